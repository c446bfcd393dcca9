import { EventEmitter, once } from 'node:events'
import { PassThrough } from 'node:stream'
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'
import { afterEach, describe, expect, it } from 'vitest'
import { ErrorCodes } from '../../../src/core/errors.js'
import { type ConcurrencyLimiter, concurrencyLimit } from '../../../src/core/limiters/concurrencyLimit.js'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import { MemoryStore } from '../../../src/core/stores/memoryStore.js'
import {
  type TollboothConcurrencyOptions,
  tollboothConcurrency,
  tollboothRateLimit,
} from '../../../src/fastify/index.js'
import { CountingStore } from '../../helpers/countingStore.js'
import { fastifyStartupError } from '../../helpers/fastifyStartup.js'
import { startRequest } from '../../helpers/httpServer.js'

const identify = (request: FastifyRequest) => String(request.headers['x-user'] ?? 'anonymous')

const apps: FastifyInstance[] = []
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()))
})

/** Handlers that start a streamed response and hold it open until the test ends it. */
function holdingRoutes() {
  const held: { stream: PassThrough; closed: Promise<void>; reply: FastifyReply }[] = []
  const arrivals = new EventEmitter()
  const handler = async (_request: FastifyRequest, reply: FastifyReply) => {
    const stream = new PassThrough()
    const closed = new Promise<void>((resolve) => reply.raw.once('close', () => resolve()))
    stream.write('holding\n')
    held.push({ stream, closed, reply })
    arrivals.emit('held')
    return reply.header('content-type', 'text/plain').send(stream)
  }
  const until = async (count: number) => {
    while (held.length < count) await once(arrivals, 'held')
  }
  return { held, handler, until }
}

