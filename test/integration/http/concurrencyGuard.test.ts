/**
 * `concurrencyGuard` of tollbooth/http through real servers (Express 5 and plain node:http) and real clients: one
 * lease per request, released exactly once when the response finishes, when the client aborts mid-response and when
 * the client socket is reset; renewed while a long response runs; freed after `leaseMs` when the process holding it
 * is SIGKILLed. Store operations are counted by a pass-through wrapper around the real store.
 */
import { randomUUID } from 'node:crypto'
import { request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http'
import { connect } from 'node:net'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest'
import { ErrorCodes, TollboothError } from '../../../src/core/errors.js'
import { type ConcurrencyLimiter, concurrencyLimit } from '../../../src/core/limiters/concurrencyLimit.js'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import { RedisStore } from '../../../src/core/stores/redisStore.js'
import type { Reply, Store, StoreRequest } from '../../../src/core/stores/store.js'
import { concurrencyGuard } from '../../../src/http/index.js'
import { JsonLinesProcess } from '../../helpers/childProcess.js'
import type { HttpGuardJob } from '../../helpers/httpGuardWorker.js'
import {
  type Flavour,
  flavours,
  type GuardedApp,
  limitHeaders,
  serveGuarded,
} from '../../helpers/httpServer.js'
import { type RedisProcess, startRedis } from '../../helpers/redisServer.js'
import {
  createClusterClient,
  createRedisClient,
  createStore,
  limiterClientOptions,
  type StoreFixture,
  storeKinds,
  whenReady,
} from '../../helpers/stores.js'

const WAIT_BOUND_MS = 10_000
const identify = (req: IncomingMessage) => String(req.headers['x-user'] ?? 'anonymous')

/** A real store, passed through, counting the operations it completed (`op` and `op:key`). */
class CountingStore implements Store {
  readonly kind: Store['kind']
  private readonly counts = new Map<string, number>()
  private readonly waiters = new Set<() => void>()

  constructor(private readonly inner: Store) {
    this.kind = inner.kind
  }

  count(op: string, key?: string): number {
    return this.counts.get(key === undefined ? op : `${op}:${key}`) ?? 0
  }

  /** Resolves once `predicate` holds after a completed operation; fails after WAIT_BOUND_MS. */
  async until(what: string, predicate: () => boolean): Promise<void> {
    const deadline = Date.now() + WAIT_BOUND_MS
    while (!predicate()) {
      const left = deadline - Date.now()
      if (left <= 0) throw new Error(`not within ${WAIT_BOUND_MS} ms: ${what}`)
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, left)
        function done() {
          clearTimeout(timer)
          resolve()
        }
        this.waiters.add(done)
      })
    }
  }

  async run(request: StoreRequest): Promise<Reply> {
    const reply = await this.inner.run(request)
    for (const name of [request.op, `${request.op}:${request.key}`]) {
      this.counts.set(name, (this.counts.get(name) ?? 0) + 1)
    }
    const waiters = [...this.waiters]
    this.waiters.clear()
    for (const wake of waiters) wake()
    return reply
  }

  consumeAll(requests: readonly StoreRequest[]): Promise<Reply[]> {
    return this.inner.consumeAll(requests)
  }

  delete(limiter: string, key: string): Promise<void> {
    return this.inner.delete(limiter, key)
  }
}

const open: GuardedApp[] = []
afterEach(async () => {
  await Promise.all(open.splice(0).map((app) => app.close()))
})

async function serve(
  flavour: Flavour,
  limiter: ConcurrencyLimiter,
  route: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<GuardedApp> {
  const app = await serveGuarded(flavour, concurrencyGuard({ limiter, identify }), route)
  open.push(app)
  return app
}

/** A route that starts its response and holds it open until the test ends it. */
function holdingRoute() {
  const held: { req: IncomingMessage; res: ServerResponse; closed: Promise<void> }[] = []
  const waiters = new Set<() => void>()
  const route = (req: IncomingMessage, res: ServerResponse) => {
    const closed = new Promise<void>((resolve) => res.once('close', () => resolve()))
    res.writeHead(200, { 'content-type': 'text/plain' })
    res.write('holding\n')
    held.push({ req, res, closed })
    for (const wake of waiters) wake()
  }
  const until = async (n: number) => {
    const deadline = Date.now() + WAIT_BOUND_MS
    while (held.length < n) {
      if (Date.now() > deadline) throw new Error(`fewer than ${n} requests reached the route`)
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 100)
        waiters.add(() => {
          clearTimeout(timer)
          resolve()
        })
      })
    }
    waiters.clear()
  }
  return { held, route, until }
}

