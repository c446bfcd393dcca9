/**
 * One behaviour suite, run against both servers tollbooth protects (test/helpers/graphqlServers.ts): `useTollbooth`
 * in graphql-yoga 5 and `tollboothApolloPlugin` in Apollo Server 5, each on a real listening server on 127.0.0.1,
 * over `fetch`: charge and refund, denial and recovery, maxCost, dry-run, per-plan budgets, the login field limit,
 * HTTP batching and option validation. Then what only one server has: the login limit across two Yoga processes
 * sharing Redis, and Apollo's document cache, batches, logger and `formatError`.
 *
 * The schema (test/helpers/yogaSchema.ts) stores 8 users with 2 friends each; every resolver call is counted, so a
 * refusal can be shown to have run no resolver. Costs in the cost-directive model (objects 1, scalars 0):
 * `{ users(first: F) { id friends(first: G) { id } } }` costs (1 + G) × F and really holds min(F, 8) × (1 + 2);
 * `{ users(first: F) { id } }` costs F; a root mutation field costs 10.
 */
import { randomUUID } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import type { ApolloServerPlugin, BaseContext } from '@apollo/server'
import { type DocumentNode, type ExecutionResult, GraphQLError, parse, print } from 'graphql'
import { createSchema, type Plugin } from 'graphql-yoga'
import { afterEach, beforeEach, describe, expect, inject, it, onTestFinished } from 'vitest'
import type { TollboothError } from '../../../src/core/errors.js'
import type { RateLimiter } from '../../../src/core/rateLimiter.js'
import {
  costDirectivesTypeDefs,
  type GraphQLContext,
  type TollboothGraphQLOptions,
} from '../../../src/graphql/index.js'
import { tokenBucket } from '../../../src/index.js'
import { JsonLinesProcess } from '../../helpers/childProcess.js'
import { VirtualClock } from '../../helpers/contract.js'
import {
  apolloDriver,
  closeServers,
  type GraphQLServerDriver,
  graphqlServerDrivers,
  post,
  type ResultBody,
  startApollo,
  startYoga,
  type TestServer,
} from '../../helpers/graphqlServers.js'
import { createStore, type StoreFixture, type StoreKind } from '../../helpers/stores.js'
import { createTestSchema, type ResolverCalls, resolverCalls, totalCalls } from '../../helpers/yogaSchema.js'
import type { YogaWorkerJob } from '../../helpers/yogaServerWorker.js'

/** `"name";r=12;t=3` → { r: 12, t: 3 } */
function rateLimitFields(header: string | null): { name: string; r: number; t: number } {
  const match = /^"([^"]*)";r=(\d+);t=(\d+)$/.exec(header ?? '')
  if (match === null) throw new Error(`unexpected RateLimit header: ${header}`)
  return { name: match[1] as string, r: Number(match[2]), t: Number(match[3]) }
}

/** The result's first error: exactly this message and exactly these extensions (nothing more leaks). */
function expectFirstError(
  result: ResultBody | undefined,
  message: string,
  extensions: Record<string, unknown>,
): void {
  expect(result?.errors?.[0]?.message).toBe(message)
  expect(result?.errors?.[0]?.extensions).toEqual(extensions)
}

/**
 * The results of a batch refused for its size, as the server answers it: Yoga one refusal for the batch, Apollo
 * (which runs each operation of a batch on its own) an array of one refusal per operation.
 */
function batchRefusals(
  driver: GraphQLServerDriver,
  body: ResultBody | ResultBody[],
  size: number,
): ResultBody[] {
  if (driver.batchRefusal === 'single') {
    expect(Array.isArray(body)).toBe(false)
    return [body as ResultBody]
  }
  expect(body).toHaveLength(size)
  return body as ResultBody[]
}

/** A Yoga plugin that sets a response header through its result's `extensions.http.headers`, as Yoga lets one. */
function yogaPluginSetting(name: string, value: string): Plugin {
  return {
    onExecutionResult({ result, setResult }) {
      const answered = result as ExecutionResult
      setResult({ ...answered, extensions: { ...answered.extensions, http: { headers: { [name]: value } } } })
    },
  }
}

/** A Yoga plugin that sets response headers in the server adapter's `onResponse`, after the response is made. */
function yogaPluginReplacing(fields: Record<string, string>): Plugin {
  return {
    onResponse({ response }) {
      for (const [name, value] of Object.entries(fields)) response.headers.set(name, value)
    },
  }
}

/** An Apollo plugin that sets a response header (listed before tollbooth's, it sets it first). */
function apolloPluginSetting(name: string, value: string): ApolloServerPlugin<BaseContext> {
  return {
    async requestDidStart() {
      return {
        async willSendResponse({ response }) {
          response.http.headers.set(name, value)
        },
      }
    },
  }
}

/** A limiter name no other test uses (the store prefix is unique per test too). */
function uniqueName(label: string): string {
  return `${label}-${randomUUID().slice(0, 8)}`
}

// The identity the plugin uses by default: the client IP (the tests connect from 127.0.0.1).
const CLIENT_IP_KEY = 'ip:127.0.0.1'

/** (1 + 3) × 10 = 40 requested; 8 users × (1 + 2 friends) = 24 really returned: 16 refunded. */
const USERS_WITH_FRIENDS = '{ users(first: 10) { id name friends(first: 3) { id } } }'
const USERS_WITH_FRIENDS_COST = 40
const USERS_WITH_FRIENDS_ACTUAL = 24
/** 8 requested, 8 returned: nothing to refund. */
const EIGHT_USERS = '{ users(first: 8) { id } }'
/** (1 + 1) × 8 = 16 requested, 8 × (1 + 1) = 16 returned. */
const EIGHT_USERS_ONE_FRIEND = '{ users(first: 8) { id friends(first: 1) { id } } }'

afterEach(async () => {
  // No test here makes a resolver throw: whatever a server masked as unexpected came from a plugin.
  for (const server of await closeServers())
    expect(server.unexpected, `${server.kind}: unexpected errors`).toEqual([])
})

const storeKinds: StoreKind[] = ['memory', 'redis']

