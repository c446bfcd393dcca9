/**
 * The rate limit's behaviour, the same cases on node:http and Express (`rateLimit`) and Fastify
 * (`tollboothRateLimit`), through real servers on a loopback port and real `fetch` requests: budgets shared by two
 * apps on memory, Redis and the cluster, exact headers and bodies, skip, cost, per-request limiters, refunds by
 * outcome (none for a client that hung up), errors of the options' callbacks reaching the error path, identity
 * options, a leaky bucket and a sliding window's RateLimit `t`. What only one server has stays beside its own
 * guard: test/integration/http/rateLimit.test.ts, test/integration/fastify/tollboothRateLimit.test.ts.
 *
 * The options are written once for both guards: their callbacks read only what a Node request and a Fastify request
 * both have (`headers`, `url`; `statusCode` of the response or reply).
 */
import { randomUUID } from 'node:crypto'
import type { IncomingHttpHeaders } from 'node:http'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { ErrorCodes, TollboothError } from '../../../src/core/errors.js'
import { concurrencyLimit } from '../../../src/core/limiters/concurrencyLimit.js'
import { leakyBucket } from '../../../src/core/limiters/leakyBucket.js'
import { slidingWindow } from '../../../src/core/limiters/slidingWindow.js'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import type { RateLimiter } from '../../../src/core/rateLimiter.js'
import { MemoryStore } from '../../../src/core/stores/memoryStore.js'
import type { Store } from '../../../src/core/stores/store.js'
import { type TollboothFastifyOptions, tollboothRateLimit } from '../../../src/fastify/index.js'
import { type RateLimitOptions, rateLimit } from '../../../src/http/index.js'
import { VirtualClock } from '../../helpers/contract.js'
import {
  type GuardedServer,
  partnerOf,
  type Route,
  type ServerKind,
  serveGuarded,
  serverKinds,
} from '../../helpers/guardedServers.js'
import { limitHeaders } from '../../helpers/httpServer.js'
import { HangUpTraffic } from '../../helpers/rawHttp.js'
import { createStore, type StoreFixture, storeKinds } from '../../helpers/stores.js'

const QUOTA_EXCEEDED = {
  type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
  title: 'Request cannot be satisfied as assigned quota has been exceeded',
  status: 429,
}

/** What both a Node request and a Fastify request carry. */
interface AnyRequest {
  readonly headers: IncomingHttpHeaders
  readonly url?: string
}

/** The options of both guards, with callbacks of `AnyRequest` (and a response or reply of `statusCode`). */
interface SharedOptions {
  readonly limiter: RateLimiter | ((req: AnyRequest) => RateLimiter | Promise<RateLimiter>)
  readonly identify?: (req: AnyRequest) => string | Promise<string>
  readonly cost?: number | ((req: AnyRequest) => number | Promise<number>)
  readonly skip?: (req: AnyRequest) => boolean | Promise<boolean>
  readonly refundWhen?: (req: AnyRequest, res: { statusCode: number }) => boolean | Promise<boolean>
  readonly trustProxy?: RateLimitOptions['trustProxy']
}

/**
 * The guard that answers a request's own errors: rateLimit names itself, tollboothRateLimit's per-request check is
 * rateLimitCheck's (its options are reworded at startup, not its requests' errors).
 */
const requestOwner: Record<ServerKind, string> = {
  'node:http': 'rateLimit',
  express: 'rateLimit',
  fastify: 'rateLimitCheck',
}

const open: GuardedServer[] = []
afterEach(async () => {
  await Promise.all(open.splice(0).map((server) => server.close()))
})

async function serve(kind: ServerKind, options: SharedOptions, route?: Route): Promise<GuardedServer> {
  const server = await serveGuarded(
    kind,
    kind === 'fastify'
      ? { register: (app) => app.register(tollboothRateLimit, options as TollboothFastifyOptions) }
      : { middleware: rateLimit(options as RateLimitOptions) },
    route,
  )
  open.push(server)
  return server
}

/** Counts the refunds a limiter makes (its decision hook), and waits for a number of them. */
function refundCounter() {
  const counter = {
    count: 0,
    waiters: [] as (() => void)[],
    hooks: {
      onDecision: (event: { op: string }) => {
        if (event.op !== 'refund') return
        counter.count++
        for (const wake of counter.waiters.splice(0)) wake()
      },
    },
    async reach(count: number) {
      while (counter.count < count) await new Promise<void>((resolve) => counter.waiters.push(resolve))
    },
  }
  return counter
}

