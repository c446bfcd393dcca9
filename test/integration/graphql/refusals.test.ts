/**
 * Refusals cost little and are not free, through both servers tollbooth protects (test/helpers/graphqlServers.ts):
 * - tollbooth's structural rules refuse a document before graphql-js' validation runs, and their refusal is the
 *   whole answer (one code, the first rule that fired);
 * - a refused operation spends `minCost` from its caller's budget, so a flood of refusals runs the budget dry;
 * - a document whose validation is skipped (Yoga's persisted operations with `skipDocumentValidation`) is held to
 *   the same structural limits.
 * The CPU a refusal costs is measured by `npm run bench:graphql -- --refusals`, not here.
 */
import { randomUUID } from 'node:crypto'
import { usePersistedOperations } from '@graphql-yoga/plugin-persisted-operations'
import { afterEach, describe, expect, it } from 'vitest'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import { MemoryStore } from '../../../src/core/stores/memoryStore.js'
import {
  closeServers,
  type GraphQLServerDriver,
  graphqlServerDrivers,
  startYoga,
} from '../../helpers/graphqlServers.js'
import { totalCalls } from '../../helpers/yogaSchema.js'

const CLIENT = 'ip:127.0.0.1'
/**
 * The GraphQL-over-HTTP media type: Yoga answers a validation-stage error under `application/json` with 200, as
 * the specification says, and with its status under this one.
 */
const GRAPHQL_RESPONSE = { accept: 'application/graphql-response+json' }

afterEach(async () => {
  await closeServers()
})

/** A budget no test shares, refilling so slowly (a token every 100 s) that nothing comes back meanwhile. */
function budget(capacity: number) {
  return tokenBucket({
    name: `refusals-${randomUUID().slice(0, 8)}`,
    store: new MemoryStore(),
    capacity,
    refillPerSecond: 0.01,
  })
}

/**
 * `{ users { id } }` selected `times` times at the root: one field as executed, `times` root fields as written;
 * `first` makes each document distinct, so no cache answers for it.
 */
function wide(times: number, first = 10): string {
  return `{ users(first: ${first}) { id } ${'users { id } '.repeat(times - 1)}}`
}

