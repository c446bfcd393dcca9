/**
 * Introspection is priced by what it returns, through both servers tollbooth protects: on a schema of 200 types of
 * 25 fields, the review's 20 aliases of `__schema { types { … } }` bought 22 MB of response for 20 points. Costs are
 * counted here from the response itself (test/helpers/responseCost.ts), without tollbooth.
 */
import { randomUUID } from 'node:crypto'
import { buildSchema, type GraphQLSchema, parse } from 'graphql'
import { afterEach, describe, expect, it } from 'vitest'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import { MemoryStore } from '../../../src/core/stores/memoryStore.js'
import { CostAnalyzer } from '../../../src/graphql/index.js'
import { closeServers, type GraphQLServerDriver, graphqlServerDrivers } from '../../helpers/graphqlServers.js'
import { realCost } from '../../helpers/responseCost.js'

const TYPES = 200
const FIELDS = 25

/** 200 object types of 25 fields, each field with two arguments, reachable from `Query.t0` … */
function wideSchema(): GraphQLSchema {
  const types = Array.from({ length: TYPES }, (_, t) => {
    const fields = Array.from({ length: FIELDS }, (_, f) => `  f${f}(a: Int, b: String): T${(t + f) % TYPES}`)
    return `type T${t} {\n${fields.join('\n')}\n}`
  })
  return buildSchema(`${types.join('\n')}\ntype Query { t0: T0 }`)
}

const TYPE_SELECTION = 'name fields { name args { name type { name } } type { name kind ofType { name } } }'

afterEach(async () => {
  await closeServers()
})

/** A budget on a clock that stands still: nothing comes back during a test, however long it takes. */
function budget(capacity: number) {
  const now = Date.now() * 1000
  return tokenBucket({
    name: `introspection-${randomUUID().slice(0, 8)}`,
    store: new MemoryStore({ clock: () => now }),
    capacity,
    refillPerSecond: 100,
  })
}

describe.each(graphqlServerDrivers)('$name', (driver: GraphQLServerDriver) => {
  const schema = wideSchema()
  const start = (options: Parameters<GraphQLServerDriver['start']>[0]) =>
    driver.start(options, { served: { schema, calls: {} } })

  it('20 aliases of __schema: refused by maxIntrospectionFields (1), before anything is priced or run', async () => {
    const limiter = budget(1_000_000)
    const server = await start({ limiter })
    const aliases = Array.from({ length: 20 }, (_, i) => `s${i}: __schema { types { ${TYPE_SELECTION} } }`)
    const reply = await server.post(
      { query: `{ ${aliases.join(' ')} }` },
      { accept: 'application/graphql-response+json' },
    )
    expect(reply.status).toBe(400)
    expect(reply.body.errors?.map((error) => error.extensions?.code)).toEqual([
      'MAX_INTROSPECTION_FIELDS_EXCEEDED',
    ])
    expect(reply.body.data).toBeUndefined()
  })

  it('one __schema of the whole schema: priced by what it returns, above maxCost, so refused', async () => {
    const server = await start({ limiter: budget(1_000_000) })
    const reply = await server.post({ query: `{ __schema { types { ${TYPE_SELECTION} } } }` })
    expect(reply.status).toBe(400)
    expect(reply.body.errors?.[0]?.extensions?.code).toBe('COST_LIMIT_EXCEEDED')
    expect(reply.body.data).toBeUndefined()
  })

  it('with room for it: charged exactly what the response holds', async () => {
    const limiter = budget(1_000_000)
    const server = await start({ limiter, maxCost: 1_000_000, maxFieldVisits: 1_000_000 })
    const query = `{ __schema { types { ${TYPE_SELECTION} } } }`
    const reply = await server.post({ query })
    expect(reply.status).toBe(200)
    const counted = realCost(schema, parse(query), reply.body.data)
    // 200 types of 25 fields, each field with 2 arguments: far more than the flat 1 it used to cost.
    expect(counted).toBeGreaterThan(TYPES * FIELDS * 4)
    expect(reply.body.extensions?.cost).toMatchObject({
      requestedQueryCost: counted,
      actualQueryCost: counted,
    })
    expect((await limiter.peek('ip:127.0.0.1')).remaining).toBe(1_000_000 - counted)
  })

  it('__type of one type costs what that type holds', async () => {
    const server = await start({ limiter: budget(10_000) })
    const query = `{ __type(name: "T7") { ${TYPE_SELECTION} } }`
    const reply = await server.post({ query })
    const counted = realCost(schema, parse(query), reply.body.data)
    expect(reply.body.extensions?.cost).toMatchObject({
      requestedQueryCost: counted,
      actualQueryCost: counted,
    })
    // the type 1 + 25 fields × (field 1 + 2 arguments × (1 + type 1) + type 1 + ofType null 1)
    expect(counted).toBe(1 + FIELDS * (1 + 2 * 2 + 1 + 1))
  })
})

describe('the price cache with introspection arguments given as variables', () => {
  const schema = buildSchema(`
    type Small { a: Int }
    type Big { ${Array.from({ length: 200 }, (_, i) => `f${i}: Int${i % 2 === 0 ? ' @deprecated' : ''}`).join(' ')} }
    type Query { small: Small big: Big }
  `)
  const fresh = (document: ReturnType<typeof parse>, variables: Record<string, unknown>) =>
    new CostAnalyzer().estimate({ schema, document, variables })

  it('__type(name: $t): each type name priced by what that type holds, whatever was priced first', () => {
    const analyzer = new CostAnalyzer()
    const document = parse(
      'query($t: String!) { __type(name: $t) { fields(includeDeprecated: true) { name } } }',
    )
    const small = analyzer.estimate({ schema, document, variables: { t: 'Small' } })
    const big = analyzer.estimate({ schema, document, variables: { t: 'Big' } })
    expect(small).toBe(fresh(document, { t: 'Small' }))
    expect(big).toBe(fresh(document, { t: 'Big' }))
    // the type 1 + its 200 fields × (field 1 + name 0).
    expect(big).toBe(201)
    expect(small).toBeLessThan(big)
  })

  it('fields(includeDeprecated: $d): false and true priced apart', () => {
    const analyzer = new CostAnalyzer()
    const document = parse(
      'query($d: Boolean) { __type(name: "Big") { fields(includeDeprecated: $d) { name } } }',
    )
    const without = analyzer.estimate({ schema, document, variables: { d: false } })
    const withDeprecated = analyzer.estimate({ schema, document, variables: { d: true } })
    expect(without).toBe(fresh(document, { d: false }))
    expect(withDeprecated).toBe(fresh(document, { d: true }))
    expect(withDeprecated).toBeGreaterThan(without)
  })
})
