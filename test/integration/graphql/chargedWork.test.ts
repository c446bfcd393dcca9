/**
 * Work is paid for: attacks that got work without paying for it, replayed over HTTP through both servers tollbooth
 * protects (a real Yoga server and a real Apollo Server, test/helpers/graphqlServers.ts).
 *
 * - A response nulled by an error must not refund the work that ran before the error nulled it.
 * - Operations priced 0 (only `__typename`, slicing arguments of 0 or below) must not pass a spent budget.
 * - An estimate that was too low is reported as it is (`actualQueryCost` above `requestedQueryCost`) and counted.
 *
 * Costs in the cost-directive model, worked out by hand in each test: objects 1, scalars 0, lists size × items,
 * `search` 5 per item, root mutation fields +10, every operation at least `minCost` (1).
 */
import { randomUUID } from 'node:crypto'
import { createSchema } from 'graphql-yoga'
import { Registry } from 'prom-client'
import { afterEach, describe, expect, it } from 'vitest'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import type { RateLimiter } from '../../../src/core/rateLimiter.js'
import { MemoryStore } from '../../../src/core/stores/memoryStore.js'
import type { Store } from '../../../src/core/stores/store.js'
import { costDirectivesTypeDefs, type TollboothGraphQLOptions } from '../../../src/graphql/index.js'
import { createPrometheusMetrics } from '../../../src/metrics/index.js'
import {
  closeServers,
  type GraphQLServerDriver,
  graphqlServerDrivers,
  startApollo,
} from '../../helpers/graphqlServers.js'
import { createStore, type StoreFixture } from '../../helpers/stores.js'

const typeDefs = /* GraphQL */ `
  type Item {
    id: ID!
    "100 items, whatever the estimate's default size (10) says."
    wide: [Item!]!
    "The same, after a turn of the event loop."
    wideLater: [Item!]!
    "Non-null; throws on the last of big's items, nulling all of big."
    bad: Int!
    children(first: Int = 5): [Item!]! @listSize(slicingArguments: ["first"])
    "A dear leaf."
    heavy: Int @cost(weight: 10)
  }
  type Session {
    token: String!
    user: Item!
  }
  type Query {
    items(first: Int = 10): [Item!]! @listSize(slicingArguments: ["first"])
    "Scans every item whatever it returns: dear."
    search(text: String!, first: Int = 10): [Item!]! @cost(weight: 5) @listSize(slicingArguments: ["first"])
    "The careless resolver of the review: slice(-last), so last: -1 returns all but one, last: 0 everything."
    messages(last: Int = 20): [Item!]! @listSize(slicingArguments: ["last"])
    "Nullable; its resolver throws."
    maybe: Item
    "Returns 50 items whatever first says: its listSize is wrong."
    overflow(first: Int = 10): [Item!]! @listSize(slicingArguments: ["first"])
    item(id: ID!): Item
    "A Float slicing argument: 1e309 reads as Infinity."
    tags(first: Float = 10): [String!]! @listSize(slicingArguments: ["first"])
    "Does its dear work, then throws."
    expensive(n: Int!): Int @cost(weight: 100)
    "Looks hard for the id, then answers null."
    lookup(id: ID!): Item @cost(weight: 50)
    "The resolver of the review: null means no limit, and a negative first slices from the end."
    users(first: Int = 10): [Item!]! @listSize(slicingArguments: ["first"])
    "The same, each call answering once \`together\` calls are waiting: operations that all run at once."
    usersTogether(first: Int = 10, together: Int!): [Item!]! @listSize(slicingArguments: ["first"])
    "100 items, priced at the default size, 10."
    big: [Item!]!
  }
  type Mutation {
    login(email: String!): Session
    "Non-null; its resolver throws, which nulls all of data."
    explode: Boolean!
  }
`

const ALL_MESSAGES = 500
const ALL_USERS = 1000

