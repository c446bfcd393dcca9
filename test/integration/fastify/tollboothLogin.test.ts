/**
 * `tollboothLogin` (tollbooth/fastify) through real Fastify 5 servers on 127.0.0.1 (port 0) and real clients (fetch,
 * raw sockets), on a MemoryStore, the test Redis and the test Redis Cluster (on a virtual clock, so every delay and
 * Retry-After is exact), and a private redis-server stopped under the guard. The login route reads the body Fastify
 * parsed; the guard's `account` gets the Fastify request.
 */
import { randomUUID } from 'node:crypto'
import { once } from 'node:events'
import net from 'node:net'
import { performance } from 'node:perf_hooks'
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify'
import { Redis } from 'ioredis'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { DecisionEvent } from '../../../src/core/hooks.js'
import { leakyBucket } from '../../../src/core/limiters/leakyBucket.js'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import { MemoryStore } from '../../../src/core/stores/memoryStore.js'
import { RedisStore } from '../../../src/core/stores/redisStore.js'
import type { Store } from '../../../src/core/stores/store.js'
import {
  type TollboothLogin,
  type TollboothLoginOptions,
  tollboothLogin,
} from '../../../src/fastify/index.js'
import { VirtualClock } from '../../helpers/contract.js'
import { startRedis } from '../../helpers/redisServer.js'
import {
  createStore,
  limiterClientOptions,
  type StoreFixture,
  type StoreKind,
  storeKinds,
  whenReady,
} from '../../helpers/stores.js'

const HOST = '127.0.0.1'
/** Tokens that never come back within a test: a refusal's Retry-After is the hour one token takes. */
const HOURLY = 1 / 3600
const ALICE = 'alice@example.com'
const ALICE_PASSWORD = 'correct horse battery staple'
/** Spellings of alice's account, written out: the guard must count them as one account for reasons of its own. */
const ALICE_SPELLINGS = [
  ' Alice@Example.COM ',
  'ＡＬＩＣＥ＠ｅｘａｍｐｌｅ．ｃｏｍ\u3000',
  'al\u200bice@example.com',
]
/** What the handler's own lookup takes for alice (never the guard's normalizer, which is under test). */
const ALICE_ACCOUNT = new Set([ALICE, ...ALICE_SPELLINGS])

type LoginBody = { email?: unknown; password?: unknown } | undefined

const cleanups: (() => Promise<void> | void)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const emailOf = (request: FastifyRequest) => {
  const email = (request.body as LoginBody)?.email
  return typeof email === 'string' ? email : undefined
}

interface LoginApp {
  readonly port: number
  /** Requests that reached the credential check (the handler). */
  handled: number
}

/** `POST /login` behind the guard's preHandler: looks the account up (only here), reports the outcome. */
async function startLoginApp(login: TollboothLogin, routes: (app: FastifyInstance) => void = () => {}) {
  const app = Fastify({ logger: false })
  cleanups.push(() => app.close())
  const state: LoginApp = { port: 0, handled: 0 }
  app.post('/login', { preHandler: login.preHandler }, async (request, reply) => {
    state.handled++
    const email = emailOf(request) ?? ''
    const password = (request.body as LoginBody)?.password
    if (ALICE_ACCOUNT.has(email) && password === ALICE_PASSWORD) {
      await login.succeeded(request, email)
      return { ok: true }
    }
    await login.failed(request, email)
    return reply.code(401).send({ error: 'invalid credentials' })
  })
  routes(app)
  const url = await app.listen({ port: 0, host: HOST })
  return Object.assign(state, { port: Number(new URL(url).port) })
}

interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly body: unknown
}

