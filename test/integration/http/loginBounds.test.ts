/**
 * The login guard's bounds, measured with an attacker's traffic through real Express 5 (`loginGuard` after
 * `express.json()`) and Fastify 5 (`tollboothLogin`'s preHandler) servers on 127.0.0.1, clients sending over real
 * sockets with a distinct `X-Forwarded-For` each (`trustProxy: 'loopback'`):
 * - guesses at one account from 1,000 addresses at once reach the route no faster than the account's budget,
 *   while the owner's trusted device logs in and an untrusted new device is refused;
 * - device tokens forged, altered, expired, of another account or signed with another key count as no token, with
 *   answers byte for byte alike; a stolen token replayed from many addresses buys its device's budget and no more;
 * - spellings of one account, and 256 /64s of one /56, share one budget; names that cannot be keys are counted.
 *
 * Exact counts run on a MemoryStore on a virtual clock (frozen: no budget refills during a test, while the middleware
 * really waits out each delay); one test per server runs on the real clock and bounds what passed by the time taken.
 */
import { once } from 'node:events'
import http from 'node:http'
import net from 'node:net'
import express from 'express'
import Fastify, { type FastifyRequest } from 'fastify'
import { afterEach, describe, expect, it } from 'vitest'
import type { DecisionEvent } from '../../../src/core/hooks.js'
import { leakyBucket } from '../../../src/core/limiters/leakyBucket.js'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import { MemoryStore } from '../../../src/core/stores/memoryStore.js'
import { tollboothLogin } from '../../../src/fastify/index.js'
import { type LoginGuardOptions, loginGuard } from '../../../src/http/loginGuard.js'
import { VirtualClock } from '../../helpers/contract.js'
import { listenOnLoopback } from '../../helpers/httpServer.js'

const HOST = '127.0.0.1'
const HOURLY = 1 / 3600
const ALICE = 'alice@example.com'
const BOB = 'bob@example.com'
const PASSWORDS = new Map([
  [ALICE, 'correct horse battery staple'],
  [BOB, 'hunter2 hunter2'],
])
const SECRET = 'a device-token secret of 32 bytes or more, for tests'
const COOKIE = '__Host-tollbooth-device'

const cleanups: (() => Promise<void> | void)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

interface Budgets {
  readonly perAccount: { ratePerSecond: number; maxQueue: number }
  readonly perIpAndAccount?: number
  readonly perDevice?: number
  readonly maxAgeMs?: number
  readonly secret?: string
  /** The store on the wall clock; by default a virtual clock that stands still (no budget refills meanwhile). */
  readonly realClock?: boolean
  readonly onDecision?: (event: DecisionEvent) => void
}

/** The options both servers' guards get: every limiter on one MemoryStore, failing closed. */
function options(budgets: Budgets) {
  const store = new MemoryStore(budgets.realClock === true ? {} : { clock: new VirtualClock().now })
  const common = {
    store,
    failPolicy: 'closed' as const,
    ...(budgets.onDecision === undefined ? {} : { hooks: { onDecision: budgets.onDecision } }),
  }
  return {
    perIp: tokenBucket({ name: 'login-ip', ...common, capacity: 1000, refillPerSecond: HOURLY }),
    perIpAndAccount: tokenBucket({
      name: 'login-pair',
      ...common,
      capacity: budgets.perIpAndAccount ?? 100,
      refillPerSecond: HOURLY,
    }),
    perAccount: leakyBucket({ name: 'login-account', ...common, ...budgets.perAccount }),
    trustProxy: 'loopback' as const,
    trustedDevices: {
      secret: budgets.secret ?? SECRET,
      perDevice: tokenBucket({
        name: 'login-device',
        ...common,
        capacity: budgets.perDevice ?? 5,
        refillPerSecond: HOURLY,
      }),
      ...(budgets.maxAgeMs === undefined ? {} : { maxAgeMs: budgets.maxAgeMs }),
    },
  }
}

interface LoginApp {
  readonly port: number
  /** Attempts that reached the credential check. */
  routeHits: number
}

