/**
 * A sensitive field's limit counts the runs of the field, not only its occurrences in the document: under a list it
 * runs once per item, through a fragment once per spread, through an interface as the implementation's field. And a
 * limit that names nothing in the schema, or a `by` argument the field does not have, is refused at startup. Through
 * both servers tollbooth protects (a real Yoga server and a real Apollo Server, test/helpers/graphqlServers.ts) over
 * HTTP; every resolver run is counted.
 */
import { randomUUID } from 'node:crypto'
import { createSchema } from 'graphql-yoga'
import { afterEach, describe, expect, it } from 'vitest'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import { MemoryStore } from '../../../src/core/stores/memoryStore.js'
import { costDirectivesTypeDefs, type TollboothGraphQLOptions } from '../../../src/graphql/index.js'
import {
  closeServers,
  type GraphQLServerDriver,
  graphqlServerDrivers,
  type ResultBody,
} from '../../helpers/graphqlServers.js'

const typeDefs = /* GraphQL */ `
  type Account {
    id: ID!
    verifyPin(pin: String!): Boolean @rateLimit(limit: 3, window: "1m")
    sendCode(email: String!): Boolean @rateLimit(limit: 3, window: "1m", by: ["email"])
  }
  interface Node {
    id: ID!
    secret: String @rateLimit(limit: 2, window: "1m")
  }
  type Impl implements Node {
    id: ID!
    secret: String
  }
  type Query {
    accounts(first: Int = 10): [Account!]! @listSize(slicingArguments: ["first"])
    me: Account
    nodes(first: Int = 10): [Node!]! @listSize(slicingArguments: ["first"])
  }
  type Mutation {
    login(email: String!, password: String!): Boolean
  }
`

afterEach(async () => {
  await closeServers()
})

function schemaCountingRuns(runs: Record<string, number>) {
  const ran = (name: string) => {
    runs[name] = (runs[name] ?? 0) + 1
  }
  return createSchema({
    typeDefs: [costDirectivesTypeDefs, typeDefs],
    resolvers: {
      Query: {
        accounts: (_: unknown, { first }: { first: number }) =>
          Array.from({ length: first }, (_, i) => ({ id: `a${i}` })),
        me: () => ({ id: 'me' }),
        nodes: (_: unknown, { first }: { first: number }) =>
          Array.from({ length: first }, (_, i) => ({ id: `n${i}` })),
      },
      Account: {
        verifyPin: () => {
          ran('verifyPin')
          return false
        },
        sendCode: (_: unknown, { email }: { email: string }) => {
          ran(`sendCode ${email}`)
          return true
        },
      },
      Node: { __resolveType: () => 'Impl' },
      Impl: {
        secret: () => {
          ran('secret')
          return 's'
        },
      },
      Mutation: {
        login: () => {
          ran('login')
          return false
        },
      },
    },
  })
}

