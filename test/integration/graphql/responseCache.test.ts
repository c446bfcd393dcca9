/**
 * Response caches in front of or behind tollbooth, with the real plugins: `@envelop/response-cache` (it caches in
 * the executor) and `@graphql-yoga/plugin-response-cache` (it answers a hit from the request's parameters, before
 * parsing) on Yoga, `@apollo/server-plugin-response-cache` on Apollo Server. Whatever the order:
 * - a cache hit pays at least `minCost` (1), so a flood of hits runs the budget dry;
 * - `extensions.cost` and the RateLimit fields of each response are that request's, never a cached copy's.
 * Where tollbooth prices the operation before the cache answers (an executor-level cache, or Apollo's listed after
 * tollbooth), a hit pays what its response holds, as a miss does; where the cache answers first, it pays minCost.
 *
 * `{ users { id } }` is estimated 5 (`users` sized by its default `first: 5`) and holds 2 users: it costs 2.
 */
import { randomUUID } from 'node:crypto'
import type { ApolloServerPlugin, BaseContext } from '@apollo/server'
import { ApolloServerPluginCacheControl } from '@apollo/server/plugin/cacheControl'
import responseCachePlugin from '@apollo/server-plugin-response-cache'
import { useResponseCache as useEnvelopResponseCache } from '@envelop/response-cache'
import { useResponseCache as useYogaResponseCache } from '@graphql-yoga/plugin-response-cache'
import { createSchema, type Plugin } from 'graphql-yoga'
import { afterEach, describe, expect, it } from 'vitest'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import type { RateLimiter } from '../../../src/core/rateLimiter.js'
import { MemoryStore } from '../../../src/core/stores/memoryStore.js'
import { costDirectivesTypeDefs } from '../../../src/graphql/index.js'
import { closeServers, type Reply, startApollo, startYoga } from '../../helpers/graphqlServers.js'

const CLIENT = 'ip:127.0.0.1'
const QUERY = '{ users { id } }'

afterEach(async () => {
  await closeServers()
})

function served() {
  const calls = { users: 0 }
  const schema = createSchema({
    typeDefs: [
      costDirectivesTypeDefs,
      /* GraphQL */ `
        type User { id: ID! }
        type Query { users(first: Int = 5): [User!]! @listSize(slicingArguments: ["first"]) }
      `,
    ],
    resolvers: {
      Query: {
        users: () => {
          calls.users++
          return [{ id: 'u1' }, { id: 'u2' }]
        },
      },
    },
  })
  return { schema, calls }
}

/** A budget on a clock that stands still: nothing comes back during a test. */
function budget(capacity: number): RateLimiter {
  const now = Date.now() * 1000
  return tokenBucket({
    name: `cache-${randomUUID().slice(0, 8)}`,
    store: new MemoryStore({ clock: () => now }),
    capacity,
    refillPerSecond: 1,
  })
}

/** What each reply said of the budget, and what it was charged. */
function accounts(replies: readonly Reply[]) {
  return replies.map((reply) => ({
    status: reply.status,
    charged: reply.body.extensions?.cost?.actualQueryCost,
    available: reply.body.extensions?.cost?.throttleStatus?.currentlyAvailable,
    remaining: Number(/;r=(\d+)/.exec(reply.headers.get('ratelimit') ?? '')?.[1]),
  }))
}

async function threeTimes(post: () => Promise<Reply>): Promise<Reply[]> {
  const replies: Reply[] = []
  for (let i = 0; i < 3; i++) replies.push(await post())
  return replies
}

type Placement = 'before' | 'after'
const placements: Placement[] = ['before', 'after']

describe.each(placements)('Yoga, the cache listed %s tollbooth', (placement) => {
  const around = (cache: Plugin) =>
    placement === 'before' ? { pluginsBefore: [cache] } : { pluginsAfter: [cache] }

  it('@envelop/response-cache (in the executor): every hit pays what its response holds, and says so', async () => {
    const limiter = budget(100)
    const { schema, calls } = served()
    const server = await startYoga(
      { limiter },
      { served: { schema, calls }, ...around(useEnvelopResponseCache({ session: () => null }) as Plugin) },
    )
    const replies = await threeTimes(() => server.post({ query: QUERY }))
    expect(calls.users).toBe(1)
    expect(accounts(replies)).toEqual([
      { status: 200, charged: 2, available: 98, remaining: 98 },
      { status: 200, charged: 2, available: 96, remaining: 96 },
      { status: 200, charged: 2, available: 94, remaining: 94 },
    ])
    expect((await limiter.peek(CLIENT)).remaining).toBe(94)
  })

  it('@graphql-yoga/plugin-response-cache (before parsing): a hit pays minCost, with its own cost and fields', async () => {
    const limiter = budget(100)
    const { schema, calls } = served()
    const server = await startYoga(
      { limiter },
      { served: { schema, calls }, ...around(useYogaResponseCache({ session: () => null }) as Plugin) },
    )
    const replies = await threeTimes(() => server.post({ query: QUERY }))
    expect(calls.users).toBe(1)
    expect(accounts(replies)).toEqual([
      { status: 200, charged: 2, available: 98, remaining: 98 },
      { status: 200, charged: 1, available: 97, remaining: 97 },
      { status: 200, charged: 1, available: 96, remaining: 96 },
    ])
    expect(replies[1]?.body.data).toEqual({ users: [{ id: 'u1' }, { id: 'u2' }] })
  })

  it('@graphql-yoga/plugin-response-cache: a flood of hits runs the budget dry, then is refused', async () => {
    const limiter = budget(10)
    const { schema, calls } = served()
    const server = await startYoga(
      { limiter },
      { served: { schema, calls }, ...around(useYogaResponseCache({ session: () => null }) as Plugin) },
    )
    const replies: Reply[] = []
    for (let i = 0; i < 12; i++) replies.push(await server.post({ query: QUERY }))
    // The miss pays 2, eight hits 1 each: 10. The rest find the budget spent.
    expect(replies.map((reply) => reply.status)).toEqual([
      ...Array.from({ length: 9 }, () => 200),
      429,
      429,
      429,
    ])
    expect(replies[11]?.headers.get('retry-after')).toBe('1')
    expect(replies[11]?.body.errors?.[0]?.extensions?.code).toBe('RATE_LIMITED')
    expect(calls.users).toBe(1)
  })
})

describe.each(placements)('Apollo Server, its response cache listed %s tollbooth', (placement) => {
  it('a hit pays at least minCost, with its own cost and fields', async () => {
    const limiter = budget(100)
    const { schema, calls } = served()
    const cache = responseCachePlugin() as ApolloServerPlugin<BaseContext>
    const cacheControl = ApolloServerPluginCacheControl({
      defaultMaxAge: 60,
    }) as ApolloServerPlugin<BaseContext>
    const server = await startApollo(
      { limiter },
      {
        served: { schema, calls },
        pluginsBefore: placement === 'before' ? [cacheControl, cache] : [cacheControl],
        pluginsAfter: placement === 'before' ? [] : [cache],
      },
    )
    const replies = await threeTimes(() => server.post({ query: QUERY }))
    expect(calls.users).toBe(1)
    // Listed after tollbooth, the cache answers an operation admitted and priced: the hit pays what it holds.
    const hit = placement === 'before' ? 1 : 2
    expect(accounts(replies)).toEqual([
      { status: 200, charged: 2, available: 98, remaining: 98 },
      { status: 200, charged: hit, available: 98 - hit, remaining: 98 - hit },
      { status: 200, charged: hit, available: 98 - 2 * hit, remaining: 98 - 2 * hit },
    ])
  })
})
