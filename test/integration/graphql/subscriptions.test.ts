/**
 * Subscriptions on a real stack, one suite run against both servers tollbooth has an adapter for, each in its own
 * recipe (test/helpers/graphqlWsServers.ts): graphql-yoga with useTollbooth (src/graphql/yoga/useTollbooth.ts), and
 * Apollo Server with tollboothApolloPlugin, whose `graphqlWs` options (src/graphql/apollo/graphqlWs.ts) admit every
 * operation over WebSocket. Each listens on 127.0.0.1 port 0 with a `ws` WebSocketServer on the same server running
 * graphql-ws's `useServer`; real graphql-ws clients connect to it. GraphQL over SSE is Yoga's own (`fetch` with
 * `accept: text/event-stream`, the stream read to its end): Apollo Server serves no subscription over HTTP.
 *
 * Covered on both servers: the subscription's cost charged at subscribe, the over-budget refusal at subscribe
 * (RATE_LIMITED with `retryAfter`, no resolver run), each event charged what its result costs to a budget for
 * events (the event it cannot pay is a RATE_LIMITED error result, and ends the subscription), `costPerEvent` as
 * the least an event costs, the default budget for events kept apart from the query budget, `maxPerIdentity` with
 * its leases released when a subscription completes, is
 * unsubscribed (at once, even while its source is suspended) or its connection closes, on a MemoryStore and on a
 * RedisStore; refusals over graphql-ws carry no `http` extension; a parse guard's or a structural rule's refusal is
 * an `error` message on an open socket; HTTP and graphql-ws draw on one budget. On Yoga also over SSE; on Apollo
 * also an application `onSubscribe` that builds its own ExecutionArgs, and a subscription sent over HTTP (which
 * Apollo runs as a query).
 *
 * Every budget refills at 1 unit per 1000 s, so within a test it is a fixed amount and every count is exact.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { type ExecutionResult, GraphQLError, parse } from 'graphql'
import { type Client, createClient } from 'graphql-ws'
import { createSchema } from 'graphql-yoga'
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest'
import { WebSocket } from 'ws'
import { concurrencyLimit } from '../../../src/core/limiters/concurrencyLimit.js'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import type { RateLimiter } from '../../../src/core/rateLimiter.js'
import type { Store } from '../../../src/core/stores/store.js'
import {
  costDirectivesTypeDefs,
  type OperationEvent,
  type TollboothGraphQLOptions,
} from '../../../src/graphql/index.js'
import {
  apolloDriver,
  type OnSubscribe,
  type WsServerDriver,
  wsServerDrivers,
  yogaDriver,
} from '../../helpers/graphqlWsServers.js'
import { createStore, type StoreFixture } from '../../helpers/stores.js'

const HOST = '127.0.0.1'
/** The default identity: the client IP of the upgrade request (graphql-ws) or of the HTTP request (SSE). */
const IDENTITY = `ip:${HOST}`
/** 1 unit per 1000 s: nothing comes back during a test. */
const REFILL = 0.001

// ---------------------------------------------------------------------------------------------------------------
// Schema
// ---------------------------------------------------------------------------------------------------------------

const typeDefs = /* GraphQL */ `
  type Query {
    budget: Int
    node: Node
  }
  type Node {
    child: Node
    name: String
  }
  type Sample {
    v: Int!
  }
  type Tick {
    n: Int!
    samples: [Sample!]! @listSize(assumedSize: 2)
    "100 samples, whatever the assumed size says"
    many: [Sample!]! @listSize(assumedSize: 2)
    "Non-null; throws: the event's tick is nulled, and what ran below it vanishes"
    bad: Int!
  }
  type Subscription {
    "count events, gapMs apart (0: as fast as the consumer reads)"
    ticks(count: Int!, gapMs: Int = 0): Tick @cost(weight: 5)
    "one event, then the source waits (not at a yield) until the test ends"
    stalled: Tick @cost(weight: 5)
  }
`

/**
 * `subscription { ticks(count: …) { n samples { v } } }` costs, by hand: ticks' own weight 5 (@cost), n 0 (a
 * scalar), samples (1 per Sample object + 0 for v) × 2 (@listSize assumedSize) = 2; 5 + 0 + 2 = 7. `stalled` the same.
 */
const SUB_COST = 7
const ticksQuery = (count: number, gapMs = 0) =>
  `subscription Ticks { ticks(count: ${count}, gapMs: ${gapMs}) { n samples { v } } }`
const stalledQuery = 'subscription Stalled { stalled { n samples { v } } }'
const tick = (n: number) => ({ data: { ticks: { n, samples: [{ v: n }, { v: -n }] } } })

/** What the subscription resolvers did, server side. */
interface Runs {
  /** Calls of a `subscribe` resolver (an admitted subscription). */
  subscribes: number
  /** Events the generators yielded. */
  events: number
  /** Generators running right now (entered, not yet finished). */
  active: number
}

/** `stalled`'s sources wait on `stall` (resolved when the test ends). */
function makeSchema(runs: Runs, stall: Promise<void>) {
  return createSchema({
    typeDefs: [costDirectivesTypeDefs, typeDefs],
    resolvers: {
      Query: { budget: () => 1, node: () => ({}) },
      Node: { child: () => ({}), name: () => 'n' },
      Tick: {
        samples: (tick: { n: number }) => [{ v: tick.n }, { v: -tick.n }],
        many: () => Array.from({ length: 100 }, (_, v) => ({ v })),
        bad: () => {
          throw new Error('bad')
        },
      },
      Subscription: {
        ticks: {
          // A plain function, so the call is counted even if the generator is never started.
          subscribe: (_source: unknown, args: { count: number; gapMs: number }) => {
            runs.subscribes++
            return (async function* () {
              runs.active++
              try {
                for (let n = 1; n <= args.count; n++) {
                  runs.events++
                  yield { ticks: { n } }
                  if (args.gapMs > 0) await sleep(args.gapMs)
                }
              } finally {
                runs.active--
              }
            })()
          },
        },
        stalled: {
          subscribe: () => {
            runs.subscribes++
            return (async function* () {
              runs.active++
              try {
                runs.events++
                yield { stalled: { n: 1 } }
                // Suspended in an `await`: a `return()` of this generator waits until it resumes.
                await stall
              } finally {
                runs.active--
              }
            })()
          },
        },
      },
    },
  })
}

// ---------------------------------------------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------------------------------------------

interface Harness {
  readonly httpUrl: string
  readonly wsUrl: string
  readonly runs: Runs
  readonly limiter: RateLimiter
  /** The budget the subscriptions' events draw from. */
  readonly eventBudget: RateLimiter
  readonly events: OperationEvent[]
  /** The budget left for IDENTITY. */
  remaining(): Promise<number>
  /** The budget for events left for IDENTITY. */
  eventsRemaining(): Promise<number>
}