function item(id: number) {
  return { id: `i${id}` }
}
function items(count: number) {
  return Array.from({ length: Math.max(0, Math.min(count, 100)) }, (_, i) => item(i))
}

function createServerSchema(calls: Record<string, number>) {
  const count = (name: string) => {
    calls[name] = (calls[name] ?? 0) + 1
  }
  /** The calls of usersTogether waiting for the others. */
  const waiting: (() => void)[] = []
  /** Counts a call of `name`'s resolver and answers `value`. */
  const counted = <T>(name: string, value: T): T => {
    count(name)
    return value
  }
  return createSchema({
    typeDefs: [costDirectivesTypeDefs, typeDefs],
    resolvers: {
      Query: {
        items: (_: unknown, { first }: { first: number }) => counted('items', items(first)),
        search: (_: unknown, { first }: { first: number }) => counted('search', items(Math.min(first, 2))),
        messages: (_: unknown, { last }: { last: number }) => {
          count('messages')
          return Array.from({ length: ALL_MESSAGES }, (_, i) => item(i)).slice(-last)
        },
        maybe: () => {
          count('maybe')
          throw new Error('maybe failed')
        },
        overflow: () => counted('overflow', items(50)),
        item: (_: unknown, { id }: { id: string }) => counted('item', { id }),
        tags: () => counted('tags', Array.from({ length: 1000 }, String)),
        expensive: () => {
          count('expensive')
          throw new Error('expensive failed after its work')
        },
        lookup: () => counted('lookup', null),
        big: () =>
          counted(
            'big',
            Array.from({ length: 100 }, (_, i) => ({ id: `b${i}` })),
          ),
        users: (_: unknown, { first }: { first: number | null }) => {
          count('users')
          const all = Array.from({ length: ALL_USERS }, (_, i) => item(i))
          return first === null ? all : all.slice(0, first)
        },
        usersTogether: async (_: unknown, { together }: { together: number }) => {
          count('usersTogether')
          if (calls.usersTogether === together) for (const release of waiting.splice(0)) release()
          else await new Promise<void>((resolve) => waiting.push(resolve))
          return Array.from({ length: ALL_USERS }, (_, i) => item(i))
        },
      },
      Item: {
        children: (_: unknown, { first }: { first: number }) => counted('children', items(first)),
        wide: () => counted('wide', items(100)),
        heavy: () => counted('heavy', 1),
        wideLater: async () => {
          await new Promise((resolve) => setImmediate(resolve))
          return counted('wideLater', items(100))
        },
        bad: (parent: { id: string }) => {
          count('bad')
          if (parent.id === 'b99') throw new Error('the last one fails')
          return 1
        },
      },
      Mutation: {
        login: (_: unknown, { email }: { email: string }) => {
          count('login')
          return email === 'alice@example.com' ? { token: 't', user: item(0) } : null
        },
        explode: () => {
          count('explode')
          throw new Error('explode failed')
        },
      },
    },
  })
}

afterEach(async () => {
  await closeServers()
})

/** A budget no test shares, refilling so slowly (a token every 100 s) that nothing comes back meanwhile. */
function budget(capacity: number, store: Store = new MemoryStore()): RateLimiter {
  return tokenBucket({
    name: `work-${randomUUID().slice(0, 8)}`,
    store,
    capacity,
    refillPerSecond: 0.01,
  })
}

const CLIENT = 'ip:127.0.0.1'