/** `capacity` requests, then one more every 100 s: within a test, `t` and `Retry-After` are whole hundreds. */
function slowBucket(name: string, store: Store = new MemoryStore(), capacity = 5): RateLimiter {
  return tokenBucket({ name, store, capacity, refillPerSecond: 0.01 })
}

const uniqueName = (what: string) => `${what}-${randomUUID().slice(0, 8)}`

describe.each(storeKinds)('the rate limit on a %s store', (storeKind) => {
  let fixture: StoreFixture
  beforeAll(async () => {
    fixture = await createStore(storeKind)
  })
  afterAll(async () => {
    await fixture.close()
  })

  describe.each(serverKinds)('on %s', (kind) => {
    it(`two apps (${kind} and ${partnerOf(kind)}) share one budget: exactly 5 admitted, with exact headers`, async () => {
      const name = uniqueName('shared')
      // Two apps, each with its own limiter object, as two processes would have.
      const a = await serve(kind, { limiter: slowBucket(name, fixture.store) })
      const b = await serve(partnerOf(kind), { limiter: slowBucket(name, fixture.store) })
      const order = [a, b, a, b, a, b, a]
      const responses: Response[] = []
      for (const app of order) responses.push(await fetch(app.url))

      expect(responses.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 429, 429])
      expect(a.routeHits).toBe(3)
      expect(b.routeHits).toBe(2)
      for (let i = 0; i < 5; i++) {
        const response = responses[i] as Response
        expect(limitHeaders(response)).toEqual({
          'ratelimit-policy': `"${name}";q=5;w=500`,
          // One token back every 100 s: the next one comes in 100 s, however many are spent.
          ratelimit: `"${name}";r=${4 - i};t=100`,
          'retry-after': null,
          'content-type': 'text/plain',
        })
        expect(await response.text()).toBe('ok')
      }
      for (const [i, response] of responses.slice(5).entries()) {
        expect(limitHeaders(response)).toEqual({
          'ratelimit-policy': `"${name}";q=5;w=500`,
          ratelimit: `"${name}";r=0;t=100`,
          'retry-after': '100',
          'content-type': (order[5 + i] as GuardedServer).jsonType('application/problem+json'),
        })
        expect(await response.json()).toEqual({
          ...QUOTA_EXCEEDED,
          'violated-policies': [name],
          retryAfter: 100,
        })
      }
    })

    it(`two ${kind} apps on one store share one budget: 12 parallel requests, exactly 5 admitted`, async () => {
      const name = uniqueName('parallel')
      // Two limiters of one name on one store: two processes' view of the same budget.
      const first = await serve(kind, { limiter: slowBucket(name, fixture.store) })
      const second = await serve(kind, { limiter: slowBucket(name, fixture.store) })

      const statuses = await Promise.all(
        Array.from(
          { length: 12 },
          async (_, i) => (await fetch(i % 2 === 0 ? first.url : second.url)).status,
        ),
      )

      expect(statuses.filter((status) => status === 200)).toHaveLength(5)
      expect(statuses.filter((status) => status === 429)).toHaveLength(7)
      expect(first.routeHits + second.routeHits).toBe(5)
    })

    it('a per-request limiter: each plan has its own budget on the shared store', async () => {
      const free = slowBucket(uniqueName('plan-free'), fixture.store, 1)
      const pro = slowBucket(uniqueName('plan-pro'), fixture.store, 3)
      const options = { limiter: (req: AnyRequest) => (req.headers['x-plan'] === 'pro' ? pro : free) }
      const a = await serve(kind, options)
      const b = await serve(partnerOf(kind), options)
      const statuses = async (app: GuardedServer, plan: string, n: number) => {
        const out: number[] = []
        for (let i = 0; i < n; i++) out.push((await fetch(app.url, { headers: { 'x-plan': plan } })).status)
        return out
      }
      expect(await statuses(a, 'free', 2)).toEqual([200, 429])
      expect(await statuses(b, 'pro', 2)).toEqual([200, 200])
      expect(await statuses(a, 'pro', 2)).toEqual([200, 429])
      expect(await statuses(b, 'free', 1)).toEqual([429])
      expect(a.routeHits + b.routeHits).toBe(4)
    })
  })
})