const cleanups: (() => unknown)[] = []

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

interface StartOptions {
  readonly capacity: number
  /**
   * The capacity of the budget for events, given as `subscriptions.limiter` (1000 by default); `'twin'` leaves the
   * option out, so that events draw from the plugin's default: a budget like `capacity`'s, kept apart.
   */
  readonly eventCapacity?: number | 'twin'
  readonly store?: Store
  /** The plugin's `name`: its leases are `${name}:subscriptions` in `store`. */
  readonly name?: string
  readonly subscriptions?: TollboothGraphQLOptions['subscriptions']
  readonly limits?: TollboothGraphQLOptions['limits']
  readonly identify?: TollboothGraphQLOptions['identify']
  /** The application's own graphql-ws `onSubscribe` (Apollo's recipe only), given the server's schema. */
  readonly onSubscribe?: (schema: ReturnType<typeof makeSchema>) => OnSubscribe
}

let serial = 0

/** `driver`'s server with tollbooth on a fresh http server, graphql-ws on the same server, budget `capacity`. */
async function start(driver: WsServerDriver, options: StartOptions): Promise<Harness> {
  const runs: Runs = { subscribes: 0, events: 0, active: 0 }
  const events: OperationEvent[] = []
  let endStall: () => void = () => {}
  const stall = new Promise<void>((resolve) => {
    endStall = resolve
  })
  const limiter = tokenBucket({
    name: `budget-${++serial}`,
    capacity: options.capacity,
    refillPerSecond: REFILL,
    ...(options.store === undefined ? {} : { store: options.store }),
  })
  const eventCapacity = options.eventCapacity ?? 1000
  const eventBudget =
    eventCapacity === 'twin'
      ? // The plugin's default: the same store and size, under the limiter's name and `-events`.
        limiter.twin(`${limiter.name}-events`)
      : tokenBucket({
          name: `events-${serial}`,
          capacity: eventCapacity,
          refillPerSecond: REFILL,
          ...(options.store === undefined ? {} : { store: options.store }),
        })
  const subscriptions = {
    ...(eventCapacity === 'twin' ? {} : { limiter: eventBudget }),
    ...options.subscriptions,
  }
  const schema = makeSchema(runs, stall)
  const server = await driver.start({
    schema,
    tollbooth: {
      limiter,
      onOperation: (event) => events.push(event),
      ...(options.store === undefined ? {} : { store: options.store }),
      ...(options.name === undefined ? {} : { name: options.name }),
      subscriptions,
      ...(options.limits === undefined ? {} : { limits: options.limits }),
      ...(options.identify === undefined ? {} : { identify: options.identify }),
    },
    ...(options.onSubscribe === undefined ? {} : { onSubscribe: options.onSubscribe(schema) }),
  })
  cleanups.push(async () => {
    endStall()
    await server.close()
  })
  return {
    httpUrl: server.httpUrl,
    wsUrl: server.wsUrl,
    runs,
    limiter,
    eventBudget,
    events,
    remaining: async () => (await limiter.peek(IDENTITY)).remaining,
    eventsRemaining: async () => (await eventBudget.peek(IDENTITY)).remaining,
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Clients
// ---------------------------------------------------------------------------------------------------------------

/** A graphql-ws client; `lazy: false` connects at once and keeps its socket open until disposed. */
function wsClient(url: string, options: { lazy?: boolean } = {}): Client {
  const client = createClient({ url, webSocketImpl: WebSocket, retryAttempts: 0, ...options })
  cleanups.push(() => client.dispose())
  return client
}

interface WsOperation {
  readonly results: ExecutionResult[]
  /** Resolves with what the sink's `error` got, or `undefined` on `complete`. */
  readonly ended: Promise<unknown>
  unsubscribe(): void
}

function subscribeWs(client: Client, query: string): WsOperation {
  const results: ExecutionResult[] = []
  let unsubscribe: () => void = () => {}
  const ended = new Promise<unknown>((resolve) => {
    unsubscribe = client.subscribe(
      { query },
      {
        next: (result) => results.push(result as ExecutionResult),
        error: (error) => resolve(error),
        complete: () => resolve(undefined),
      },
    )
  })
  cleanups.push(() => unsubscribe())
  return { results, ended, unsubscribe: () => unsubscribe() }
}

interface SseEvent {
  readonly event: string
  readonly data: string
}

interface SseStream {
  readonly status: number
  readonly headers: Headers
  readonly events: SseEvent[]
  /** The `next` events' data, parsed. */
  readonly results: ExecutionResult[]
  /** Resolves when the server ends the stream (or it is aborted). */
  readonly ended: Promise<void>
  abort(): void
}

/** A GraphQL-over-SSE request (Yoga's distinct-connections mode), its stream read in the background. */
async function subscribeSse(url: string, query: string): Promise<SseStream> {
  const controller = new AbortController()
  cleanups.push(() => controller.abort())
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ query }),
    signal: controller.signal,
  })
  const events: SseEvent[] = []
  const results: ExecutionResult[] = []
  const ended = (async () => {
    if (response.body === null) return
    const decoder = new TextDecoder()
    let buffer = ''
    try {
      const reader = response.body.getReader()
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
        buffer += decoder.decode(chunk.value, { stream: true })
        for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
          const block = buffer.slice(0, end)
          buffer = buffer.slice(end + 2)
          let event = 'message'
          const data: string[] = []
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) continue // Yoga's keep-alive pings
            if (line.startsWith('event:')) event = line.slice(6).trim()
            else if (line.startsWith('data:')) data.push(line.slice(5).trimStart())
          }
          if (data.length === 0 && event === 'message') continue
          events.push({ event, data: data.join('\n') })
          if (event === 'next') results.push(JSON.parse(data.join('\n')) as ExecutionResult)
        }
      }
    } catch (error) {
      if (!controller.signal.aborted) throw error
    }
  })()
  return {
    status: response.status,
    headers: response.headers,
    events,
    results,
    ended,
    abort: () => controller.abort(),
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Waiting
// ---------------------------------------------------------------------------------------------------------------

async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms)
  })
  try {
    return await Promise.race([promise, timeout])
  } finally {
    clearTimeout(timer)
  }
}

