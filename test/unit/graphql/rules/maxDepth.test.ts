import { describe, expect, it } from 'vitest'
import { maxDepthRule } from '../../../../src/graphql/rules/maxDepth.js'
import { codes, expectRefusalNamingNoLimit, nested } from '../../../helpers/validationRules.js'

describe('maxDepthRule', () => {
  it('allows exactly the limit and refuses one more', () => {
    expect(codes(nested(5), maxDepthRule(5, 15))).toEqual([])
    expect(codes(nested(6), maxDepthRule(5, 15))).toEqual(['MAX_DEPTH_EXCEEDED'])
  })

  it('follows fragment spreads and inline fragments', () => {
    const source = `
      query { node { ...A } }
      fragment A on Node { child { ... on Node { child { ...B } } } }
      fragment B on Node { child { name } }`
    // node(1) child(2) child(3) child(4) name(5)
    expect(codes(source, maxDepthRule(5, 15))).toEqual([])
    expect(codes(source, maxDepthRule(4, 15))).toEqual(['MAX_DEPTH_EXCEEDED'])
  })

  it('counts a fragment at its spread depth even when it was first measured elsewhere', () => {
    const source = `
      query { hello ...Q node { child { child { ...N } } } }
      fragment Q on Query { node { ...N } }
      fragment N on Node { child { name } }`
    // Deepest path: node(1) child(2) child(3) child(4) name(5); N's depth (2) was memoized on the shallow path.
    expect(codes(source, maxDepthRule(4, 15))).toEqual(['MAX_DEPTH_EXCEEDED'])
  })

  it('judges introspection subtrees against their own limit, keyed on the field', () => {
    const deepIntrospection = '{ __schema { types { fields { type { ofType { ofType { name } } } } } } }'
    // __schema(1) types(2) fields(3) type(4) ofType(5) ofType(6) name(7)
    expect(codes(deepIntrospection, maxDepthRule(3, 7))).toEqual([])
    expect(codes(deepIntrospection, maxDepthRule(3, 6))).toEqual(['MAX_DEPTH_EXCEEDED'])
  })

  it('is not bypassed by naming the operation or a fragment __schema', () => {
    const namedOperation = `query __schema ${nested(6)}`
    expect(codes(namedOperation, maxDepthRule(5, 100))).toEqual(['MAX_DEPTH_EXCEEDED'])
    const namedFragment = `query { node { ...__schema } } fragment __schema on Node { ${nested(6).slice(1, -1).replace('node', 'child')} }`
    expect(codes(namedFragment, maxDepthRule(5, 100))).toEqual(['MAX_DEPTH_EXCEEDED'])
  })

  it('stops on fragment cycles (left to NoFragmentCyclesRule)', () => {
    const cycle =
      'query { node { ...A } } fragment A on Node { child { ...B } } fragment B on Node { child { ...A } }'
    const result = codes(cycle, maxDepthRule(15, 15), true)
    expect(result).toHaveLength(1)
    expect(
      result.every((message) => typeof message === 'string' && /Cannot spread fragment/.test(message)),
    ).toBe(true)
  })

  describe('with exposeLimits: false', () => {
    const hidden = { exposeLimits: false }
    it.each([
      ['maxDepth', nested(6), maxDepthRule(5, 15, hidden)],
      [
        'maxIntrospectionDepth',
        '{ __schema { types { fields { type { name } } } } }',
        maxDepthRule(15, 3, hidden),
      ],
    ])('%s: the refusal names no limit, in its message or its extensions', (_, source, rule) => {
      expectRefusalNamingNoLimit(source, rule, 'MAX_DEPTH_EXCEEDED')
    })
  })
})
