import { describe, expect, it } from 'vitest'
import { maxDirectivesRule } from '../../../../src/graphql/rules/maxDirectives.js'
import { codes, expectRefusalNamingNoLimit } from '../../../helpers/validationRules.js'

describe('maxDirectivesRule', () => {
  it('counts directives on the operation and its selections', () => {
    const source =
      'query @skip(if: false) { hello @include(if: true) @skip(if: false) node { name @include(if: true) } }'
    expect(codes(source, maxDirectivesRule(4))).toEqual([])
    expect(codes(source, maxDirectivesRule(3))).toEqual(['MAX_DIRECTIVES_EXCEEDED'])
  })

  it('with exposeLimits: false, the refusal names no limit, in its message or its extensions', () => {
    expectRefusalNamingNoLimit(
      '{ hello @skip(if: false) @include(if: true) }',
      maxDirectivesRule(1, { exposeLimits: false }),
      'MAX_DIRECTIVES_EXCEEDED',
    )
  })
})