describe.each(graphqlServerDrivers)('$name', (driver: GraphQLServerDriver) => {
  async function start(
    options: Partial<TollboothGraphQLOptions> = {},
    shared: {
      runs?: Record<string, number>
      schema?: ReturnType<typeof schemaCountingRuns>
      batching?: boolean
    } = {},
  ) {
    const runs: Record<string, number> = shared.runs ?? {}
    const store = options.store ?? new MemoryStore()
    const limiter = tokenBucket({
      name: `runs-${randomUUID().slice(0, 8)}`,
      store,
      capacity: 100_000,
      refillPerSecond: 1,
    })
    const server = await driver.start(
      { limiter, store, ...options },
      {
        served: { schema: shared.schema ?? schemaCountingRuns(runs), calls: runs },
        batching: shared.batching,
      },
    )
    return { runs, post: (query: string) => server.post({ query }), server }
  }

  describe('a field limit counts runs', () => {
    it('under a list: accounts(first: 50) { verifyPin } runs it 3 times, the other 47 are RATE_LIMITED field errors', async () => {
      const server = await start()
      const reply = await server.post('{ accounts(first: 50) { id verifyPin(pin: "0000") } }')
      expect(server.runs).toEqual({ verifyPin: 3 })
      const refused = reply.body.errors ?? []
      expect(refused).toHaveLength(47)
      expect(new Set(refused.map((error) => error.extensions?.code))).toEqual(new Set(['RATE_LIMITED']))
      expect(refused[0]?.extensions?.field).toBe('Account.verifyPin')
      expect(reply.body.data?.accounts).toHaveLength(50)
      expect(
        reply.body.data?.accounts.filter((account: { verifyPin: unknown }) => account.verifyPin === false),
      ).toHaveLength(3)
    })

    it("runs refused under a list: status 429 with the field limit's RateLimit fields, no `http` in the errors", async () => {
      const { server } = await start()
      const reply = await server.post({ query: '{ accounts(first: 5) { verifyPin(pin: "0000") } }' })
      // Yoga and Apollo both answer a refusal's status and headers, here the field limit's (3 calls a minute).
      expect(reply.status).toBe(429)
      expect(reply.headers.get('ratelimit-policy')).toBe('"gql:field:Account.verifyPin";q=3;w=60')
      const retryAfter = Number(reply.headers.get('retry-after'))
      expect(retryAfter).toBeGreaterThanOrEqual(1)
      expect(retryAfter).toBeLessThanOrEqual(80)
      expect(reply.body.errors).toHaveLength(2)
      for (const error of reply.body.errors ?? []) {
        expect(error.extensions).toEqual({ code: 'RATE_LIMITED', retryAfter, field: 'Account.verifyPin' })
      }
      expect(reply.body.data?.accounts).toHaveLength(5)
    })

    it('runs refused under a list in an HTTP batch: the batch answers 200, no `http` in the errors', async () => {
      const { server, runs } = await start({}, { batching: true })
      const reply = await server.post<ResultBody[]>([
        { query: '{ accounts(first: 2) { verifyPin(pin: "0000") } }' },
        { query: '{ accounts(first: 3) { verifyPin(pin: "0000") } }' },
      ])
      expect(reply.status).toBe(200)
      expect(reply.headers.get('retry-after')).toBeNull()
      expect(runs).toEqual({ verifyPin: 3 })
      const errors = reply.body.flatMap((result) => result.errors ?? [])
      expect(errors).toHaveLength(2)
      for (const error of errors) {
        expect(error.extensions).toMatchObject({ code: 'RATE_LIMITED', field: 'Account.verifyPin' })
        expect(Object.keys(error.extensions ?? {}).sort()).toEqual(['code', 'field', 'retryAfter'])
      }
    })

    it('through a fragment spread under five aliases: 3 runs in all', async () => {
      const aliases = Array.from({ length: 5 }, (_, i) => `m${i}: me { ...Pin }`).join(' ')
      const server = await start()
      const reply = await server.post(`{ ${aliases} } fragment Pin on Account { verifyPin(pin: "1") }`)
      expect(server.runs).toEqual({ verifyPin: 3 })
      expect(reply.body.errors).toHaveLength(2)
    })

    it("a limit on an interface's field holds when it is selected through the implementation", async () => {
      const server = await start()
      await server.post('{ nodes(first: 5) { ... on Impl { secret } } }')
      expect(server.runs).toEqual({ secret: 2 })
    })

    it('spread over requests: what admission counted and what ran share one window', async () => {
      const server = await start()
      await server.post('{ me { verifyPin(pin: "1") } }')
      await server.post('{ accounts(first: 2) { verifyPin(pin: "1") } }')
      const refused = await server.post('{ me { verifyPin(pin: "1") } }')
      // The third call is refused by admission, before anything runs.
      expect(refused.status).toBe(429)
      expect(server.runs).toEqual({ verifyPin: 3 })
    })

    it('units paid for one key are not spent by runs for another: skipped junk e-mails buy no sends to the victim', async () => {
      const server = await start()
      for (let round = 0; round < 3; round++) {
        const junk = Array.from(
          { length: 9 },
          (_, i) => `j${i}: sendCode(email: "junk-${round}-${i}@example.com") @skip(if: true)`,
        ).join(' ')
        await server.post(`{ accounts(first: 10) { ${junk} v: sendCode(email: "victim@example.com") } }`)
      }
      expect(server.runs['sendCode victim@example.com']).toBe(3)
    })

    it('one schema served by two servers sharing a store: each run counted once', async () => {
      const runs: Record<string, number> = {}
      const schema = schemaCountingRuns(runs)
      const store = new MemoryStore()
      const a = await start({ store }, { runs, schema })
      const b = await start({ store }, { runs, schema })
      for (let i = 0; i < 6; i++) await (i % 2 === 0 ? a : b).post('{ me { verifyPin(pin: "1") } }')
      expect(runs).toEqual({ verifyPin: 3 })
    })

    it('dry-run: every run goes ahead', async () => {
      const server = await start({ mode: 'dry-run' })
      const reply = await server.post('{ accounts(first: 10) { verifyPin(pin: "0000") } }')
      expect(server.runs).toEqual({ verifyPin: 10 })
      expect(reply.body.errors).toBeUndefined()
    })
  })

  describe('a field limit that names nothing in the schema fails the server at startup', () => {
    /** Yoga: `createYoga` throws; Apollo: `server.start()` rejects. */
    function createWith(fieldLimits: TollboothGraphQLOptions['fieldLimits']): Promise<unknown> {
      const limiter = tokenBucket({ name: 'x', capacity: 1, refillPerSecond: 1 })
      return driver.startupError({ limiter, fieldLimits }, schemaCountingRuns({}))
    }

    it.each([
      [
        'mutation.login',
        '"fieldLimits["mutation.login"]" must name a field of the schema, got "mutation.login" (did you mean "Mutation.login"?)',
      ],
      [
        'Mutation.logn',
        '"fieldLimits["Mutation.logn"]" must name a field of the schema, got "Mutation.logn" (did you mean "Mutation.login"?)',
      ],
    ])('%s', async (coordinate, message) => {
      expect(await createWith({ [coordinate]: { limit: 5, windowMs: 60_000 } })).toMatchObject({
        code: 'TOLLBOOTH_ERR_INVALID_OPTION',
        message: `${driver.pluginName}: ${message}`,
      })
    })

    it('a `by` argument the field does not have', async () => {
      expect(
        await createWith({ 'Mutation.login': { limit: 5, windowMs: 60_000, by: ['emial'] } }),
      ).toMatchObject({
        code: 'TOLLBOOTH_ERR_INVALID_OPTION',
        message: `${driver.pluginName}: "fieldLimits["Mutation.login"].by" must name an argument of Mutation.login, got "emial" (did you mean "email"?)`,
      })
    })
  })
})
