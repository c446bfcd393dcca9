import { buildSchema, parse, specifiedRules, type ValidationRule, validate } from 'graphql'
import { describe, expect, it } from 'vitest'
import { maxAliasesRule } from '../../../../src/graphql/rules/maxAliases.js'
import { maxDepthRule } from '../../../../src/graphql/rules/maxDepth.js'
import { maxDirectivesRule } from '../../../../src/graphql/rules/maxDirectives.js'
import { maxRootFieldsRule } from '../../../../src/graphql/rules/maxRootFields.js'

const schema = buildSchema(`
  type Query { node: Node, hello: String }
  type Node { child: Node, name: String }
`)

/** Codes of the errors a document gets from one rule (plus graphql-js's own rules when `withSpecified`). */
function codes(source: string, rule: ValidationRule, withSpecified = false): unknown[] {
  const rules = withSpecified ? [...specifiedRules, rule] : [rule]
  return validate(schema, parse(source), rules).map((error) => error.extensions.code ?? error.message)
}

/** `{ node { child { child { … name } } } }` with `depth` fields on the deepest path. */
function nested(depth: number): string {
  return `{ node ${'{ child '.repeat(depth - 2)}{ name }${' }'.repeat(depth - 2)} }`
}

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
})

describe('maxAliasesRule', () => {
  it('counts aliases, fragments at every spread', () => {
    const source = 'query { a: hello ...F b: node { ...F } } fragment F on Query { c: hello }'
    // Invalid placement of F inside node is irrelevant for counting: a, b, c (root spread), c (node spread) = 4.
    expect(codes(source, maxAliasesRule(4))).toEqual([])
    expect(codes(source, maxAliasesRule(3))).toEqual(['MAX_ALIASES_EXCEEDED'])
  })
})

describe('maxDirectivesRule', () => {
  it('counts directives on the operation and its selections', () => {
    const source =
      'query @skip(if: false) { hello @include(if: true) @skip(if: false) node { name @include(if: true) } }'
    expect(codes(source, maxDirectivesRule(4))).toEqual([])
    expect(codes(source, maxDirectivesRule(3))).toEqual(['MAX_DIRECTIVES_EXCEEDED'])
  })
})

describe('maxRootFieldsRule', () => {
  it('counts root fields through fragments, duplicates included', () => {
    const source =
      'query { hello hello ...F ... on Query { node { name } } } fragment F on Query { a: hello }'
    // hello, hello, a (via F), node (inline) = 4
    expect(codes(source, maxRootFieldsRule(4))).toEqual([])
    expect(codes(source, maxRootFieldsRule(3))).toEqual(['MAX_ROOT_FIELDS_EXCEEDED'])
  })
})

describe('with exposeLimits: false', () => {
  const hidden = { exposeLimits: false }
  it.each([
    ['maxDepth', nested(6), maxDepthRule(5, 15, hidden), 'MAX_DEPTH_EXCEEDED'],
    [
      'maxIntrospectionDepth',
      '{ __schema { types { fields { type { name } } } } }',
      maxDepthRule(15, 3, hidden),
      'MAX_DEPTH_EXCEEDED',
    ],
    ['maxAliases', '{ a: hello b: hello }', maxAliasesRule(1, hidden), 'MAX_ALIASES_EXCEEDED'],
    [
      'maxDirectives',
      '{ hello @skip(if: false) @include(if: true) }',
      maxDirectivesRule(1, hidden),
      'MAX_DIRECTIVES_EXCEEDED',
    ],
    ['maxRootFields', '{ hello node { name } }', maxRootFieldsRule(1, hidden), 'MAX_ROOT_FIELDS_EXCEEDED'],
  ])('%s: the refusal names no limit, in its message or its extensions', (_, source, rule, code) => {
    const errors = validate(schema, parse(source), [rule])
    expect(errors).toHaveLength(1)
    const [error] = errors
    expect(error?.extensions.code).toBe(code)
    expect(error?.extensions.limit).toBeUndefined()
    expect(error?.message).not.toMatch(/\d/)
  })
})
