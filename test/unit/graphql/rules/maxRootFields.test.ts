import { describe, expect, it } from 'vitest'
import { maxRootFieldsRule } from '../../../../src/graphql/rules/maxRootFields.js'
import { codes, expectRefusalNamingNoLimit } from '../../../helpers/validationRules.js'

describe('maxRootFieldsRule', () => {
  it('counts root fields through fragments, duplicates included', () => {
    const source =
      'query { hello hello ...F ... on Query { node { name } } } fragment F on Query { a: hello }'
    // hello, hello, a (via F), node (inline) = 4
    expect(codes(source, maxRootFieldsRule(4))).toEqual([])
    expect(codes(source, maxRootFieldsRule(3))).toEqual(['MAX_ROOT_FIELDS_EXCEEDED'])
  })

  it('with exposeLimits: false, the refusal names no limit, in its message or its extensions', () => {
    expectRefusalNamingNoLimit(
      '{ hello node { name } }',
      maxRootFieldsRule(1, { exposeLimits: false }),
      'MAX_ROOT_FIELDS_EXCEEDED',
    )
  })
})