describe.each(graphqlServerDrivers)('$name over HTTP', (driver) => {
  describe.each(storeKinds)('%s store', (kind) => {
    let fixture: StoreFixture

    beforeEach(async () => {
      fixture = await createStore(kind)
    })

    afterEach(async () => {
      await fixture.close()
    })

    /** A token bucket in this test's store. */
    function bucket(label: string, capacity: number, refillPerSecond: number): RateLimiter {
      return tokenBucket({ name: uniqueName(label), capacity, refillPerSecond, store: fixture.store })
    }

    const startServer = (options: TollboothGraphQLOptions, setup: { batching?: boolean } = {}) =>
      driver.start(options, setup)

    it('charges the estimate, refunds what the response did not hold, and reports both', async () => {
      // 0.01 token/s: nothing measurable comes back while the test runs (a token every 100 s).
      const limiter = bucket('charge', 100, 0.01)
      const server = await startServer({ limiter, store: fixture.store })

      const first = await server.post({ query: USERS_WITH_FRIENDS })
      expect(first.status).toBe(200)
      expect(first.body.errors).toBeUndefined()
      expect(first.body.data?.users).toHaveLength(8)
      // 100 − 40 charged = 60, + 16 refunded = 76.
      expect(first.body.extensions?.cost).toEqual({
        requestedQueryCost: USERS_WITH_FRIENDS_COST,
        actualQueryCost: USERS_WITH_FRIENDS_ACTUAL,
        throttleStatus: { maximumAvailable: 100, currentlyAvailable: 76, restoreRate: 0.01 },
      })
      // w = ceil(capacity / refill) = 10000 s.
      expect(first.headers.get('ratelimit-policy')).toBe(`"${limiter.name}";q=100;w=10000`)
      const firstHeader = rateLimitFields(first.headers.get('ratelimit'))
      expect(firstHeader).toMatchObject({ name: limiter.name, r: 76 })
      // The headers stay headers: the body's extensions hold `cost` only.
      expect(Object.keys(first.body.extensions ?? {})).toEqual(['cost'])
      expect(server.calls).toEqual({ users: 1, friends: 8, login: 0, ping: 0 })

      // The next response starts from 76: 76 − 40 = 36, + 16 = 52.
      const second = await server.post({ query: USERS_WITH_FRIENDS })
      expect(second.body.extensions?.cost?.throttleStatus?.currentlyAvailable).toBe(52)
      expect(rateLimitFields(second.headers.get('ratelimit')).r).toBe(52)

      // An operation with nothing to refund: 52 − 8 = 44.
      const third = await server.post({ query: EIGHT_USERS })
      expect(third.body.extensions?.cost).toMatchObject({
        requestedQueryCost: 8,
        actualQueryCost: 8,
        throttleStatus: { currentlyAvailable: 44 },
      })
      expect(rateLimitFields(third.headers.get('ratelimit')).r).toBe(44)
      // Schema defaults count as given: `users` is sized by first = 10 (8 returned), `friends` by first = 3 (2).
      const defaults = await server.post({ query: '{ users { friends { id } } }' })
      expect(defaults.body.extensions?.cost).toMatchObject({
        requestedQueryCost: (1 + 3) * 10,
        actualQueryCost: 8 * (1 + 2),
        throttleStatus: { currentlyAvailable: 44 - 40 + 16 },
      })
    })

    it('the refund reaches the limiter itself (peek), not only the response', async () => {
      // The refund is not awaited before the response: each one is waited for as the limiter reports it.
      const refunds: number[] = []
      let refunded: () => void = () => {}
      const limiter = tokenBucket({
        name: uniqueName('refund'),
        capacity: 100,
        refillPerSecond: 0.01,
        store: fixture.store,
        hooks: {
          onDecision: (event) => {
            if (event.op !== 'refund') return
            refunds.push(event.cost)
            refunded()
          },
        },
      })
      const nextRefund = () =>
        new Promise<void>((resolve) => {
          refunded = resolve
        })
      const server = await startServer({ limiter, store: fixture.store })

      const first = nextRefund()
      const reply = await server.post({ query: USERS_WITH_FRIENDS })
      expect(reply.body.extensions?.cost?.throttleStatus?.currentlyAvailable).toBe(76)
      await first
      expect((await limiter.peek(CLIENT_IP_KEY)).remaining).toBe(76)
      // Refunded once, not twice: after a second operation and its own refund, 100 − 2 × (40 − 16) are left.
      const second = nextRefund()
      await server.post({ query: USERS_WITH_FRIENDS })
      await second
      expect(refunds).toEqual([16, 16])
      expect((await limiter.peek(CLIENT_IP_KEY)).remaining).toBe(52)
    })

    it('the RateLimit header follows the refund: r is what is left after it, t the next token', async () => {
      const limiter = bucket('reset', 100, 1)
      const server = await startServer({ limiter, store: fixture.store })

      const reply = await server.post({ query: USERS_WITH_FRIENDS })
      const header = rateLimitFields(reply.headers.get('ratelimit'))
      expect(header.r).toBe(76)
      expect((await limiter.peek(CLIENT_IP_KEY)).remaining).toBe(76)
      // One token a second: the next is at most 1 s away (draft -10's t), whatever the refund gave back.
      expect(header.t).toBe(1)
    })

    it('with costExtension: false the RateLimit headers are still sent, and the body has no extensions', async () => {
      const limiter = bucket('no-extension', 100, 0.01)
      const server = await startServer({ limiter, store: fixture.store, costExtension: false })

      const reply = await server.post({ query: EIGHT_USERS })
      expect(reply.status).toBe(200)
      expect(reply.body.data?.users).toHaveLength(8)
      expect(reply.body).not.toHaveProperty('extensions')
      expect(rateLimitFields(reply.headers.get('ratelimit')).r).toBe(100 - 8)
    })

    it('RateLimit fields the application already set stay, and none of its own are mixed in', async () => {
      const fields = { RateLimit: '"app";r=1;t=1', 'RateLimit-Policy': '"app";q=2;w=60' }
      for (const [name, value] of Object.entries(fields)) {
        const limiter = bucket(`app-${name}`, 100, 0.01)
        // A plugin sets the field as each server lets one set it for the response: Apollo's willSendResponse (listed
        // before tollbooth's), the result's extensions.http.headers in Yoga.
        const server =
          driver.kind === 'yoga'
            ? await startYoga(
                { limiter, store: fixture.store },
                { pluginsBefore: [yogaPluginSetting(name, value)] },
              )
            : await startApollo(
                { limiter, store: fixture.store },
                { pluginsBefore: [apolloPluginSetting(name, value)] },
              )

        const reply = await server.post({ query: EIGHT_USERS })
        expect(reply.status).toBe(200)
        expect(reply.headers.get(name)).toBe(value)
        const other = name === 'RateLimit' ? 'ratelimit-policy' : 'ratelimit'
        expect(reply.headers.get(other)).toBeNull()
        expect(reply.body.extensions?.cost?.requestedQueryCost).toBe(8)
        expect((await limiter.peek(CLIENT_IP_KEY)).remaining).toBe(100 - 8)
      }
    })

    if (driver.kind === 'yoga') {
      it("a plugin's onResponse runs after tollbooth has written its fields: the plugin's replace them", async () => {
        const limiter = bucket('app-onResponse', 100, 0.01)
        const fields = { RateLimit: '"app";r=1;t=1', 'RateLimit-Policy': '"app";q=2;w=60' }
        const server = await startYoga(
          { limiter, store: fixture.store },
          { pluginsBefore: [yogaPluginReplacing(fields)] },
        )

        const reply = await server.post({ query: EIGHT_USERS })
        expect(reply.status).toBe(200)
        expect(reply.headers.get('ratelimit')).toBe(fields.RateLimit)
        expect(reply.headers.get('ratelimit-policy')).toBe(fields['RateLimit-Policy'])
        expect((await limiter.peek(CLIENT_IP_KEY)).remaining).toBe(100 - 8)
      })
    }

    it('a query asked for as an event stream (SSE): Yoga answers one with the RateLimit headers, Apollo answers 406', async () => {
      const limiter = bucket('sse', 100, 0.01)
      const server = await startServer({ limiter, store: fixture.store })

      const response = await fetch(server.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
        body: JSON.stringify({ query: EIGHT_USERS }),
      })
      if (driver.kind === 'apollo') {
        // Apollo Server answers queries as JSON only, and finds out after running the query: the work is charged,
        // and the 406 is Apollo's own error response, without the operation's result or RateLimit fields.
        expect(response.status).toBe(406)
        expect(((await response.json()) as ResultBody).errors?.[0]?.extensions?.code).toBe('BAD_REQUEST')
        expect(response.headers.get('ratelimit')).toBeNull()
        expect(server.calls.users).toBe(1)
        expect((await limiter.peek(CLIENT_IP_KEY)).remaining).toBe(100 - 8)
        return
      }
      expect(response.status).toBe(200)
      expect(response.headers.get('content-type')).toContain('text/event-stream')
      const events = await response.text()
      expect(events).toContain('"requestedQueryCost":8')
      expect(events).not.toContain('"http"')
      expect(rateLimitFields(response.headers.get('ratelimit')).r).toBe(100 - 8)
    })

    it('denies a spent budget with 429 and Retry-After before any resolver runs', async () => {
      // 16 tokens, one back every 62.5 s: nothing comes back between the two requests, however slow the machine.
      const limiter = bucket('deny', 16, 0.016)
      const server = await startServer({ limiter, store: fixture.store })

      const spend = await server.post({ query: EIGHT_USERS_ONE_FRIEND })
      expect(spend.status).toBe(200)
      expect(spend.body.extensions?.cost).toMatchObject({
        requestedQueryCost: 16,
        actualQueryCost: 16,
        throttleStatus: { maximumAvailable: 16, currentlyAvailable: 0, restoreRate: 0.016 },
      })
      const before = { ...server.calls }
      expect(totalCalls(before)).toBe(1 + 8)

      const denied = await server.post({ query: EIGHT_USERS })
      expect(denied.status).toBe(429)
      // ceil(8 tokens / 0.016 per second) = 500 s.
      expect(denied.headers.get('retry-after')).toBe('500')
      expect(denied.body.data ?? undefined).toBeUndefined()
      expect(denied.body.errors).toHaveLength(1)
      expectFirstError(denied.body, 'The budget is spent; retry in 500 s.', {
        code: 'RATE_LIMITED',
        retryAfter: 500,
        cost: 8,
      })
      expect(denied.body.extensions?.cost).toEqual({ requestedQueryCost: 8 })
      // The window: 16 tokens / 0.016 per second = 1000 s.
      expect(denied.headers.get('ratelimit-policy')).toBe(`"${limiter.name}";q=16;w=1000`)
      // t: the next token, one per 62.5 s (Retry-After: the 8 the operation needs).
      expect(rateLimitFields(denied.headers.get('ratelimit'))).toEqual({ name: limiter.name, r: 0, t: 63 })
      expect(server.calls).toEqual(before)
    })

    it('admits a denied operation again once its Retry-After has passed: a denial spends nothing', async () => {
      // 16 tokens, 4 per second: a cost-8 operation on an empty bucket waits exactly 2 s, on a virtual clock.
      const clock = new VirtualClock()
      const timed = await createStore(kind, clock.now)
      onTestFinished(() => timed.close())
      // No deny cache: it runs on real time, the store on the virtual clock.
      const limiter = tokenBucket({
        name: uniqueName('deny-again'),
        capacity: 16,
        refillPerSecond: 4,
        store: timed.store,
        denyCache: false,
      })
      const server = await startServer({ limiter, store: timed.store })
      expect((await server.post({ query: EIGHT_USERS_ONE_FRIEND })).status).toBe(200)
      const before = { ...server.calls }
      const denied = await server.post({ query: EIGHT_USERS })
      expect(denied.status).toBe(429)
      expect(denied.headers.get('retry-after')).toBe('2')
      expect(denied.body.errors?.[0]?.extensions?.code).toBe('RATE_LIMITED')
      expect(server.calls).toEqual(before)

      clock.advance(1999)
      expect((await server.post({ query: EIGHT_USERS })).status).toBe(429)
      clock.advance(1)
      const again = await server.post({ query: EIGHT_USERS })
      expect(again.status).toBe(200)
      expect(again.body.errors).toBeUndefined()
      expect(again.body.data?.users).toHaveLength(8)
      expect(again.body.extensions?.cost?.actualQueryCost).toBe(8)
      expect(server.calls.users).toBe(before.users + 1)
    })

    it('an identify that throws a GraphQLError with an HTTP status refuses with it, running nothing', async () => {
      const limiter = bucket('unauthenticated', 100, 0.01)
      const server = await startServer({
        limiter,
        identify: () => {
          throw new GraphQLError('Sign in first.', {
            extensions: { code: 'UNAUTHENTICATED', http: { status: 401 } },
          })
        },
      })
      const refused = await server.post({ query: EIGHT_USERS })
      expect(refused.status).toBe(401)
      expect(refused.body.errors?.[0]).toMatchObject({
        message: 'Sign in first.',
        extensions: { code: 'UNAUTHENTICATED' },
      })
      expect(refused.body.errors?.[0]?.extensions?.http).toBeUndefined()
      expect(totalCalls(server.calls)).toBe(0)
      expect((await limiter.peek(CLIENT_IP_KEY)).remaining).toBe(100)
    })

    it('an operation costing more than the bucket can ever hold is refused with 400 and no Retry-After, running nothing', async () => {
      const limiter = bucket('too-big', 10, 0.01)
      const server = await startServer({ limiter, store: fixture.store })

      const refused = await server.post({ query: EIGHT_USERS_ONE_FRIEND })
      // Waiting would not help: a client error, with the budget's size, and nothing telling the client to retry.
      expect(refused.status).toBe(400)
      expect(refused.headers.get('retry-after')).toBeNull()
      expect(refused.headers.get('ratelimit-policy')).toBe(`"${limiter.name}";q=10;w=1000`)
      expect(rateLimitFields(refused.headers.get('ratelimit')).r).toBe(10)
      expect(refused.body.errors?.[0]?.message).toBe(
        'The operation costs 16, more than the budget can ever hold (10).',
      )
      expect(refused.body.errors?.[0]?.extensions).toEqual({
        code: 'COST_LIMIT_EXCEEDED',
        cost: 16,
        budget: 10,
      })
      expect(totalCalls(server.calls)).toBe(0)
      // A refusal spends minCost (1).
      expect((await limiter.peek(CLIENT_IP_KEY)).remaining).toBe(9)
    })

    it('refuses an operation above maxCost with 400 COST_LIMIT_EXCEEDED, spending minCost', async () => {
      const limiter = bucket('max-cost', 100, 0.01)
      const server = await startServer({ limiter, store: fixture.store, maxCost: 30 })

      const refused = await server.post({ query: USERS_WITH_FRIENDS })
      expect(refused.status).toBe(400)
      expect(refused.body.data ?? undefined).toBeUndefined()
      expect(refused.body.errors).toHaveLength(1)
      expect(refused.body.errors?.[0]?.message).toBe('The operation costs 40, more than the maximum of 30.')
      expect(refused.body.errors?.[0]?.extensions).toEqual({
        code: 'COST_LIMIT_EXCEEDED',
        cost: 40,
        maxCost: 30,
      })
      expect(refused.body.extensions?.cost).toEqual({ requestedQueryCost: 40 })
      expect(totalCalls(server.calls)).toBe(0)
      expect((await limiter.peek(CLIENT_IP_KEY)).remaining).toBe(99)

      // At the limit exactly: allowed.
      const atLimit = await server.post({ query: '{ users(first: 10) { id friends(first: 2) { id } } }' })
      expect(atLimit.status).toBe(200)
      expect(atLimit.body.extensions?.cost?.requestedQueryCost).toBe(30)
    })

    it('with exposeLimits: false a maxCost refusal names neither the cost nor the limit', async () => {
      const limiter = bucket('hidden', 100, 0.01)
      const server = await startServer({ limiter, store: fixture.store, maxCost: 30, exposeLimits: false })

      const refused = await server.post({ query: USERS_WITH_FRIENDS })
      expect(refused.status).toBe(400)
      expectFirstError(refused.body, 'The operation costs more than allowed.', {
        code: 'COST_LIMIT_EXCEEDED',
      })
      expect(totalCalls(server.calls)).toBe(0)

      // Allowed results carry no throttleStatus either.
      const allowed = await server.post({ query: EIGHT_USERS })
      expect(allowed.body.extensions?.cost).toEqual({ requestedQueryCost: 8, actualQueryCost: 8 })
    })

    it('with exposeLimits: false the parse guards and structural rules name no limit either', async () => {
      const limiter = bucket('hidden-guards', 100, 0.01)
      const server = await startServer({
        limiter,
        store: fixture.store,
        exposeLimits: false,
        limits: { maxDepth: 2, maxCharacters: 200 },
      })

      const deep = await server.post({ query: USERS_WITH_FRIENDS })
      expectFirstError(deep.body, 'The operation nests too deeply.', { code: 'MAX_DEPTH_EXCEEDED' })

      const long = await server.post({ query: `{ users(first: 1) { id${' '.repeat(300)} } }` })
      expect(long.status).toBe(413)
      expectFirstError(long.body, 'The query is too long.', { code: 'QUERY_TOO_LARGE' })
      expect(totalCalls(server.calls)).toBe(0)
    })

    it('with exposeLimits: false a batch too large and an operation too large to price name no limit', async () => {
      const limiter = bucket('hidden-batch', 100, 0.01)
      const server = await startServer(
        {
          limiter,
          store: fixture.store,
          exposeLimits: false,
          maxFieldVisits: 2,
          limits: { maxBatchSize: 3 },
        },
        { batching: true },
      )

      const batch = await server.post<ResultBody | ResultBody[]>(
        Array.from({ length: 4 }, () => ({ query: EIGHT_USERS })),
      )
      expect(batch.status).toBe(413)
      for (const result of batchRefusals(driver, batch.body, 4)) {
        expectFirstError(result, 'The batch holds too many operations.', { code: 'BATCH_TOO_LARGE' })
      }

      const large = await server.post({ query: USERS_WITH_FRIENDS }) // 5 fields to visit, 2 allowed
      expect(large.status).toBe(400)
      expectFirstError(large.body, 'The operation is too large to price.', { code: 'COST_LIMIT_EXCEEDED' })
      expect(totalCalls(server.calls)).toBe(0)
    })

    it('with exposeLimits: false an operation the budget can never hold is refused without its cost', async () => {
      const limiter = bucket('hidden-budget', 10, 0.01)
      const server = await startServer({ limiter, store: fixture.store, exposeLimits: false })

      const refused = await server.post({ query: '{ users(first: 20) { id } }' }) // costs 20, the bucket holds 10
      expect(refused.status).toBe(400)
      expect(refused.body.errors?.[0]?.message).toBe(
        'The operation costs more than the budget can ever hold.',
      )
      expect(refused.body.errors?.[0]?.extensions).toEqual({ code: 'COST_LIMIT_EXCEEDED' })
      expect(totalCalls(server.calls)).toBe(0)
    })

    it('dry-run: an over-budget operation still runs, with wouldRefuse, status 200 and nothing charged', async () => {
      const limiter = bucket('dry-run', 50, 0.01)
      const server = await startServer({ limiter, store: fixture.store, mode: 'dry-run' })
      // 16 spent: 34 left, less than the 40 the next operation costs.
      expect((await server.post({ query: EIGHT_USERS_ONE_FRIEND })).body.extensions?.cost?.wouldRefuse).toBe(
        undefined,
      )

      const reply = await server.post({ query: USERS_WITH_FRIENDS })
      expect(reply.status).toBe(200)
      expect(reply.body.errors).toBeUndefined()
      expect(reply.body.data?.users).toHaveLength(8)
      expect(reply.body.extensions?.cost).toEqual({
        requestedQueryCost: 40,
        actualQueryCost: 24,
        throttleStatus: { maximumAvailable: 50, currentlyAvailable: 34, restoreRate: 0.01 },
        wouldRefuse: 'RATE_LIMITED',
      })
      expect(server.calls).toEqual({ users: 2, friends: 16, login: 0, ping: 0 })
      // The refused consume spent nothing.
      expect((await limiter.peek(CLIENT_IP_KEY)).remaining).toBe(34)

      // Within budget: no wouldRefuse.
      const within = await server.post({ query: EIGHT_USERS })
      expect(within.body.extensions?.cost).toEqual({
        requestedQueryCost: 8,
        actualQueryCost: 8,
        throttleStatus: { maximumAvailable: 50, currentlyAvailable: 26, restoreRate: 0.01 },
      })

      // More than the budget can ever hold: runs too, with the refusal enforcement would answer.
      const never = await startServer({ limiter: bucket('dry-run-never', 10, 0.01), mode: 'dry-run' })
      const tooBig = await never.post({ query: USERS_WITH_FRIENDS })
      expect(tooBig.status).toBe(200)
      expect(tooBig.body.data?.users).toHaveLength(8)
      expect(tooBig.body.extensions?.cost?.wouldRefuse).toBe('COST_LIMIT_EXCEEDED')
    })

    it('dry-run: the 200 answer of an operation enforcement would refuse carries no Retry-After', async () => {
      // Dry-run must be invisible to clients: a Retry-After on a 200 tells well-behaved clients to back off.
      // (Fails as of 4385cbd: settle() builds the headers from the denied decision, allowed: false.)
      const limiter = bucket('dry-run-headers', 20, 0.01)
      const server = await startServer({ limiter, store: fixture.store, mode: 'dry-run' })
      await server.post({ query: EIGHT_USERS_ONE_FRIEND }) // 16 of 20 spent

      const reply = await server.post({ query: EIGHT_USERS_ONE_FRIEND })
      expect(reply.status).toBe(200)
      expect(reply.body.extensions?.cost?.wouldRefuse).toBe('RATE_LIMITED')
      expect(reply.headers.get('ratelimit-policy')).toBe(`"${limiter.name}";q=20;w=2000`)
      expect(rateLimitFields(reply.headers.get('ratelimit')).r).toBe(4)
      expect(reply.headers.get('retry-after')).toBeNull()
    })

    it('dry-run: an operation above maxCost still runs, wouldRefuse COST_LIMIT_EXCEEDED', async () => {
      const limiter = bucket('dry-run-max', 100, 0.01)
      const server = await startServer({ limiter, store: fixture.store, mode: 'dry-run', maxCost: 30 })

      const reply = await server.post({ query: USERS_WITH_FRIENDS })
      expect(reply.status).toBe(200)
      expect(reply.body.errors).toBeUndefined()
      expect(reply.body.extensions?.cost).toEqual({
        requestedQueryCost: 40,
        actualQueryCost: 24,
        throttleStatus: { maximumAvailable: 100, currentlyAvailable: 76, restoreRate: 0.01 },
        wouldRefuse: 'COST_LIMIT_EXCEEDED',
      })
    })

    it('per-plan budgets: the limiter is chosen per request, the gold plan gets more than the free one', async () => {
      const gold = bucket('plan-gold', 48, 0.01)
      const free = bucket('plan-free', 16, 0.01)
      // The test server's "authentication": a fixed token table. A real app reads the plan (and the user) from the
      // verified credentials of its own auth (session, signed token), never from a header the client picks freely.
      const accounts: Record<string, { user: string; plan: 'gold' | 'free' }> = {
        'Bearer gold': { user: 'alice', plan: 'gold' },
        'Bearer free': { user: 'bob', plan: 'free' },
      }
      const account = (context: GraphQLContext) =>
        accounts[driver.requestHeader(context, 'authorization') ?? ''] ?? { user: 'anonymous', plan: 'free' }
      const server = await startServer({
        limiter: (context) => (account(context).plan === 'gold' ? gold : free),
        identify: (context) => `user:${account(context).user}`,
        store: fixture.store,
      })

      const run = async (authorization: string, times: number) => {
        const statuses: number[] = []
        const available: (string | undefined)[] = []
        for (let i = 0; i < times; i++) {
          const reply = await server.post({ query: EIGHT_USERS }, { authorization })
          statuses.push(reply.status)
          const throttle = reply.body.extensions?.cost?.throttleStatus
          available.push(throttle && `${throttle.currentlyAvailable}/${throttle.maximumAvailable}`)
        }
        return { statuses, available }
      }
      // Cost 8 each: free holds 16 → 2 operations; gold holds 48 → 6.
      expect(await run('Bearer free', 3)).toEqual({
        statuses: [200, 200, 429],
        available: ['8/16', '0/16', undefined],
      })
      expect(await run('Bearer gold', 7)).toEqual({
        statuses: [200, 200, 200, 200, 200, 200, 429],
        available: ['40/48', '32/48', '24/48', '16/48', '8/48', '0/48', undefined],
      })
      expect(server.calls.users).toBe(2 + 6)
      // Each plan's limiter holds its own user's budget.
      expect((await gold.peek('user:alice')).remaining).toBe(0)
      expect((await free.peek('user:bob')).remaining).toBe(0)
      expect((await free.peek('user:alice')).remaining).toBe(16)
      expect((await gold.peek('user:bob')).remaining).toBe(48)
      // A caller without a known token falls to the free plan, under an identity of its own.
      const anonymous = await server.post({ query: EIGHT_USERS })
      expect(anonymous.body.extensions?.cost?.throttleStatus).toMatchObject({
        maximumAvailable: 16,
        currentlyAvailable: 8,
      })
      expect(server.calls.users).toBe(2 + 6 + 1)
    })

    it('login field limit: aliases each count, e-mails are normalized, a denial runs no resolver', async () => {
      const limiter = bucket('login-budget', 1000, 0.01)
      const server = await startServer({
        limiter,
        store: fixture.store,
        name: uniqueName('gql'),
        fieldLimits: { 'Mutation.login': { limit: 3, windowMs: 60_000, by: ['email'] } },
      })
      const login = (email: string) => `login(email: ${JSON.stringify(email)}, password: "correct horse")`

      // Two aliases, one person: ' Alice@Example.com' and 'alice@example.com' share a key. 2 of 3 spent.
      const twice = await server.post({
        query: `mutation { a: ${login(' Alice@Example.com')} b: ${login('alice@example.com')} }`,
      })
      expect(twice.status).toBe(200)
      expect(twice.body.data).toEqual({ a: true, b: true })
      expect(twice.body.extensions?.cost?.requestedQueryCost).toBe(20)
      expect(server.calls.login).toBe(2)

      // A third spelling, a variable this time: 3 of 3.
      const third = await server.post({
        query: 'mutation Login($email: String!) { login(email: $email, password: "wrong") }',
        variables: { email: 'ALICE@EXAMPLE.COM  ' },
      })
      expect(third.status).toBe(200)
      expect(third.body.data).toEqual({ login: false })
      expect(server.calls.login).toBe(3)

      // The fourth is refused before any resolver of the operation runs (ping comes first and does not run either).
      const fourth = await server.post({ query: `mutation { ping ${login('alice@EXAMPLE.com')} }` })
      expect(fourth.status).toBe(429)
      expect(fourth.body.data ?? undefined).toBeUndefined()
      expect(fourth.body.errors?.[0]?.extensions).toMatchObject({
        code: 'RATE_LIMITED',
        field: 'Mutation.login',
      })
      const retryAfter = Number(fourth.headers.get('retry-after'))
      // A sliding window counter: the 3 calls leave the count when their window has slid a third past them, so the
      // wait is at most windowMs × (1 + 1/limit) = 80 s (when they fell at the very start of a fixed window).
      expect(retryAfter).toBeGreaterThanOrEqual(1)
      expect(retryAfter).toBeLessThanOrEqual(80)
      expect(fourth.body.errors?.[0]?.extensions?.retryAfter).toBe(retryAfter)
      expect(server.calls).toEqual({ users: 0, friends: 0, login: 3, ping: 0 })
      // The field limit is separate from the budget: 1000 − 20 − 10 (the refused operation spent none).
      expect((await limiter.peek(CLIENT_IP_KEY)).remaining).toBe(1000 - 20 - 10)

      // Another e-mail has its own key.
      const bob = await server.post({ query: `mutation { ${login('bob@example.com')} }` })
      expect(bob.status).toBe(200)
      expect(bob.body.data).toEqual({ login: true })
      expect(server.calls.login).toBe(4)
    })

    it('HTTP batching: more than maxBatchSize operations → 413 BATCH_TOO_LARGE, none run', async () => {
      const limiter = bucket('batch-size', 100, 0.01)
      const server = await startServer(
        { limiter, store: fixture.store, limits: { maxBatchSize: 3 } },
        { batching: true },
      )

      const four = Array.from({ length: 4 }, () => ({ query: EIGHT_USERS }))
      const refused = await server.post<ResultBody | ResultBody[]>(four)
      expect(refused.status).toBe(413)
      for (const result of batchRefusals(driver, refused.body, 4)) {
        expect(result.errors).toHaveLength(1)
        expectFirstError(result, 'A batch may hold at most 3 operations.', {
          code: 'BATCH_TOO_LARGE',
          limit: 3,
        })
      }
      expect(totalCalls(server.calls)).toBe(0)
      expect((await limiter.peek(CLIENT_IP_KEY)).remaining).toBe(100)

      // Three is allowed: three results, each charged.
      const three = await server.post<ResultBody[]>(four.slice(0, 3))
      expect(three.status).toBe(200)
      expect(three.body).toHaveLength(3)
      expect(three.body.map((result) => result.extensions?.cost?.requestedQueryCost)).toEqual([8, 8, 8])
      expect(server.calls.users).toBe(3)
      expect((await limiter.peek(CLIENT_IP_KEY)).remaining).toBe(100 - 24)
      // One response for the batch: its RateLimit headers are those of the operation settled last, after all three.
      expect(three.headers.get('ratelimit-policy')).toBe(`"${limiter.name}";q=100;w=10000`)
      expect(rateLimitFields(three.headers.get('ratelimit')).r).toBe(100 - 24)
      // The headers stay headers: each result's extensions hold `cost` only.
      expect(three.body.map((result) => Object.keys(result.extensions ?? {}))).toEqual([
        ['cost'],
        ['cost'],
        ['cost'],
      ])
    })

    it.each([
      ['with limits.maxBatchSize', { maxBatchSize: 3 }],
      ["with Yoga's batching limit alone", undefined],
    ])(
      'HTTP batching (%s): the batch is judged by its summed cost; the operation that crosses maxCost is refused',
      async (_, limits) => {
        const limiter = bucket('batch-cost', 100, 0.01)
        const server = await startServer(
          { limiter, store: fixture.store, maxCost: 20, ...(limits === undefined ? {} : { limits }) },
          { batching: true },
        )

        // 8 + 8 = 16 ≤ 20; + 8 = 24 > 20.
        const batch = [{ query: EIGHT_USERS }, { query: EIGHT_USERS }, { query: EIGHT_USERS }]
        const reply = await server.post<ResultBody[]>(batch)
        // A batch answers one status for all its results: Yoga sends 200 when some of them succeeded.
        expect(reply.status).toBe(200)
        expect(reply.body).toHaveLength(3)
        const [first, second, third] = reply.body
        expect(first?.errors).toBeUndefined()
        expect(second?.errors).toBeUndefined()
        expect(first?.data?.users).toHaveLength(8)
        expect(second?.data?.users).toHaveLength(8)
        expect(third?.data ?? undefined).toBeUndefined()
        expectFirstError(third, 'The batch costs 24, more than the maximum of 20.', {
          code: 'COST_LIMIT_EXCEEDED',
          cost: 24,
          maxCost: 20,
        })
        expect(server.calls.users).toBe(2)
        // The two operations that ran were charged, and the refused one minCost (1).
        expect((await limiter.peek(CLIENT_IP_KEY)).remaining).toBe(100 - 16 - 1)
      },
    )

    it('HTTP batching without limits.maxBatchSize: 11 operations refused (Yoga: its own batching limit of 10; Apollo: tollbooth’s default of 10), nothing run or spent', async () => {
      const limiter = bucket('batch-yoga-limit', 100, 0.01)
      const server = await startServer({ limiter, store: fixture.store }, { batching: true })
      const reply = await server.post<ResultBody>(Array.from({ length: 11 }, () => ({ query: EIGHT_USERS })))
      expect(reply.status).toBe(413)
      expect(JSON.stringify(reply.body)).toContain(
        driver.name.includes('Yoga')
          ? 'Batching is limited to 10 operations per request.'
          : 'A batch may hold at most 10 operations.',
      )
      expect(server.calls.users).toBe(0)
      expect((await limiter.peek(CLIENT_IP_KEY)).remaining).toBe(100)
    })

    it('HTTP batching: a spent budget refuses the operations it cannot pay for; the others run', async () => {
      // 20 tokens: 8 + 8 pass, the third finds 4 left.
      const limiter = bucket('batch-budget', 20, 0.01)
      const server = await startServer({ limiter, store: fixture.store }, { batching: true })

      const reply = await server.post<ResultBody[]>([
        { query: EIGHT_USERS },
        { query: EIGHT_USERS },
        { query: EIGHT_USERS },
      ])
      // The batch's status and headers are the batch's: the refusal's 429 and Retry-After would say the two
      // operations that ran had failed too.
      expect(reply.status).toBe(200)
      expect(reply.headers.get('retry-after')).toBeNull()
      expect(rateLimitFields(reply.headers.get('ratelimit')).r).toBe(4)
      expect(reply.body.map((result) => result.data?.users?.length)).toEqual([8, 8, undefined])
      const refused = reply.body[2]
      expect(refused?.errors).toHaveLength(1)
      expectFirstError(
        refused,
        'The operation costs 8, more than the 4 left in the budget; retry in 400 s.',
        {
          code: 'RATE_LIMITED',
          retryAfter: 400,
          cost: 8,
        },
      )
      expect(refused?.extensions?.cost).toEqual({ requestedQueryCost: 8 })
      expect(server.calls.users).toBe(2)
      expect((await limiter.peek(CLIENT_IP_KEY)).remaining).toBe(4)
    })

    it('HTTP batching: an operation over a structural rule is refused; the others run', async () => {
      const limiter = bucket('batch-rules', 100, 0.01)
      const server = await startServer(
        { limiter, store: fixture.store, limits: { maxDepth: 2 } },
        { batching: true },
      )

      const reply = await server.post<ResultBody[]>([{ query: EIGHT_USERS }, { query: USERS_WITH_FRIENDS }])
      // Yoga answers a batch 200 whatever its results hold; Apollo sets the batch's status from an error thrown
      // before execution (as for its own validation errors), and the structural rules throw theirs there.
      expect(reply.status).toBe(driver.batchStatusWithRuleRefusal)
      expect(reply.body[0]?.data?.users).toHaveLength(8)
      expect(reply.body[1]?.data ?? undefined).toBeUndefined()
      expectFirstError(reply.body[1], 'The operation nests deeper than 2.', {
        code: 'MAX_DEPTH_EXCEEDED',
        limit: 2,
      })
      expect(server.calls.users).toBe(1)
      // The refused operation spends minCost (1).
      expect((await limiter.peek(CLIENT_IP_KEY)).remaining).toBe(100 - 8 - 1)
    })
  })
})

