import { buildSchema, parse, validate } from 'graphql'
import { describe, expect, it } from 'vitest'
import { maxIntrospectionFieldsRule } from '../../../../src/graphql/rules/maxIntrospectionFields.js'

const schema = buildSchema('type Query { hello: String }')

function codes(source: string, max: number, exposeLimits = true): unknown[] {
  return validate(schema, parse(source), [maxIntrospectionFieldsRule(max, { exposeLimits })]).map(
    (error) => error.extensions.code,
  )
}

describe('maxIntrospectionFieldsRule', () => {
  it('allows exactly the limit and refuses one more, __schema and __type alike', () => {
    expect(codes('{ __schema { queryType { name } } }', 1)).toEqual([])
    expect(codes('{ __schema { queryType { name } } t: __type(name: "Query") { name } }', 1)).toEqual([
      'MAX_INTROSPECTION_FIELDS_EXCEEDED',
    ])
    expect(codes('{ a: __schema { queryType { name } } b: __schema { queryType { name } } }', 2)).toEqual([])
  })

  it('counts aliases and every spread of a fragment', () => {
    const aliases = Array.from({ length: 20 }, (_, i) => `s${i}: __schema { types { name } }`).join(' ')
    expect(codes(`{ ${aliases} }`, 1)).toEqual(['MAX_INTROSPECTION_FIELDS_EXCEEDED'])
    const spread = '{ ...F ... on Query { ...F } } fragment F on Query { __type(name: "Query") { name } }'
    // graphql-js runs F once (its fields merge), but each spread is a separate selection to count.
    expect(codes(spread, 1)).toEqual(['MAX_INTROSPECTION_FIELDS_EXCEEDED'])
    expect(codes(spread, 2)).toEqual([])
  })

  it('leaves __typename alone, and names the limit only when limits are exposed', () => {
    expect(codes('{ a: __typename b: __typename c: __typename }', 1)).toEqual([])
    const twice = parse('{ a: __schema { description } b: __schema { description } }')
    const [named] = validate(schema, twice, [maxIntrospectionFieldsRule(1)])
    expect(named?.message).toBe('The operation selects __schema or __type more than once.')
    expect(named?.extensions).toMatchObject({ limit: 1, http: { status: 400 } })
    const [hidden] = validate(schema, twice, [maxIntrospectionFieldsRule(1, { exposeLimits: false })])
    expect(hidden?.message).toBe('The operation selects __schema or __type too many times.')
    expect(hidden?.extensions.limit).toBeUndefined()
  })
})