/** Polls `condition` every 5 ms until it holds; fails after `ms`. */
async function waitFor(what: string, condition: () => boolean | Promise<boolean>, ms = 5_000): Promise<void> {
  const deadline = performance.now() + ms
  while (!(await condition())) {
    if (performance.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await sleep(5)
  }
}

interface RefusalShape {
  message: string
  extensions: { code: string; retryAfter: number; [key: string]: unknown }
}

/** `{ node { child { child … { name } … } } }` with `depth` levels of fields. */
function nested(depth: number): string {
  return `{node{${'child{'.repeat(depth - 2)}name${'}'.repeat(depth - 1)}}`
}

/** The close codes of every socket the client saw closed. */
function closeCodes(client: Client): number[] {
  const codes: number[] = []
  client.on('closed', (event) => codes.push((event as { code: number }).code))
  return codes
}

/** The errors of an `error` message (what the sink's `error` got), as the client reads them. */
function errorMessage(ended: unknown): { message: string; extensions: Record<string, unknown> }[] {
  expect(Array.isArray(ended), `an error message, not ${String(ended)}`).toBe(true)
  return ended as { message: string; extensions: Record<string, unknown> }[]
}

/**
 * A subscription, then a query, on one socket that is not lazy (a close, such as a 4500, would show): each must end
 * with one result, and the socket must stay open. Their results.
 */
async function subscriptionAndQueryOnOneSocket(h: Harness): Promise<ExecutionResult[]> {
  const client = wsClient(h.wsUrl, { lazy: false })
  const closed = closeCodes(client)
  const results: ExecutionResult[] = []
  for (const query of [ticksQuery(2), '{ budget }']) {
    const op = subscribeWs(client, query)
    expect(await within(op.ended, 5_000, `the answer to ${query}`)).toBeUndefined()
    expect(op.results).toHaveLength(1)
    results.push(...op.results)
  }
  expect(closed).toEqual([])
  return results
}

/** The one error of a refusal result. */
function refusalOf(result: ExecutionResult | undefined): RefusalShape {
  expect(result?.data ?? undefined).toBeUndefined()
  expect(result?.errors).toHaveLength(1)
  return result?.errors?.[0] as unknown as RefusalShape
}

describe.each(wsServerDrivers.map((driver) => [driver.name, driver] as const))('%s', (_name, driver) => {
  // ---------------------------------------------------------------------------------------------------------------
  // 1–3. graphql-ws: charge at subscribe, refusal at subscribe, costPerEvent
  // ---------------------------------------------------------------------------------------------------------------

  describe('graphql-ws: budget', () => {
    it('charges the subscription its hand-computed cost at subscribe, and nothing per event to the query budget', async () => {
      const h = await start(driver, { capacity: 100 })
      const client = wsClient(h.wsUrl)
      expect(await h.remaining()).toBe(100)

      const op = subscribeWs(client, ticksQuery(3))
      expect(await within(op.ended, 5_000, 'the subscription to complete')).toBeUndefined()

      expect(op.results).toEqual([tick(1), tick(2), tick(3)])
      expect(h.runs).toEqual({ subscribes: 1, events: 3, active: 0 })
      expect(await h.remaining()).toBe(100 - SUB_COST)

      // A following query (only a scalar: minCost, 1) on the same connection draws on the same budget.
      const query = subscribeWs(client, '{ budget }')
      expect(await within(query.ended, 5_000, 'the query')).toBeUndefined()
      expect(query.results).toEqual([
        {
          data: { budget: 1 },
          extensions: {
            cost: {
              requestedQueryCost: 1,
              actualQueryCost: 1,
              throttleStatus: {
                maximumAvailable: 100,
                currentlyAvailable: 100 - SUB_COST - 1,
                restoreRate: REFILL,
              },
            },
          },
        },
      ])

      // A second subscription is charged again.
      const again = subscribeWs(client, ticksQuery(1))
      expect(await within(again.ended, 5_000, 'the second subscription')).toBeUndefined()
      expect(await h.remaining()).toBe(100 - 2 * SUB_COST - 1)
    })

    it('refuses a subscription the budget cannot pay: RATE_LIMITED with retryAfter, no resolver run', async () => {
      // Pays one subscription (7), then 3 are left.
      const h = await start(driver, { capacity: 10 })
      const client = wsClient(h.wsUrl)
      const paid = subscribeWs(client, ticksQuery(2))
      expect(await within(paid.ended, 5_000, 'the paid subscription')).toBeUndefined()
      expect(paid.results).toEqual([tick(1), tick(2)])
      expect(await h.remaining()).toBe(10 - SUB_COST)

      const refused = subscribeWs(client, ticksQuery(2))
      // graphql-ws: the refusal is a single `next` result, then `complete` (there is no HTTP status to carry).
      expect(await within(refused.ended, 5_000, 'the refused subscription')).toBeUndefined()
      expect(refused.results).toHaveLength(1)
      const error = refusalOf(refused.results[0])
      expect(error.extensions.code).toBe('RATE_LIMITED')
      expect(typeof error.extensions.retryAfter).toBe('number')
      expect(Number.isInteger(error.extensions.retryAfter)).toBe(true)
      // 4 units short at 1 unit per 1000 s.
      expect(error.extensions.retryAfter).toBe(4000)
      expect(error.extensions.cost).toBe(SUB_COST)
      // No HTTP response carries it: the status and headers are not sent as data.
      expect(error.extensions.http).toBeUndefined()
      expect(error.message).toBe(
        `The operation costs ${SUB_COST}, more than the ${10 - SUB_COST} left in the budget; retry in 4000 s.`,
      )
      expect(refused.results[0]?.extensions).toEqual({ cost: { requestedQueryCost: SUB_COST } })

      // The resolver ran for the paid subscription only; the denial spent nothing.
      expect(h.runs).toEqual({ subscribes: 1, events: 2, active: 0 })
      expect(await h.remaining()).toBe(10 - SUB_COST)
    })

    it('refuses a query over graphql-ws the budget cannot pay: one RATE_LIMITED result without `http`', async () => {
      const h = await start(driver, { capacity: 3 })
      await h.limiter.consume(IDENTITY, 3)
      const op = subscribeWs(wsClient(h.wsUrl), '{ node { name } }')
      expect(await within(op.ended, 5_000, 'the refused query')).toBeUndefined()
      expect(op.results).toHaveLength(1)
      const error = refusalOf(op.results[0])
      // `node` 1 + `name` 0: the query costs 1, and nothing is left.
      expect(error.extensions.code).toBe('RATE_LIMITED')
      expect(error.extensions.cost).toBe(1)
      expect(error.extensions.retryAfter).toBe(1000)
      expect(error.extensions.http).toBeUndefined()
      expect(op.results[0]?.extensions).toEqual({ cost: { requestedQueryCost: 1 } })
      expect(await h.remaining()).toBe(0)
    })

    it.each([
      ['throws', 'synchronously'],
      ['rejects', 'asynchronously'],
    ] as const)(
      'an identify that %s a GraphQLError (%s) refuses with it, without `http`; the socket stays open',
      async (_how, way) => {
        const refuse = () =>
          new GraphQLError('Sign in first.', {
            extensions: { code: 'UNAUTHENTICATED', http: { status: 401 } },
          })
        const h = await start(driver, {
          capacity: 100,
          identify:
            way === 'synchronously'
              ? () => {
                  throw refuse()
                }
              : async () => {
                  throw refuse()
                },
        })
        const results = await subscriptionAndQueryOnOneSocket(h)
        for (const result of results) {
          expect(result.data ?? undefined).toBeUndefined()
          expect(result.errors?.map((error) => [error.message, error.extensions])).toEqual([
            ['Sign in first.', { code: 'UNAUTHENTICATED' }],
          ])
        }
        expect(h.runs).toEqual({ subscribes: 0, events: 0, active: 0 })
        expect(await h.remaining()).toBe(100)
      },
    )

    it('HTTP and graphql-ws draw on one budget (the same client IP, the same identity)', async () => {
      const h = await start(driver, { capacity: 100 })
      const op = subscribeWs(wsClient(h.wsUrl), ticksQuery(1))
      expect(await within(op.ended, 5_000, 'the subscription')).toBeUndefined()
      expect(op.results).toEqual([tick(1)])
      const response = await fetch(h.httpUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json' },
        body: JSON.stringify({ query: '{ budget }' }),
      })
      expect(response.status).toBe(200)
      const body = (await response.json()) as ExecutionResult & {
        extensions: { cost: { throttleStatus: { currentlyAvailable: number } } }
      }
      expect(body.data).toEqual({ budget: 1 })
      expect(body.extensions.cost.throttleStatus.currentlyAvailable).toBe(100 - SUB_COST - 1)
      expect(await h.remaining()).toBe(100 - SUB_COST - 1)
    })

    it('refuses a subscription that costs more than the budget can ever hold', async () => {
      const h = await start(driver, { capacity: SUB_COST - 1 })
      const op = subscribeWs(wsClient(h.wsUrl), ticksQuery(1))
      expect(await within(op.ended, 5_000, 'the refused subscription')).toBeUndefined()
      const error = refusalOf(op.results[0])
      // A client error: no retryAfter, since waiting would not help.
      expect(error.extensions).toEqual({ code: 'COST_LIMIT_EXCEEDED', cost: SUB_COST, budget: SUB_COST - 1 })
      expect(error.message).toBe(
        `The operation costs ${SUB_COST}, more than the budget can ever hold (${SUB_COST - 1}).`,
      )
      expect(h.runs.subscribes).toBe(0)
      expect(await h.remaining()).toBe(SUB_COST - 1)
    })

    it('each event is charged what its result costs (7) to the budget for events; 200 events, 1,400', async () => {
      const h = await start(driver, { capacity: 100, eventCapacity: 2000 })
      const op = subscribeWs(wsClient(h.wsUrl), ticksQuery(200))
      expect(await within(op.ended, 10_000, 'the subscription to complete')).toBeUndefined()
      expect(op.results).toHaveLength(200)
      expect(op.results[199]).toEqual(tick(200))
      // ticks 5 (@cost) + samples: 2 Sample objects, 1 each = 7 per event, as the subscription is priced.
      expect(await h.eventsRemaining()).toBe(2000 - 200 * SUB_COST)
      expect(await h.remaining()).toBe(100 - SUB_COST)
    })

    it('the event the budget for events cannot pay is charged, refused and ends the subscription', async () => {
      const paidEvents = 3
      const h = await start(driver, { capacity: 100, eventCapacity: SUB_COST * paidEvents + 2 })
      const op = subscribeWs(wsClient(h.wsUrl), ticksQuery(10))
      expect(await within(op.ended, 5_000, 'the subscription to end')).toBeUndefined()
      expect(op.results).toHaveLength(paidEvents + 1)
      expect(op.results.slice(0, paidEvents)).toEqual([tick(1), tick(2), tick(3)])
      const error = refusalOf(op.results[paidEvents])
      expect(error.extensions.code).toBe('RATE_LIMITED')
      expect(error.extensions.cost).toBe(SUB_COST)
      // 2 were left, 7 taken: 5 owed, and 1 more to fit: 6 units at 1 unit per 1000 s.
      expect(error.extensions.retryAfter).toBe(6000)
      expect(error.message).toBe('The budget for events is spent; the subscription ends. Retry in 6000 s.')
      expect(error.extensions.http).toBeUndefined()
      // The 4th event was computed, so it was charged; the source was closed after it, at no further event.
      expect(h.runs).toEqual({ subscribes: 1, events: paidEvents + 1, active: 0 })
      expect(await h.eventsRemaining()).toBe(0)
      // The budget for queries paid the subscription's opening only.
      expect(await h.remaining()).toBe(100 - SUB_COST)
    })

    it('an event whose result an error nulled is charged the work that ran: 100 samples hidden are paid', async () => {
      const h = await start(driver, { capacity: 100, eventCapacity: 1000 })
      const op = subscribeWs(wsClient(h.wsUrl), 'subscription { ticks(count: 3) { n many { v } bad } }')
      expect(await within(op.ended, 5_000, 'the subscription to complete')).toBeUndefined()
      // Each event: ticks nulled by bad, so the result shows { ticks: null } and an error.
      expect(op.results.map((result) => result.data)).toEqual([
        { ticks: null },
        { ticks: null },
        { ticks: null },
      ])
      // What ran, per event: ticks 5 + 100 samples = 105 (the response alone would say 5).
      expect(await h.eventsRemaining()).toBe(1000 - 3 * 105)
    })

    it('an event does at most twice its budget for events of work: a list past that is refused before its items run', async () => {
      // A budget for events of 40 can pay 40 and owe 40: 80 points per event at most. Each event's many returns 100
      // samples (priced 2): with ticks' own 5, 105. The list is refused before its samples complete; the event is
      // answered with ticks nulled and a RATE_LIMITED error, and pays what ran, ticks' 5.
      const h = await start(driver, { capacity: 100, eventCapacity: 40 })
      const op = subscribeWs(wsClient(h.wsUrl), 'subscription { ticks(count: 3) { n many { v } } }')
      expect(await within(op.ended, 5_000, 'the subscription to complete')).toBeUndefined()
      expect(op.results.map((result) => result.data)).toEqual([
        { ticks: null },
        { ticks: null },
        { ticks: null },
      ])
      expect(op.results.map((result) => result.errors?.map((error) => error.extensions?.code))).toEqual([
        ['RATE_LIMITED'],
        ['RATE_LIMITED'],
        ['RATE_LIMITED'],
      ])
      expect(await h.eventsRemaining()).toBe(40 - 3 * 5)
    })

    it('costPerEvent is the least an event costs', async () => {
      const h = await start(driver, {
        capacity: 100,
        eventCapacity: 1000,
        subscriptions: { costPerEvent: 20 },
      })
      const op = subscribeWs(wsClient(h.wsUrl), ticksQuery(3))
      expect(await within(op.ended, 5_000, 'the subscription to complete')).toBeUndefined()
      expect(op.results).toEqual([tick(1), tick(2), tick(3)])
      expect(await h.eventsRemaining()).toBe(1000 - 3 * 20)
    })

    it("by default events draw from a budget of the query budget's size, kept apart: draining it never spends the query budget", async () => {
      const h = await start(driver, { capacity: 30, eventCapacity: 'twin' })
      const client = wsClient(h.wsUrl, { lazy: false })
      // Whoever makes the events (here the source, elsewhere other clients' mutations), 30 units pay 4 of them.
      const op = subscribeWs(client, ticksQuery(100))
      expect(await within(op.ended, 5_000, 'the subscription to end')).toBeUndefined()
      expect(op.results).toHaveLength(5)
      expect(refusalOf(op.results[4]).extensions.code).toBe('RATE_LIMITED')
      expect(await h.eventsRemaining()).toBe(0)
      // The query budget paid the opening (7) and nothing for the events: a query still runs.
      expect(await h.remaining()).toBe(30 - SUB_COST)
      const query = subscribeWs(client, '{ budget }')
      expect(await within(query.ended, 5_000, 'the query')).toBeUndefined()
      expect(query.results[0]?.data).toEqual({ budget: 1 })
    })
  })

  // ---------------------------------------------------------------------------------------------------------------
  // 4, 6. graphql-ws: maxPerIdentity, on a MemoryStore and a RedisStore
  // ---------------------------------------------------------------------------------------------------------------

  describe.each(['memory', 'redis'] as const)('graphql-ws: maxPerIdentity 2 on a %s store', (kind) => {
    let fixture: StoreFixture | undefined

    afterAll(async () => {
      await fixture?.close()
    })

    async function setup(capacity = 1000, leaseMs = 60_000) {
      fixture ??= await createStore(kind)
      const store = fixture.store
      // A limiter name unique per test: the store outlives the test.
      const name = `sub${++serial}`
      const h = await start(driver, { capacity, store, name, subscriptions: { maxPerIdentity: 2, leaseMs } })
      // The plugin's leases live in `store` under `${name}:subscriptions`; this reads them without taking one.
      const leases = concurrencyLimit({ name: `${name}:subscriptions`, store, max: 2, leaseMs })
      const held = async () => 2 - (await leases.peek(IDENTITY)).remaining
      return { h, held }
    }

    it('refuses a third concurrent subscription with SUBSCRIPTION_LIMIT_EXCEEDED; unsubscribe and completion free a slot', async () => {
      const { h, held } = await setup()
      const client = wsClient(h.wsUrl)

      const a = subscribeWs(client, ticksQuery(100_000, 20))
      const b = subscribeWs(client, ticksQuery(100_000, 20))
      await waitFor('first events of two subscriptions', () => a.results.length > 0 && b.results.length > 0)
      expect(await held()).toBe(2)

      const c = subscribeWs(client, ticksQuery(1))
      expect(await within(c.ended, 5_000, 'the refused subscription')).toBeUndefined()
      expect(c.results).toHaveLength(1)
      const error = refusalOf(c.results[0])
      expect(error.extensions.code).toBe('SUBSCRIPTION_LIMIT_EXCEEDED')
      expect(typeof error.extensions.retryAfter).toBe('number')
      expect(error.extensions.retryAfter).toBeGreaterThanOrEqual(1)
      expect(error.extensions.limit).toBe(2)
      expect(error.extensions.http).toBeUndefined()
      expect(h.runs.subscribes).toBe(2)
      expect(await held()).toBe(2)

      // The client unsubscribes a: its generator stops and its lease is released.
      a.unsubscribe()
      await waitFor(
        'the lease of the unsubscribed subscription to be released',
        async () => (await held()) === 1,
      )
      await waitFor('the unsubscribed generator to stop', () => h.runs.active === 1)

      // A subscription that completes by itself (2 events) is admitted, and frees its lease when it completes.
      const d = subscribeWs(client, ticksQuery(2))
      expect(await within(d.ended, 5_000, 'the admitted subscription')).toBeUndefined()
      expect(d.results).toEqual([tick(1), tick(2)])
      await waitFor(
        'the lease of the completed subscription to be released',
        async () => (await held()) === 1,
      )

      // So two can be open again (b and e), and a fourth concurrent one is refused again.
      const e = subscribeWs(client, ticksQuery(100_000, 20))
      await waitFor('the first event of e', () => e.results.length > 0)
      expect(await held()).toBe(2)
      const f = subscribeWs(client, ticksQuery(1))
      expect(await within(f.ended, 5_000, 'the refused subscription f')).toBeUndefined()
      expect(refusalOf(f.results[0]).extensions.code).toBe('SUBSCRIPTION_LIMIT_EXCEEDED')
      expect(h.runs.subscribes).toBe(4)

      // Closing the connection ends b and e and releases both.
      await client.dispose()
      await waitFor(
        'every lease to be released after the connection closed',
        async () => (await held()) === 0,
      )
      await waitFor('every generator to stop', () => h.runs.active === 0)
    })

    it('unsubscribing gives the lease back at once, while the source is still suspended', async () => {
      const { h, held } = await setup()
      const client = wsClient(h.wsUrl)
      const op = subscribeWs(client, stalledQuery)
      await waitFor('the one event of the stalled subscription', () => op.results.length > 0)
      expect(op.results).toEqual([{ data: { stalled: { n: 1, samples: [{ v: 1 }, { v: -1 }] } } }])
      expect(await held()).toBe(1)

      // graphql-ws answers the client's `complete` with `return()` on the server's iterator; the source waits
      // until the test ends, so a release that waited for it would never come.
      op.unsubscribe()
      await waitFor('the lease to be released', async () => (await held()) === 0)
      expect(h.runs.active).toBe(1)
    })

    it('counts leases per identity across connections', async () => {
      const { h, held } = await setup()
      const one = subscribeWs(wsClient(h.wsUrl), ticksQuery(100_000, 20))
      const two = subscribeWs(wsClient(h.wsUrl), ticksQuery(100_000, 20))
      await waitFor(
        'first events on both connections',
        () => one.results.length > 0 && two.results.length > 0,
      )
      const three = subscribeWs(wsClient(h.wsUrl), ticksQuery(1))
      expect(await within(three.ended, 5_000, 'the refused subscription')).toBeUndefined()
      expect(refusalOf(three.results[0]).extensions.code).toBe('SUBSCRIPTION_LIMIT_EXCEEDED')
      expect(await held()).toBe(2)
      one.unsubscribe()
      two.unsubscribe()
      await waitFor('both leases to be released', async () => (await held()) === 0)
    })

    it('renews the leases of live subscriptions past leaseMs', async () => {
      const leaseMs = 450
      const { h, held } = await setup(1000, leaseMs)
      const client = wsClient(h.wsUrl)
      const a = subscribeWs(client, ticksQuery(100_000, 20))
      const b = subscribeWs(client, ticksQuery(100_000, 20))
      await waitFor('first events of two subscriptions', () => a.results.length > 0 && b.results.length > 0)
      // Over two lease lifetimes: unrenewed leases would have expired.
      await sleep(1_000)
      expect(await held()).toBe(2)
      const c = subscribeWs(client, ticksQuery(1))
      expect(await within(c.ended, 5_000, 'the refused subscription')).toBeUndefined()
      const error = refusalOf(c.results[0])
      expect(error.extensions.code).toBe('SUBSCRIPTION_LIMIT_EXCEEDED')
      expect(error.extensions.retryAfter).toBe(1)
      a.unsubscribe()
      b.unsubscribe()
      await waitFor('both leases to be released', async () => (await held()) === 0)
      await waitFor('both generators to stop', () => h.runs.active === 0)
    })

    it('a subscription refused for its lease is not charged to the budget', async () => {
      const { h } = await setup(100)
      const client = wsClient(h.wsUrl)
      const a = subscribeWs(client, ticksQuery(100_000, 20))
      const b = subscribeWs(client, ticksQuery(100_000, 20))
      await waitFor('first events of two subscriptions', () => a.results.length > 0 && b.results.length > 0)
      expect(await h.remaining()).toBe(100 - 2 * SUB_COST)

      const c = subscribeWs(client, ticksQuery(1))
      expect(await within(c.ended, 5_000, 'the refused subscription')).toBeUndefined()
      expect(refusalOf(c.results[0]).extensions.code).toBe('SUBSCRIPTION_LIMIT_EXCEEDED')
      // The operation did not run: like every other refusal, it spends nothing.
      expect(await h.remaining()).toBe(100 - 2 * SUB_COST)
    })
  })

  // ---------------------------------------------------------------------------------------------------------------
  // onOperation
  // ---------------------------------------------------------------------------------------------------------------

  describe('graphql-ws: onOperation', () => {
    it('reports every subscription once: admitted, refused for its budget, refused for its lease', async () => {
      const h = await start(driver, { capacity: 3 * SUB_COST, subscriptions: { maxPerIdentity: 1 } })
      const client = wsClient(h.wsUrl)
      const held = subscribeWs(client, ticksQuery(100_000, 20))
      await waitFor('the first event', () => held.results.length > 0)
      const leaseRefused = subscribeWs(client, ticksQuery(1))
      expect(await within(leaseRefused.ended, 5_000, 'the lease refusal')).toBeUndefined()
      expect(refusalOf(leaseRefused.results[0]).extensions.code).toBe('SUBSCRIPTION_LIMIT_EXCEEDED')
      held.unsubscribe()
      await waitFor('the generator to stop', () => h.runs.active === 0)
      // Spend the rest of the budget whatever the lease refusal cost, then be refused for the budget.
      await h.limiter.consume(IDENTITY, await h.remaining())
      const budgetRefused = subscribeWs(client, ticksQuery(1))
      expect(await within(budgetRefused.ended, 5_000, 'the budget refusal')).toBeUndefined()
      expect(refusalOf(budgetRefused.results[0]).extensions.code).toBe('RATE_LIMITED')

      const subscription = { operationName: 'Ticks', operationType: 'subscription', requestedCost: SUB_COST }
      expect(h.events).toEqual([
        expect.objectContaining({ ...subscription, refused: undefined }),
        expect.objectContaining({ ...subscription, refused: 'SUBSCRIPTION_LIMIT_EXCEEDED' }),
        expect.objectContaining({ ...subscription, refused: 'RATE_LIMITED' }),
      ])
    })
  })
})

