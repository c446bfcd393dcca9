/**
 * Incremental delivery (`@defer`, `@stream`) on Yoga with `@graphql-yoga/plugin-defer-stream`, settled like any
 * operation: the review's `{ feed @stream(initialCount: 1) { id heavy } }` was charged its estimate of 63 while
 * `heavy` ran 2,000 times. Each payload is counted as it is sent; what the parts cost above the estimate is debited
 * as it is reached, and a stream the budget cannot pay for is ended. Costs by hand: Item 1, `heavy` 20 (@cost), so
 * an item costs 21; `feed` is sized 3 (@listSize assumedSize), so its estimate is 63.
 */

import { randomUUID } from 'node:crypto'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { useDeferStream } from '@graphql-yoga/plugin-defer-stream'
import { createSchema, createYoga } from 'graphql-yoga'
import { afterEach, describe, expect, it } from 'vitest'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import type { RateLimiter } from '../../../src/core/rateLimiter.js'
import { MemoryStore } from '../../../src/core/stores/memoryStore.js'
import {
  type CostExtension,
  costDirectivesTypeDefs,
  type OperationEvent,
  useTollbooth,
} from '../../../src/graphql/index.js'

const ITEM = 21
const CLIENT = 'ip:127.0.0.1'

const typeDefs = /* GraphQL */ `
  type Item {
    id: ID!
    heavy: Int @cost(weight: 20)
    "20 items, however many the default size (10) says."
    children: [Item!]!
  }
  type Query {
    "Waits for the test to let it answer."
    slow: Item
    "An async generator of \`count\` items, however many its @listSize says."
    feed(count: Int!): [Item!]! @listSize(assumedSize: 3)
    user: Item
  }
`

interface Calls {
  heavy: number
  items: number
  children: number
}

const closers: (() => Promise<void>)[] = []
afterEach(async () => {
  for (const close of closers.splice(0)) await close()
})

/** A budget on a clock that stands still: nothing comes back during a test. */
function budget(capacity: number): RateLimiter {
  const now = Date.now() * 1000
  return tokenBucket({
    name: `stream-${randomUUID().slice(0, 8)}`,
    store: new MemoryStore({ clock: () => now }),
    capacity,
    refillPerSecond: 1,
  })
}

/** What `slow` waits on, and what tells the test that `children` has run. */
interface Gates {
  release(): void
  readonly childrenRan: Promise<void>
  /** The first operation was settled (its onOperation event). */
  readonly settled: Promise<void>
}