async function post(
  port: number,
  email: string,
  password = 'wrong',
  forwardedFor?: string,
  path = '/login',
): Promise<Answer> {
  const response = await fetch(`http://${HOST}:${port}${path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor }),
    },
    body: JSON.stringify({ email, password }),
  })
  return { status: response.status, headers: response.headers, body: await response.json() }
}

/** One request on a raw socket, and the bytes of the whole response without its `Date` line. */
async function rawLogin(port: number, email: string): Promise<string> {
  const payload = JSON.stringify({ email, password: 'wrong' })
  const socket = net.connect(port, HOST)
  await once(socket, 'connect')
  socket.write(
    `POST /login HTTP/1.1\r\nHost: ${HOST}:${port}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${Buffer.byteLength(payload)}\r\nConnection: close\r\n\r\n${payload}`,
  )
  const chunks: Buffer[] = []
  for await (const chunk of socket) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
    .toString('latin1')
    .replace(/^Date: .*\r\n/im, '')
}

interface Budgets {
  perIp?: { capacity: number }
  perIpAndAccount?: { capacity: number }
  perAccount?: { ratePerSecond: number; maxQueue: number }
  onDecision?: (event: DecisionEvent) => void
}

/** The three limiters of a login guard on `store`, failing closed; generous where a test does not look. */
function limiters(store: Store, prefix: string, budgets: Budgets = {}) {
  const hooks = budgets.onDecision === undefined ? {} : { hooks: { onDecision: budgets.onDecision } }
  // No deny cache: it runs on real time, the stores here on a virtual clock.
  const common = { store, failPolicy: 'closed' as const, denyCache: false, ...hooks }
  return {
    perIp: tokenBucket({
      name: `${prefix}-ip`,
      ...common,
      capacity: budgets.perIp?.capacity ?? 100,
      refillPerSecond: HOURLY,
    }),
    perIpAndAccount: tokenBucket({
      name: `${prefix}-pair`,
      ...common,
      capacity: budgets.perIpAndAccount?.capacity ?? 100,
      refillPerSecond: HOURLY,
    }),
    // Fast by default: the preHandler really waits out each delay.
    perAccount: leakyBucket({
      name: `${prefix}-account`,
      ...common,
      ratePerSecond: budgets.perAccount?.ratePerSecond ?? 1000,
      maxQueue: budgets.perAccount?.maxQueue ?? 100,
    }),
  }
}

function guardOf(
  store: Store,
  prefix: string,
  budgets: Budgets = {},
  extra: Partial<TollboothLoginOptions> = {},
): TollboothLogin {
  return tollboothLogin({ ...limiters(store, prefix, budgets), account: emailOf, ...extra })
}

/** A store of `kind` on a virtual clock for each test, with a limiter-name prefix of its own. */
function useStore(kind: StoreKind) {
  const ctx = {} as { fixture: StoreFixture; clock: VirtualClock; name: string }
  beforeEach(async () => {
    ctx.clock = new VirtualClock()
    ctx.fixture = await createStore(kind, ctx.clock.now)
    ctx.name = `fastify-login-${randomUUID().slice(0, 8)}`
  })
  afterEach(async () => {
    expect((await ctx.fixture.ttls()).filter((ttl) => ttl === -1)).toEqual([])
    await ctx.fixture.close()
  })
  return ctx
}

describe.each(storeKinds)('tollboothLogin on the %s store', (kind) => {
  const ctx = useStore(kind)

  it('refuses the 6th attempt from one address when perIp allows 5, through the reply, before the handler', async () => {
    const app = await startLoginApp(guardOf(ctx.fixture.store, ctx.name, { perIp: { capacity: 5 } }))
    // A spray: a different account each time, so only the per-address budget can stop it.
    const statuses: number[] = []
    for (let i = 1; i <= 5; i++) statuses.push((await post(app.port, `user${i}@example.com`)).status)
    expect(statuses).toEqual([401, 401, 401, 401, 401])

    const sixth = await post(app.port, 'user6@example.com')
    expect(sixth.status).toBe(429)
    expect(sixth.headers.get('retry-after')).toBe('3600')
    expect(sixth.headers.get('content-type')).toBe('application/problem+json; charset=utf-8')
    expect(sixth.headers.get('ratelimit')).toBe(`"${ctx.name}-ip";r=0;t=3600`)
    expect(sixth.body).toEqual({
      type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
      title: 'Request cannot be satisfied as assigned quota has been exceeded',
      status: 429,
      'violated-policies': [`${ctx.name}-ip`],
      retryAfter: 3600,
    })
    expect(app.handled).toBe(5)
  })

  it('admits exactly the budget of 10 parallel attempts', async () => {
    const app = await startLoginApp(guardOf(ctx.fixture.store, ctx.name, { perIp: { capacity: 5 } }))
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) => post(app.port, `user${i}@example.com`)),
    )
    expect(answers.map((answer) => answer.status).sort()).toEqual([
      401, 401, 401, 401, 401, 429, 429, 429, 429, 429,
    ])
    expect(app.handled).toBe(5)
  })

  it('clears the (address, account) pair on success, and gives back the attempt per address', async () => {
    const app = await startLoginApp(
      guardOf(ctx.fixture.store, ctx.name, { perIp: { capacity: 7 }, perIpAndAccount: { capacity: 3 } }),
    )
    const statuses: number[] = []
    statuses.push((await post(app.port, ALICE)).status)
    statuses.push((await post(app.port, ALICE)).status)
    statuses.push((await post(app.port, ALICE, ALICE_PASSWORD)).status)
    // Without the reset the pair would be spent (3 attempts): these three would not reach the handler.
    for (let i = 0; i < 3; i++) statuses.push((await post(app.port, ALICE)).status)
    const refused = await post(app.port, ALICE)
    expect(statuses).toEqual([401, 401, 200, 401, 401, 401])
    expect(refused.status).toBe(429)
    expect(refused.body).toMatchObject({ 'violated-policies': [`${ctx.name}-pair`] })

    // Per address: 5 failures counted; the success and the pair's refusal were given back. 2 left of 7.
    expect((await post(app.port, 'bob@example.com')).status).toBe(401)
    expect((await post(app.port, 'carol@example.com')).status).toBe(401)
    const last = await post(app.port, 'dave@example.com')
    expect(last.status).toBe(429)
    expect(last.body).toMatchObject({ 'violated-policies': [`${ctx.name}-ip`] })
    expect(app.handled).toBe(8)
  })

  it('counts variants of one account name as one account (trimmed, NFKC, lowercased, invisible characters)', async () => {
    const app = await startLoginApp(
      guardOf(ctx.fixture.store, ctx.name, { perIpAndAccount: { capacity: 3 } }),
    )
    const statuses: number[] = []
    for (const spelling of ALICE_SPELLINGS) statuses.push((await post(app.port, spelling)).status)
    const fourth = await post(app.port, ALICE)
    expect(statuses).toEqual([401, 401, 401])
    expect(fourth.status).toBe(429)
    expect(fourth.body).toMatchObject({ 'violated-policies': [`${ctx.name}-pair`] })
    expect(app.handled).toBe(3)
  })

  it('a success in another spelling clears the pair the other spellings spent', async () => {
    const app = await startLoginApp(
      guardOf(ctx.fixture.store, ctx.name, { perIpAndAccount: { capacity: 3 } }),
    )
    const statuses: number[] = []
    statuses.push((await post(app.port, ALICE)).status)
    statuses.push((await post(app.port, ALICE_SPELLINGS[0] as string)).status)
    statuses.push((await post(app.port, ALICE_SPELLINGS[1] as string, ALICE_PASSWORD)).status)
    // Cleared: three more failures in any spelling reach the handler, the fourth is refused.
    for (const spelling of [ALICE, ...ALICE_SPELLINGS.slice(2), ALICE])
      statuses.push((await post(app.port, spelling)).status)
    const refused = await post(app.port, ALICE_SPELLINGS[0] as string)
    expect(statuses).toEqual([401, 401, 200, 401, 401, 401])
    expect(refused.status).toBe(429)
    expect(refused.body).toMatchObject({ 'violated-policies': [`${ctx.name}-pair`] })
    expect(app.handled).toBe(6)
  })

  it('answers an existing and an unknown account byte for byte alike, after the same store calls', async () => {
    const events: DecisionEvent[] = []
    const app = await startLoginApp(
      guardOf(ctx.fixture.store, ctx.name, {
        perIpAndAccount: { capacity: 2 },
        onDecision: (event) => events.push(event),
      }),
    )
    const ghost = 'ghost@example.com'
    for (const email of [ALICE, ALICE, ghost, ghost]) expect((await post(app.port, email)).status).toBe(401)
    expect(app.handled).toBe(4)

    const callsOf = async (email: string) => {
      events.length = 0
      const raw = await rawLogin(app.port, email)
      return {
        raw,
        calls: events.map(({ limiter, op, allowed, source, cost }) => ({
          limiter,
          op,
          allowed,
          source,
          cost,
        })),
      }
    }
    const existing = await callsOf(ALICE)
    const unknown = await callsOf(ghost)
    expect(existing.raw.startsWith('HTTP/1.1 429 Too Many Requests\r\n')).toBe(true)
    expect(unknown.raw).toBe(existing.raw)
    expect(unknown.calls).toEqual(existing.calls)
    expect(existing.calls).toEqual([
      { limiter: `${ctx.name}-ip`, op: 'consume', allowed: true, source: 'store', cost: 1 },
      { limiter: `${ctx.name}-pair`, op: 'consume', allowed: false, source: 'store', cost: 1 },
      { limiter: `${ctx.name}-ip`, op: 'refund', allowed: true, source: 'store', cost: 1 },
    ])
    expect(app.handled).toBe(4)
  })

  it('slows one account down with a growing delay from any address, then refuses it once its queue is full', async () => {
    const login = guardOf(
      ctx.fixture.store,
      ctx.name,
      { perAccount: { ratePerSecond: 1, maxQueue: 3 } },
      { trustProxy: 'loopback' },
    )
    const app = await startLoginApp(login, (fastify) => {
      // check() with the Fastify request: the delay each attempt gets, without waiting it out.
      fastify.post('/check', async (request, reply) => {
        const answer = await login.check(request)
        if ('allowed' in answer) return { delayMs: answer.delayMs }
        return reply.code(answer.status).headers(answer.headers).send(answer.body)
      })
    })
    const attempt = (i: number) => post(app.port, 'victim@example.com', 'wrong', `2001:db8:${i}::1`, '/check')
    const delays: unknown[] = []
    for (let i = 1; i <= 4; i++) delays.push((await attempt(i)).body)
    // One second per attempt queued.
    expect(delays).toEqual([{ delayMs: 0 }, { delayMs: 1000 }, { delayMs: 2000 }, { delayMs: 3000 }])
    // With 3 waiting, an attempt is refused until a turn frees (1 s), from any address.
    const refused = await Promise.all([attempt(5), attempt(6)])
    expect(refused.map(({ status, headers }) => [status, headers.get('retry-after')])).toEqual([
      [429, '1'],
      [429, '1'],
    ])
    // Another account is not slowed down.
    expect((await post(app.port, ALICE, 'wrong', '2001:db8:99::1', '/check')).body).toEqual({ delayMs: 0 })
  })

  it('the preHandler waits out the delay before the handler; a client leaving meanwhile never reaches it', async () => {
    let queued: (() => void) | undefined
    const app = await startLoginApp(
      guardOf(ctx.fixture.store, ctx.name, {
        perAccount: { ratePerSecond: 10, maxQueue: 5 },
        onDecision: (event) => {
          if (event.limiter === `${ctx.name}-account` && event.op === 'consume') queued?.()
        },
      }),
    )
    expect((await post(app.port, ALICE)).status).toBe(401)

    // The second attempt on the account waits 100 ms: hang up once it is queued.
    const inQueue = new Promise<void>((resolve) => {
      queued = resolve
    })
    const payload = JSON.stringify({ email: ALICE, password: ALICE_PASSWORD })
    const socket = net.connect(app.port, HOST)
    await once(socket, 'connect')
    socket.write(
      `POST /login HTTP/1.1\r\nHost: ${HOST}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${payload.length}\r\n\r\n${payload}`,
    )
    await inQueue
    queued = undefined
    socket.destroy()

    // The third waits 200 ms (the virtual clock stands still), behind the abandoned one.
    const started = performance.now()
    expect((await post(app.port, ALICE)).status).toBe(401)
    expect(performance.now() - started).toBeGreaterThanOrEqual(199)
    expect(app.handled).toBe(2)
  })
})

describe('tollboothLogin on a Redis that stops', () => {
  it('fails closed: an attempt while the store is down is refused before the handler', async () => {
    const redis = await startRedis()
    cleanups.push(() => redis.stop())
    const client = new Redis(redis.url, limiterClientOptions)
    client.on('error', () => {})
    cleanups.push(() => client.disconnect())
    await whenReady(client)
    const store = new RedisStore({ client, timeoutMs: 200 })
    const app = await startLoginApp(guardOf(store, 'login'))
    expect((await post(app.port, ALICE)).status).toBe(401)

    await redis.stop()
    const refused = await post(app.port, ALICE)
    expect(refused.status).toBe(429)
    expect(refused.headers.get('retry-after')).toBe('1')
    expect(refused.body).toMatchObject({ 'violated-policies': ['login-ip'], retryAfter: 1 })
    expect((await post(app.port, ALICE, ALICE_PASSWORD)).status).toBe(429)
    expect(app.handled).toBe(1)
  })
})

describe('tollboothLogin options', () => {
  const store = new MemoryStore()
  const base = () => ({ ...limiters(store, 'options'), account: emailOf })
  const invalid = (message: string) =>
    expect.objectContaining({
      code: 'TOLLBOOTH_ERR_INVALID_OPTION',
      message: expect.stringContaining(message),
    })

  it('refuses unknown, mistyped and inconsistent options, naming this guard and the option', () => {
    expect(() => tollboothLogin({ ...base(), perIP: base().perIp } as never)).toThrow(
      invalid('tollboothLogin: unknown option "perIP" (did you mean "perIp"?)'),
    )
    expect(() => tollboothLogin({ ...base(), perAccount: base().perIp as never })).toThrow(
      invalid('tollboothLogin: "perAccount" must be a leakyBucket'),
    )
    expect(() => tollboothLogin({ ...base(), account: 'email' as never })).toThrow(
      invalid('tollboothLogin: "account" must be a function, got "email"'),
    )
    expect(() => tollboothLogin({ ...base(), identify: 'x-user' as never })).toThrow(
      invalid('tollboothLogin: "identify" must be a function'),
    )
    expect(() => tollboothLogin({ ...base(), ipv6Prefix: 200 })).toThrow(
      invalid('tollboothLogin: "ipv6Prefix"'),
    )
    expect(() => tollboothLogin(null as never)).toThrow(
      invalid('tollboothLogin: "options" must be an object'),
    )
  })
})