// ---------------------------------------------------------------------------------------------------------------
// Parse-time guards and structural rules over graphql-ws
// ---------------------------------------------------------------------------------------------------------------

describe.each(wsServerDrivers.map((driver) => [driver.name, driver] as const))(
  '%s: guards over graphql-ws',
  (_name, driver) => {
    it('a parse guard refusal is an `error` message without `http`, and the socket stays open', async () => {
      const h = await start(driver, { capacity: 100 })
      const client = wsClient(h.wsUrl, { lazy: false })
      const closes = closeCodes(client)
      const refusals = [
        // 5,003 tokens: { budget × 5,001 }
        { query: `{ ${'budget '.repeat(5_001)}}`, code: 'TOO_MANY_TOKENS' },
        // 100,009 characters
        { query: `{ budget }${' '.repeat(99_999)}`, code: 'QUERY_TOO_LARGE' },
        // 120 levels of braces, past maxNesting 100
        { query: nested(120), code: 'MAX_DEPTH_EXCEEDED' },
      ]
      for (const { query, code } of refusals) {
        const op = subscribeWs(client, query)
        const errors = errorMessage(await within(op.ended, 5_000, code))
        expect(errors.map((error) => error.extensions.code)).toEqual([code])
        expect(errors[0]?.extensions.http).toBeUndefined()
        expect(op.results).toEqual([])
      }
      // A syntax error is answered the same way.
      const syntax = subscribeWs(client, '{ budget')
      expect(errorMessage(await within(syntax.ended, 5_000, 'the syntax error'))[0]?.message).toMatch(
        /^Syntax Error/,
      )

      // The same socket still serves: nothing was closed, and nothing was charged before this query.
      const query = subscribeWs(client, '{ budget }')
      expect(await within(query.ended, 5_000, 'the query')).toBeUndefined()
      expect(query.results[0]?.data).toEqual({ budget: 1 })
      expect(closes).toEqual([])
      expect(await h.remaining()).toBe(99)
    })

    it('a structural rule refuses over graphql-ws: an `error` message without `http`, nothing run or charged', async () => {
      const h = await start(driver, { capacity: 100 })
      const client = wsClient(h.wsUrl, { lazy: false })
      const closes = closeCodes(client)
      const deep = subscribeWs(client, nested(20))
      const deepErrors = errorMessage(await within(deep.ended, 5_000, 'the deep query'))
      expect(deepErrors).toEqual([
        {
          message: 'The operation nests deeper than 15.',
          extensions: { code: 'MAX_DEPTH_EXCEEDED', limit: 15 },
        },
      ])
      const aliases = Array.from({ length: 31 }, (_, i) => `a${i}: n`).join(' ')
      const aliased = subscribeWs(client, `subscription { ticks(count: 1) { ${aliases} } }`)
      const aliasErrors = errorMessage(await within(aliased.ended, 5_000, 'the aliased subscription'))
      expect(aliasErrors.map((error) => error.extensions.code)).toEqual(['MAX_ALIASES_EXCEEDED'])
      expect(aliasErrors[0]?.extensions.http).toBeUndefined()
      expect(h.runs.subscribes).toBe(0)
      expect(await h.remaining()).toBe(100)
      expect(closes).toEqual([])
    })
  },
)

