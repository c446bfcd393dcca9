/**
 * `loginGuard` end to end: real Express 5 and node:http servers on 127.0.0.1 (port 0), real clients (fetch, raw
 * sockets), on a MemoryStore, the test Redis and the test Redis Cluster (on a virtual clock, so every delay and
 * Retry-After is exact), and a private redis-server stopped under the guard. Nothing is mocked.
 */
import { randomUUID } from 'node:crypto'
import { once } from 'node:events'
import http, { type IncomingMessage, type ServerResponse } from 'node:http'
import net from 'node:net'
import express from 'express'
import { Redis } from 'ioredis'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { DecisionEvent } from '../../../src/core/hooks.js'
import { leakyBucket } from '../../../src/core/limiters/leakyBucket.js'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import { MemoryStore } from '../../../src/core/stores/memoryStore.js'
import { RedisStore } from '../../../src/core/stores/redisStore.js'
import type { Store } from '../../../src/core/stores/store.js'
import {
  type LoginGuard,
  type LoginGuardOptions,
  loginGuard,
  normalizeAccount,
} from '../../../src/http/loginGuard.js'
import { VirtualClock } from '../../helpers/contract.js'
import { listenOnLoopback } from '../../helpers/httpServer.js'
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
/**
 * The spellings the route's own account lookup takes for alice, written out here rather than derived with the
 * guard's normalizer: the guard must count these as one account for reasons of its own.
 */
const ALICE_SPELLINGS = new Set([ALICE, ' Alice@Example.COM ', 'ＡＬＩＣＥ＠ｅｘａｍｐｌｅ．ｃｏｍ\u3000'])

type LoginRequest = IncomingMessage & { body?: { email?: unknown; password?: unknown } }
type Framework = 'express' | 'node:http'

const cleanups: (() => Promise<void> | void)[] = []

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

// ---------------------------------------------------------------------------------------------------------------
// The login app: one account, the guard in front of the credential check.
// ---------------------------------------------------------------------------------------------------------------

interface LoginApp {
  readonly port: number
  /** Requests that reached the credential check (the route). */
  routeHits: number
}

/** The route behind the guard: looks the account up (only here), reports the outcome, answers 200 or 401. */
async function verify(
  guard: LoginGuard<LoginRequest>,
  req: LoginRequest,
  res: ServerResponse,
  app: LoginApp,
): Promise<void> {
  app.routeHits++
  const email = typeof req.body?.email === 'string' ? req.body.email : ''
  const known = ALICE_SPELLINGS.has(email)
  if (known && req.body?.password === ALICE_PASSWORD) {
    await guard.succeeded(req, email)
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}')
  } else {
    await guard.failed(req, email)
    res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"invalid credentials"}')
  }
}

async function listen(server: http.Server): Promise<number> {
  const listening = await listenOnLoopback(server)
  cleanups.push(listening.close)
  return listening.port
}

async function readJsonBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  return chunks.length === 0 ? undefined : JSON.parse(Buffer.concat(chunks).toString('utf8'))
}

async function startLoginApp(framework: Framework, guard: LoginGuard<LoginRequest>): Promise<LoginApp> {
  const app = { port: 0, routeHits: 0 }
  let server: http.Server
  if (framework === 'express') {
    const expressApp = express()
    expressApp.post('/login', express.json(), guard, (req, res) => verify(guard, req, res, app))
    server = http.createServer(expressApp)
  } else {
    server = http.createServer(async (req: LoginRequest, res) => {
      req.body = (await readJsonBody(req)) as LoginRequest['body']
      guard(req, res, (error) => {
        if (error === undefined) return void verify(guard, req, res, app)
        res.writeHead(500).end()
      })
    })
  }
  app.port = await listen(server)
  return app
}

/** A server answering `guard.check` as JSON, to read each attempt's delay. */
async function startCheckServer(guard: LoginGuard<LoginRequest>): Promise<number> {
  const server = http.createServer(async (req: LoginRequest, res) => {
    req.body = (await readJsonBody(req)) as LoginRequest['body']
    const answer = await guard.check(req)
    if ('allowed' in answer) res.writeHead(200).end(JSON.stringify({ delayMs: answer.delayMs }))
    else res.writeHead(answer.status, answer.headers).end(JSON.stringify(answer.body))
  })
  return listen(server)
}

interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly body: unknown
}