describe.each(graphqlServerDrivers)('$name', (driver: GraphQLServerDriver) => {
  async function start(options: TollboothGraphQLOptions) {
    const calls: Record<string, number> = {}
    const server = await driver.start(options, { served: { schema: createServerSchema(calls), calls } })
    return {
      calls,
      post: (query: string, variables?: Record<string, unknown>) => server.post({ query, variables }),
    }
  }

  describe('a response nulled by an error is charged for the work that ran', () => {
    it('a login that ran, followed by a non-null sibling that throws, pays its whole estimate', async () => {
      const limiter = budget(1000)
      const server = await start({ limiter })
      // login: (Session 1 + user (1 + children 20 × 1)) + mutation 10 = 32; explode: Boolean 0 + mutation 10 = 10.
      const reply = await server.post(
        'mutation { login(email: "alice@example.com") { token user { children(first: 20) { id } } } explode }',
      )
      expect(reply.status).toBe(200)
      expect(reply.body.data).toBeNull()
      expect(reply.body.errors?.map((error) => error.path)).toEqual([['explode']])
      // Everything ran before explode nulled data: the response shows none of it, and nothing is refunded.
      expect(server.calls).toEqual({ login: 1, children: 1, explode: 1 })
      expect(reply.body.extensions?.cost).toMatchObject({ requestedQueryCost: 42, actualQueryCost: 42 })
      expect((await limiter.peek(CLIENT)).remaining).toBe(1000 - 42)
    })

    it('a root mutation that nulled data pays its mutationCost', async () => {
      const limiter = budget(100)
      const server = await start({ limiter })
      const reply = await server.post('mutation { explode }')
      expect(reply.body.data).toBeNull()
      expect(reply.body.extensions?.cost).toMatchObject({ requestedQueryCost: 10, actualQueryCost: 10 })
      expect((await limiter.peek(CLIENT)).remaining).toBe(90)
    })

    it('a nullable field whose own resolver threw pays its weight; what never ran below it is refunded', async () => {
      const limiter = budget(1000)
      const server = await start({ limiter })
      // items 3 × 1 = 3; maybe: 1 + children 4 × 1 = 5. maybe ran (and threw): its weight, 1; nothing ran below it.
      const reply = await server.post('{ items(first: 3) { id } maybe { children(first: 4) { id } } }')
      expect(reply.body.data).toEqual({ items: [item(0), item(1), item(2)], maybe: null })
      expect(reply.body.errors?.map((error) => error.path)).toEqual([['maybe']])
      expect(server.calls).toEqual({ items: 1, maybe: 1 })
      expect(reply.body.extensions?.cost).toMatchObject({ requestedQueryCost: 8, actualQueryCost: 4 })
      expect((await limiter.peek(CLIENT)).remaining).toBe(1000 - 4)
    })

    it('a root mutation field that ran and answered null pays its mutationCost and its weight, not its subtree', async () => {
      const limiter = budget(100)
      const server = await start({ limiter })
      // login: (Session 1 + user 1) + mutation 10 = 12 requested; it answered null: Session 1 + mutation 10.
      const reply = await server.post('mutation { login(email: "nobody@example.com") { token user { id } } }')
      expect(reply.body.data).toEqual({ login: null })
      expect(reply.body.extensions?.cost).toMatchObject({ requestedQueryCost: 12, actualQueryCost: 11 })
      expect((await limiter.peek(CLIENT)).remaining).toBe(89)
    })
  })

  describe('a resolver that ran pays its weight, whatever it answered', () => {
    it('200 weighted fields that throw and 200 that answer null, against 1,000 points: 10 and 20 run', async () => {
      const throwing = budget(1000)
      const first = await start({ limiter: throwing })
      const thrown = await Promise.all(Array.from({ length: 200 }, () => first.post('{ expensive(n: 1) }')))
      const ran = thrown.filter((reply) => reply.status === 200)
      expect(ran).toHaveLength(10)
      expect(thrown.filter((reply) => reply.status === 429)).toHaveLength(190)
      expect(first.calls).toEqual({ expensive: 10 })
      for (const reply of ran) {
        expect(reply.body.errors?.map((error) => error.path)).toEqual([['expensive']])
        expect(reply.body.extensions?.cost).toMatchObject({ requestedQueryCost: 100, actualQueryCost: 100 })
      }
      expect((await throwing.peek(CLIENT)).remaining).toBe(0)

      const nulls = budget(1000)
      const second = await start({ limiter: nulls })
      const looked = await Promise.all(
        Array.from({ length: 200 }, () => second.post('{ lookup(id: "nope") { id } }')),
      )
      expect(looked.filter((reply) => reply.status === 200)).toHaveLength(20)
      expect(second.calls).toEqual({ lookup: 20 })
      expect(looked[0]?.body).toMatchObject({
        data: { lookup: null },
        extensions: { cost: { requestedQueryCost: 50, actualQueryCost: 50 } },
      })
    })
  })

  describe('a response that cost more than its estimate is billed, into debt', () => {
    it('users(first: null) answered with 1,000 objects is charged 1,000; the debt shows, and the next request waits', async () => {
      const limiter = budget(1000)
      const server = await start({ limiter })
      for (let spent = 0; spent < 5; spent++) await server.post('{ items(first: 100) { id } }')
      expect((await limiter.peek(CLIENT)).remaining).toBe(500)
      // Priced as if first were not given: defaultListSize, 10. It held 1,000: 990 more are debited.
      const reply = await server.post('{ users(first: null) { id } }')
      expect(reply.body.data.users).toHaveLength(ALL_USERS)
      expect(reply.body.extensions?.cost).toMatchObject({
        requestedQueryCost: 10,
        actualQueryCost: 1000,
        throttleStatus: { maximumAvailable: 1000, currentlyAvailable: 500 - 1000 },
      })
      // Owing 500, the next operation of 1 fits once 501 tokens are back: 50,100 s at 0.01 per second.
      const next = await server.post('{ items(first: 1) { id } }')
      expect(next.status).toBe(429)
      const retryAfter = Number(next.headers.get('retry-after'))
      expect(retryAfter).toBeGreaterThan(50_000)
      expect(retryAfter).toBeLessThanOrEqual(50_100)
      expect(server.calls).toEqual({ items: 5, users: 1 })
    })

    it('users(first: -1) answered with 999 objects is charged 999', async () => {
      const limiter = budget(1000)
      const server = await start({ limiter })
      const reply = await server.post('{ users(first: -1) { id } }')
      expect(reply.body.data.users).toHaveLength(ALL_USERS - 1)
      expect(reply.body.extensions?.cost).toMatchObject({ requestedQueryCost: 10, actualQueryCost: 999 })
      expect((await limiter.peek(CLIENT)).remaining).toBe(1)
    })
  })

  describe('work an error hid is paid for what ran, and bounded by what the budget can pay', () => {
    // { big { id wide { id } bad } } is priced 10 × (1 + wide 10 × 1) = 110. It runs 100 + 100 × 100 = 10,100
    // objects, and then the last big item's non-null bad throws: data is null, and the response shows nothing.
    const query = '{ big { id wide { id } bad } }'

    it('with room for it, the hidden work is charged what ran: 10,100, not the estimate', async () => {
      const limiter = budget(20_000)
      const server = await start({ limiter })
      const reply = await server.post(query)
      expect(reply.body.data).toBeNull()
      expect(reply.body.errors?.map((error) => error.path)).toEqual([['big', 99, 'bad']])
      expect(server.calls).toEqual({ big: 1, wide: 100, bad: 100 })
      expect(reply.body.extensions?.cost).toMatchObject({ requestedQueryCost: 110, actualQueryCost: 10_100 })
      expect((await limiter.peek(CLIENT)).remaining).toBe(20_000 - 10_100)
    })

    it('against 1,000 points, the lists stop once the budget owes its capacity: the rest never runs', async () => {
      const limiter = budget(1000)
      const server = await start({ limiter })
      const reply = await server.post(query)
      expect(reply.body.data).toBeNull()
      expect(reply.body.errors?.[0]?.extensions?.code).toBe('RATE_LIMITED')
      // 1,000 points and 1,000 of debt pay for 2,000: the 100 big items and 19 lists of 100. The 20th list's
      // resolver ran; its items would take the work past 2,000: refused, and its null ends the response.
      expect(server.calls).toEqual({ big: 1, wide: 20, bad: 19 })
      expect(reply.body.extensions?.cost).toMatchObject({ requestedQueryCost: 110, actualQueryCost: 2000 })
      // The budget owes its whole capacity: the next operation of 1 fits once 1,001 tokens are back.
      const next = await server.post('{ items(first: 1) { id } }')
      expect(next.status).toBe(429)
      expect(Number(next.headers.get('retry-after'))).toBeGreaterThan(100_000)
      expect(Number(next.headers.get('retry-after'))).toBeLessThanOrEqual(100_100)
    })
  })

  describe('the weighted fields under a list longer than its estimate stop at what the budget can pay', () => {
    // users(first: null) is priced as an unsliced list, 10 × (1 + 4 heavy × 10) = 410, and answers 1,000 users. A
    // budget of 1,000 can pay 1,000 and owe 1,000: 2,000 points of work. The list's 1,000 objects are 1,000; then
    // 25 users' four heavy fields (25 × 40 = 1,000) reach 2,000, and every heavy after them is refused before its
    // resolver runs, on a store that answers at once as on one whose answers come after the work has run on.
    const query = '{ users(first: null) { h0: heavy h1: heavy h2: heavy h3: heavy } }'
    let redis: StoreFixture | undefined

    afterEach(async () => {
      await redis?.close()
      redis = undefined
    })

    it.each(['memory', 'redis'] as const)(
      'on a %s store: 100 heavy fields run, 2,000 is paid',
      async (kind) => {
        let store: Store = new MemoryStore()
        if (kind === 'redis') {
          redis = await createStore('redis')
          store = redis.store
        }
        const limiter = budget(1000, store)
        const server = await start({ limiter })
        const reply = await server.post(query)
        expect(reply.status).toBe(200)
        expect(reply.body.data.users).toHaveLength(ALL_USERS)
        expect(server.calls).toEqual({ users: 1, heavy: 100 })
        const errors = reply.body.errors ?? []
        expect(errors).toHaveLength((ALL_USERS - 25) * 4)
        expect(errors[0]).toMatchObject({ path: ['users', 25, 'h0'], extensions: { code: 'RATE_LIMITED' } })
        expect(reply.body.extensions?.cost).toMatchObject({
          requestedQueryCost: 410,
          actualQueryCost: 2000,
          throttleStatus: { currentlyAvailable: -1000 },
        })
        const next = await server.post('{ items(first: 1) { id } }')
        expect(next.status).toBe(429)
        expect(server.calls).toEqual({ users: 1, heavy: 100 })
      },
    )

    it('a list the budget could never pay is refused before its items run, and costs only its call', async () => {
      const limiter = budget(400)
      const server = await start({ limiter })
      // Priced 10 (unsliced: the default size), with 390 left and 400 of debt: at most 800 points of work. The
      // 1,000 objects users answers are refused whole, before any is completed, and no debit is made for them.
      const reply = await server.post('{ users(first: null) { id } }')
      expect(reply.status).toBe(200)
      expect(reply.body.data).toBeNull()
      expect(reply.body.errors).toHaveLength(1)
      expect(reply.body.errors?.[0]).toMatchObject({ path: ['users'], extensions: { code: 'RATE_LIMITED' } })
      expect(server.calls).toEqual({ users: 1 })
      // What ran is users' call: minCost, 1. The estimate's other 9 go back.
      expect(reply.body.extensions?.cost).toMatchObject({ requestedQueryCost: 10, actualQueryCost: 1 })
      expect((await limiter.peek(CLIENT)).remaining).toBe(399)
    })
  })

  describe('parallel operations that outrun their estimates share one bound: what the budget can pay', () => {
    it('10 at once, each of 100 lists of 100 answered after a turn of the event loop, against 1,000 points', async () => {
      const limiter = budget(1000)
      const server = await start({ limiter })
      // Each priced 110 (big 10 × (1 + 10)), admitted together, then running 100 + 100 × 100 objects each. The
      // lists' resolvers are all called before any answers (graphql-js runs siblings at once); their items are
      // completed only while the budget can pay: `children` runs for no item of a refused list.
      const replies = await Promise.all(
        Array.from({ length: 10 }, () =>
          server.post('{ big { id wideLater { id children(first: 1) { id } } } }'),
        ),
      )
      const charged = replies.reduce(
        (sum, reply) => sum + (reply.body.extensions?.cost?.actualQueryCost ?? 0),
        0,
      )
      // 1,000 points and 1,000 of debt: about 2,000 objects completed in all, whichever operations ran them (each
      // completed list of 100 pays 200: its items and their one child each), far from 10 × 20,100.
      const children = server.calls.children ?? 0
      expect(children).toBeLessThanOrEqual(1100)
      expect(charged).toBeLessThanOrEqual(2000 + 10 * 200)
      const next = await server.post('{ items(first: 1) { id } }')
      expect(next.status).toBe(429)
    })

    it('30 at once, each a list of 1,000 priced at 10: the refused lists cost nothing, the store keeps what the responses say', async () => {
      const limiter = budget(1000)
      const server = await start({ limiter })
      // Priced at the default size (10), admitted together (300 spent), each list answering 1,000 users. The first
      // pays them from the 700 left and 290 of debt; every later one would take the debt past the budget's
      // capacity: refused before its items run, it pays minCost (1) and nothing of the debit it asked for.
      const replies = await Promise.all(
        Array.from({ length: 30 }, () => server.post('{ usersTogether(first: null, together: 30) { id } }')),
      )
      expect(replies.map((reply) => reply.status)).toEqual(replies.map(() => 200))
      const paid = replies.map((reply) => reply.body.extensions?.cost?.actualQueryCost)
      expect(paid.filter((cost) => cost === ALL_USERS)).toHaveLength(1)
      expect(paid.filter((cost) => cost === 1)).toHaveLength(29)
      expect(replies.filter((reply) => reply.body.data === null)).toHaveLength(29)
      // 1,029 paid of 1,000: owing 29, the budget has 1 point again once 30 are back, in 3,000 s at 0.01 per second.
      expect(Math.round((await limiter.peek(CLIENT)).retryAfterMs / 1000)).toBe(3000)
    })
  })

  describe('no operation is free past a spent budget', () => {
    it('once the budget is spent, an operation selecting only __typename is refused (minCost 1)', async () => {
      const limiter = budget(20)
      const server = await start({ limiter })
      expect((await server.post('{ items(first: 15) { id } }')).status).toBe(200)
      // 5 left: not spent, but too little for 10 (5 more tokens at 0.01/s: 500 s).
      const tooDear = await server.post('{ items(first: 10) { id } }')
      expect(tooDear.status).toBe(429)
      expect(tooDear.body.errors?.[0]?.message).toBe(
        'The operation costs 10, more than the 5 left in the budget; retry in 500 s.',
      )
      expect((await server.post('{ items(first: 5) { id } }')).status).toBe(200)

      const typename = await server.post('{ __typename }')
      expect(typename.status).toBe(429)
      expect(typename.body.errors?.[0]?.extensions?.code).toBe('RATE_LIMITED')
      expect(typename.body.extensions?.cost).toEqual({ requestedQueryCost: 1 })
    })

    it('minCost: 0 lets an operation priced 0 through a spent budget; a larger minCost is charged', async () => {
      const spent = budget(5)
      const free = await start({ limiter: spent, minCost: 0 })
      expect((await free.post('{ items(first: 5) { id } }')).status).toBe(200)
      const typename = await free.post('{ __typename }')
      expect(typename.status).toBe(200)
      expect(typename.body.extensions?.cost).toMatchObject({ requestedQueryCost: 0, actualQueryCost: 0 })

      const limiter = budget(100)
      const dearer = await start({ limiter, minCost: 5 })
      const reply = await dearer.post('{ __typename }')
      expect(reply.body.extensions?.cost).toMatchObject({ requestedQueryCost: 5, actualQueryCost: 5 })
      expect((await limiter.peek(CLIENT)).remaining).toBe(95)
    })

    it('replayed: ten messages(last: -1) aliases run until the budget owes its capacity; the rest wait', async () => {
      const limiter = budget(300)
      const server = await start({ limiter })
      const aliases = Array.from({ length: 10 }, (_, i) => `m${i}: messages(last: -1) { id }`).join(' ')
      const replies = []
      for (let attempt = 0; attempt < 50; attempt++) replies.push(await server.post(`{ ${aliases} }`))
      // last: -1 is priced as an unsliced call, the default size: 10 items per alias, 100 in all. The resolver read
      // it as "all but one": 499 items per alias. The first list is paid from the 200 left and 199 of debt; the
      // second would take the work past what the budget can pay (the 200 left and its capacity of 300 as debt):
      // refused, uncharged, and so are the lists after it. Its items never run, and a non-null root field refused
      // nulls the data.
      const [first, ...rest] = replies
      expect(first?.status).toBe(200)
      expect(first?.body.data).toBeNull()
      expect(first?.body.errors).toHaveLength(1)
      expect(first?.body.errors?.[0]).toMatchObject({
        message: 'The budget cannot pay for more of this operation; the rest of it did not run.',
        extensions: { code: 'RATE_LIMITED' },
      })
      expect(first?.body.extensions?.cost).toMatchObject({
        requestedQueryCost: 100,
        actualQueryCost: 499,
        throttleStatus: { currentlyAvailable: -199 },
      })
      expect(rest.map((reply) => reply.status)).toEqual(rest.map(() => 429))
      // Owing 199, the next operation of 100 fits once 299 tokens are back: 29,900 s at 0.01 per second.
      const retryAfter = Number(rest.at(-1)?.headers.get('retry-after'))
      expect(retryAfter).toBeGreaterThan(29_800)
      expect(retryAfter).toBeLessThanOrEqual(29_900)
      // The refusal of m1 nulled the data, and graphql-js ran no root field after it.
      expect(server.calls).toEqual({ messages: 2 })
    })

    it('a slicing argument of 0 or below is priced as if absent, and an empty list pays its weight', async () => {
      const limiter = budget(1000)
      const server = await start({ limiter })
      // search(first: 0): 10 (the default size) × 5; the empty list that came back: its weight once, 5.
      const search = await server.post('{ search(text: "x", first: 0) { id } }')
      expect(search.body.data).toEqual({ search: [] })
      expect(search.body.extensions?.cost).toMatchObject({ requestedQueryCost: 50, actualQueryCost: 5 })
      expect(server.calls).toEqual({ search: 1 })
      // items(first: -3): 10 × 1; an empty list: 1.
      const negative = await server.post('{ items(first: -3) { id } }')
      expect(negative.body.extensions?.cost).toMatchObject({ requestedQueryCost: 10, actualQueryCost: 1 })
      expect((await limiter.peek(CLIENT)).remaining).toBe(1000 - 5 - 1)
    })
  })

  describe('what cannot be priced does not run', () => {
    // Each would be 429 for the spent budget, or 400 over maxCost, if it were priced: none may run unpriced.
    const expensive = 'items(first: 100) { id children(first: 100) { id } }'

    it.each([
      [
        'a null @include condition under a list that comes back empty',
        `query($b: Boolean = true) { search(text: "x", first: 0) { id @include(if: $b) } ${expensive} }`,
        { b: null },
        'Argument "if" of non-null type "Boolean!" must not be null.',
      ],
      [
        'a null for a non-null argument, through a nullable variable with a default',
        `query($id: ID = "i1") { item(id: $id) { id } ${expensive} }`,
        { id: null },
        'Argument "id" of non-null type "ID!" must not be null.',
      ],
      [
        'a slicing argument of 1e309 on a list of scalars (Infinity × 0 is NaN)',
        `{ tags(first: 1e309) ${expensive} }`,
        undefined,
        'its cost is not a finite number (a slicing argument or a weighted input too large).',
      ],
    ])(
      '%s: refused with 400 COST_LIMIT_EXCEEDED, no resolver run, minCost spent',
      async (_, query, variables, reason) => {
        const limiter = budget(100)
        const server = await start({ limiter })
        const reply = await server.post(query, variables)
        expect(reply.status).toBe(400)
        expect(reply.body.errors?.[0]).toMatchObject({
          message: `The operation cannot be priced: ${reason}`,
          extensions: { code: 'COST_LIMIT_EXCEEDED' },
        })
        expect(server.calls).toEqual({})
        // A refusal spends minCost (1).
        expect((await limiter.peek(CLIENT)).remaining).toBe(99)
      },
    )

    it('dry-run: it runs, counted at maxCost (no 500)', async () => {
      const server = await start({ limiter: budget(100), mode: 'dry-run', maxCost: 700 })
      const reply = await server.post('{ tags(first: 1e309) items(first: 2) { id } }')
      expect(reply.status).toBe(200)
      expect(reply.body.extensions?.cost).toMatchObject({
        requestedQueryCost: 700,
        wouldRefuse: 'COST_LIMIT_EXCEEDED',
      })
    })

    it('invalid variables are left to the executor: no resolver runs, nothing is charged', async () => {
      const limiter = budget(100)
      const server = await start({ limiter })
      const reply = await server.post('query($n: Int!) { items(first: $n) { id } }', { n: 'many' })
      expect(reply.body.errors?.[0]?.message).toMatch(/Variable "\$n" got invalid value "many"/)
      expect(server.calls).toEqual({})
      expect((await limiter.peek(CLIENT)).remaining).toBe(100)
    })
  })

  describe('an estimate that was too low is billed, and reported', () => {
    it('actualQueryCost says what the response cost, the difference is debited, the metric counts it', async () => {
      const registry = new Registry()
      const metrics = createPrometheusMetrics({ registry })
      const limiter = budget(1000)
      const server = await start({ limiter, onOperation: metrics.onOperation })

      const reply = await server.post('{ overflow(first: 10) { id } }')
      expect(reply.body.data.overflow).toHaveLength(50)
      expect(reply.body.extensions?.cost).toMatchObject({ requestedQueryCost: 10, actualQueryCost: 50 })
      // Charged the estimate at the door, and the 40 it cost above it after the response.
      expect((await limiter.peek(CLIENT)).remaining).toBe(950)
      await server.post('{ items(first: 3) { id } }') // a sound estimate: not counted

      const text = await registry.metrics()
      expect(text).toContain('tollbooth_graphql_cost_underestimates_total{operation_type="query"} 1\n')
      expect(text).toMatch(/tollbooth_graphql_actual_cost_sum\{operation_type="query"\} 53\n/)
    })
  })
})

describe('Apollo Server with a formatError that drops what it does not know', () => {
  it('work an error hid is still charged: it is judged from the errors as raised, not as formatError left them', async () => {
    const limiter = budget(1000)
    const calls: Record<string, number> = {}
    const server = await startApollo(
      { limiter },
      {
        served: { schema: createServerSchema(calls), calls },
        // Apollo's masking recipe: no path, no extensions.
        formatError: () => ({ message: 'Internal server error' }),
      },
    )
    const reply = await server.post({
      query:
        'mutation { login(email: "alice@example.com") { token user { children(first: 20) { id } } } explode }',
    })
    expect(reply.body.data).toBeNull()
    expect(reply.body.errors).toEqual([{ message: 'Internal server error' }])
    expect(calls).toEqual({ login: 1, children: 1, explode: 1 })
    // As with Apollo's default formatError (the test above): everything ran, nothing is refunded.
    expect(reply.body.extensions?.cost).toMatchObject({ requestedQueryCost: 42, actualQueryCost: 42 })
    expect((await limiter.peek(CLIENT)).remaining).toBe(1000 - 42)
  })
})