// ---------------------------------------------------------------------------------------------------------------
// An unexpected failure in identify, on both servers
// ---------------------------------------------------------------------------------------------------------------

describe.each(wsServerDrivers.map((driver) => [driver.name, driver] as const))(
  '%s: an unexpected failure in identify',
  (_name, driver) => {
    it('(a GraphQLError wrapping an Error) is the server’s to handle: a 500 over HTTP, a 4500 close over graphql-ws', async () => {
      const h = await start(driver, {
        capacity: 100,
        identify: () => {
          throw new GraphQLError('session store: connect ECONNREFUSED 10.0.0.5:6379', {
            originalError: new Error('connect ECONNREFUSED 10.0.0.5:6379'),
          })
        },
      })
      // graphql-ws logs it through console.error: read here, and kept out of the test's output.
      const logged = vi.spyOn(console, 'error').mockImplementation(() => {})
      cleanups.push(() => logged.mockRestore())
      const overHttp = await fetch(h.httpUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query: '{ budget }' }),
      })
      expect(overHttp.status).toBe(500)
      const httpBody = (await overHttp.json()) as ExecutionResult
      expect(httpBody.errors?.map((error) => error.extensions.code)).toEqual(['INTERNAL_SERVER_ERROR'])
      expect(JSON.stringify(httpBody)).not.toContain('ECONNREFUSED')

      const op = subscribeWs(wsClient(h.wsUrl, { lazy: false }), '{ budget }')
      const ended = await within(op.ended, 5_000, 'the socket to close')
      expect((ended as { code?: number }).code).toBe(4500)
      expect(op.results).toEqual([])
      const loggedText = logged.mock.calls.map((call) => call.map(String).join(' ')).join('\n')
      expect(loggedText).toContain('Internal error occurred during message handling')
      expect(h.runs).toEqual({ subscribes: 0, events: 0, active: 0 })
      expect(await h.remaining()).toBe(100)
    })
  },
)