describe.each(graphqlServerDrivers)('$name', (driver: GraphQLServerDriver) => {
  it("a structural refusal is the whole answer: graphql-js' validation does not run on the document", async () => {
    const limiter = budget(100)
    const server = await driver.start({ limiter })
    // 800 root fields, and an unknown field graphql-js would report: only the root-field rule answers.
    const reply = await server.post({ query: `{ ${'users { id } '.repeat(799)} nope }` }, GRAPHQL_RESPONSE)
    expect(reply.status).toBe(400)
    expect(reply.body.errors).toEqual([
      {
        message: 'The operation selects more than 20 root fields.',
        extensions: { code: 'MAX_ROOT_FIELDS_EXCEEDED', limit: 20 },
      },
    ])
    expect(totalCalls(server.calls)).toBe(0)
  })

  it('two rules that would both refuse: the first answers alone', async () => {
    const server = await driver.start({ limiter: budget(100), limits: { maxAliases: 2, maxRootFields: 2 } })
    const reply = await server.post(
      { query: '{ a: users { id } b: users { id } c: users { id } }' },
      GRAPHQL_RESPONSE,
    )
    expect(reply.status).toBe(400)
    expect(reply.body.errors).toHaveLength(1)
    expect(reply.body.errors?.[0]?.extensions?.code).toMatch(/^MAX_(ALIASES|ROOT_FIELDS)_EXCEEDED$/)
  })

  it('40 distinct wide documents (800 root fields) against a 10-point budget: each refusal spends minCost, the budget runs dry', async () => {
    const limiter = budget(10)
    const server = await driver.start({ limiter })
    const replies = []
    for (let i = 0; i < 40; i++) replies.push(await server.post({ query: wide(800, i) }, GRAPHQL_RESPONSE))
    expect(replies.map((reply) => reply.status)).toEqual(replies.map(() => 400))
    expect(
      replies.every((reply) => reply.body.errors?.[0]?.extensions?.code === 'MAX_ROOT_FIELDS_EXCEEDED'),
    ).toBe(true)
    // 10 refusals paid 1 each; the other 30 found the budget spent, and a denial spends nothing.
    expect((await limiter.peek(CLIENT)).remaining).toBe(0)
    const honest = await server.post({ query: '{ users(first: 1) { id } }' })
    expect(honest.status).toBe(429)
    expect(totalCalls(server.calls)).toBe(0)
  })

  it("documents graphql-js refuses spend minCost too: its validation's errors, a syntax error", async () => {
    const limiter = budget(10)
    const server = await driver.start({ limiter })
    const unknown = await server.post({ query: '{ users { nope } }' }, GRAPHQL_RESPONSE)
    expect(unknown.body.errors?.[0]?.extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED')
    const broken = await server.post({ query: '{ users { id }' }, GRAPHQL_RESPONSE)
    expect(broken.body.errors?.[0]?.extensions?.code).toBe('GRAPHQL_PARSE_FAILED')
    expect((await limiter.peek(CLIENT)).remaining).toBe(8)
  })

  it('350 fragments spread under one field (20 kB, within every other limit): MAX_FRAGMENTS_EXCEEDED', async () => {
    const limiter = budget(10)
    const server = await driver.start({ limiter })
    const fragments = Array.from({ length: 350 }, (_, i) => `fragment F${i} on User { id }`).join(' ')
    const spreads = Array.from({ length: 350 }, (_, i) => `...F${i}`).join(' ')
    const reply = await server.post(
      { query: `{ users { ${spreads} ${spreads} ${spreads} } } ${fragments}` },
      GRAPHQL_RESPONSE,
    )
    expect(reply.status).toBe(400)
    expect(reply.body.errors).toEqual([
      {
        message: 'A selection spreads more than 50 fragments.',
        extensions: { code: 'MAX_FRAGMENTS_EXCEEDED', limit: 50 },
      },
    ])
    expect(totalCalls(server.calls)).toBe(0)
    expect((await limiter.peek(CLIENT)).remaining).toBe(9)
  })

  it('an operation named as the stand-in Apollo caches for refused documents runs as any other, every time', async () => {
    const server = await driver.start({ limiter: budget(100) })
    for (const query of [
      'query TollboothRefusedDocument { users(first: 1) { id } }',
      'query TollboothRefusedDocument{__typename}',
    ]) {
      for (let i = 0; i < 2; i++) {
        const reply = await server.post({ query })
        expect(reply.status).toBe(200)
        expect(reply.body.errors).toBeUndefined()
      }
    }
  })

  it('a parse-time refusal spends minCost too; a batch refused for its size spends nothing', async () => {
    const limiter = budget(10)
    const server = await driver.start(
      { limiter, limits: { maxTokens: 20, maxBatchSize: 2 } },
      { batching: true },
    )
    const tokens = await server.post({ query: wide(10) })
    expect(tokens.body).toMatchObject({ errors: [{ extensions: { code: 'TOO_MANY_TOKENS' } }] })
    const long = await server.post({ query: `{ users { id } }${' '.repeat(100_000)}` })
    expect(long.status).toBe(413)
    expect((await limiter.peek(CLIENT)).remaining).toBe(8)
    const batch = await server.post([
      { query: '{ users { id } }' },
      { query: '{ users { id } }' },
      { query: '{ users { id } }' },
    ])
    expect(batch.status).toBe(413)
    expect((await limiter.peek(CLIENT)).remaining).toBe(8)
  })
})

describe('Yoga with persisted operations that skip validation', () => {
  const stored: Record<string, string> = {
    deep: '{ users { friends { friends { friends { friends { friends { friends { id } } } } } } } }',
    aliased: `{ ${Array.from({ length: 40 }, (_, i) => `a${i}: users(first: 1) { id }`).join(' ')} }`,
    fine: '{ users(first: 2) { id } }',
  }
  const persisted = () =>
    usePersistedOperations({
      getPersistedOperation: (key: string) => stored[key] ?? null,
      skipDocumentValidation: true,
    })
  const byKey = (key: string) => ({
    query: '',
    extensions: { persistedQuery: { version: 1, sha256Hash: key } },
  })

  it('a stored document over maxDepth or maxAliases is refused all the same; nothing runs', async () => {
    const limiter = budget(100)
    const server = await startYoga(
      { limiter, limits: { maxDepth: 6, maxAliases: 30 } },
      { pluginsBefore: [persisted()] },
    )
    const deep = await server.post(byKey('deep') as never)
    expect(deep.body.errors).toEqual([
      { message: 'The operation nests deeper than 6.', extensions: { code: 'MAX_DEPTH_EXCEEDED', limit: 6 } },
    ])
    const aliased = await server.post(byKey('aliased') as never)
    expect(aliased.body.errors?.map((error) => error.extensions?.code)).toEqual(['MAX_ALIASES_EXCEEDED'])
    expect(totalCalls(server.calls)).toBe(0)
    // Nothing was charged but minCost for each refusal; a document within the limits runs.
    const fine = await server.post(byKey('fine') as never)
    expect(fine.body.data?.users).toHaveLength(2)
    expect((await limiter.peek(CLIENT)).remaining).toBe(100 - 2 - 2)
  })
})