/** A Fastify app guarded by the plugin, `GET /` served by `handler`, listening on 127.0.0.1. */
async function guardedApp(
  options: TollboothConcurrencyOptions,
  handler: (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>,
  routes: (app: FastifyInstance) => void = () => {},
): Promise<{ url: string; port: number; app: FastifyInstance }> {
  const app = Fastify({ logger: false })
  apps.push(app)
  await app.register(tollboothConcurrency, options)
  app.get('/', handler)
  routes(app)
  const url = await app.listen({ port: 0, host: '127.0.0.1' })
  return { url, port: Number(new URL(url).port), app }
}

function leases(store: CountingStore, name: string): ConcurrencyLimiter {
  return concurrencyLimit({ name, store, max: 1, leaseMs: 30_000 })
}

describe('tollboothConcurrency route config, callbacks and errors', () => {
  it('a route with its own limiter, and a route left unguarded', async () => {
    const store = new CountingStore(new MemoryStore())
    const shared = leases(store, 'shared')
    const own = leases(store, 'own')
    const holding = holdingRoutes()
    const { url } = await guardedApp({ limiter: shared, identify }, holding.handler, (app) => {
      app.get('/own', { config: { tollboothConcurrency: { limiter: own } } }, holding.handler)
      app.get('/free', { config: { tollboothConcurrency: false } }, holding.handler)
    })
    const first = await startRequest(url, 'ada')
    const ownFirst = await startRequest(`${url}/own`, 'ada')
    const free = [await startRequest(`${url}/free`, 'ada'), await startRequest(`${url}/free`, 'ada')]
    await holding.until(4)
    expect(first.res.headers.ratelimit).toBe('"shared";r=0;t=30')
    expect(ownFirst.res.headers.ratelimit).toBe('"own";r=0;t=30')
    expect(free.map((f) => [f.res.statusCode, f.res.headers.ratelimit])).toEqual([
      [200, undefined],
      [200, undefined],
    ])

    const refused = [
      await fetch(url, { headers: { 'x-user': 'ada' } }),
      await fetch(`${url}/own`, { headers: { 'x-user': 'ada' } }),
    ]
    expect(refused.map((r) => [r.status, r.headers.get('ratelimit')])).toEqual([
      [429, '"shared";r=0;t=30'],
      [429, '"own";r=0;t=30'],
    ])
    for (const { stream } of holding.held) stream.end()
    await Promise.all(holding.held.map((entry) => entry.closed))
    await store.until(() => store.count('release') === 2)
    expect([store.count('acquire'), store.count('release')]).toEqual([4, 2])
  })

  it("onLimited answers through the reply; what identify throws reaches Fastify's error handler and takes no lease", async () => {
    const store = new CountingStore(new MemoryStore())
    const limiter = leases(store, 'callbacks')
    const errors: unknown[] = []
    const holding = holdingRoutes()
    const app = Fastify({ logger: false })
    apps.push(app)
    app.setErrorHandler((error, _request, reply) => {
      errors.push(error)
      void reply.code(401).send({ error: (error as Error).message })
    })
    await app.register(tollboothConcurrency, {
      limiter,
      identify: (request) => {
        const user = request.headers['x-user']
        if (typeof user !== 'string') throw new Error('who are you?')
        return user
      },
      onLimited: (_request, reply, refusal) => {
        void reply.code(503).headers(refusal.headers).send({ busy: refusal.decision.retryAfterMs })
      },
    })
    app.get('/', holding.handler)
    const url = await app.listen({ port: 0, host: '127.0.0.1' })

    const anonymous = await fetch(url)
    expect([anonymous.status, await anonymous.json()]).toEqual([401, { error: 'who are you?' }])
    expect(errors).toHaveLength(1)
    const held = await startRequest(url, 'ada')
    await holding.until(1)
    const busy = await fetch(url, { headers: { 'x-user': 'ada' } })
    expect(busy.status).toBe(503)
    // Until the held lease expires: 30 s from its acquisition, less the (real) time since; Retry-After rounds it up.
    const { busy: retryAfterMs } = (await busy.json()) as { busy: number }
    expect(retryAfterMs).toBeGreaterThan(0)
    expect(retryAfterMs).toBeLessThanOrEqual(30_000)
    expect(busy.headers.get('retry-after')).toBe(String(Math.ceil(retryAfterMs / 1000)))
    held.req.destroy()
    await store.until(() => store.count('release') === 1)
    expect([store.count('acquire'), store.count('release'), holding.held.length]).toEqual([2, 1, 1])
  })
})

describe('tollboothConcurrency beside tollboothRateLimit', () => {
  it('a request spending from both carries the fields of both budgets, admitted or refused', async () => {
    const store = new CountingStore(new MemoryStore())
    const holding = holdingRoutes()
    const app = Fastify({ logger: false })
    apps.push(app)
    await app.register(tollboothRateLimit, {
      limiter: tokenBucket({ name: 'rate', capacity: 5, refillPerSecond: 0.01 }),
      identify,
    })
    await app.register(tollboothConcurrency, { limiter: leases(store, 'slots'), identify })
    app.get('/', holding.handler)
    const url = await app.listen({ port: 0, host: '127.0.0.1' })

    const held = await startRequest(url, 'ada')
    await holding.until(1)
    const refused = await fetch(url, { headers: { 'x-user': 'ada' } })

    expect([held.res.headers.ratelimit, held.res.headers['ratelimit-policy']]).toEqual([
      '"rate";r=4;t=100, "slots";r=0;t=30',
      '"rate";q=5;w=500, "slots";q=1;qu="concurrent-requests"',
    ])
    expect([refused.status, refused.headers.get('ratelimit'), refused.headers.get('retry-after')]).toEqual([
      429,
      '"rate";r=3;t=100, "slots";r=0;t=30',
      '30',
    ])
    held.req.destroy()
    await store.until(() => store.count('release') === 1)
  })
})

describe('tollboothConcurrency options, checked at startup', () => {
  const limiter = concurrencyLimit({ name: 'options', max: 1, leaseMs: 1000 })

  /** Registers the plugin with `options` (and `routeConfig` on its route) and returns what `ready()` rejects with. */
  const startupError = (options: unknown, routeConfig?: unknown) =>
    fastifyStartupError(
      tollboothConcurrency,
      options,
      { method: 'GET', url: '/', configKey: 'tollboothConcurrency' },
      routeConfig,
    )

  it.each([
    [{ limitr: limiter }, 'tollboothConcurrency: unknown option "limitr" (did you mean "limiter"?)'],
    [
      { limiter: tokenBucket({ name: 'tb', capacity: 1, refillPerSecond: 1 }) },
      'tollboothConcurrency: "limiter" must be a concurrency limiter (concurrencyLimit)',
    ],
    [{ limiter, identify: 'x-user' }, 'tollboothConcurrency: "identify" must be a function'],
    [{ limiter, onLimited: 429 }, 'tollboothConcurrency: "onLimited" must be a function, got 429'],
    [{ limiter, ipv6Prefix: 200 }, 'tollboothConcurrency: "ipv6Prefix" must be'],
    ['limiter', 'tollboothConcurrency: "options" must be an object'],
  ])('plugin options %j are refused', async (options, message) => {
    const error = await startupError(options)
    expect(error.code).toBe(ErrorCodes.INVALID_OPTION)
    expect(error.message.startsWith(message)).toBe(true)
  })

  it.each([
    [
      { limiters: limiter },
      'tollboothConcurrency: unknown option "config.tollboothConcurrency.limiters" (did you mean "limiter"?)',
    ],
    [
      { limiter: {} },
      'tollboothConcurrency: "config.tollboothConcurrency.limiter" must be a concurrency limiter',
    ],
    [{ identify: 1 }, 'tollboothConcurrency: "config.tollboothConcurrency.identify" must be a function'],
    [{ ipv4Prefix: 40 }, 'tollboothConcurrency: "config.tollboothConcurrency.ipv4Prefix" must be'],
    [
      true,
      'tollboothConcurrency: "config.tollboothConcurrency" must be an object of options or false, got true',
    ],
  ])('route config %j is refused', async (routeConfig, message) => {
    const error = await startupError({ limiter }, routeConfig)
    expect(error.code).toBe(ErrorCodes.INVALID_OPTION)
    expect(error.message.startsWith(message)).toBe(true)
  })
})