describe('useTollbooth in Yoga: login field limit across two server processes sharing Redis', () => {
  const WORKER = fileURLToPath(new URL('../../helpers/yogaServerWorker.ts', import.meta.url))

  class YogaWorker extends JsonLinesProcess {
    port = 0

    constructor(job: YogaWorkerJob) {
      super({ script: WORKER, jobVariable: 'TOLLBOOTH_YOGA_WORKER_JOB', job, label: 'yoga worker' })
    }

    async ready(): Promise<void> {
      const message = await this.next<{ ready?: boolean; port?: number }>()
      expect(message).toMatchObject({ ready: true })
      this.port = message.port as number
    }

    get url(): string {
      return `http://127.0.0.1:${this.port}/graphql`
    }

    async stats(): Promise<ResolverCalls> {
      this.child.stdin?.write('stats\n')
      return this.next<ResolverCalls>()
    }
  }

  const workers: YogaWorker[] = []

  afterEach(async () => {
    const all = workers.splice(0)
    for (const worker of all) if (worker.failed) console.error(worker.describe())
    await Promise.all(all.map((worker) => worker.kill()))
  })

  async function startWorkers(count: number): Promise<YogaWorker[]> {
    const job: YogaWorkerJob = {
      redisUrl: inject('redisUrl'),
      prefix: `yoga-mp-${randomUUID()}:`,
      loginLimit: 5,
      loginWindowMs: 60_000,
    }
    const started = Array.from({ length: count }, () => new YogaWorker(job))
    workers.push(...started)
    await Promise.all(started.map((worker) => worker.ready()))
    return started
  }

  const loginAs = (email: string) => ({
    query: 'mutation Login($email: String!) { login(email: $email, password: "correct horse") }',
    variables: { email },
  })

  it('alternating between the servers, exactly 5 logins of one e-mail pass in total', async () => {
    const [a, b] = (await startWorkers(2)) as [YogaWorker, YogaWorker]

    const statuses: number[] = []
    for (let i = 0; i < 12; i++) {
      const server = i % 2 === 0 ? a : b
      // Spellings of one address alternate too: they share the key on both servers.
      const reply = await post(server.url, loginAs(i % 3 === 0 ? 'Carol@Example.com ' : 'carol@example.com'))
      statuses.push(reply.status)
      if (reply.status === 200) expect(reply.body.data).toEqual({ login: true })
      else expect(reply.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED' })
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429, 429, 429, 429, 429, 429])
    // Calls 1, 3, 5 went to a, 2 and 4 to b; no refused call reached a resolver.
    expect((await a.stats()).login).toBe(3)
    expect((await b.stats()).login).toBe(2)
  })

  it('12 concurrent logins split over the two servers: exactly 5 pass', async () => {
    const [a, b] = (await startWorkers(2)) as [YogaWorker, YogaWorker]

    const replies = await Promise.all(
      Array.from({ length: 12 }, (_, i) => post((i % 2 === 0 ? a : b).url, loginAs('dave@example.com'))),
    )
    const statuses = replies.map((reply) => reply.status)
    expect(statuses.filter((status) => status === 200)).toHaveLength(5)
    expect(statuses.filter((status) => status === 429)).toHaveLength(7)
    const [statsA, statsB] = await Promise.all([a.stats(), b.stats()])
    expect(statsA.login + statsB.login).toBe(5)
  })
})