type Credentials = { email?: unknown; password?: unknown } | undefined

/**
 * The route's own check: the account looked up (only here) by the spelling PASSWORDS holds, never through the
 * guard's normalizer (which is under test). Every other spelling the tests send is a wrong guess anyway.
 */
function verify(body: Credentials): { email: string; ok: boolean } {
  const email = typeof body?.email === 'string' ? body.email : ''
  return { email, ok: PASSWORDS.get(email) === body?.password }
}

async function expressApp(budgets: Budgets): Promise<LoginApp> {
  const guard = loginGuard<express.Request>({
    ...options(budgets),
    account: (req) => (typeof req.body?.email === 'string' ? req.body.email : undefined),
  } satisfies LoginGuardOptions<express.Request>)
  const app = { port: 0, routeHits: 0 }
  const server = express()
  server.post('/login', express.json(), guard, async (req, res) => {
    app.routeHits++
    const { email, ok } = verify(req.body)
    if (!ok) {
      await guard.failed(req, email)
      res.status(401).json({ error: 'invalid credentials' })
      return
    }
    const { deviceCookie } = await guard.succeeded(req, email)
    if (deviceCookie !== undefined) res.setHeader('set-cookie', deviceCookie)
    res.json({ ok: true })
  })
  app.port = await listen(http.createServer(server))
  return app
}

async function fastifyApp(budgets: Budgets): Promise<LoginApp> {
  const login = tollboothLogin({
    ...options(budgets),
    account: (request: FastifyRequest) => {
      const email = (request.body as Credentials)?.email
      return typeof email === 'string' ? email : undefined
    },
  })
  const app = { port: 0, routeHits: 0 }
  const server = Fastify({ logger: false })
  cleanups.push(() => server.close())
  server.post('/login', { preHandler: login.preHandler }, async (request, reply) => {
    app.routeHits++
    const { email, ok } = verify(request.body as Credentials)
    if (!ok) {
      await login.failed(request, email)
      return reply.code(401).send({ error: 'invalid credentials' })
    }
    const { deviceCookie } = await login.succeeded(request, email)
    if (deviceCookie !== undefined) reply.header('set-cookie', deviceCookie)
    return { ok: true }
  })
  const url = await server.listen({ port: 0, host: HOST })
  app.port = Number(new URL(url).port)
  return app
}

async function listen(server: http.Server): Promise<number> {
  const listening = await listenOnLoopback(server)
  cleanups.push(listening.close)
  return listening.port
}

const servers = [
  ['Express', expressApp],
  ['Fastify', fastifyApp],
] as const

interface Attempt {
  readonly email: unknown
  readonly password?: string
  readonly from: string
  /** The device token to present in the cookie. */
  readonly token?: string
}

interface Answer {
  readonly status: number
  readonly retryAfter: string | null
  /** The device token of a `Set-Cookie` in the answer. */
  readonly token: string | undefined
}

async function attempt(port: number, { email, password = 'wrong', from, token }: Attempt): Promise<Answer> {
  const response = await fetch(`http://${HOST}:${port}/login`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-forwarded-for': from,
      ...(token === undefined ? {} : { cookie: `theme=dark; ${COOKIE}=${token}` }),
    },
    body: JSON.stringify({ email, password }),
  })
  await response.arrayBuffer()
  const cookie = response.headers.get('set-cookie') ?? ''
  return {
    status: response.status,
    retryAfter: response.headers.get('retry-after'),
    token: cookie.startsWith(`${COOKIE}=`) ? cookie.slice(COOKIE.length + 1).split(';')[0] : undefined,
  }
}

/** The owner logs in once from home and keeps the device token the route set. */
async function trustedDevice(port: number, email = ALICE): Promise<string> {
  const answer = await attempt(port, { email, password: PASSWORDS.get(email), from: '198.51.100.7' })
  expect(answer.status).toBe(200)
  expect(answer.token).toMatch(/^1\.[\w-]{22}\.\d{13}\.[\w-]{43}$/)
  return answer.token as string
}

