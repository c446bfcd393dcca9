/**
 * What `tollboothRateLimit` (tollbooth/fastify) does on Fastify 5 beyond the cases every server runs
 * (test/integration/httpGuards/rateLimit.test.ts): route `config.tollbooth` (cost, own limiter, `false`) on memory,
 * Redis and the cluster, the Fastify request in every callback, errors reaching Fastify's error handlers, custom
 * refusals through the reply, the hook stage, and option validation at startup.
 */
import { randomUUID } from 'node:crypto'
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { ErrorCodes } from '../../../src/core/errors.js'
import { concurrencyLimit } from '../../../src/core/limiters/concurrencyLimit.js'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import type { RateLimiter } from '../../../src/core/rateLimiter.js'
import { MemoryStore } from '../../../src/core/stores/memoryStore.js'
import type { Store } from '../../../src/core/stores/store.js'
import { type TollboothFastifyOptions, tollboothRateLimit } from '../../../src/fastify/index.js'
import { fastifyStartupError } from '../../helpers/fastifyStartup.js'
import { createStore, type StoreFixture, storeKinds } from '../../helpers/stores.js'

const apps: FastifyInstance[] = []
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()))
})

/** A Fastify app, closed after the test. */
function fastify(): FastifyInstance {
  const app = Fastify({ logger: false })
  apps.push(app)
  return app
}

/** `capacity` requests, then one more every 100 s: within a test, `t` and `Retry-After` are whole hundreds. */
function slowBucket(capacity: number, store: Store = new MemoryStore(), name = uniqueName()): RateLimiter {
  return tokenBucket({ name, store, capacity, refillPerSecond: 0.01 })
}

function uniqueName(): string {
  return `fastify-${randomUUID().slice(0, 8)}`
}

/** An app limited by the plugin, with `GET /` counting the requests its handler saw; listening on 127.0.0.1. */
async function limitedApp(
  options: TollboothFastifyOptions,
  routes: (app: FastifyInstance) => void = () => {},
): Promise<{ url: string; app: FastifyInstance; handled: () => number }> {
  const app = fastify()
  let handled = 0
  await app.register(tollboothRateLimit, options)
  app.get('/', async () => {
    handled++
    return { ok: true }
  })
  routes(app)
  const url = await app.listen({ port: 0, host: '127.0.0.1' })
  return { url, app, handled: () => handled }
}

interface Answer {
  status: number
  headers: Record<string, string>
  body: unknown
}

async function get(url: string, headers: Record<string, string> = {}): Promise<Answer> {
  const response = await fetch(url, { headers })
  const text = await response.text()
  return {
    status: response.status,
    headers: Object.fromEntries(response.headers),
    body: text === '' ? undefined : JSON.parse(text),
  }
}

describe.each(storeKinds)('tollboothRateLimit on a %s store', (kind) => {
  let fixture: StoreFixture
  beforeAll(async () => {
    fixture = await createStore(kind)
  })
  afterAll(async () => {
    await fixture.close()
  })

  it('route config: a cost per route, a route with its own budget, and a route left unlimited', async () => {
    const shared = uniqueName()
    const own = slowBucket(1, fixture.store)
    let free = 0
    const { url } = await limitedApp({ limiter: slowBucket(5, fixture.store, shared) }, (app) => {
      app.get('/heavy', { config: { tollbooth: { cost: 2 } } }, async () => ({ heavy: true }))
      app.get('/own', { config: { tollbooth: { limiter: own } } }, async () => ({ own: true }))
      app.get('/free', { config: { tollbooth: false } }, async () => {
        free++
        return { free: true }
      })
    })

    const heavy = [await get(`${url}/heavy`), await get(`${url}/heavy`), await get(`${url}/heavy`)]
    expect(heavy.map((a) => [a.status, a.headers.ratelimit])).toEqual([
      [200, `"${shared}";r=3;t=100`],
      [200, `"${shared}";r=1;t=100`],
      // 2 more than the 1 left: refused, and nothing spent.
      [429, `"${shared}";r=1;t=100`],
    ])
    const plain = [await get(url), await get(url)]
    expect(plain.map((a) => [a.status, a.headers.ratelimit])).toEqual([
      [200, `"${shared}";r=0;t=100`],
      [429, `"${shared}";r=0;t=100`],
    ])
    const ownAnswers = [await get(`${url}/own`), await get(`${url}/own`)]
    expect(ownAnswers.map((a) => [a.status, a.headers.ratelimit])).toEqual([
      [200, `"${own.name}";r=0;t=100`],
      [429, `"${own.name}";r=0;t=100`],
    ])
    const freeAnswers = [await get(`${url}/free`), await get(`${url}/free`), await get(`${url}/free`)]
    expect(freeAnswers.map((a) => [a.status, a.headers.ratelimit, a.body])).toEqual(
      Array.from({ length: 3 }, () => [200, undefined, { free: true }]),
    )
    expect(free).toBe(3)
  })
})

