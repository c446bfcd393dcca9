/**
 * What `rateLimit` and `rateLimitCheck` of tollbooth/http do on node:http and Express beyond the cases every server
 * runs (test/integration/httpGuards/rateLimit.test.ts): two guards composed on one route, a custom `onLimited`
 * writing the Node response, a client gone before the guard runs, `rateLimitCheck` for any server, fail policies
 * with a private Redis that is stopped, and option validation.
 */

import { once } from 'node:events'
import { createServer, type IncomingMessage } from 'node:http'
import { type AddressInfo, connect } from 'node:net'
import { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { ErrorCodes, TollboothError } from '../../../src/core/errors.js'
import { concurrencyLimit } from '../../../src/core/limiters/concurrencyLimit.js'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import type { RateLimiter } from '../../../src/core/rateLimiter.js'
import { MemoryStore } from '../../../src/core/stores/memoryStore.js'
import { RedisStore } from '../../../src/core/stores/redisStore.js'
import type { Store } from '../../../src/core/stores/store.js'
import { rateLimit, rateLimitCheck, sendRefusal } from '../../../src/http/index.js'
import type { Middleware } from '../../../src/http/middleware.js'
import {
  type GuardedServer,
  middlewareKinds,
  type ServerKind,
  serveGuarded,
} from '../../helpers/guardedServers.js'
import { limitHeaders } from '../../helpers/httpServer.js'
import { type RedisProcess, startRedis } from '../../helpers/redisServer.js'
import { limiterClientOptions } from '../../helpers/stores.js'

const QUOTA_EXCEEDED = {
  type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
  title: 'Request cannot be satisfied as assigned quota has been exceeded',
  status: 429,
}

const open: GuardedServer[] = []
afterEach(async () => {
  await Promise.all(open.splice(0).map((app) => app.close()))
})

async function serve(kind: ServerKind, middleware: Middleware): Promise<GuardedServer> {
  const app = await serveGuarded(kind, { middleware })
  open.push(app)
  return app
}

/** 5 requests, then one more every 100 s: within a test, `t` and `Retry-After` are whole hundreds of seconds. */
function slowBucket(name: string, store: Store = new MemoryStore()): RateLimiter {
  return tokenBucket({ name, store, capacity: 5, refillPerSecond: 0.01 })
}

describe.each(middlewareKinds)('rateLimit with %s', (kind) => {
  it('two guards on one route: the client sees both budgets, and the refusing one waits longest', async () => {
    const outer = rateLimit({ limiter: tokenBucket({ name: 'outer', capacity: 100, refillPerSecond: 0.01 }) })
    const inner = rateLimit({ limiter: slowBucket('inner') })
    const both = ((req, res, next) =>
      outer(req, res, (error) => (error ? next(error) : inner(req, res, next)))) as typeof outer
    const app = await serve(kind, both)
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

  it('custom onLimited answers with the app body; a failing one goes to next(error)', async () => {
    const app = await serve(
      kind,
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
      kind,
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
      'rateLimit: "limiter" must be a rate limiter (a concurrencyLimit goes to concurrencyGuard), got a concurrencyLimit limiter ("c")',
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
    expect(() => rateLimit({ limiter, trustProxy: true as never })).toThrow(
      /^rateLimit: "trustProxy" must not be true/,
    )
    // Named for the guard it was given to, not for the client IP resolver that checks it.
    expect(() => rateLimit({ limiter, trustProxy: 'yes' })).toThrow(
      /^rateLimit: "trustProxy" must list IP addresses, CIDRs, 'loopback', 'linklocal' or 'uniquelocal'/,
    )
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