/** 1,000 distinct addresses: 10.1.0.0 to 10.1.3.231. */
const botnet = (n: number) => Array.from({ length: n }, (_, i) => `10.1.${i >> 8}.${i & 255}`)

const statusCounts = (answers: readonly Answer[]) => {
  const counts: Record<number, number> = {}
  for (const { status } of answers) counts[status] = (counts[status] ?? 0) + 1
  return counts
}

/** Resolves at the first refusal by the account's budget: its queue is full from then on (the clock is frozen). */
function accountQueueFull(): { onDecision: (event: DecisionEvent) => void; full: Promise<void> } {
  let resolve = () => {}
  const full = new Promise<void>((done) => {
    resolve = done
  })
  return {
    onDecision: (event) => {
      if (event.limiter === 'login-account' && event.op === 'consume' && !event.allowed) resolve()
    },
    full,
  }
}

describe.each(servers)('login bounds through %s', (_name, start) => {
  it('1,000 parallel guesses at one account from 1,000 addresses: 11 reach the route (queue of 10 + 1), the owner’s trusted device logs in meanwhile, an untrusted new device is refused', async () => {
    const queue = accountQueueFull()
    const app = await start({
      perAccount: { ratePerSecond: 20, maxQueue: 10 },
      onDecision: queue.onDecision,
    })
    const token = await trustedDevice(app.port)
    expect(app.routeHits).toBe(1)

    const attack = Promise.all(botnet(1000).map((from) => attempt(app.port, { email: ALICE, from })))
    await queue.full
    const owner = await attempt(app.port, {
      email: ALICE,
      password: PASSWORDS.get(ALICE),
      from: '198.51.100.7',
      token,
    })
    const newDevice = await attempt(app.port, {
      email: ALICE,
      password: PASSWORDS.get(ALICE),
      from: '198.51.100.8',
    })
    const answers = await attack

    expect(owner.status).toBe(200)
    expect(owner.token).toBeDefined()
    expect(newDevice.status).toBe(429)
    expect(newDevice.retryAfter).toBe('1') // a turn frees every 50 ms
    expect(statusCounts(answers)).toEqual({ 401: 11, 429: 989 })
    for (const answer of answers) if (answer.status === 429) expect(answer.retryAfter).toBe('1')
    // The owner's first login, the 11 the account's budget admits, the owner's login from the trusted device.
    expect(app.routeHits).toBe(13)
  })

  it('on the real clock, 1,000 parallel guesses reach the route no faster than 11 + 5/s × the time taken', async () => {
    const app = await start({ perAccount: { ratePerSecond: 5, maxQueue: 10 }, realClock: true })
    const started = performance.now()
    const answers = await Promise.all(botnet(1000).map((from) => attempt(app.port, { email: ALICE, from })))
    const seconds = (performance.now() - started) / 1000
    const passed = answers.filter(({ status }) => status === 401).length
    expect(passed + answers.filter(({ status }) => status === 429).length).toBe(1000)
    expect(passed).toBeGreaterThanOrEqual(11)
    expect(passed).toBeLessThanOrEqual(11 + Math.floor(5 * seconds))
    expect(app.routeHits).toBe(passed)
  })

  it('forged, altered, foreign and other-key tokens count as no token, answered byte for byte alike', async () => {
    const app = await start({ perAccount: { ratePerSecond: 20, maxQueue: 0 } })
    const alice = await trustedDevice(app.port)
    const bob = await trustedDevice(app.port, BOB)
    // Another deployment's secret: a well-formed, correctly signed token this guard never issued.
    const elsewhere = await start({
      perAccount: { ratePerSecond: 20, maxQueue: 0 },
      secret: `${SECRET}, elsewhere`,
    })
    const otherKey = await trustedDevice(elsewhere.port)
    const [, device, expiry, mac] = alice.split('.') as [string, string, string, string]
    const flip = (text: string) => `${text.slice(0, -1)}${text.endsWith('A') ? 'B' : 'A'}`
    const forgeries = {
      none: undefined,
      garbage: 'not a token',
      long: 'x'.repeat(8_000),
      'random MAC': `1.${device}.${expiry}.${'A'.repeat(43)}`,
      'altered MAC': `1.${device}.${expiry}.${flip(mac)}`,
      'later expiry': `1.${device}.${Number(expiry) + 1000}.${mac}`,
      'other device id': `1.${flip(device)}.${expiry}.${mac}`,
      'other version': `2.${device}.${expiry}.${mac}`,
      "bob's token": bob,
      'another secret': otherKey,
    }
    // The account under attack: the one attempt its queue (of 0) holds is in, and the clock stands still.
    expect((await attempt(app.port, { email: ALICE, from: '10.9.9.9' })).status).toBe(401)
    const answers: Record<string, string> = {}
    for (const [name, token] of Object.entries(forgeries)) answers[name] = await raw(app.port, ALICE, token)
    expect(answers.none?.startsWith('HTTP/1.1 429 ')).toBe(true)
    for (const [name, answer] of Object.entries(answers)) expect(answer, name).toBe(answers.none)
    // The genuine token gets through the same attack.
    expect((await attempt(app.port, { email: ALICE, from: '10.9.9.10', token: alice })).status).toBe(401)
    // No enumeration: an account that does not exist, under the same attack, is answered alike.
    const ghost = 'ghost@example.com'
    expect((await attempt(app.port, { email: ghost, from: '10.9.9.9' })).status).toBe(401)
    expect(await raw(app.port, ghost, alice)).toBe(answers.none)
  })

  it("all 63 alterations of the MAC's last character, and one of every other character, count as no token", async () => {
    const app = await start({ perAccount: { ratePerSecond: 20, maxQueue: 0 } })
    const alice = await trustedDevice(app.port)
    const [, device, expiry, mac] = alice.split('.') as [string, string, string, string]
    const B64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'
    const at = (text: string, i: number, c: string) => `${text.slice(0, i)}${c}${text.slice(i + 1)}`
    const other = (c: string) => B64URL[(B64URL.indexOf(c) + 17) % 64] as string
    const altered: string[] = []
    // Base64url's last of 43 characters carries 4 bits of the MAC and 2 that decoding drops.
    for (const c of B64URL) if (c !== mac.at(-1)) altered.push(`1.${device}.${expiry}.${at(mac, 42, c)}`)
    for (let i = 0; i < 42; i++) altered.push(`1.${device}.${expiry}.${at(mac, i, other(mac[i] as string))}`)
    for (let i = 0; i < 22; i++)
      altered.push(`1.${at(device, i, other(device[i] as string))}.${expiry}.${mac}`)
    expect(altered).toHaveLength(63 + 42 + 22)
    expect((await attempt(app.port, { email: ALICE, from: '10.9.9.9' })).status).toBe(401)
    const none = await raw(app.port, ALICE, undefined)
    expect(none.startsWith('HTTP/1.1 429 ')).toBe(true)
    const accepted: string[] = []
    for (const token of altered) if ((await raw(app.port, ALICE, token)) !== none) accepted.push(token)
    expect(accepted).toEqual([])
    expect(app.routeHits).toBe(2)
    // The genuine token still gets through the attack.
    expect((await attempt(app.port, { email: ALICE, from: '10.9.9.10', token: alice })).status).toBe(401)
  })

  it('an expired device token counts as no token', async () => {
    const app = await start({
      perAccount: { ratePerSecond: 20, maxQueue: 0 },
      maxAgeMs: 1000,
    })
    const token = await trustedDevice(app.port)
    expect((await attempt(app.port, { email: ALICE, from: '10.9.9.9' })).status).toBe(401)
    const none = await raw(app.port, ALICE, undefined)
    expect(none.startsWith('HTTP/1.1 429 ')).toBe(true)
    // Wait for the wall clock to pass the expiry the token carries.
    const expires = Number(token.split('.')[2])
    while (Date.now() <= expires)
      await new Promise((resolve) => setTimeout(resolve, expires + 1 - Date.now()))
    expect(await raw(app.port, ALICE, token)).toBe(none)
  })

  it('a stolen device token replayed from 100 addresses at once buys its 5 guesses, then counts as no token', async () => {
    const app = await start({
      perAccount: { ratePerSecond: 20, maxQueue: 3 },
      perDevice: 5,
    })
    const token = await trustedDevice(app.port)
    const answers = await Promise.all(
      botnet(100).map((from) => attempt(app.port, { email: ALICE, from, token })),
    )
    // 5 on the device, then the shared budget: 3 queued + 1.
    expect(statusCounts(answers)).toEqual({ 401: 9, 429: 91 })
    expect(app.routeHits).toBe(1 + 9)
    // Revoked: with the account's queue full, the token no longer gets its holder through.
    expect((await attempt(app.port, { email: ALICE, from: '10.8.0.1', token })).status).toBe(429)
  })

  it('1,000 parallel spellings of one account from 1,000 addresses share its budget', async () => {
    const app = await start({ perAccount: { ratePerSecond: 20, maxQueue: 10 } })
    const spellings = [
      ALICE,
      ' Alice@Example.COM ',
      'ＡＬＩＣＥ＠ｅｘａｍｐｌｅ．ｃｏｍ',
      'al\u200bice@example.com',
      'alice@exam\u00adple.com',
      '\u2060ALICE@example.com\ufe0f',
      'alice@example.com\u0000',
      'ａlice@example.com\u3000',
    ]
    const answers = await Promise.all(
      botnet(1000).map((from, i) => attempt(app.port, { email: spellings[i % spellings.length], from })),
    )
    expect(statusCounts(answers)).toEqual({ 401: 11, 429: 989 })
    expect(app.routeHits).toBe(11)
  })

  it('256 /64s of one /56, 10 guesses each at one account: the pair budget of 10 admits 10 in all', async () => {
    const app = await start({
      perAccount: { ratePerSecond: 1000, maxQueue: 10_000 },
      perIpAndAccount: 10,
    })
    const answers: Answer[] = []
    for (let guess = 0; guess < 10; guess++) {
      const round = Array.from({ length: 256 }, (_, net64) =>
        attempt(app.port, { email: ALICE, from: `2001:db8:7:${net64.toString(16)}::${guess + 1}` }),
      )
      answers.push(...(await Promise.all(round)))
    }
    expect(statusCounts(answers)).toEqual({ 401: 10, 429: 2550 })
    // The next /56 is another client.
    expect((await attempt(app.port, { email: ALICE, from: '2001:db8:7:100::1' })).status).toBe(401)
  })

  it('an account of 256 lone surrogates, or of 50,000 characters, is counted, never a 500', async () => {
    const app = await start({
      perAccount: { ratePerSecond: 1000, maxQueue: 100 },
      perIpAndAccount: 2,
    })
    for (const email of ['\ud800'.repeat(256), 'x'.repeat(50_000) + ALICE]) {
      const statuses: number[] = []
      for (let i = 0; i < 3; i++) statuses.push((await attempt(app.port, { email, from: '10.2.0.1' })).status)
      // Counted per (address, account) like any name: 2 then refused.
      expect(statuses).toEqual([401, 401, 429])
    }
    // Lone surrogates are counted as the U+FFFD a UTF-8 decoder makes of them: one account however they are spelt.
    expect((await attempt(app.port, { email: '\udfff'.repeat(256), from: '10.2.0.1' })).status).toBe(429)
  })
})

