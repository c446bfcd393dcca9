/**
 * `rateLimit` and `rateLimitCheck` of tollbooth/http through real servers (Express 5 and plain node:http on a
 * loopback port) and real `fetch` requests: budgets shared by two app instances on memory, Redis and the cluster,
 * exact headers and bodies, skip, cost, per-request limiters, custom answers, identity options, fail policies with a
 * private Redis that is stopped, and option validation.
 */

import { once } from 'node:events'
import { createServer, type IncomingMessage } from 'node:http'
import { type AddressInfo, connect } from 'node:net'
import { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { ErrorCodes, TollboothError } from '../../../src/core/errors.js'
import { concurrencyLimit } from '../../../src/core/limiters/concurrencyLimit.js'
import { leakyBucket } from '../../../src/core/limiters/leakyBucket.js'
import { slidingWindow } from '../../../src/core/limiters/slidingWindow.js'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import type { RateLimiter } from '../../../src/core/rateLimiter.js'
import { MemoryStore } from '../../../src/core/stores/memoryStore.js'
import { RedisStore } from '../../../src/core/stores/redisStore.js'
import type { Store } from '../../../src/core/stores/store.js'
import { rateLimit, rateLimitCheck, sendRefusal } from '../../../src/http/index.js'
import { VirtualClock } from '../../helpers/contract.js'
import {
  type Flavour,
  flavours,
  type GuardedApp,
  limitHeaders,
  serveGuarded,
} from '../../helpers/httpServer.js'
import { HangUpTraffic } from '../../helpers/rawHttp.js'
import { type RedisProcess, startRedis } from '../../helpers/redisServer.js'
import { createStore, limiterClientOptions, type StoreFixture, storeKinds } from '../../helpers/stores.js'

const QUOTA_EXCEEDED = {
  type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
  title: 'Request cannot be satisfied as assigned quota has been exceeded',
  status: 429,
}

const open: GuardedApp[] = []
afterEach(async () => {
  await Promise.all(open.splice(0).map((app) => app.close()))
})

async function serve(...args: Parameters<typeof serveGuarded>): Promise<GuardedApp> {
  const app = await serveGuarded(...args)
  open.push(app)
  return app
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

/** 5 requests, then one more every 100 s: within a test, `t` and `Retry-After` are whole hundreds of seconds. */
function slowBucket(name: string, store: Store = new MemoryStore()): RateLimiter {
  return tokenBucket({ name, store, capacity: 5, refillPerSecond: 0.01 })
}

describe.each(storeKinds)('rateLimit on a %s store', (kind) => {
  let fixture: StoreFixture
  beforeAll(async () => {
    fixture = await createStore(kind)
  })
  afterAll(async () => {
    await fixture.close()
  })

  it('two app instances (Express and node:http) share one budget: exactly 5 admitted, with exact headers', async () => {
    // Two instances, each with its own limiter object, as two processes would have.
    const a = await serve('express', rateLimit({ limiter: slowBucket('shared', fixture.store) }))
    const b = await serve('node', rateLimit({ limiter: slowBucket('shared', fixture.store) }))
    const order = [a, b, a, b, a, b, a]
    const responses: Response[] = []
    for (const app of order) responses.push(await fetch(app.url))

    expect(responses.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 429, 429])
    expect(a.routeHits).toBe(3)
    expect(b.routeHits).toBe(2)
    for (let i = 0; i < 5; i++) {
      const response = responses[i] as Response
      expect(limitHeaders(response)).toEqual({
        'ratelimit-policy': '"shared";q=5;w=500',
        // One token back every 100 s: the next one comes in 100 s, however many are spent.
        ratelimit: `"shared";r=${4 - i};t=100`,
        'retry-after': null,
        'content-type': 'text/plain',
      })
      expect(await response.text()).toBe('ok')
    }
    for (const response of responses.slice(5)) {
      expect(limitHeaders(response)).toEqual({
        'ratelimit-policy': '"shared";q=5;w=500',
        ratelimit: '"shared";r=0;t=100',
        'retry-after': '100',
        'content-type': 'application/problem+json',
      })
      expect(await response.json()).toEqual({
        ...QUOTA_EXCEEDED,
        'violated-policies': ['shared'],
        retryAfter: 100,
      })
    }
  })

  it('a per-request limiter: each plan has its own budget on the shared store', async () => {
    const free = tokenBucket({ name: 'plan-free', store: fixture.store, capacity: 1, refillPerSecond: 0.01 })
    const pro = tokenBucket({ name: 'plan-pro', store: fixture.store, capacity: 3, refillPerSecond: 0.01 })
    const middleware = rateLimit({ limiter: (req) => (req.headers['x-plan'] === 'pro' ? pro : free) })
    const a = await serve('express', middleware)
    const b = await serve('node', middleware)
    const statuses = async (app: GuardedApp, plan: string, n: number) => {
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

describe.each(flavours)('rateLimit with %s', (flavour: Flavour) => {
  it('skip: skipped requests spend nothing and carry no RateLimit fields (sync and async skip)', async () => {
    const limiter = slowBucket('skip')
    const app = await serve(
      flavour,
      rateLimit({
        limiter,
        skip: async (req) => req.url === '/health' || req.headers['x-internal'] === 'yes',
      }),
    )
    for (let i = 0; i < 8; i++) {
      const response = await fetch(`${app.url}/health`)
      expect(response.status).toBe(200)
      expect(response.headers.get('ratelimit')).toBeNull()
      expect(response.headers.get('ratelimit-policy')).toBeNull()
    }
    expect((await fetch(app.url, { headers: { 'x-internal': 'yes' } })).headers.get('ratelimit')).toBeNull()
    expect((await fetch(app.url)).headers.get('ratelimit')).toBe('"skip";r=4;t=100')
    expect(app.routeHits).toBe(10)

    const syncSkip = await serve(flavour, rateLimit({ limiter: slowBucket('skip-sync'), skip: () => true }))
    expect((await fetch(syncSkip.url)).headers.get('ratelimit')).toBeNull()
  })

  it('cost: a number is spent by every request', async () => {
    const app = await serve(flavour, rateLimit({ limiter: slowBucket('constant'), cost: 2 }))
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

  it('refundWhen counting only failures: 10 successes cost nothing, then 5 failures spend the budget of 5', async () => {
    const refunds = refundCounter()
    const limiter = tokenBucket({
      name: 'failures',
      capacity: 5,
      refillPerSecond: 0.01,
      hooks: refunds.hooks,
    })
    const app = await serve(
      flavour,
      rateLimit({ limiter, refundWhen: (_req, res) => res.statusCode < 400 }),
      (req, res) => res.writeHead(req.url === '/wrong' ? 401 : 200).end(),
    )
    for (let i = 1; i <= 10; i++) {
      expect((await fetch(app.url)).status).toBe(200)
      await refunds.reach(i)
    }
    const failures: number[] = []
    for (let i = 0; i < 6; i++) failures.push((await fetch(`${app.url}/wrong`)).status)
    expect(failures).toEqual([401, 401, 401, 401, 401, 429])
    expect(app.routeHits).toBe(15)
    expect(refunds.count).toBe(10)
  })

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
      flavour,
      rateLimit({ limiter, refundWhen: async (_req, res) => res.statusCode >= 400 }),
      (req, res) => {
        // /hang has set a failing status but not sent it when its client gives up.
        if (req.url === '/hang') {
          res.statusCode = 503
          traffic.routeHas(res)
        } else res.writeHead(req.url === '/fail' ? 500 : 200).end()
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
      flavour,
      rateLimit({
        limiter,
        identify: () => 'one',
        refundWhen: (_req, res) => {
          asked++
          return res.statusCode < 400
        },
      }),
      (_req, res) => {
        // The route's work ends after its client left; the 401 it then answers is read by nobody.
        traffic.routeHas(res).then(() => {
          res.statusCode = 401
          res.end()
        })
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
    const app = await serve(flavour, rateLimit({ limiter }))
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

  it('two guards on one route: the client sees both budgets, and the refusing one waits longest', async () => {
    const outer = rateLimit({ limiter: tokenBucket({ name: 'outer', capacity: 100, refillPerSecond: 0.01 }) })
    const inner = rateLimit({ limiter: slowBucket('inner') })
    const both = ((req, res, next) =>
      outer(req, res, (error) => (error ? next(error) : inner(req, res, next)))) as typeof outer
    const app = await serve(flavour, both)
    let last: Response | undefined
    for (let i = 0; i < 6; i++) last = await fetch(app.url)
    const first = await fetch(app.url)
    expect((last as Response).status).toBe(429)
    expect((last as Response).headers.get('ratelimit-policy')).toBe(
      '"outer";q=100;w=10000, "inner";q=5;w=500',
    )
    expect((last as Response).headers.get('ratelimit')).toBe('"outer";r=94;t=100, "inner";r=0;t=100')
    expect((last as Response).headers.get('retry-after')).toBe('100')
    expect(first.status).toBe(429)
  })

  it('cost: an async cost is spent; a cost above the capacity is a 400 without Retry-After', async () => {
    const app = await serve(
      flavour,
      rateLimit({ limiter: slowBucket('cost'), cost: async (req) => Number(req.headers['x-cost'] ?? 1) }),
    )
    const three = await fetch(app.url, { headers: { 'x-cost': '3' } })
    expect(three.status).toBe(200)
    expect(three.headers.get('ratelimit')).toBe('"cost";r=2;t=100')

    const tooBig = await fetch(app.url, { headers: { 'x-cost': '6' } })
    expect(tooBig.status).toBe(400)
    expect(limitHeaders(tooBig)).toEqual({
      'ratelimit-policy': '"cost";q=5;w=500',
      ratelimit: '"cost";r=2;t=100',
      'retry-after': null,
      'content-type': 'application/problem+json',
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
  ])('a cost of %s is an error handed to next, not a free pass', async (_name, value) => {
    const limiter = slowBucket('bad-cost')
    const app = await serve(flavour, rateLimit({ limiter, cost: () => value }))
    const response = await fetch(app.url)
    expect(response.status).toBe(500)
    expect(await response.json()).toEqual({ code: ErrorCodes.INVALID_ARGUMENT })
    expect(app.routeHits).toBe(0)
    expect(app.errors).toHaveLength(1)
    expect(app.errors[0]).toBeInstanceOf(TollboothError)
    expect((app.errors[0] as Error).message).toBe(
      `rateLimit: "cost(req)" must be a positive finite number, got ${String(value)}`,
    )
    expect((await limiter.peek('127.0.0.1')).remaining).toBe(5)
  })

  it('errors thrown by identify, cost and skip (sync or async) go to next(error); the route is not reached', async () => {
    const boom = new Error('boom')
    const throwing = [
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
      const app = await serve(flavour, rateLimit({ limiter: slowBucket('throws'), ...options }))
      const response = await fetch(app.url)
      expect(response.status).toBe(500)
      expect(app.errors).toEqual([boom])
      expect(app.routeHits).toBe(0)
    }
  })

  it('an identity that is not a non-empty string is an error handed to next', async () => {
    const app = await serve(flavour, rateLimit({ limiter: slowBucket('identity'), identify: () => '' }))
    const response = await fetch(app.url)
    expect(response.status).toBe(500)
    expect(await response.json()).toEqual({ code: ErrorCodes.INVALID_ARGUMENT })
    expect((app.errors[0] as Error).message).toMatch(
      /^rateLimit: "identify\(req\)" must be a non-empty string/,
    )
  })

  it('a limiter function returning something else than a rate limiter is an error handed to next', async () => {
    const app = await serve(
      flavour,
      rateLimit({ limiter: () => concurrencyLimit({ name: 'c', max: 1, leaseMs: 1000 }) as never }),
    )
    const response = await fetch(app.url)
    expect(response.status).toBe(500)
    expect(await response.json()).toEqual({ code: ErrorCodes.INVALID_OPTION })
    expect((app.errors[0] as Error).message).toBe(
      'rateLimit: "limiter" must be a function returning a rate limiter, got object',
    )
    expect(app.routeHits).toBe(0)
  })

  it('custom onLimited answers with the app body; a failing one goes to next(error)', async () => {
    const app = await serve(
      flavour,
      rateLimit({
        limiter: tokenBucket({ name: 'custom', capacity: 1, refillPerSecond: 0.01 }),
        onLimited: (_req, res, refusal) => {
          res.statusCode = 503
          res.setHeader('retry-after', refusal.headers['Retry-After'] as string)
          res.setHeader('content-type', 'application/json')
          res.end(JSON.stringify({ error: 'slow down', status: refusal.status, policy: refusal.policy.name }))
        },
      }),
    )
    expect((await fetch(app.url)).status).toBe(200)
    const refused = await fetch(app.url)
    expect(refused.status).toBe(503)
    expect(limitHeaders(refused)).toEqual({
      'ratelimit-policy': null,
      ratelimit: null,
      'retry-after': '100',
      'content-type': 'application/json',
    })
    expect(await refused.json()).toEqual({ error: 'slow down', status: 429, policy: 'custom' })
    expect(app.routeHits).toBe(1)

    const boom = new Error('onLimited failed')
    const failing = await serve(
      flavour,
      rateLimit({
        limiter: tokenBucket({ name: 'custom-fails', capacity: 1, refillPerSecond: 0.01 }),
        onLimited: async () => {
          throw boom
        },
      }),
    )
    expect((await fetch(failing.url)).status).toBe(200)
    expect((await fetch(failing.url)).status).toBe(500)
    expect(failing.errors).toEqual([boom])
  })

  it('identity options: X-Forwarded-For names the client only through trustProxy', async () => {
    const trusting = await serve(
      flavour,
      rateLimit({
        limiter: tokenBucket({ name: 'xff', capacity: 1, refillPerSecond: 0.01 }),
        trustProxy: 'loopback',
      }),
    )
    const ignoring = await serve(
      flavour,
      rateLimit({ limiter: tokenBucket({ name: 'no-xff', capacity: 1, refillPerSecond: 0.01 }) }),
    )
    const from = (app: GuardedApp, ip: string) => fetch(app.url, { headers: { 'x-forwarded-for': ip } })
    expect((await from(trusting, '203.0.113.1')).status).toBe(200)
    expect((await from(trusting, '203.0.113.2')).status).toBe(200)
    expect((await from(trusting, '203.0.113.1')).status).toBe(429)
    expect((await from(ignoring, '203.0.113.1')).status).toBe(200)
    expect((await from(ignoring, '203.0.113.2')).status).toBe(429)
  })

  it('a leaky bucket: admitted requests wait their turn before the route, one more than the queue is refused', async () => {
    const reachedAt: number[] = []
    const app = await serve(
      flavour,
      rateLimit({ limiter: leakyBucket({ name: 'shaped', ratePerSecond: 4, maxQueue: 2 }) }),
      (_req, res) => {
        reachedAt.push(performance.now())
        res.end('ok')
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

describe('a client gone before the guard runs', () => {
  it('spends nothing, under its address or the shared unknown identity, and does not reach the route', async () => {
    const limiter = tokenBucket({ name: 'gone', capacity: 5, refillPerSecond: 0.01 })
    const guard = rateLimit({ limiter })
    let reached = 0
    let guarded = 0
    const server = createServer((req, res) => {
      // As after a body parser: the guard runs once the client has reset the connection.
      req.socket.once('close', () => {
        guard(req, res, () => {
          reached++
        })
        guarded++
        server.emit('guarded')
      })
    })
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    try {
      const { port } = server.address() as AddressInfo
      for (let i = 0; i < 3; i++) {
        const socket = connect(port, '127.0.0.1')
        socket.on('error', () => {})
        await once(socket, 'connect')
        const handled = once(server, 'guarded')
        socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n')
        // Give the server the request before the reset: wait until it has a connection with a request.
        await new Promise((resolve) => server.once('request', resolve))
        socket.resetAndDestroy()
        await handled
      }
      expect(guarded).toBe(3)
      expect(reached).toBe(0)
      expect((await limiter.peek('unknown')).remaining).toBe(5)
      expect((await limiter.peek('127.0.0.1')).remaining).toBe(5)
    } finally {
      server.closeAllConnections()
      server.close()
    }
  })
})

describe('rateLimitCheck', () => {
  it('answers an admission with headers, or a Refusal, for any server', async () => {
    const check = rateLimitCheck({
      limiter: slowBucket('check'),
      identify: (req: IncomingMessage) => req.url ?? '/',
    })
    const answers: unknown[] = []
    const server = createServer(async (req, res) => {
      const result = await check(req)
      answers.push(result)
      if ('allowed' in result) {
        for (const [name, value] of Object.entries(result.headers)) res.setHeader(name, value)
        res.end('ok')
      } else {
        sendRefusal(res, result)
      }
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/a`
    try {
      for (let i = 0; i < 6; i++) await fetch(url)
    } finally {
      server.closeAllConnections()
      server.close()
    }
    expect(answers[0]).toMatchObject({
      allowed: true,
      headers: { 'RateLimit-Policy': '"check";q=5;w=500', RateLimit: '"check";r=4;t=100' },
      decision: { allowed: true, remaining: 4, source: 'store' },
    })
    expect(answers[5]).toMatchObject({
      status: 429,
      headers: {
        'RateLimit-Policy': '"check";q=5;w=500',
        RateLimit: '"check";r=0;t=100',
        'Retry-After': '100',
        'content-type': 'application/problem+json',
      },
      body: { ...QUOTA_EXCEEDED, 'violated-policies': ['check'], retryAfter: 100 },
      policy: { name: 'check', quota: 5, windowSeconds: 500 },
    })
  })

  it('rejects with what the options threw, and is allowed through by skip without headers', async () => {
    const boom = new Error('boom')
    const failing = rateLimitCheck({
      limiter: slowBucket('check-fails'),
      identify: () => Promise.reject(boom),
    })
    await expect(failing({} as IncomingMessage)).rejects.toBe(boom)
    const skipping = rateLimitCheck({ limiter: slowBucket('check-skip'), skip: () => true })
    expect(await skipping({} as IncomingMessage)).toEqual({ allowed: true, headers: {}, decision: undefined })
  })
})

describe('fail policies with the store down', () => {
  let redis: RedisProcess
  let client: Redis
  let store: RedisStore
  beforeAll(async () => {
    redis = await startRedis()
    client = new Redis(redis.url, limiterClientOptions)
    client.on('error', () => {})
    store = new RedisStore({ client, prefix: 'http-faults:', timeoutMs: 200 })
    await store.warmUp()
  })
  afterAll(async () => {
    client.disconnect()
    await redis.stop()
  })

  it('closed refuses with 429, open admits, local limits in-process', async () => {
    const make = (failPolicy: 'open' | 'closed' | 'local') =>
      serve(
        'express',
        rateLimit({
          limiter: tokenBucket({
            name: `fp-${failPolicy}`,
            store,
            capacity: 2,
            refillPerSecond: 0.01,
            failPolicy,
          }),
        }),
      )
    const closed = await make('closed')
    const opened = await make('open')
    const local = await make('local')
    // The store answers while it is up.
    expect((await fetch(closed.url)).headers.get('ratelimit')).toBe('"fp-closed";r=1;t=100')

    await redis.stop()
    const refused = await fetch(closed.url)
    expect(refused.status).toBe(429)
    expect(limitHeaders(refused)).toEqual({
      'ratelimit-policy': '"fp-closed";q=2;w=200',
      ratelimit: '"fp-closed";r=0;t=1',
      'retry-after': '1',
      'content-type': 'application/problem+json',
    })
    expect(await refused.json()).toEqual({
      ...QUOTA_EXCEEDED,
      'violated-policies': ['fp-closed'],
      retryAfter: 1,
    })

    const openStatuses: number[] = []
    for (let i = 0; i < 4; i++) openStatuses.push((await fetch(opened.url)).status)
    expect(openStatuses).toEqual([200, 200, 200, 200])

    const localStatuses: number[] = []
    for (let i = 0; i < 3; i++) localStatuses.push((await fetch(local.url)).status)
    expect(localStatuses).toEqual([200, 200, 429])
    expect([closed.routeHits, opened.routeHits, local.routeHits]).toEqual([1, 4, 2])
  })
})

describe('option validation', () => {
  const limiter = slowBucket('options')
  const invalid = (call: () => unknown, message: string) => {
    let thrown: unknown
    try {
      call()
    } catch (error) {
      thrown = error
    }
    expect(thrown).toBeInstanceOf(TollboothError)
    expect((thrown as TollboothError).code).toBe(ErrorCodes.INVALID_OPTION)
    expect((thrown as TollboothError).message).toBe(message)
  }

  it('refuses unknown keys with a did-you-mean, and wrong types naming the option', () => {
    invalid(
      () => rateLimit({ limiter, skipp: () => false } as never),
      'rateLimit: unknown option "skipp" (did you mean "skip"?)',
    )
    invalid(
      () => rateLimitCheck({ limiter, onLimited: () => {} } as never),
      'rateLimitCheck: unknown option "onLimited" (a Refusal is answered by the caller, e.g. with sendRefusal)',
    )
    invalid(() => rateLimit(null as never), 'rateLimit: "options" must be an object, got null')
    invalid(
      () => rateLimit({} as never),
      'rateLimit: "limiter" must be a rate limiter (tokenBucket, slidingWindow, fixedWindow, leakyBucket) or a function of the request returning one, got undefined',
    )
    invalid(
      () => rateLimit({ limiter: concurrencyLimit({ name: 'c', max: 1, leaseMs: 1000 }) as never }),
      'rateLimit: "limiter" must be a rate limiter (a concurrencyLimit goes to concurrencyGuard), got object',
    )
    for (const cost of [0, -1, Number.NaN, Number.POSITIVE_INFINITY, '2']) {
      invalid(
        () => rateLimit({ limiter, cost: cost as never }),
        `rateLimit: "cost" must be a positive finite number or a function of the request, got ${typeof cost === 'string' ? `"${cost}"` : cost}`,
      )
    }
    invalid(
      () => rateLimit({ limiter, skip: true as never }),
      'rateLimit: "skip" must be a function, got true',
    )
    invalid(
      () => rateLimit({ limiter, onLimited: 'json' as never }),
      'rateLimit: "onLimited" must be a function, got "json"',
    )
    // null is a value, not "use the default".
    invalid(
      () => rateLimit({ limiter, onLimited: null as never }),
      'rateLimit: "onLimited" must be a function, got null',
    )
    invalid(
      () => rateLimit({ limiter, identify: 'ip' as never }),
      'rateLimit: "identify" must be a function, got "ip"',
    )
    invalid(
      () => rateLimit({ limiter, refundWhen: 'failed' as never }),
      'rateLimit: "refundWhen" must be a function (req, res) => boolean, got "failed"',
    )
  })

  it('checks the identity options through requestIdentity', () => {
    expect(() => rateLimit({ limiter, ipv6Prefix: 200 })).toThrow(/rateLimit: "ipv6Prefix"/)
    expect(() => rateLimit({ limiter, trustProxy: true as never })).toThrow(/trustProxy/)
    // A hop count past any real chain trusts every hop, as true would.
    for (const trustProxy of [33, 1e9]) {
      expect(() => rateLimit({ limiter, trustProxy })).toThrow(
        expect.objectContaining({
          code: ErrorCodes.INVALID_OPTION,
          message: expect.stringContaining('"trustProxy" must be a number of hops from 0 to 32'),
        }),
      )
    }
  })
})