/** Sends a GET with `x-user`; resolves with the response once its first body chunk arrived. */
function startRequest(url: string, user: string) {
  return new Promise<{ res: IncomingMessage; req: ReturnType<typeof httpRequest>; first: string }>(
    (resolve, reject) => {
      const req = httpRequest(url, { headers: { 'x-user': user }, agent: false })
      req.on('error', () => {})
      req.on('response', (res) => {
        res.once('data', (chunk: Buffer) => resolve({ res, req, first: chunk.toString() }))
        res.once('error', () => {})
      })
      req.once('error', reject)
      req.end()
    },
  )
}

describe.each(storeKinds)('concurrencyGuard on a %s store', (kind) => {
  let fixture: StoreFixture
  beforeAll(async () => {
    fixture = await createStore(kind)
  })
  afterAll(async () => {
    await fixture.close()
  })

  it('two app instances share the slots of an identity: the third is refused with exact headers; each lease is released once when its response finishes', async () => {
    const store = new CountingStore(fixture.store)
    const options = { name: `jobs-${randomUUID().slice(0, 6)}`, store, max: 2, leaseMs: 30_000 }
    const holding = holdingRoute()
    // Two instances, each with its own limiter object, as two processes would have.
    const a = await serve('express', concurrencyLimit(options), holding.route)
    const b = await serve('node', concurrencyLimit(options), holding.route)
    const first = await startRequest(a.url, 'u1')
    const second = await startRequest(b.url, 'u1')
    await holding.until(2)
    expect(first.res.headers.ratelimit).toBe(`"${options.name}";r=1;t=30`)
    expect(second.res.headers.ratelimit).toBe(`"${options.name}";r=0;t=30`)
    expect(first.res.headers['ratelimit-policy']).toBe(`"${options.name}";q=2;qu="concurrent-requests"`)

    for (const app of [a, b]) {
      const refused = await fetch(app.url, { headers: { 'x-user': 'u1' } })
      expect(refused.status).toBe(429)
      expect(limitHeaders(refused)).toEqual({
        'ratelimit-policy': `"${options.name}";q=2;qu="concurrent-requests"`,
        ratelimit: `"${options.name}";r=0;t=30`,
        'retry-after': '30',
        'content-type': 'application/problem+json',
      })
      expect(await refused.json()).toMatchObject({
        status: 429,
        'violated-policies': [options.name],
        retryAfter: 30,
      })
    }
    // Another identity has slots of its own.
    const other = await startRequest(a.url, 'u2')
    await holding.until(3)
    expect(other.res.headers.ratelimit).toBe(`"${options.name}";r=1;t=30`)

    for (const { res } of holding.held) res.end('done\n')
    await Promise.all(holding.held.map((entry) => entry.closed))
    await store.until('3 releases', () => store.count('release') === 3)
    expect(store.count('acquire')).toBe(5)
    expect(store.count('release', 'u1')).toBe(2)
    expect(store.count('release', 'u2')).toBe(1)
    expect((await concurrencyLimit(options).peek('u1')).remaining).toBe(2)
    expect([a.routeHits, b.routeHits]).toEqual([2, 1])
  })

  it.each(flavours)('%s: a client abort mid-response releases the lease exactly once', async (flavour) => {
    const store = new CountingStore(fixture.store)
    const limiter = concurrencyLimit({ name: `abort-${flavour}`, store, max: 1, leaseMs: 30_000 })
    const holding = holdingRoute()
    const app = await serve(flavour, limiter, holding.route)
    const { req, first } = await startRequest(app.url, 'aborter')
    expect(first).toBe('holding\n')
    expect((await limiter.peek('aborter')).remaining).toBe(0)
    req.destroy()
    await holding.held[0]?.closed
    await store.until('a release', () => store.count('release') === 1)
    expect(holding.held[0]?.res.writableEnded).toBe(false)
    expect((await limiter.peek('aborter')).remaining).toBe(1)
    // The slot is free again for the same identity.
    const again = await startRequest(app.url, 'aborter')
    again.req.destroy()
    await store.until('a second release', () => store.count('release') === 2)
    expect([store.count('acquire'), store.count('release')]).toEqual([2, 2])
  })

  it.each(flavours)('%s: a socket error (client reset) releases the lease exactly once', async (flavour) => {
    const store = new CountingStore(fixture.store)
    const limiter = concurrencyLimit({ name: `reset-${flavour}`, store, max: 1, leaseMs: 30_000 })
    const socketErrors: string[] = []
    const holding = holdingRoute()
    const app = await serve(flavour, limiter, (req, res) => {
      req.socket.on('error', (error: NodeJS.ErrnoException) => socketErrors.push(error.code ?? error.message))
      holding.route(req, res)
    })
    const socket = connect(app.port, '127.0.0.1')
    socket.on('error', () => {})
    socket.write('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nx-user: resetter\r\n\r\n')
    await new Promise<void>((resolve) => {
      let seen = ''
      socket.on('data', (chunk: Buffer) => {
        seen += chunk.toString()
        if (seen.includes('holding')) resolve()
      })
    })
    expect((await limiter.peek('resetter')).remaining).toBe(0)
    socket.resetAndDestroy()
    await holding.held[0]?.closed
    await store.until('a release', () => store.count('release') === 1)
    expect(socketErrors).toEqual(['ECONNRESET'])
    expect([store.count('acquire'), store.count('release')]).toEqual([1, 1])
    expect((await limiter.peek('resetter')).remaining).toBe(1)
  })

  it('a long response keeps its lease by renewing it every leaseMs / 3; renewal stops on release', async () => {
    const store = new CountingStore(fixture.store)
    const limiter = concurrencyLimit({ name: 'renewed', store, max: 2, leaseMs: 300 })
    const holding = holdingRoute()
    const app = await serve('node', limiter, holding.route)
    const long = await startRequest(app.url, 'long')
    // Four renewals: over 400 ms, longer than the lease would have lived without them.
    await store.until('4 renewals', () => store.count('renew', 'long') >= 4)
    expect((await limiter.peek('long')).remaining).toBe(1)
    holding.held[0]?.res.end()
    await store.until('a release', () => store.count('release', 'long') === 1)
    const renewalsAtRelease = store.count('renew', 'long')
    expect((await limiter.peek('long')).remaining).toBe(2)
    long.req.destroy()

    // Another request renews three times; the released one no more.
    const other = await startRequest(app.url, 'other')
    await store.until('3 renewals of another lease', () => store.count('renew', 'other') >= 3)
    expect(store.count('renew', 'long')).toBe(renewalsAtRelease)
    other.req.destroy()
    await store.until('the other release', () => store.count('release', 'other') === 1)
  })
})