// ---------------------------------------------------------------------------------------------------------------
// Apollo Server only: an application onSubscribe of its own; a subscription over HTTP
// ---------------------------------------------------------------------------------------------------------------

describe("Apollo Server: tollbooth.graphqlWs with the application's own onSubscribe", () => {
  /** An application that parses the payload itself and returns its own ExecutionArgs (graphql-ws adds the context). */
  const ownArgs =
    (schema: Parameters<NonNullable<StartOptions['onSubscribe']>>[0]): OnSubscribe =>
    (_ctx, _id, payload) => ({
      schema,
      document: parse(payload.query),
      operationName: payload.operationName ?? null,
      variableValues: payload.variables ?? null,
    })

  it('its ExecutionArgs still get the structural rules', async () => {
    const h = await start(apolloDriver, { capacity: 100, onSubscribe: ownArgs })
    const op = subscribeWs(wsClient(h.wsUrl), nested(20))
    const errors = errorMessage(await within(op.ended, 5_000, 'the refusal'))
    expect(errors).toEqual([
      {
        message: 'The operation nests deeper than 15.',
        extensions: { code: 'MAX_DEPTH_EXCEEDED', limit: 15 },
      },
    ])
    expect(h.runs.subscribes).toBe(0)
    expect(await h.remaining()).toBe(100)
  })

  it('its text still gets the parse-time guards, before the application parses it', async () => {
    const h = await start(apolloDriver, { capacity: 100, onSubscribe: ownArgs })
    const client = wsClient(h.wsUrl, { lazy: false })
    const closes = closeCodes(client)
    for (const [query, code] of [
      [`{ ${'budget '.repeat(5_001)}}`, 'TOO_MANY_TOKENS'],
      [`{ budget }${' '.repeat(99_999)}`, 'QUERY_TOO_LARGE'],
      // 3,000 levels: graphql-js' parser, called by the application, would overflow the stack.
      [nested(3_000), 'MAX_DEPTH_EXCEEDED'],
    ] as const) {
      const op = subscribeWs(client, query)
      const errors = errorMessage(await within(op.ended, 5_000, code))
      expect(errors.map((error) => error.extensions.code)).toEqual([code])
      expect(errors[0]?.extensions.http).toBeUndefined()
    }
    expect(closes).toEqual([])
  })

  it('its ExecutionArgs are priced, charged and held to maxPerIdentity like any other', async () => {
    const h = await start(apolloDriver, {
      capacity: 100,
      onSubscribe: ownArgs,
      subscriptions: { maxPerIdentity: 1 },
    })
    const client = wsClient(h.wsUrl)
    const held = subscribeWs(client, stalledQuery)
    await waitFor('the first event', () => held.results.length > 0)
    const refused = subscribeWs(client, ticksQuery(1))
    expect(await within(refused.ended, 5_000, 'the refused subscription')).toBeUndefined()
    expect(refusalOf(refused.results[0]).extensions.code).toBe('SUBSCRIPTION_LIMIT_EXCEEDED')
    expect(await h.remaining()).toBe(100 - SUB_COST)
    expect(h.runs.subscribes).toBe(1)
  })

  it('its own errors are answered as they are', async () => {
    const h = await start(apolloDriver, {
      capacity: 100,
      onSubscribe: () => () => [new GraphQLError('Not allowed here.', { extensions: { code: 'FORBIDDEN' } })],
    })
    const op = subscribeWs(wsClient(h.wsUrl), ticksQuery(1))
    expect(errorMessage(await within(op.ended, 5_000, 'the refusal'))).toEqual([
      { message: 'Not allowed here.', extensions: { code: 'FORBIDDEN' } },
    ])
    expect(h.runs.subscribes).toBe(0)
    expect(await h.remaining()).toBe(100)
  })
})

