/**
 * `tollboothRateLimit` (tollbooth/fastify) through real Fastify 5 servers on a loopback port and real `fetch`
 * requests: exact admissions and headers on memory, Redis and the cluster (a budget shared by two servers), route
 * `config.tollbooth` (cost, own limiter, `false`), skip, custom refusals, the hook stage, errors of `identify`
 * reaching Fastify's error handler, and option validation at startup.
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
import { HangUpTraffic } from '../../helpers/rawHttp.js'
import { createStore, type StoreFixture, storeKinds } from '../../helpers/stores.js'

const QUOTA_EXCEEDED = {
  type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
  title: 'Request cannot be satisfied as assigned quota has been exceeded',
  status: 429,
}

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

/** The rate-limit fields of an answer (and its content type), nothing else. */
function limitFields(answer: Answer): Record<string, string> {
  const picked: Record<string, string> = {}
  for (const name of ['ratelimit-policy', 'ratelimit', 'retry-after', 'content-type']) {
    const value = answer.headers[name]
    if (value !== undefined) picked[name] = value
  }
  return picked
}

describe.each(storeKinds)('tollboothRateLimit on a %s store', (kind) => {
  let fixture: StoreFixture
  beforeAll(async () => {
    fixture = await createStore(kind)
  })
  afterAll(async () => {
    await fixture.close()
  })

  it('admits exactly the budget with RateLimit fields, and refuses the rest with 429 through the reply', async () => {
    const name = uniqueName()
    const { url, handled } = await limitedApp({ limiter: slowBucket(3, fixture.store, name) })

    const answers: Answer[] = []
    for (let i = 0; i < 5; i++) answers.push(await get(url))

    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 429, 429])
    expect(handled()).toBe(3)
    const json = 'application/json; charset=utf-8'
    const policy = `"${name}";q=3;w=300`
    // One token back every 100 s: the next one is 100 s away, however many are spent.
    expect(answers.map(limitFields)).toEqual([
      { 'ratelimit-policy': policy, ratelimit: `"${name}";r=2;t=100`, 'content-type': json },
      { 'ratelimit-policy': policy, ratelimit: `"${name}";r=1;t=100`, 'content-type': json },
      { 'ratelimit-policy': policy, ratelimit: `"${name}";r=0;t=100`, 'content-type': json },
      ...[3, 4].map(() => ({
        'ratelimit-policy': policy,
        ratelimit: `"${name}";r=0;t=100`,
        'retry-after': '100',
        'content-type': 'application/problem+json; charset=utf-8',
      })),
    ])
    expect(answers[0]?.body).toEqual({ ok: true })
    expect(answers[3]?.body).toEqual({ ...QUOTA_EXCEEDED, 'violated-policies': [name], retryAfter: 100 })
  })

  it('two Fastify servers on one store share one budget: 12 parallel requests, exactly 5 admitted', async () => {
    const name = uniqueName()
    // Two limiters of one name on one store: two processes' view of the same budget.
    const first = await limitedApp({ limiter: slowBucket(5, fixture.store, name) })
    const second = await limitedApp({ limiter: slowBucket(5, fixture.store, name) })

    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) => get(i % 2 === 0 ? first.url : second.url)),
    )

    expect(answers.filter((a) => a.status === 200)).toHaveLength(5)
    expect(answers.filter((a) => a.status === 429)).toHaveLength(7)
    expect(first.handled() + second.handled()).toBe(5)
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
  it('refundWhen counting only failures: successes cost nothing, then the budget of 2 holds 2 failures', async () => {
    let refunds = 0
    let refunded: () => void = () => {}
    const limiter = tokenBucket({
      name: uniqueName(),
      capacity: 2,
      refillPerSecond: 0.01,
      hooks: {
        onDecision: (event) => {
          if (event.op !== 'refund') return
          refunds++
          refunded()
        },
      },
    })
    const { url } = await limitedApp(
      { limiter, refundWhen: (_request, reply) => reply.statusCode < 400 },
      (app) => {
        app.get('/wrong', async (_request, reply) => reply.code(401).send({ error: 'invalid' }))
      },
    )
    for (let i = 1; i <= 5; i++) {
      const counted = new Promise<void>((resolve) => {
        refunded = resolve
      })
      expect((await get(url)).status).toBe(200)
      await counted
    }
    const failures = [await get(`${url}/wrong`), await get(`${url}/wrong`), await get(`${url}/wrong`)]
    expect(failures.map(({ status }) => status)).toEqual([401, 401, 429])
    expect(refunds).toBe(5)
  })

  it('refundWhen with clients hanging up while the handler works (status still 200): a budget of 5 runs it 5 times in 50 attempts', async () => {
    let refunds = 0
    let asked = 0
    const limiter = tokenBucket({
      name: uniqueName(),
      capacity: 5,
      refillPerSecond: 0.0001,
      hooks: { onDecision: (event) => void (event.op === 'refund' && refunds++) },
    })
    const traffic = new HangUpTraffic()
    const { url } = await limitedApp(
      {
        limiter,
        identify: () => 'one',
        refundWhen: (_request, reply) => {
          asked++
          return reply.statusCode < 400
        },
      },
      (app) => {
        app.get('/login', async (_request, reply) => {
          await traffic.routeHas(reply.raw)
          return reply.code(401).send({ error: 'invalid credentials' })
        })
      },
    )
    const answered = await traffic.send(Number(new URL(url).port), '/login', 50)
    expect(traffic.reached).toBe(5)
    expect(answered).toEqual(Array(45).fill(429))
    expect(refunds).toBe(0)
    expect(asked).toBe(0)
    expect((await get(`${url}/login`)).status).toBe(429)
  })

  it('skip: a skipped request spends nothing and carries no RateLimit fields', async () => {
    const name = uniqueName()
    const { url, handled } = await limitedApp({
      limiter: slowBucket(1, new MemoryStore(), name),
      skip: (request) => request.headers['x-health'] === 'yes',
    })

    const health = [await get(url, { 'x-health': 'yes' }), await get(url, { 'x-health': 'yes' })]
    const counted = [await get(url), await get(url)]

    expect(health.map((a) => [a.status, a.headers.ratelimit])).toEqual([
      [200, undefined],
      [200, undefined],
    ])
    expect(counted.map((a) => [a.status, a.headers.ratelimit])).toEqual([
      [200, `"${name}";r=0;t=100`],
      [429, `"${name}";r=0;t=100`],
    ])
    expect(handled()).toBe(3)
  })

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

  it('a cost no budget can ever hold is refused with 400 and no Retry-After', async () => {
    const name = uniqueName()
    const { url, handled } = await limitedApp({ limiter: slowBucket(5, new MemoryStore(), name), cost: 6 })

    const answer = await get(url)

    expect(answer.status).toBe(400)
    expect(answer.headers['retry-after']).toBeUndefined()
    // Fastify gives JSON media types its default charset.
    expect(answer.headers['content-type']).toBe('application/problem+json; charset=utf-8')
    expect(answer.body).toEqual({
      type: 'about:blank',
      title: 'Request exceeds what the quota can ever admit',
      status: 400,
    })
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
  /** Registers the plugin with `options` (and `route` config on `GET /`) and returns what `ready()` rejects with. */
  async function startupError(
    options: unknown,
    routeConfig?: unknown,
  ): Promise<{ code: string; message: string }> {
    const app = fastify()
    const start = async () => {
      await app.register(tollboothRateLimit, options as TollboothFastifyOptions)
      app.get('/', { config: { tollbooth: routeConfig as false } }, async () => ({}))
      await app.ready()
    }
    const error = await start().then(
      () => undefined,
      (rejection: unknown) => rejection,
    )
    expect(error).toBeInstanceOf(Error)
    return { code: (error as { code: string }).code, message: (error as Error).message }
  }

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
    // The address options are checked by clientIp, which names them as its own.
    expect(inRoute.message).toContain(
      option === 'trustProxy' ? '"trustProxy"' : `"config.tollbooth.${option}"`,
    )
  })

  it('limiter: null is refused', async () => {
    const error = await startupError({ limiter: null })
    expect(error.code).toBe(ErrorCodes.INVALID_OPTION)
    expect(error.message.startsWith('tollboothRateLimit: "limiter" must be a rate limiter')).toBe(true)
  })
})