describe.each(graphqlServerDrivers)('$pluginName options', (driver) => {
  const limiter = tokenBucket({ name: 'options', capacity: 10, refillPerSecond: 1 })

  function thrownBy(build: () => unknown): TollboothError {
    try {
      build()
    } catch (error) {
      return error as TollboothError
    }
    throw new Error('expected a throw')
  }

  it.each([
    ['limiter missing', {}, '"limiter"'],
    ['limiter not a limiter', { limiter: { consume: () => {} } }, '"limiter"'],
    ['maxCost -1', { limiter, maxCost: -1 }, '"maxCost"'],
    // Every operation costs at least minCost: these would refuse them all.
    ['minCost above maxCost', { limiter, minCost: 6000, maxCost: 5000 }, '"minCost"'],
    ['minCost above what the limiter can hold (10)', { limiter, minCost: 11 }, '"minCost"'],
    ['limits.maxDepth 0', { limiter, limits: { maxDepth: 0 } }, '"limits.maxDepth"'],
    [
      'fieldLimits with a bad coordinate',
      { limiter, fieldLimits: { login: { limit: 5, windowMs: 60_000 } } },
      '"fieldLimits["login"]"',
    ],
    [
      'fieldLimits with limit 0',
      { limiter, fieldLimits: { 'Mutation.login': { limit: 0, windowMs: 60_000 } } },
      '"fieldLimits["Mutation.login"].limit"',
    ],
    // An array is no options object: its entries would be read as keys "0", "1"… and the cap dropped.
    ['limits as an array', { limiter, limits: [{ maxDepth: 3 }] }, '"limits"'],
    ['subscriptions as an array', { limiter, subscriptions: [{ maxPerIdentity: 1 }] }, '"subscriptions"'],
    ['fieldLimits as an array', { limiter, fieldLimits: [] }, '"fieldLimits"'],
  ])('%s: throws TOLLBOOTH_ERR_INVALID_OPTION at construction', (_, options, named) => {
    const error = thrownBy(() => driver.plugin(options as unknown as TollboothGraphQLOptions))
    expect(error.code).toBe('TOLLBOOTH_ERR_INVALID_OPTION')
    expect(error.message).toContain(`${driver.pluginName}: ${named}`)
  })

  it('an unknown key, at any level, throws at construction naming it with the closest known name', () => {
    // Built in variables, as JavaScript or a config file would: only the runtime check can catch these.
    const maxcost = { limiter, maxcost: 100 }
    expect(thrownBy(() => driver.plugin(maxcost as TollboothGraphQLOptions))).toMatchObject({
      code: 'TOLLBOOTH_ERR_INVALID_OPTION',
      message: `${driver.pluginName}: unknown option "maxcost" (did you mean "maxCost"?)`,
    })
    const cases: [options: object, message: string][] = [
      [
        { limiter, limits: { maxDepht: 3 } },
        `${driver.pluginName}: unknown option "limits.maxDepht" (did you mean "maxDepth"?)`,
      ],
      [
        { limiter, subscriptions: { maxPerIdentiy: 3 } },
        `${driver.pluginName}: unknown option "subscriptions.maxPerIdentiy" (did you mean "maxPerIdentity"?)`,
      ],
      [
        { limiter, fieldLimits: { 'Mutation.login': { limit: 5, windowMs: 60_000, failpolicy: 'open' } } },
        `${driver.pluginName}: unknown option "fieldLimits["Mutation.login"].failpolicy" (did you mean "failPolicy"?)`,
      ],
      [
        { limiter, costs: { 'Query.users': { listSize: { assumedSise: 3 } } } },
        `${driver.pluginName}: unknown option "costs["Query.users"].listSize.assumedSise" (did you mean "assumedSize"?)`,
      ],
      [
        { limiter, defaultListsize: 5 },
        `${driver.pluginName}: unknown option "defaultListsize" (did you mean "defaultListSize"?)`,
      ],
      [
        { limiter, hooks: { ondecision: () => {} } },
        `${driver.pluginName}: unknown option "hooks.ondecision" (did you mean "onDecision"?)`,
      ],
    ]
    for (const [options, message] of cases) {
      const error = thrownBy(() => driver.plugin(options as TollboothGraphQLOptions))
      expect(error.code, message).toBe('TOLLBOOTH_ERR_INVALID_OPTION')
      expect(error.message).toBe(message)
    }
    // Every key the plugin documents is accepted, undefined or not.
    expect(() =>
      driver.plugin({
        limiter,
        maxCost: 100,
        minCost: 1,
        ipv6Prefix: 56,
        ipv4Prefix: 24,
        store: undefined,
        limits: { maxDepth: 3, maxBatchSize: undefined },
        fieldLimits: {
          'Mutation.login': {
            limit: 5,
            windowMs: 60_000,
            failPolicy: 'open',
            ipv6Prefix: 48,
            ipv4Prefix: 24,
          },
        },
        costs: { 'Query.users': { weight: 2, listSize: { assumedSize: 3 } } },
        defaultListSize: 5,
        mutationCost: 10,
      }),
    ).not.toThrow()
  })

  it('costs with an unknown coordinate fails the server at startup, naming the coordinate', async () => {
    // Yoga: createYoga throws; Apollo: server.start() rejects.
    const options: TollboothGraphQLOptions = { limiter, costs: { 'User.nickname': { weight: 3 } } }
    const thrown = await driver.startupError(options, createTestSchema(resolverCalls()))
    expect((thrown as TollboothError | undefined)?.code).toBe('TOLLBOOTH_ERR_INVALID_OPTION')
    expect((thrown as Error).message).toBe(
      `${driver.pluginName}: "costs["User.nickname"]" must be a schema coordinate that exists in the schema, got "User.nickname"`,
    )
  })

  it('a malformed @rateLimit window fails the server at startup', async () => {
    const schema = createSchema({
      typeDefs: [
        costDirectivesTypeDefs,
        'type Query { hello: String } type Mutation { login(email: String!): String @rateLimit(limit: 3, window: "soon") }',
      ],
    })
    const thrown = await driver.startupError({ limiter }, schema)
    expect((thrown as TollboothError | undefined)?.code).toBe('TOLLBOOTH_ERR_INVALID_OPTION')
    expect((thrown as Error).message).toContain('@rateLimit(window:) on Mutation.login')
  })

  it('a schema the options fit starts', async () => {
    const options: TollboothGraphQLOptions = { limiter, costs: { 'User.name': { weight: 3 } } }
    expect(await driver.startupError(options, createTestSchema(resolverCalls()))).toBeUndefined()
  })
})