describe('loginGuard before a body parser', () => {
  it('refuses every attempt with 400 and warns once, at the first: four guesses against a pair of 2 reach nothing', async () => {
    const guard = loginGuard<express.Request>({
      ...options({
        perAccount: { ratePerSecond: 1000, maxQueue: 100 },
        perIpAndAccount: 2,
      }),
      account: (req) => (typeof req.body?.email === 'string' ? req.body.email : undefined),
    })
    const warnings: (Error & { code?: string })[] = []
    const onWarning = (warning: Error & { code?: string }) => {
      if (warning.code === 'TOLLBOOTH_LOGIN_BODY_NOT_PARSED') warnings.push(warning)
    }
    process.on('warning', onWarning)
    cleanups.push(() => {
      process.off('warning', onWarning)
    })
    let routeHits = 0
    const server = express()
    // The mistake: the guard before the body parser.
    server.post('/login', guard, express.json(), (_req, res) => {
      routeHits++
      res.status(401).end()
    })
    const port = await listen(http.createServer(server))
    const statuses: number[] = []
    for (let i = 0; i < 4; i++)
      statuses.push((await attempt(port, { email: ALICE, from: '10.3.0.1' })).status)
    expect(statuses).toEqual([400, 400, 400, 400])
    expect(routeHits).toBe(0)
    while (warnings.length === 0) await new Promise((resolve) => setImmediate(resolve))
    expect(warnings).toHaveLength(1)
    expect(warnings[0]?.message).toContain('run your body parser')

    // A request without a body, or with one the parser read, is counted as before.
    const ordered = express()
    ordered.post('/login', express.json(), guard, (_req, res) => res.status(401).end())
    const orderedPort = await listen(http.createServer(ordered))
    expect((await attempt(orderedPort, { email: ALICE, from: '10.3.0.2' })).status).toBe(401)
    expect(warnings).toHaveLength(1)
  })
})