describe.each(['redis', 'cluster'] as const)('a SIGKILLed process holding leases on %s', (mode) => {
  it('its lease frees after leaseMs', async () => {
    const prefix = `http-kill-${randomUUID().slice(0, 8)}:`
    const leaseMs = 1500
    const client = mode === 'redis' ? createRedisClient() : createClusterClient()
    await whenReady(client)
    const store = new RedisStore({ client, prefix, timeoutMs: 2000 })
    const limiter = concurrencyLimit({ name: 'held', store, max: 2, leaseMs })
    const job: HttpGuardJob = {
      mode,
      ...(mode === 'redis' ? { url: inject('redisUrl') } : { nodes: inject('redisClusterNodes') }),
      prefix,
      name: 'held',
      max: 2,
      leaseMs,
    }
    const worker = new JsonLinesProcess({
      script: fileURLToPath(new URL('../../helpers/httpGuardWorker.ts', import.meta.url)),
      jobVariable: 'TOLLBOOTH_HTTP_GUARD_JOB',
      job,
      label: 'http guard worker',
    })
    try {
      const { port } = await worker.next<{ port: number }>()
      const holder = await startRequest(`http://127.0.0.1:${port}/`, 'victim')
      expect(holder.first).toBe('holding\n')
      expect(await worker.next<{ held: string }>()).toEqual({ held: 'victim' })
      expect((await limiter.peek('victim')).remaining).toBe(1)

      await worker.kill()
      const killedAt = performance.now()
      let freedAfterMs = -1
      while (performance.now() - killedAt < leaseMs + WAIT_BOUND_MS) {
        if ((await limiter.peek('victim')).remaining === 2) {
          freedAfterMs = performance.now() - killedAt
          break
        }
        await new Promise((resolve) => setTimeout(resolve, 25))
      }
      expect(freedAfterMs).toBeGreaterThan(0)
      // The last renewal came at most leaseMs / 3 before the kill: the lease outlives the process by the rest.
      expect(freedAfterMs).toBeGreaterThanOrEqual((leaseMs * 2) / 3 - 50)
    } finally {
      await worker.kill()
      client.disconnect()
    }
  })
})