describe('tollboothApolloPlugin in Apollo Server: what only Apollo has', () => {
  /** A bucket of 100 in memory, refilling a token every 100 s. */
  function bucket(label: string, capacity = 100): RateLimiter {
    return tokenBucket({ name: uniqueName(label), capacity, refillPerSecond: 0.01 })
  }

  const NO_REQUEST_WARNING = 'tollbooth: the GraphQL context has no `req`'
  const warnings = (server: TestServer) =>
    server.logs.filter((line) => line.level === 'warn' && line.message.startsWith(NO_REQUEST_WARNING))

  it('a context without `req` and no `identify`: one warning, logged once, and every caller shares one budget', async () => {
    const limiter = bucket('no-req')
    const server = await startApollo({ limiter }, { context: async () => ({}) })
    for (let i = 0; i < 3; i++) expect((await server.post({ query: EIGHT_USERS })).status).toBe(200)
    expect(warnings(server)).toHaveLength(1)
    expect(warnings(server)[0]?.message).toContain('context: async ({ req }) => ({ req })')
    // The default identity found no address: the three operations were charged to the one unknown client.
    expect((await limiter.peek('ip:unknown')).remaining).toBe(100 - 3 * 8)
    expect((await limiter.peek(CLIENT_IP_KEY)).remaining).toBe(100)

    // With `identify`, the context's `req` is not needed: no warning.
    const identified = await startApollo(
      { limiter: bucket('no-req-identified'), identify: () => 'tenant:1' },
      { context: async () => ({}) },
    )
    expect((await identified.post({ query: EIGHT_USERS })).status).toBe(200)
    // With the Node request in the context (the driver's default): no warning either.
    const withRequest = await startApollo({ limiter: bucket('with-req') })
    expect((await withRequest.post({ query: EIGHT_USERS })).status).toBe(200)
    expect([...warnings(identified), ...warnings(withRequest)]).toEqual([])

    // With `identify` but a field limit, which counts per client address: the warning again.
    const limitedField = await startApollo(
      {
        limiter: bucket('no-req-field-limit'),
        identify: () => 'tenant:1',
        fieldLimits: { 'Mutation.login': { limit: 5, windowMs: 60_000 } },
      },
      { context: async () => ({}) },
    )
    expect((await limitedField.post({ query: EIGHT_USERS })).status).toBe(200)
    expect(warnings(limitedField)).toHaveLength(1)
    expect(warnings(limitedField)[0]?.message).toContain('for every field limit')
  })

  it('each batch has its own cost sum and its own RateLimit fields, whichever batches run at the same time', async () => {
    const limiter = bucket('batches')
    const server = await startApollo(
      {
        limiter,
        maxCost: 20,
        limits: { maxBatchSize: 3 },
        identify: (context) => `client:${apolloDriver.requestHeader(context, 'x-client')}`,
      },
      { batching: true },
    )
    // Two batches of 8 + 8 = 16 ≤ 20 each, at once: were their sums shared, 32 would be over maxCost.
    const pair = [{ query: EIGHT_USERS }, { query: EIGHT_USERS }]
    const [a, b] = await Promise.all([
      server.post<ResultBody[]>(pair, { 'x-client': 'a' }),
      server.post<ResultBody[]>(pair, { 'x-client': 'b' }),
    ])
    for (const reply of [a, b]) {
      expect(reply.status).toBe(200)
      expect(reply.body.map((result) => result.errors)).toEqual([undefined, undefined])
      expect(reply.body.map((result) => result.extensions?.cost?.requestedQueryCost)).toEqual([8, 8])
      // One RateLimit field for the batch (a second would be joined to it with a comma): after both operations.
      expect(rateLimitFields(reply.headers.get('ratelimit'))).toMatchObject({
        name: limiter.name,
        r: 100 - 16,
      })
      expect(reply.headers.get('ratelimit-policy')).toBe(`"${limiter.name}";q=100;w=10000`)
    }
    expect(server.calls.users).toBe(4)
    expect((await limiter.peek('client:a')).remaining).toBe(100 - 16)
    expect((await limiter.peek('client:b')).remaining).toBe(100 - 16)

    // A batch sent after them starts its own sum: 8 + 8 pass, the third crosses 20.
    const three = await server.post<ResultBody[]>([...pair, { query: EIGHT_USERS }], { 'x-client': 'a' })
    expect(three.body.map((result) => result.errors?.[0]?.extensions?.code)).toEqual([
      undefined,
      undefined,
      'COST_LIMIT_EXCEEDED',
    ])
  })

  it("refusals and Apollo's formatError and didEncounterErrors: the structural rules' go through them, admission's do not", async () => {
    const limiter = bucket('format-error')
    const encountered: string[] = []
    const errorListener: ApolloServerPlugin<BaseContext> = {
      async requestDidStart() {
        return {
          async didEncounterErrors({ errors }) {
            for (const error of errors) encountered.push(String(error.extensions.code))
          },
        }
      },
    }
    const server = await startApollo(
      { limiter, maxCost: 20, limits: { maxDepth: 2 } },
      {
        pluginsBefore: [errorListener],
        formatError: (formatted) => ({
          ...formatted,
          extensions: { ...formatted.extensions, formatted: true },
        }),
      },
    )

    // A structural rule refuses in didResolveOperation: Apollo formats the thrown refusal and reports it.
    const deep = await server.post({ query: USERS_WITH_FRIENDS })
    expect(deep.status).toBe(400)
    expectFirstError(deep.body, 'The operation nests deeper than 2.', {
      code: 'MAX_DEPTH_EXCEEDED',
      limit: 2,
      formatted: true,
    })
    expect(encountered).toEqual(['MAX_DEPTH_EXCEEDED'])

    // Admission answers its refusal as the response for the operation: Apollo sends it as it is.
    const dear = await server.post({ query: '{ users(first: 30) { id } }' })
    expect(dear.status).toBe(400)
    expectFirstError(dear.body, 'The operation costs 30, more than the maximum of 20.', {
      code: 'COST_LIMIT_EXCEEDED',
      cost: 30,
      maxCost: 20,
    })
    expect(dear.body.extensions?.cost).toEqual({ requestedQueryCost: 30 })
    expect(encountered).toEqual(['MAX_DEPTH_EXCEEDED'])

    // A parse guard's refusal of text that still parses is thrown too: formatted and reported.
    const long = await server.post({ query: `{ users(first: 1) { id } } ${'#'.repeat(100_000)}` })
    expect(long.status).toBe(413)
    expect(long.body.errors?.[0]?.extensions).toMatchObject({ code: 'QUERY_TOO_LARGE', formatted: true })
    expect(encountered).toEqual(['MAX_DEPTH_EXCEEDED', 'QUERY_TOO_LARGE'])
    // Text over maxTokens that does not parse: Apollo's syntax error is replaced by the refusal, as tollbooth builds it.
    const broken = await server.post({ query: `{ ${'a '.repeat(6000)}` })
    expect(broken.status).toBe(400)
    expect(broken.body.errors?.[0]?.extensions).toEqual({ code: 'TOO_MANY_TOKENS', limit: 5000 })
    expect(totalCalls(server.calls)).toBe(0)
  })

  /** Apollo's document cache, counting what it hands back; `copies`: a new object each time, as an external cache. */
  function documentStore(copies: boolean) {
    const documents = new Map<string, DocumentNode>()
    const store = {
      hits: 0,
      async get(key: string): Promise<DocumentNode | undefined> {
        const document = documents.get(key)
        if (document === undefined) return undefined
        store.hits++
        return copies ? parse(print(document)) : document
      },
      async set(key: string, document: DocumentNode): Promise<void> {
        documents.set(key, document)
      },
      async delete(key: string): Promise<boolean> {
        return documents.delete(key)
      },
    }
    return store
  }

  it('a document Apollo has cached is charged every time it runs', async () => {
    const limiter = bucket('cached-charge')
    const store = documentStore(false)
    const server = await startApollo({ limiter }, { documentStore: store })
    for (let i = 1; i <= 3; i++) {
      const reply = await server.post({ query: EIGHT_USERS })
      expect(reply.body.extensions?.cost?.throttleStatus?.currentlyAvailable).toBe(100 - 8 * i)
    }
    expect(store.hits).toBe(2)
    expect(server.calls.users).toBe(3)
    expect((await limiter.peek(CLIENT_IP_KEY)).remaining).toBe(100 - 24)
  })

  describe.each([
    ['the same object', false],
    ['a copy (an external cache)', true],
  ])("Apollo's cache hands back %s", (_, copies) => {
    it('text over maxTokens or maxNesting is refused every time, also once Apollo has its document cached', async () => {
      const limiter = bucket('cached-tokens')
      const store = documentStore(copies)
      const server = await startApollo(
        { limiter, limits: { maxTokens: 10, maxNesting: 3, maxDepth: false } },
        { documentStore: store },
      )
      // { users ( first : 8 ) { id } }: 11 tokens; nesting 2.
      for (let i = 0; i < 3; i++) {
        const reply = await server.post({ query: EIGHT_USERS })
        expect(reply.status).toBe(400)
        expectFirstError(reply.body, 'The query has more than 10 tokens.', {
          code: 'TOO_MANY_TOKENS',
          limit: 10,
        })
      }
      // Nesting 4, 9 tokens.
      for (let i = 0; i < 3; i++) {
        const reply = await server.post({ query: '{ users { friends { friends { id } } } }' })
        expect(reply.status).toBe(400)
        expectFirstError(reply.body, 'The query nests brackets deeper than 3.', {
          code: 'MAX_DEPTH_EXCEEDED',
          limit: 3,
        })
      }
      // Apollo cached a stand-in for each (validated in place of the refused document) and served it from the cache
      // the 2nd and 3rd time. Each of the six refusals spent minCost (1).
      expect(store.hits).toBe(4)
      expect(totalCalls(server.calls)).toBe(0)
      expect((await limiter.peek(CLIENT_IP_KEY)).remaining).toBe(100 - 6)

      // Text within the guards runs, from the cache too.
      for (let i = 0; i < 2; i++) {
        expect((await server.post({ query: '{ users { id } }' })).body.data?.users).toHaveLength(8)
      }
      expect(store.hits).toBe(5)
    })

    it('a document over the structural rules is refused every time, also from the cache', async () => {
      const limiter = bucket('cached-rules')
      const store = documentStore(copies)
      const server = await startApollo({ limiter, limits: { maxDepth: 2 } }, { documentStore: store })
      for (let i = 0; i < 3; i++) {
        const reply = await server.post({ query: USERS_WITH_FRIENDS })
        expect(reply.status).toBe(400)
        expectFirstError(reply.body, 'The operation nests deeper than 2.', {
          code: 'MAX_DEPTH_EXCEEDED',
          limit: 2,
        })
      }
      // The stand-in Apollo validated in place of the refused document, from the cache; each refusal spent minCost.
      expect(store.hits).toBe(2)
      expect(totalCalls(server.calls)).toBe(0)
      expect((await limiter.peek(CLIENT_IP_KEY)).remaining).toBe(100 - 3)
    })
  })
})