async function login(
  port: number,
  email: string | string[],
  password = 'wrong',
  forwardedFor?: string,
): Promise<Answer> {
  const response = await fetch(`http://${HOST}:${port}/login`, {
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

// ---------------------------------------------------------------------------------------------------------------
// Budgets
// ---------------------------------------------------------------------------------------------------------------

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
    // Fast by default: the middleware really waits out each delay.
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
  extra: Partial<LoginGuardOptions<LoginRequest>> = {},
): LoginGuard<LoginRequest> {
  return loginGuard<LoginRequest>({
    ...limiters(store, prefix, budgets),
    account: (req) => (typeof req.body?.email === 'string' ? req.body.email : undefined),
    ...extra,
  })
}

// ---------------------------------------------------------------------------------------------------------------

/**
 * A store of `kind` on a virtual clock for each test, with a limiter-name prefix of its own; after the test, no key
 * it holds may lack a TTL. (A key may expire while they are listed: the account queues drain in milliseconds of real
 * time, which Redis' TTLs run on.)
 */
function useStore(kind: StoreKind) {
  const ctx = {} as { fixture: StoreFixture; clock: VirtualClock; name: string }
  beforeEach(async () => {
    ctx.clock = new VirtualClock()
    ctx.fixture = await createStore(kind, ctx.clock.now)
    ctx.name = `login-${randomUUID().slice(0, 8)}`
  })
  afterEach(async () => {
    expect((await ctx.fixture.ttls()).filter((ttl) => ttl === -1)).toEqual([])
    await ctx.fixture.close()
  })
  return ctx
}

describe.each(storeKinds)('loginGuard on the %s store', (kind) => {
  const ctx = useStore(kind)

  describe.each(['express', 'node:http'] as const)('behind %s', (framework) => {
    it('refuses the 6th attempt from one address when perIp allows 5, before the route', async () => {
      const guard = guardOf(ctx.fixture.store, ctx.name, { perIp: { capacity: 5 } })
      const app = await startLoginApp(framework, guard)
      // A spray: a different account each time, so only the per-address budget can stop it.
      const statuses: number[] = []
      for (let i = 1; i <= 5; i++) statuses.push((await login(app.port, `user${i}@example.com`)).status)
      expect(statuses).toEqual([401, 401, 401, 401, 401])

      const sixth = await login(app.port, 'user6@example.com')
      expect(sixth.status).toBe(429)
      expect(sixth.headers.get('retry-after')).toBe('3600')
      expect(sixth.headers.get('content-type')).toBe('application/problem+json')
      expect(sixth.headers.get('ratelimit')).toBe(`"${ctx.name}-ip";r=0;t=3600`)
      expect(sixth.body).toEqual({
        type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
        title: 'Request cannot be satisfied as assigned quota has been exceeded',
        status: 429,
        'violated-policies': [`${ctx.name}-ip`],
        retryAfter: 3600,
      })
      expect(app.routeHits).toBe(5)
    })

    it('admits exactly the budget of 10 parallel attempts: each is counted at the door', async () => {
      const guard = guardOf(ctx.fixture.store, ctx.name, { perIp: { capacity: 5 } })
      const app = await startLoginApp(framework, guard)
      const answers = await Promise.all(
        Array.from({ length: 10 }, (_, i) => login(app.port, `user${i}@example.com`)),
      )
      const statuses = answers.map((answer) => answer.status).sort()
      expect(statuses).toEqual([401, 401, 401, 401, 401, 429, 429, 429, 429, 429])
      expect(app.routeHits).toBe(5)
    })

    it('counts IPv6 addresses rotating within one /56 as one address', async () => {
      const guard = guardOf(
        ctx.fixture.store,
        ctx.name,
        { perIp: { capacity: 5 } },
        { trustProxy: 'loopback' },
      )
      const app = await startLoginApp(framework, guard)
      const statuses: number[] = []
      // Six /64s of the /56 2001:db8:1::/56.
      for (let i = 1; i <= 6; i++) {
        statuses.push(
          (await login(app.port, `user${i}@example.com`, 'wrong', `2001:db8:1:${i}::${i}`)).status,
        )
      }
      expect(statuses).toEqual([401, 401, 401, 401, 401, 429])
      // The next /56 is another client.
      expect((await login(app.port, 'user7@example.com', 'wrong', '2001:db8:1:100::1')).status).toBe(401)
      expect(app.routeHits).toBe(6)
    })

    it('clears the (address, account) pair on success, and gives back the attempt per address', async () => {
      const guard = guardOf(ctx.fixture.store, ctx.name, {
        perIp: { capacity: 7 },
        perIpAndAccount: { capacity: 3 },
      })
      const app = await startLoginApp(framework, guard)
      const statuses: number[] = []
      statuses.push((await login(app.port, ALICE)).status)
      statuses.push((await login(app.port, ALICE)).status)
      statuses.push((await login(app.port, ALICE, ALICE_PASSWORD)).status)
      // Without the reset the pair would be spent (3 attempts): these three would not reach the route.
      for (let i = 0; i < 3; i++) statuses.push((await login(app.port, ALICE)).status)
      const refused = await login(app.port, ALICE)
      expect(statuses).toEqual([401, 401, 200, 401, 401, 401])
      expect(refused.status).toBe(429)
      expect(refused.body).toMatchObject({ 'violated-policies': [`${ctx.name}-pair`] })

      // Per address: 5 failures counted; the success and the pair's refusal were given back. 2 left of 7.
      expect((await login(app.port, 'bob@example.com')).status).toBe(401)
      expect((await login(app.port, 'carol@example.com')).status).toBe(401)
      const last = await login(app.port, 'dave@example.com')
      expect(last.status).toBe(429)
      expect(last.body).toMatchObject({ 'violated-policies': [`${ctx.name}-ip`] })
      expect(app.routeHits).toBe(8)
    })

    it('answers an existing and an unknown account byte for byte alike, after the same store calls', async () => {
      const events: DecisionEvent[] = []
      const guard = guardOf(ctx.fixture.store, ctx.name, {
        perIpAndAccount: { capacity: 2 },
        onDecision: (event) => events.push(event),
      })
      const app = await startLoginApp(framework, guard)
      const ghost = 'ghost@example.com'
      for (const email of [ALICE, ALICE, ghost, ghost])
        expect((await login(app.port, email)).status).toBe(401)
      expect(app.routeHits).toBe(4)

      /** The store calls one refused request makes, without the keys (which name the account). */
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
      // Per address spent then given back, the pair refused; the account's queue is never touched.
      expect(existing.calls).toEqual([
        { limiter: `${ctx.name}-ip`, op: 'consume', allowed: true, source: 'store', cost: 1 },
        { limiter: `${ctx.name}-pair`, op: 'consume', allowed: false, source: 'store', cost: 1 },
        { limiter: `${ctx.name}-ip`, op: 'refund', allowed: true, source: 'store', cost: 1 },
      ])
      expect(app.routeHits).toBe(4)
    })

    it('lets a client that hangs up during its delay never reach the route', async () => {
      let queued: (() => void) | undefined
      const guard = guardOf(ctx.fixture.store, ctx.name, {
        perAccount: { ratePerSecond: 20, maxQueue: 5 },
        onDecision: (event) => {
          if (event.limiter === `${ctx.name}-account` && event.op === 'consume') queued?.()
        },
      })
      const app = await startLoginApp(framework, guard)
      expect((await login(app.port, ALICE)).status).toBe(401)

      // The second attempt on the account waits 50 ms: hang up once it is queued.
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

      // The third waits 100 ms, behind the abandoned one: had that one gone on, it would have reached the route first.
      expect((await login(app.port, ALICE)).status).toBe(401)
      expect(app.routeHits).toBe(2)
    })

    it('counts variants of one account name as one account (trimmed, NFKC, lowercased)', async () => {
      const guard = guardOf(ctx.fixture.store, ctx.name, { perIpAndAccount: { capacity: 2 } })
      const app = await startLoginApp(framework, guard)
      expect((await login(app.port, ' Alice@Example.COM ')).status).toBe(401)
      // Full-width letters and at sign, with an ideographic space.
      expect((await login(app.port, 'ＡＬＩＣＥ＠ｅｘａｍｐｌｅ．ｃｏｍ\u3000')).status).toBe(401)
      const third = await login(app.port, ALICE)
      expect(third.status).toBe(429)
      expect(third.body).toMatchObject({ 'violated-policies': [`${ctx.name}-pair`] })
      expect(app.routeHits).toBe(2)
    })

    it('counts an account sent as a JSON array as the account it names (no way around its budgets)', async () => {
      // The account as the body has it, not checked for a string: as a route whose own check coerces it would.
      const guard = guardOf(
        ctx.fixture.store,
        ctx.name,
        { perIpAndAccount: { capacity: 2 } },
        { account: (req) => req.body?.email as string | undefined },
      )
      const app = await startLoginApp(framework, guard)
      expect((await login(app.port, ALICE)).status).toBe(401)
      expect((await login(app.port, [ALICE])).status).toBe(401)
      const third = await login(app.port, [ALICE])
      expect(third.status).toBe(429)
      expect(third.body).toMatchObject({ 'violated-policies': [`${ctx.name}-pair`] })
      expect(app.routeHits).toBe(2)
    })
  })

  it('slows one account down with a growing delay from any address, then refuses it once its queue is full', async () => {
    const guard = guardOf(
      ctx.fixture.store,
      ctx.name,
      { perAccount: { ratePerSecond: 1, maxQueue: 3 } },
      { trustProxy: 'loopback' },
    )
    const port = await startCheckServer(guard)
    const attempt = (i: number) => login(port, 'victim@example.com', 'wrong', `2001:db8:${i}::1`)
    const delays: unknown[] = []
    for (let i = 1; i <= 4; i++) delays.push((await attempt(i)).body)
    // One second per attempt queued.
    expect(delays).toEqual([{ delayMs: 0 }, { delayMs: 1000 }, { delayMs: 2000 }, { delayMs: 3000 }])
    // With 3 waiting, an attempt is refused until a turn frees (1 s), from any address: never "wait, then pass".
    for (const i of [5, 6]) {
      const refused = await attempt(i)
      expect(refused.status).toBe(429)
      expect(refused.headers.get('retry-after')).toBe('1')
      expect(refused.body).toMatchObject({ 'violated-policies': [`${ctx.name}-account`], retryAfter: 1 })
    }
    ctx.clock.advance(1000)
    expect((await attempt(7)).body).toEqual({ delayMs: 3000 })
    expect((await attempt(8)).status).toBe(429)
    // Another account is not slowed down.
    expect((await login(port, ALICE, 'wrong', '2001:db8:99::1')).body).toEqual({ delayMs: 0 })
  })

  it("gives a success's turn in the account's queue back: successes never queue, failures still do", async () => {
    const guard = guardOf(
      ctx.fixture.store,
      ctx.name,
      { perAccount: { ratePerSecond: 1, maxQueue: 3 } },
      { trustProxy: 'loopback' },
    )
    // Checks and settles at once (the virtual clock stands still: a delay is read, never waited out).
    const server = http.createServer(async (req: LoginRequest, res) => {
      req.body = (await readJsonBody(req)) as LoginRequest['body']
      const answer = await guard.check(req)
      if (!('allowed' in answer)) return void res.writeHead(answer.status).end('{}')
      const email = String(req.body?.email)
      if (ALICE_SPELLINGS.has(email) && req.body?.password === ALICE_PASSWORD)
        await guard.succeeded(req, email)
      else await guard.failed(req, email)
      res.writeHead(200).end(JSON.stringify({ delayMs: answer.delayMs }))
    })
    const port = await listen(server)
    const attempt = async (i: number, email: string, password: string) => {
      const answer = await login(port, email, password, `2001:db8:${i}::1`)
      return answer.status === 200 ? answer.body : answer.status
    }
    // Six successes in a row, from six addresses and in two spellings: without the refund the queue would fill
    // (0, 1000, 2000, 3000 ms, then 429).
    const successes: unknown[] = []
    for (let i = 1; i <= 6; i++)
      successes.push(await attempt(i, i % 2 ? ALICE : ' Alice@Example.COM ', ALICE_PASSWORD))
    expect(successes).toEqual(Array(6).fill({ delayMs: 0 }))
    // The queue is as empty as before the first: four failures take its four places, the fifth is refused.
    const failures: unknown[] = []
    for (let i = 7; i <= 11; i++) failures.push(await attempt(i, ALICE, 'wrong'))
    expect(failures).toEqual([{ delayMs: 0 }, { delayMs: 1000 }, { delayMs: 2000 }, { delayMs: 3000 }, 429])
  })

  it('counts a failure reported for a request it did not check', async () => {
    const guard = guardOf(ctx.fixture.store, ctx.name, { perIpAndAccount: { capacity: 2 } })
    const server = http.createServer(async (req: LoginRequest, res) => {
      req.body = (await readJsonBody(req)) as LoginRequest['body']
      if (req.url === '/second-factor') {
        await guard.failed(req, String(req.body?.email))
        res.writeHead(401).end('{}')
        return
      }
      const answer = await guard.check(req)
      res.writeHead('allowed' in answer ? 200 : answer.status).end('{}')
    })
    const port = await listen(server)
    const post = async (path: string) =>
      (
        await fetch(`http://${HOST}:${port}${path}`, {
          method: 'POST',
          body: JSON.stringify({ email: ALICE }),
        })
      ).status
    expect(await post('/second-factor')).toBe(401)
    expect(await post('/second-factor')).toBe(401)
    expect(await post('/login')).toBe(429)
  })
})

describe('loginGuard on a Redis that stops', () => {
  it('fails closed: an attempt while the store is down is refused before the route', async () => {
    const redis = await startRedis()
    cleanups.push(() => redis.stop())
    const client = new Redis(redis.url, limiterClientOptions)
    client.on('error', () => {})
    cleanups.push(() => client.disconnect())
    await whenReady(client)
    const store = new RedisStore({ client, timeoutMs: 200 })
    const guard = guardOf(store, 'login')
    const app = await startLoginApp('express', guard)
    expect((await login(app.port, ALICE)).status).toBe(401)

    await redis.stop()
    const refused = await login(app.port, ALICE)
    expect(refused.status).toBe(429)
    expect(refused.headers.get('retry-after')).toBe('1')
    expect(refused.body).toMatchObject({ 'violated-policies': ['login-ip'], retryAfter: 1 })
    // A correct password changes nothing: the credentials are never checked.
    expect((await login(app.port, ALICE, ALICE_PASSWORD)).status).toBe(429)
    expect(app.routeHits).toBe(1)
  })

  it('refuses limiters failing open on a remote store at startup, unless allowFailOpen', async () => {
    const redis = await startRedis()
    cleanups.push(() => redis.stop())
    const client = new Redis(redis.url, limiterClientOptions)
    client.on('error', () => {})
    cleanups.push(() => client.disconnect())
    await whenReady(client)
    const store = new RedisStore({ client, timeoutMs: 200 })
    const open = {
      perIp: tokenBucket({ name: 'ip', store, capacity: 5, refillPerSecond: HOURLY }),
      perIpAndAccount: tokenBucket({ name: 'pair', store, capacity: 5, refillPerSecond: HOURLY }),
      perAccount: leakyBucket({ name: 'account', store, ratePerSecond: 1, maxQueue: 3 }),
      account: (req: LoginRequest) => String(req.body?.email),
    }
    expect(() => loginGuard(open)).toThrow(
      expect.objectContaining({
        code: 'TOLLBOOTH_ERR_INVALID_OPTION',
        message: expect.stringContaining('loginGuard: "perIp" must be a limiter with failPolicy \'closed\''),
      }),
    )
    const guard = loginGuard<LoginRequest>({ ...open, allowFailOpen: true })
    const app = await startLoginApp('node:http', guard)
    await redis.stop()
    // Chosen, and so it is: every attempt reaches the credential check while Redis is down.
    expect((await login(app.port, ALICE)).status).toBe(401)
    expect((await login(app.port, ALICE, ALICE_PASSWORD)).status).toBe(200)
    expect(app.routeHits).toBe(2)
  })
})

describe('loginGuard options', () => {
  const store = new MemoryStore()
  const base = () => ({
    ...limiters(store, 'options'),
    account: (req: LoginRequest) => String(req.body?.email),
  })
  const invalid = (message: string) =>
    expect.objectContaining({
      code: 'TOLLBOOTH_ERR_INVALID_OPTION',
      message: expect.stringContaining(message),
    })

  it('refuses an unknown key with the closest name', () => {
    expect(() => loginGuard({ ...base(), perIP: base().perIp } as never)).toThrow(
      invalid('loginGuard: unknown option "perIP" (did you mean "perIp"?)'),
    )
  })

  it('refuses a limiter of the wrong kind, naming the option', () => {
    const { perIp, perAccount } = base()
    expect(() => loginGuard({ ...base(), perAccount: perIp as never })).toThrow(
      invalid('loginGuard: "perAccount" must be a leakyBucket'),
    )
    expect(() => loginGuard({ ...base(), perIp: perAccount })).toThrow(
      invalid('loginGuard: "perIp" must be a rate limiter that refuses'),
    )
    expect(() => loginGuard({ ...base(), perIpAndAccount: undefined as never })).toThrow(
      invalid('loginGuard: "perIpAndAccount" must be a rate limiter that refuses'),
    )
  })

  it('refuses two budgets sharing a name and a store', () => {
    const { perIp } = base()
    const twin = tokenBucket({ name: perIp.name, store, capacity: 5, refillPerSecond: 1 })
    expect(() => loginGuard({ ...base(), perIpAndAccount: twin })).toThrow(
      invalid('loginGuard: "perIpAndAccount" must be a limiter of its own'),
    )
  })

  it('refuses functions and flags of the wrong type', () => {
    expect(() => loginGuard({ ...base(), account: 'email' as never })).toThrow(
      invalid('loginGuard: "account" must be a function, got "email"'),
    )
    expect(() => loginGuard({ ...base(), normalize: true as never })).toThrow(
      invalid('loginGuard: "normalize" must be a function, got true'),
    )
    expect(() => loginGuard({ ...base(), allowFailOpen: 'yes' as never })).toThrow(
      invalid('loginGuard: "allowFailOpen" must be a boolean, got "yes"'),
    )
    expect(() => loginGuard({ ...base(), ipv6Prefix: 200 })).toThrow(invalid('"ipv6Prefix"'))
    expect(() => loginGuard(null as never)).toThrow(invalid('loginGuard: "options" must be an object'))
  })

  it('refuses trusted-device options it cannot use, naming the option and never the secret', () => {
    const perDevice = tokenBucket({ name: 'options-device', store, capacity: 5, refillPerSecond: HOURLY })
    const secret = 's'.repeat(32)
    const devices = (trustedDevices: unknown) => () =>
      loginGuard({ ...base(), trustedDevices: trustedDevices as never })
    expect(devices({ secret, perDevice, maxAge: 1 })).toThrow(
      invalid('loginGuard: unknown option "trustedDevices.maxAge" (did you mean "maxAgeMs"?)'),
    )
    expect(devices({ secret: 'short secret', perDevice })).toThrow(
      invalid(
        'loginGuard: "trustedDevices.secret" must be a string or Buffer of at least 32 bytes, got "12 characters"',
      ),
    )
    expect(devices({ secret: [], perDevice })).toThrow(invalid('"trustedDevices.secret" must be a secret'))
    expect(devices({ secret: [secret, Buffer.alloc(8)], perDevice })).toThrow(
      invalid('"trustedDevices.secret"'),
    )
    expect(devices({ secret })).toThrow(
      invalid('loginGuard: "trustedDevices.perDevice" must be a rate limiter that refuses'),
    )
    expect(devices({ secret, perDevice, maxAgeMs: 0 })).toThrow(
      invalid('"trustedDevices.maxAgeMs" must be a positive integer'),
    )
    expect(devices({ secret, perDevice, maxAgeMs: 401 * 86_400_000 })).toThrow(invalid('at most 400 days'))
    expect(devices({ secret, perDevice, cookieName: 'a b' })).toThrow(invalid('"trustedDevices.cookieName"'))
    expect(devices({ secret, perDevice, token: 'cookie' })).toThrow(
      invalid('"trustedDevices.token" must be a function'),
    )
    expect(devices('on')).toThrow(invalid('loginGuard: "trustedDevices" must be an object'))
    const twin = tokenBucket({ name: base().perIp.name, store, capacity: 5, refillPerSecond: 1 })
    expect(devices({ secret, perDevice: twin })).toThrow(
      invalid('"trustedDevices.perDevice" must be a limiter of its own'),
    )
  })

  it('refuses a device budget failing open on a remote store, as the others', async () => {
    const client = new Redis({ lazyConnect: true })
    cleanups.push(() => client.disconnect())
    const remote = new RedisStore({ client })
    const perDevice = tokenBucket({ name: 'device', store: remote, capacity: 5, refillPerSecond: HOURLY })
    expect(() => loginGuard({ ...base(), trustedDevices: { secret: 's'.repeat(32), perDevice } })).toThrow(
      invalid('loginGuard: "trustedDevices.perDevice" must be a limiter with failPolicy \'closed\''),
    )
  })

  it('normalizes account names by default', () => {
    expect(normalizeAccount(' Alice@Example.COM ')).toBe(ALICE)
    expect(normalizeAccount('ＡＬＩＣＥ＠ｅｘａｍｐｌｅ．ｃｏｍ\u3000')).toBe(ALICE)
    // Invisible and control characters many lookups ignore: each would otherwise be a fresh budget.
    for (const hidden of ['\u200b', '\u200d', '\u00ad', '\u2060', '\ufe0f', '\u0000', '\u180e']) {
      expect(normalizeAccount(`al${hidden}ice@example.com`)).toBe(ALICE)
    }
  })
})