describe('tollboothRateLimit callbacks and answers', () => {
  it('identify, cost, skip and limiter get the Fastify request; a per-request limiter is honoured', async () => {
    const seen = new Set<string>()
    const note = (what: string) => (request: FastifyRequest) => {
      if (request.routeOptions.url === '/' && typeof request.id === 'string') seen.add(what)
    }
    const gold = slowBucket(2)
    const basic = slowBucket(1)
    const { url } = await limitedApp({
      limiter: (request) => {
        note('limiter')(request)
        return request.headers['x-plan'] === 'gold' ? gold : basic
      },
      identify: (request) => {
        note('identify')(request)
        return String(request.headers['x-user'])
      },
      cost: (request) => {
        note('cost')(request)
        return 1
      },
      skip: (request) => {
        note('skip')(request)
        return false
      },
    })

    const golden = [1, 2, 3].map(() => ({ 'x-plan': 'gold', 'x-user': 'ada' }))
    const statuses: number[] = []
    for (const headers of golden) statuses.push((await get(url, headers)).status)
    statuses.push((await get(url, { 'x-user': 'ada' })).status, (await get(url, { 'x-user': 'bob' })).status)
    statuses.push((await get(url, { 'x-user': 'bob' })).status)

    expect(statuses).toEqual([200, 200, 429, 200, 200, 429])
    expect([...seen].sort()).toEqual(['cost', 'identify', 'limiter', 'skip'])
  })

  it("what identify throws reaches Fastify's error handler, and the handler never runs", async () => {
    const errors: unknown[] = []
    const app = fastify()
    app.setErrorHandler((error, _request, reply) => {
      errors.push(error)
      void reply.code(401).send({ error: (error as Error).message })
    })
    let handled = 0
    await app.register(tollboothRateLimit, {
      limiter: slowBucket(10),
      identify: (request) => {
        const user = request.headers['x-user']
        if (typeof user !== 'string') throw new Error('who are you?')
        return user
      },
    })
    app.get('/', async () => {
      handled++
      return { ok: true }
    })
    const url = await app.listen({ port: 0, host: '127.0.0.1' })

    const anonymous = await get(url)
    const known = await get(url, { 'x-user': 'ada' })

    expect([anonymous.status, anonymous.body]).toEqual([401, { error: 'who are you?' }])
    expect(errors).toHaveLength(1)
    expect(known.status).toBe(200)
    expect(handled).toBe(1)
  })

  it('an async identify that rejects, and an invalid cost, go to the default error handler (500)', async () => {
    const { url, handled } = await limitedApp(
      { limiter: slowBucket(10), identify: async () => 'ada' },
      (app) => {
        app.get(
          '/broken',
          { config: { tollbooth: { identify: async () => Promise.reject(new Error('down')) } } },
          async () => ({}),
        )
        app.get('/priceless', { config: { tollbooth: { cost: () => Number.NaN } } }, async () => ({}))
      },
    )

    const broken = await get(`${url}/broken`)
    const priceless = await get(`${url}/priceless`)

    expect([broken.status, (broken.body as { message: string }).message]).toEqual([500, 'down'])
    expect(priceless.status).toBe(500)
    expect((priceless.body as { code: string }).code).toBe(ErrorCodes.INVALID_ARGUMENT)
    expect(handled()).toBe(0)
  })

  it('onLimited answers through the reply; one that sends nothing leaves the default answer', async () => {
    const name = uniqueName()
    const quiet: string[] = []
    const { url, handled } = await limitedApp(
      {
        limiter: slowBucket(1, new MemoryStore(), name),
        onLimited: (_request, reply, refusal) => {
          void reply
            .code(503)
            .headers(refusal.headers)
            .send({ slowDown: refusal.decision.retryAfterMs > 0 })
        },
      },
      (app) => {
        app.get(
          '/quiet',
          {
            config: {
              tollbooth: {
                limiter: slowBucket(1),
                onLimited: async (request) => {
                  quiet.push(request.url)
                },
              },
            },
          },
          async () => ({}),
        )
      },
    )

    await get(url)
    const custom = await get(url)
    await get(`${url}/quiet`)
    const fallback = await get(`${url}/quiet`)

    expect([custom.status, custom.body, custom.headers['retry-after']]).toEqual([
      503,
      { slowDown: true },
      '100',
    ])
    expect([fallback.status, (fallback.body as { status: number }).status]).toEqual([429, 429])
    expect(quiet).toEqual(['/quiet'])
    expect(handled()).toBe(1)
  })

  it("hook: 'preHandler' lets identify read what an app-level preHandler set", async () => {
    const app = fastify()
    app.decorateRequest('account', '')
    app.addHook('preHandler', async (request) => {
      ;(request as FastifyRequest & { account: string }).account =
        `acct-${request.headers['x-token'] ?? 'none'}`
    })
    await app.register(tollboothRateLimit, {
      limiter: slowBucket(1),
      hook: 'preHandler',
      identify: (request) => (request as FastifyRequest & { account: string }).account,
    })
    app.get('/', async () => ({ ok: true }))
    const url = await app.listen({ port: 0, host: '127.0.0.1' })

    const statuses = []
    for (const token of ['a', 'a', 'b']) statuses.push((await get(url, { 'x-token': token })).status)

    expect(statuses).toEqual([200, 429, 200])
  })
})