describe.each(serverKinds)('the rate limit on %s', (kind) => {
  it('skip: skipped requests spend nothing and carry no RateLimit fields (sync and async skip)', async () => {
    const app = await serve(kind, {
      limiter: slowBucket('skip'),
      skip: async (req) => req.url === '/health' || req.headers['x-internal'] === 'yes',
    })
    for (let i = 0; i < 8; i++) {
      const response = await fetch(`${app.url}/health`)
      expect(response.status).toBe(200)
      expect(response.headers.get('ratelimit')).toBeNull()
      expect(response.headers.get('ratelimit-policy')).toBeNull()
    }
    expect((await fetch(app.url, { headers: { 'x-internal': 'yes' } })).headers.get('ratelimit')).toBeNull()
    expect((await fetch(app.url)).headers.get('ratelimit')).toBe('"skip";r=4;t=100')
    expect(app.routeHits).toBe(10)

    const syncSkip = await serve(kind, { limiter: slowBucket('skip-sync'), skip: () => true })
    expect((await fetch(syncSkip.url)).headers.get('ratelimit')).toBeNull()
  })

  it('skip: a skipped request spends nothing, and those not skipped spend the budget', async () => {
    const app = await serve(kind, {
      limiter: slowBucket('skip-some', new MemoryStore(), 1),
      skip: (req) => req.headers['x-health'] === 'yes',
    })
    const health = [
      await fetch(app.url, { headers: { 'x-health': 'yes' } }),
      await fetch(app.url, { headers: { 'x-health': 'yes' } }),
    ]
    const counted = [await fetch(app.url), await fetch(app.url)]

    expect(health.map((r) => [r.status, r.headers.get('ratelimit')])).toEqual([
      [200, null],
      [200, null],
    ])
    expect(counted.map((r) => [r.status, r.headers.get('ratelimit')])).toEqual([
      [200, '"skip-some";r=0;t=100'],
      [429, '"skip-some";r=0;t=100'],
    ])
    expect(app.routeHits).toBe(3)
  })

  it('cost: a number is spent by every request', async () => {
    const app = await serve(kind, { limiter: slowBucket('constant'), cost: 2 })
    const statuses: number[] = []
    const remaining: (string | null)[] = []
    for (let i = 0; i < 3; i++) {
      const response = await fetch(app.url)
      statuses.push(response.status)
      remaining.push(response.headers.get('ratelimit'))
    }
    // 5 tokens: 2, 2, then 1 left for a cost of 2.
    expect(statuses).toEqual([200, 200, 429])
    expect(remaining.slice(0, 2)).toEqual(['"constant";r=3;t=100', '"constant";r=1;t=100'])
  })

  it.each([
    { capacity: 5, successes: 10 },
    { capacity: 2, successes: 5 },
  ])(
    'refundWhen counting only failures: $successes successes cost nothing, then the budget of $capacity holds $capacity failures',
    async ({ capacity, successes }) => {
      const refunds = refundCounter()
      const limiter = tokenBucket({ name: 'failures', capacity, refillPerSecond: 0.01, hooks: refunds.hooks })
      const app = await serve(
        kind,
        { limiter, refundWhen: (_req, res) => res.statusCode < 400 },
        (exchange) => exchange.send(exchange.path === '/wrong' ? 401 : 200),
      )
      for (let i = 1; i <= successes; i++) {
        expect((await fetch(app.url)).status).toBe(200)
        await refunds.reach(i)
      }
      const failures: number[] = []
      for (let i = 0; i <= capacity; i++) failures.push((await fetch(`${app.url}/wrong`)).status)
      expect(failures).toEqual([...Array.from({ length: capacity }, () => 401), 429])
      expect(app.routeHits).toBe(successes + capacity)
      expect(refunds.count).toBe(successes)
    },
  )

  it('refundWhen counting only successes: failures are given back, a response its client left is not, whatever its status', async () => {
    const refunds = refundCounter()
    const limiter = tokenBucket({
      name: 'successes',
      capacity: 2,
      refillPerSecond: 0.01,
      hooks: refunds.hooks,
    })
    const traffic = new HangUpTraffic()
    const app = await serve(
      kind,
      { limiter, refundWhen: async (_req, res) => res.statusCode >= 400 },
      (exchange) => {
        // /hang has set a failing status but not sent it when its client gives up.
        if (exchange.path === '/hang') {
          exchange.res.statusCode = 503
          traffic.routeHas(exchange.res)
        } else exchange.send(exchange.path === '/fail' ? 500 : 200)
      },
    )
    for (let i = 1; i <= 3; i++) {
      expect((await fetch(`${app.url}/fail`)).status).toBe(500)
      await refunds.reach(i)
    }
    expect(await traffic.send(app.port, '/hang', 1)).toEqual([])
    // The hung-up request keeps its token: 1 of 2 left.
    const statuses: number[] = []
    for (let i = 0; i < 3; i++) statuses.push((await fetch(app.url)).status)
    expect(statuses).toEqual([200, 429, 429])
    expect(refunds.count).toBe(3)
  })

  it('refundWhen with clients hanging up while the route works (status still 200): a budget of 5 runs the route 5 times in 50 attempts', async () => {
    const refunds = refundCounter()
    const limiter = tokenBucket({
      name: 'hang-ups',
      capacity: 5,
      refillPerSecond: 0.0001,
      hooks: refunds.hooks,
    })
    const traffic = new HangUpTraffic()
    let asked = 0
    const app = await serve(
      kind,
      {
        limiter,
        identify: () => 'one',
        refundWhen: (_req, res) => {
          asked++
          return res.statusCode < 400
        },
      },
      async (exchange) => {
        // The route's work ends after its client left; the 401 it then answers is read by nobody.
        await traffic.routeHas(exchange.res)
        exchange.send(401)
      },
    )
    const answered = await traffic.send(app.port, '/login', 50)
    expect(traffic.reached).toBe(5)
    expect(answered).toEqual(Array(45).fill(429))
    expect(refunds.count).toBe(0)
    expect(asked).toBe(0)
    // Answered requests are refused too: the 5 hang-ups spent the budget.
    expect((await fetch(`${app.url}/login`)).status).toBe(429)
  })

  it('a sliding window of 3 per 60 s spent 4 s in: the 429 says t=76 with Retry-After 76, and at 76 s one is allowed, at 75 s not', async () => {
    const clock = new VirtualClock()
    const limiter = slidingWindow({
      name: 'sliding-t',
      store: new MemoryStore({ clock: clock.now }),
      limit: 3,
      windowMs: 60_000,
    })
    const app = await serve(kind, { limiter })
    // The virtual clock starts on a minute boundary.
    clock.at(4_000)
    for (let i = 0; i < 3; i++) expect((await fetch(app.url)).status).toBe(200)
    const refused = await fetch(app.url)
    expect(refused.status).toBe(429)
    expect(refused.headers.get('ratelimit')).toBe('"sliding-t";r=0;t=76')
    expect(refused.headers.get('retry-after')).toBe('76')
    // The 3 weigh 2.05 19 s into the next window, 2 at 20 s.
    clock.at(4_000 + 75_000)
    expect((await fetch(app.url)).status).toBe(429)
    clock.at(4_000 + 76_000)
    expect((await fetch(app.url)).status).toBe(200)
    expect(app.routeHits).toBe(4)
  })

  it('cost: an async cost is spent; a cost above the capacity is a 400 without Retry-After', async () => {
    const app = await serve(kind, {
      limiter: slowBucket('cost'),
      cost: async (req) => Number(req.headers['x-cost'] ?? 1),
    })
    const three = await fetch(app.url, { headers: { 'x-cost': '3' } })
    expect(three.status).toBe(200)
    expect(three.headers.get('ratelimit')).toBe('"cost";r=2;t=100')

    const tooBig = await fetch(app.url, { headers: { 'x-cost': '6' } })
    expect(tooBig.status).toBe(400)
    expect(limitHeaders(tooBig)).toEqual({
      'ratelimit-policy': '"cost";q=5;w=500',
      ratelimit: '"cost";r=2;t=100',
      'retry-after': null,
      'content-type': app.jsonType('application/problem+json'),
    })
    expect(await tooBig.json()).toEqual({
      type: 'about:blank',
      title: 'Request exceeds what the quota can ever admit',
      status: 400,
    })

    const three2 = await fetch(app.url, { headers: { 'x-cost': '3' } })
    expect(three2.status).toBe(429)
    expect(three2.headers.get('retry-after')).toBe('100')
    expect(app.routeHits).toBe(1)
  })

  it.each([
    ['0', 0],
    ['-1', -1],
    ['NaN', Number.NaN],
    ['Infinity', Number.POSITIVE_INFINITY],
  ])('a cost of %s is an error handed to the error path, not a free pass', async (_name, value) => {
    const limiter = slowBucket('bad-cost')
    const app = await serve(kind, { limiter, cost: () => value })
    const response = await fetch(app.url)
    expect(response.status).toBe(500)
    expect(await response.json()).toEqual({ code: ErrorCodes.INVALID_ARGUMENT })
    expect(app.routeHits).toBe(0)
    expect(app.errors).toHaveLength(1)
    expect(app.errors[0]).toBeInstanceOf(TollboothError)
    expect((app.errors[0] as Error).message).toBe(
      `${requestOwner[kind]}: "cost(req)" must be a positive finite number, got ${String(value)}`,
    )
    expect((await limiter.peek('127.0.0.1')).remaining).toBe(5)
  })

  it('errors thrown by identify, cost and skip (sync or async) go to the error path; the route is not reached', async () => {
    const boom = new Error('boom')
    const throwing: Omit<SharedOptions, 'limiter'>[] = [
      { identify: () => Promise.reject(boom) },
      {
        identify: () => {
          throw boom
        },
      },
      {
        cost: () => {
          throw boom
        },
      },
      { skip: () => Promise.reject(boom) },
      {
        skip: () => {
          throw boom
        },
      },
    ]
    for (const options of throwing) {
      const app = await serve(kind, { limiter: slowBucket('throws'), ...options })
      const response = await fetch(app.url)
      expect(response.status).toBe(500)
      expect(app.errors).toEqual([boom])
      expect(app.routeHits).toBe(0)
    }
  })

  it('an identity that is not a non-empty string is an error handed to the error path', async () => {
    const app = await serve(kind, { limiter: slowBucket('identity'), identify: () => '' })
    const response = await fetch(app.url)
    expect(response.status).toBe(500)
    expect(await response.json()).toEqual({ code: ErrorCodes.INVALID_ARGUMENT })
    expect((app.errors[0] as Error).message).toMatch(
      new RegExp(`^${requestOwner[kind]}: "identify\\(req\\)" must be a non-empty string`),
    )
  })

  it('a limiter function returning something else than a rate limiter is an error handed to the error path', async () => {
    const app = await serve(kind, {
      limiter: () => concurrencyLimit({ name: 'c', max: 1, leaseMs: 1000 }) as never,
    })
    const response = await fetch(app.url)
    expect(response.status).toBe(500)
    expect(await response.json()).toEqual({ code: ErrorCodes.INVALID_OPTION })
    expect((app.errors[0] as Error).message).toBe(
      `${requestOwner[kind]}: "limiter" must be a function returning a rate limiter, got a concurrencyLimit limiter ("c")`,
    )
    expect(app.routeHits).toBe(0)
  })

  it('identity options: X-Forwarded-For names the client only through trustProxy', async () => {
    const trusting = await serve(kind, {
      limiter: slowBucket('xff', new MemoryStore(), 1),
      trustProxy: 'loopback',
    })
    const ignoring = await serve(kind, { limiter: slowBucket('no-xff', new MemoryStore(), 1) })
    const from = (app: GuardedServer, ip: string) => fetch(app.url, { headers: { 'x-forwarded-for': ip } })
    expect((await from(trusting, '203.0.113.1')).status).toBe(200)
    expect((await from(trusting, '203.0.113.2')).status).toBe(200)
    expect((await from(trusting, '203.0.113.1')).status).toBe(429)
    expect((await from(ignoring, '203.0.113.1')).status).toBe(200)
    expect((await from(ignoring, '203.0.113.2')).status).toBe(429)
  })

  it('a leaky bucket: admitted requests wait their turn before the route, one more than the queue is refused', async () => {
    const reachedAt: number[] = []
    const app = await serve(
      kind,
      { limiter: leakyBucket({ name: 'shaped', ratePerSecond: 4, maxQueue: 2 }) },
      (exchange) => {
        reachedAt.push(performance.now())
        exchange.send(200, 'ok')
      },
    )
    const sentAt = performance.now()
    const statuses = await Promise.all([1, 2, 3, 4].map(async () => (await fetch(app.url)).status))
    expect(statuses.sort()).toEqual([200, 200, 200, 429])
    expect(reachedAt).toHaveLength(3)
    // The third admitted request leaves two emission intervals (2 × 250 ms) after the first decision.
    expect(Math.max(...reachedAt) - sentAt).toBeGreaterThanOrEqual(490)
  })
})