async function start(limiter: RateLimiter) {
  const calls: Calls = { heavy: 0, items: 0, children: 0 }
  let release: () => void = () => {}
  const released = new Promise<void>((resolve) => {
    release = resolve
  })
  let childrenRan: () => void = () => {}
  let settled: () => void = () => {}
  const gates: Gates = {
    release: () => release(),
    childrenRan: new Promise<void>((resolve) => {
      childrenRan = resolve
    }),
    settled: new Promise<void>((resolve) => {
      settled = resolve
    }),
  }
  const operations: OperationEvent[] = []
  const schema = createSchema({
    typeDefs: [costDirectivesTypeDefs, typeDefs],
    resolvers: {
      Query: {
        feed: async function* (_: unknown, { count }: { count: number }) {
          for (let i = 0; i < count; i++) {
            calls.items++
            yield { id: `i${i}` }
            // As a cursor over a database would: the next item after a turn of the event loop.
            await new Promise((resolve) => setImmediate(resolve))
          }
        },
        user: () => ({ id: 'u' }),
        slow: async () => {
          await released
          return { id: 's' }
        },
      },
      Item: {
        heavy: () => {
          calls.heavy++
          return 20
        },
        children: () => {
          calls.children++
          childrenRan()
          return Array.from({ length: 20 }, (_, i) => ({ id: `c${i}` }))
        },
      },
    },
  })
  const yoga = createYoga({
    schema,
    logging: false,
    plugins: [
      useDeferStream(),
      useTollbooth({
        limiter,
        onOperation: (event) => {
          operations.push(event)
          settled()
        },
      }),
    ],
  })
  const server = createServer(yoga)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  closers.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  )
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`
  return { url, calls, operations, gates }
}

interface Payload {
  data?: unknown
  incremental?: { data?: unknown; items?: unknown[]; path: (string | number)[] }[]
  errors?: { message: string; extensions?: Record<string, unknown> }[]
  extensions?: { cost?: CostExtension }
  hasNext?: boolean
}

/** POSTs for a multipart/mixed response and reads every part. */
async function incremental(url: string, query: string) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'multipart/mixed' },
    body: JSON.stringify({ query }),
  })
  const text = await response.text()
  const payloads: Payload[] = []
  for (const part of text.split('\r\n---')) {
    const body = part.slice(part.indexOf('\r\n\r\n') + 4).trim()
    if (body.startsWith('{')) payloads.push(JSON.parse(body) as Payload)
  }
  return { status: response.status, headers: response.headers, payloads }
}

/** The items of `feed` the client assembled from the payloads. */
function streamedItems(payloads: readonly Payload[]): unknown[] {
  const first = (payloads[0]?.data as { feed?: unknown[] } | undefined)?.feed ?? []
  return [...first, ...payloads.slice(1).flatMap((p) => (p.incremental ?? []).flatMap((e) => e.items ?? []))]
}

describe('useTollbooth in Yoga with @defer and @stream', () => {
  it('a stream of 2,000 items priced 63 is charged 2,000 × 21 = 42,000, and reported so', async () => {
    const limiter = budget(100_000)
    const server = await start(limiter)
    const reply = await incremental(server.url, '{ feed(count: 2000) @stream(initialCount: 1) { id heavy } }')
    expect(reply.status).toBe(200)
    expect(streamedItems(reply.payloads)).toHaveLength(2000)
    expect(server.calls.heavy).toBe(2000)
    const last = reply.payloads.at(-1)
    expect(last?.hasNext).toBe(false)
    expect(last?.extensions?.cost).toMatchObject({ requestedQueryCost: 63, actualQueryCost: 2000 * ITEM })
    expect((await limiter.peek(CLIENT)).remaining).toBe(100_000 - 2000 * ITEM)
    expect(server.operations).toEqual([
      expect.objectContaining({ requestedCost: 63, actualCost: 2000 * ITEM, refused: undefined }),
    ])
    // The response's head carries the RateLimit fields of admission.
    expect(reply.headers.get('ratelimit')).toMatch(new RegExp(`^"${limiter.name}";r=${100_000 - 63};t=\\d+$`))
  })

  it('a stream the budget cannot pay for ends there, with RATE_LIMITED; its work stops at what the budget can pay', async () => {
    const limiter = budget(1000)
    const server = await start(limiter)
    const reply = await incremental(server.url, '{ feed(count: 2000) @stream(initialCount: 1) { id heavy } }')
    const last = reply.payloads.at(-1)
    expect(last?.hasNext).toBe(false)
    expect(last?.errors?.map((error) => error.extensions?.code)).toEqual(['RATE_LIMITED'])
    // The budget can pay 1,000 and owe 1,000: 2,000 points of work, however fast the client reads. 95 items of 21
    // (1 + heavy 20) are 1,995; the 96th item is 1 more, and its heavy would pass 2,000: refused before it runs.
    expect(server.calls.heavy).toBe(95)
    expect(streamedItems(reply.payloads)).toHaveLength(96)
    expect(last?.extensions?.cost).toMatchObject({
      requestedQueryCost: 63,
      actualQueryCost: 95 * ITEM + 1,
      throttleStatus: { currentlyAvailable: 1000 - (95 * ITEM + 1) },
    })
  })

  it('@defer: each deferred part counted as it arrives; the sum is the whole response, refunded to it', async () => {
    const limiter = budget(1000)
    const server = await start(limiter)
    const reply = await incremental(server.url, '{ user { id ... @defer { heavy } } feed(count: 1) { id } }')
    expect(reply.payloads.length).toBeGreaterThan(1)
    expect(reply.payloads[0]?.extensions?.cost).toBeUndefined()
    // Estimated: user 1 + the deferred heavy 20 + feed 3 × 1 = 24; returned: user 1 + heavy 20 + 1 item = 22.
    expect(reply.payloads.at(-1)?.extensions?.cost).toMatchObject({
      requestedQueryCost: 24,
      actualQueryCost: 22,
    })
    expect((await limiter.peek(CLIENT)).remaining).toBe(1000 - 22)
  })

  it('a client that leaves before a deferred part is sent: what ran after it left is charged all the same', async () => {
    const limiter = budget(1000)
    const server = await start(limiter)
    const controller = new AbortController()
    const response = await fetch(server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'multipart/mixed' },
      body: JSON.stringify({ query: '{ user { id } ... @defer { slow { id children { id } } } }' }),
      signal: controller.signal,
    })
    // The first payload (user) arrives; the deferred part waits on `slow`. The client goes away.
    const reader = response.body?.getReader()
    await reader?.read()
    controller.abort()
    await reader?.cancel().catch(() => {})
    // The server settles the response when it sees the client gone, before `slow` answers: it paid 2 so far.
    await server.gates.settled
    expect(server.operations[0]).toMatchObject({ requestedCost: 12, actualCost: 2 })
    server.gates.release()
    await server.gates.childrenRan
    await new Promise((resolve) => setImmediate(resolve))
    // Estimated: user 1 + slow 1 + children 10 = 12. Ran: user 1 + slow 1 + children 20 = 22, all of it paid.
    expect(server.calls.children).toBe(1)
    expect((await limiter.peek(CLIENT)).remaining).toBe(1000 - 22)
  })
})