describe('tollboothRateLimit options, checked at startup', () => {
  /** Registers the plugin with `options` (and `routeConfig` on its route) and returns what `ready()` rejects with. */
  const startupError = (options: unknown, routeConfig?: unknown) =>
    fastifyStartupError(
      tollboothRateLimit,
      options,
      { method: 'GET', url: '/', configKey: 'tollbooth' },
      routeConfig,
    )

  const limiter = slowBucket(5)

  it('a misspelt route config key of tollbooth is refused, not ignored (the route would keep the defaults)', async () => {
    for (const [key, meant] of [
      ['tollBooth', 'tollbooth'],
      ['tollboth', 'tollbooth'],
      ['tollboothUploads', 'tollboothUpload'],
      ['tollboothConcurency', 'tollboothConcurrency'],
    ]) {
      const app = fastify()
      const error = await (async () => {
        await app.register(tollboothRateLimit, { limiter })
        await app.register(async (scope) => {
          scope.get('/health', { config: { [key as string]: false } }, async () => 'ok')
        })
        await app.ready()
      })().then(
        () => undefined,
        (rejection: unknown) => rejection as { code: string; message: string },
      )
      expect(error).toMatchObject({
        code: ErrorCodes.INVALID_OPTION,
        message: `tollboothRateLimit: "config.${key}" must be spelled "config.${meant}" (a misspelt key is ignored), got false`,
      })
    }
  })

  it.each([
    [{ limitr: limiter }, 'tollboothRateLimit: unknown option "limitr" (did you mean "limiter"?)'],
    [{ limiter: 'api' }, 'tollboothRateLimit: "limiter" must be a rate limiter'],
    [
      { limiter: concurrencyLimit({ name: 'c', max: 1, leaseMs: 1000 }) },
      'tollboothRateLimit: "limiter" must be a rate limiter (a concurrencyLimit',
    ],
    [
      { limiter, cost: 0 },
      'tollboothRateLimit: "cost" must be a positive finite number or a function of the request, got 0',
    ],
    [{ limiter, identify: 'x-user' }, 'tollboothRateLimit: "identify" must be a function'],
    [{ limiter, skip: true }, 'tollboothRateLimit: "skip" must be a function'],
    [
      { limiter, hook: 'onSend' },
      `tollboothRateLimit: "hook" must be one of 'onRequest', 'preValidation', 'preHandler', got "onSend"`,
    ],
    [{ limiter, onLimited: 429 }, 'tollboothRateLimit: "onLimited" must be a function, got 429'],
    [
      { limiter, refundWhen: 'failed' },
      'tollboothRateLimit: "refundWhen" must be a function (request, reply) => boolean',
    ],
    [{ limiter, ipv6Prefix: 200 }, 'tollboothRateLimit: "ipv6Prefix" must be'],
    ['limiter', 'tollboothRateLimit: "options" must be an object'],
  ])('plugin options %j are refused', async (options, message) => {
    const error = await startupError(options)
    expect(error.code).toBe(ErrorCodes.INVALID_OPTION)
    expect(error.message.startsWith(message)).toBe(true)
  })

  it.each([
    [{ costs: 2 }, 'tollboothRateLimit: unknown option "config.tollbooth.costs" (did you mean "cost"?)'],
    [
      { cost: -1 },
      'tollboothRateLimit: "config.tollbooth.cost" must be a positive finite number or a function of the request, got -1',
    ],
    [{ limiter: {} }, 'tollboothRateLimit: "config.tollbooth.limiter" must be a rate limiter'],
    [{ identify: 1 }, 'tollboothRateLimit: "config.tollbooth.identify" must be a function'],
    [{ hook: 'onResponse' }, 'tollboothRateLimit: "config.tollbooth.hook" must be one of'],
    [true, 'tollboothRateLimit: "config.tollbooth" must be an object of options or false, got true'],
  ])('route config %j is refused', async (routeConfig, message) => {
    const error = await startupError({ limiter }, routeConfig)
    expect(error.code).toBe(ErrorCodes.INVALID_OPTION)
    expect(error.message.startsWith(message)).toBe(true)
  })

  // null is a value, never "use the default": a null hook must not quietly become 'onRequest'.
  it.each([
    'identify',
    'trustProxy',
    'ipv6Prefix',
    'ipv4Prefix',
    'cost',
    'skip',
    'onLimited',
    'hook',
    'refundWhen',
  ])('%s: null in the plugin options or a route config is refused, naming it', async (option) => {
    const inPlugin = await startupError({ limiter, [option]: null })
    expect(inPlugin.code).toBe(ErrorCodes.INVALID_OPTION)
    expect(inPlugin.message).toContain(`"${option}"`)
    const inRoute = await startupError({ limiter }, { [option]: null })
    expect(inRoute.code).toBe(ErrorCodes.INVALID_OPTION)
    expect(inRoute.message).toContain(`"config.tollbooth.${option}"`)
  })

  it('limiter: null is refused', async () => {
    const error = await startupError({ limiter: null })
    expect(error.code).toBe(ErrorCodes.INVALID_OPTION)
    expect(error.message.startsWith('tollboothRateLimit: "limiter" must be a rate limiter')).toBe(true)
  })
})