describe.each(flavours)('concurrencyGuard with %s', (flavour) => {
  it('identify errors go to next(error) and take no lease; custom onLimited answers refusals', async () => {
    const limiter = concurrencyLimit({ name: 'errors', max: 1, leaseMs: 30_000 })
    const boom = new Error('boom')
    const failing = await serveGuarded(
      flavour,
      concurrencyGuard({ limiter, identify: () => Promise.reject(boom) }),
    )
    open.push(failing)
    expect((await fetch(failing.url)).status).toBe(500)
    expect(failing.errors).toEqual([boom])
    expect(failing.routeHits).toBe(0)

    const holding = holdingRoute()
    const custom = await serveGuarded(
      flavour,
      concurrencyGuard({
        limiter,
        identify,
        onLimited: (_req, res, refusal) => {
          res.statusCode = 503
          res.end(`busy: ${refusal.policy.name} ${refusal.policy.unit} ${refusal.decision.limit}`)
        },
      }),
      holding.route,
    )
    open.push(custom)
    const first = await startRequest(custom.url, 'one')
    const refused = await fetch(custom.url, { headers: { 'x-user': 'one' } })
    expect(refused.status).toBe(503)
    expect(await refused.text()).toBe('busy: errors concurrent-requests 1')
    first.req.destroy()
  })
})

describe('concurrencyGuard with the store down', () => {
  let redis: RedisProcess
  let client: Redis
  beforeAll(async () => {
    redis = await startRedis()
    client = new Redis(redis.url, limiterClientOptions)
    client.on('error', () => {})
  })
  afterAll(async () => {
    client.disconnect()
    await redis.stop()
  })

  it('failPolicy closed refuses with 429 and Retry-After; open admits', async () => {
    const store = new RedisStore({ client, prefix: 'http-guard-faults:', timeoutMs: 200 })
    await store.warmUp()
    const make = (failPolicy: 'open' | 'closed') =>
      serve(
        'express',
        concurrencyLimit({ name: `fp-${failPolicy}`, store, max: 1, leaseMs: 5000, failPolicy }),
        (_req, res) => res.end('ok'),
      )
    const closed = await make('closed')
    const opened = await make('open')
    await redis.stop()
    const refused = await fetch(closed.url)
    expect(refused.status).toBe(429)
    expect(limitHeaders(refused)).toEqual({
      'ratelimit-policy': '"fp-closed";q=1;qu="concurrent-requests"',
      ratelimit: '"fp-closed";r=0;t=1',
      'retry-after': '1',
      'content-type': 'application/problem+json',
    })
    expect((await fetch(opened.url)).status).toBe(200)
    expect([closed.routeHits, opened.routeHits]).toEqual([0, 1])
  })
})

describe('concurrencyGuard options', () => {
  const limiter = concurrencyLimit({ name: 'options', max: 1, leaseMs: 1000 })
  const message = (call: () => unknown) => {
    try {
      call()
    } catch (error) {
      expect(error).toBeInstanceOf(TollboothError)
      expect((error as TollboothError).code).toBe(ErrorCodes.INVALID_OPTION)
      return (error as Error).message
    }
    return 'did not throw'
  }

  it('refuses unknown keys with a did-you-mean and wrong types naming the option', () => {
    expect(message(() => concurrencyGuard({ limiter, identfy: identify } as never))).toBe(
      'concurrencyGuard: unknown option "identfy" (did you mean "identify"?)',
    )
    expect(
      message(() =>
        concurrencyGuard({ limiter: tokenBucket({ name: 't', capacity: 1, refillPerSecond: 1 }) as never }),
      ),
    ).toBe('concurrencyGuard: "limiter" must be a concurrency limiter (concurrencyLimit), got object')
    expect(message(() => concurrencyGuard({ limiter, onLimited: 1 as never }))).toBe(
      'concurrencyGuard: "onLimited" must be a function, got 1',
    )
    expect(message(() => concurrencyGuard({ limiter, ipv4Prefix: 0 }))).toMatch(
      /^concurrencyGuard: "ipv4Prefix"/,
    )
    expect(message(() => concurrencyGuard(undefined as never))).toBe(
      'concurrencyGuard: "options" must be an object, got undefined',
    )
  })
})