describe('Apollo Server: a subscription sent over HTTP', () => {
  it('is run as a query (no source stream, no lease) and priced and settled like one', async () => {
    const fixture = await createStore('memory')
    cleanups.push(() => fixture.close())
    const store = fixture.store
    const h = await start(apolloDriver, {
      capacity: 100,
      store,
      name: 'http',
      subscriptions: { maxPerIdentity: 1 },
    })
    const leases = concurrencyLimit({ name: 'http:subscriptions', store, max: 1, leaseMs: 60_000 })
    const response = await fetch(h.httpUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json' },
      body: JSON.stringify({ query: ticksQuery(3) }),
    })
    expect(response.status).toBe(200)
    const body = (await response.json()) as ExecutionResult & {
      extensions: { cost: { requestedQueryCost: number; actualQueryCost: number } }
    }
    // Apollo Server has no subscription transport over HTTP: graphql-js executes the root field's `resolve`
    // (none here), not its `subscribe`.
    expect(body.data).toEqual({ ticks: null })
    expect(h.runs.subscribes).toBe(0)
    expect(body.extensions.cost.requestedQueryCost).toBe(SUB_COST)
    expect(await h.remaining()).toBe(100 - body.extensions.cost.actualQueryCost)
    expect((await leases.peek(IDENTITY)).remaining).toBe(1)
  })
})