describe('loginGuard after a body parser that does not take the content type', () => {
  it('refuses a text/plain body with 400, warning that the parser before it skipped that content type', async () => {
    const guard = loginGuard<express.Request>({
      ...options({ perAccount: { ratePerSecond: 1000, maxQueue: 100 } }),
      account: (req) => (typeof req.body?.email === 'string' ? req.body.email : undefined),
    })
    const warnings: (Error & { code?: string })[] = []
    const onWarning = (warning: Error & { code?: string }) => {
      if (warning.code === 'TOLLBOOTH_LOGIN_BODY_NOT_PARSED') warnings.push(warning)
    }
    process.on('warning', onWarning)
    cleanups.push(() => {
      process.off('warning', onWarning)
    })
    let routeHits = 0
    const server = express()
    server.post('/login', express.json(), guard, (_req, res) => {
      routeHits++
      res.status(401).end()
    })
    const port = await listen(http.createServer(server))
    const plain = () =>
      fetch(`http://${HOST}:${port}/login`, {
        method: 'POST',
        headers: { 'content-type': 'text/plain', 'x-forwarded-for': '10.3.1.1' },
        body: JSON.stringify({ email: ALICE, password: 'wrong' }),
      }).then(async (response) => {
        await response.arrayBuffer()
        return response.status
      })
    expect([await plain(), await plain()]).toEqual([400, 400])
    expect(routeHits).toBe(0)
    while (warnings.length === 0) await new Promise((resolve) => setImmediate(resolve))
    expect(warnings).toHaveLength(1)
    expect(warnings[0]?.message).toBe(
      'loginGuard: a login request carries a body (content-type "text/plain") that the body parser before ' +
        'loginGuard did not parse, and names no account: such requests are refused with 400. If your clients send ' +
        'that content type, have a parser before loginGuard take it.',
    )
    expect(warnings[0]?.message).not.toContain('run your body parser')
    expect((await attempt(port, { email: ALICE, from: '10.3.1.2' })).status).toBe(401)
    expect(routeHits).toBe(1)
  })
})

/** One attempt on a raw socket presenting `token`: the whole answer without its `Date` line. */
async function raw(port: number, email: string, token: string | undefined): Promise<string> {
  const payload = JSON.stringify({ email, password: 'wrong' })
  const socket = net.connect(port, HOST)
  await once(socket, 'connect')
  const cookie = token === undefined ? '' : `Cookie: ${COOKIE}=${token}\r\n`
  socket.write(
    `POST /login HTTP/1.1\r\nHost: ${HOST}:${port}\r\nContent-Type: application/json\r\nX-Forwarded-For: 10.9.0.1\r\n` +
      `${cookie}Content-Length: ${Buffer.byteLength(payload)}\r\nConnection: close\r\n\r\n${payload}`,
  )
  const chunks: Buffer[] = []
  for await (const chunk of socket) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
    .toString('latin1')
    .replace(/^Date: .*\r\n/im, '')
}
