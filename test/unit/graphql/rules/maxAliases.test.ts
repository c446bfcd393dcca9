import { describe, expect, it } from 'vitest'
import { maxAliasesRule } from '../../../../src/graphql/rules/maxAliases.js'
import { codes, expectRefusalNamingNoLimit } from '../../../helpers/validationRules.js'

describe('maxAliasesRule', () => {
  it('counts aliases, fragments at every spread', () => {
    const source = 'query { a: hello ...F b: node { ...F } } fragment F on Query { c: hello }'
    // Invalid placement of F inside node is irrelevant for counting: a, b, c (root spread), c (node spread) = 4.
    expect(codes(source, maxAliasesRule(4))).toEqual([])
    expect(codes(source, maxAliasesRule(3))).toEqual(['MAX_ALIASES_EXCEEDED'])
  })

  it('with exposeLimits: false, the refusal names no limit, in its message or its extensions', () => {
    expectRefusalNamingNoLimit(
      '{ a: hello b: hello }',
      maxAliasesRule(1, { exposeLimits: false }),
      'MAX_ALIASES_EXCEEDED',
    )
  })
})