// ---------------------------------------------------------------------------------------------------------------
// 5. SSE through Yoga
// ---------------------------------------------------------------------------------------------------------------

describe('SSE through Yoga', () => {
  it('charges the subscription its cost at subscribe', async () => {
    const h = await start(yogaDriver, { capacity: 100 })
    const stream = await subscribeSse(h.httpUrl, ticksQuery(3))
    expect(stream.status).toBe(200)
    expect(stream.headers.get('content-type')).toMatch(/^text\/event-stream/)
    await within(stream.ended, 5_000, 'the stream to end')

    expect(stream.results).toEqual([tick(1), tick(2), tick(3)])
    expect(stream.events.map((event) => event.event)).toEqual(['next', 'next', 'next', 'complete'])
    expect(h.runs).toEqual({ subscribes: 1, events: 3, active: 0 })
    expect(await h.remaining()).toBe(100 - SUB_COST)

    // A following query over HTTP (minCost, 1) draws on the same budget (same client IP, same identity).
    const response = await fetch(h.httpUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json' },
      body: JSON.stringify({ query: '{ budget }' }),
    })
    expect(response.status).toBe(200)
    const body = (await response.json()) as ExecutionResult & {
      extensions: { cost: { throttleStatus: { currentlyAvailable: number } } }
    }
    expect(body.extensions.cost.throttleStatus.currentlyAvailable).toBe(100 - SUB_COST - 1)
  })

  it('refuses a subscription over budget: HTTP 429 with Retry-After, one RATE_LIMITED event, no resolver run', async () => {
    const h = await start(yogaDriver, { capacity: 10 })
    const paid = await subscribeSse(h.httpUrl, ticksQuery(1))
    await within(paid.ended, 5_000, 'the paid stream')
    expect(paid.results).toEqual([tick(1)])

    const refused = await subscribeSse(h.httpUrl, ticksQuery(1))
    await within(refused.ended, 5_000, 'the refused stream')
    expect(refused.status).toBe(429)
    expect(refused.headers.get('retry-after')).toBe('4000')
    expect(refused.headers.get('content-type')).toMatch(/^text\/event-stream/)
    expect(refused.events.map((event) => event.event)).toEqual(['next', 'complete'])
    const error = refusalOf(refused.results[0])
    expect(error.extensions.code).toBe('RATE_LIMITED')
    expect(error.extensions.retryAfter).toBe(4000)
    // Yoga strips its own `http` extension from what it sends.
    expect(error.extensions.http).toBeUndefined()

    expect(h.runs.subscribes).toBe(1)
    expect(await h.remaining()).toBe(10 - SUB_COST)
  })

  it('over SSE: each event charged what it costs; the one the budget for events cannot pay ends the stream', async () => {
    const h = await start(yogaDriver, { capacity: 100, eventCapacity: 2 * SUB_COST })
    const stream = await subscribeSse(h.httpUrl, ticksQuery(5))
    await within(stream.ended, 5_000, 'the stream to end')
    expect(stream.status).toBe(200)
    expect(stream.results.slice(0, 2)).toEqual([tick(1), tick(2)])
    expect(stream.results).toHaveLength(3)
    expect(refusalOf(stream.results[2]).extensions.code).toBe('RATE_LIMITED')
    expect(stream.events.map((event) => event.event)).toEqual(['next', 'next', 'next', 'complete'])
    expect(h.runs).toEqual({ subscribes: 1, events: 3, active: 0 })
    expect(await h.eventsRemaining()).toBe(0)
    expect(await h.remaining()).toBe(100 - SUB_COST)
  })

  it('maxPerIdentity: the third stream is refused with 429; aborting a stream releases its lease', async () => {
    const fixture = await createStore('memory')
    cleanups.push(() => fixture.close())
    const store = fixture.store
    const h = await start(yogaDriver, {
      capacity: 1000,
      store,
      name: 'sse',
      subscriptions: { maxPerIdentity: 2 },
    })
    const leases = concurrencyLimit({ name: 'sse:subscriptions', store, max: 2, leaseMs: 60_000 })
    const held = async () => 2 - (await leases.peek(IDENTITY)).remaining

    const a = await subscribeSse(h.httpUrl, ticksQuery(100_000, 20))
    const b = await subscribeSse(h.httpUrl, ticksQuery(100_000, 20))
    await waitFor('first events of two streams', () => a.results.length > 0 && b.results.length > 0)
    expect(await held()).toBe(2)

    const c = await subscribeSse(h.httpUrl, ticksQuery(1))
    await within(c.ended, 5_000, 'the refused stream')
    expect(c.status).toBe(429)
    expect(Number(c.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    expect(refusalOf(c.results[0]).extensions.code).toBe('SUBSCRIPTION_LIMIT_EXCEEDED')
    expect(h.runs.subscribes).toBe(2)

    // The client goes away: the server cancels the stream, stops the generator and releases the lease.
    a.abort()
    await waitFor('the aborted stream to release its lease', async () => (await held()) === 1)
    await waitFor('the aborted stream to stop its generator', () => h.runs.active === 1)
    const d = await subscribeSse(h.httpUrl, ticksQuery(1))
    await within(d.ended, 5_000, 'the admitted stream')
    expect(d.status).toBe(200)
    expect(d.results).toEqual([tick(1)])
    b.abort()
    await waitFor('every lease to be released', async () => (await held()) === 0)
  })
})
