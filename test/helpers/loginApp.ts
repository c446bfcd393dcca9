/**
 * The login app of the login-guard tests, on node:http, Express or Fastify (test/helpers/guardedServers.ts): one
 * account, `POST /login` behind the guard (`loginGuard` after a JSON parser, `tollboothLogin`'s preHandler after
 * Fastify's), the credential check in the route reporting the outcome, and `POST /check` answering the guard's
 * `check` as JSON (the delay each attempt gets, without waiting it out; the guard itself stands in front of
 * `/login` alone). The same options build either guard: their
 * `account` reads the parsed body, which a Node request (after the parser) and a Fastify request both carry.
 */

import { randomUUID } from 'node:crypto'
import { once } from 'node:events'
import type { IncomingMessage } from 'node:http'
import net from 'node:net'
import type { FastifyRequest } from 'fastify'
import { afterEach, beforeEach, expect } from 'vitest'
import type { DecisionEvent } from '../../src/core/hooks.js'
import { leakyBucket } from '../../src/core/limiters/leakyBucket.js'
import { tokenBucket } from '../../src/core/limiters/tokenBucket.js'
import type { Store } from '../../src/core/stores/store.js'
import { type TollboothLoginOptions, tollboothLogin } from '../../src/fastify/index.js'
import { type LoginGuardOptions, loginGuard } from '../../src/http/loginGuard.js'
import { VirtualClock } from './contract.js'
import { type Exchange, type GuardedServer, type ServerKind, serveGuarded } from './guardedServers.js'
import { createStore, type StoreFixture, type StoreKind } from './stores.js'

export const HOST = '127.0.0.1'
/** Tokens that never come back within a test: a refusal's Retry-After is the hour one token takes. */
export const HOURLY = 1 / 3600
export const ALICE = 'alice@example.com'
export const ALICE_PASSWORD = 'correct horse battery staple'
/** How the account's owner may spell it: what the app's own lookup accepts as Alice. */
export const ALICE_SPELLINGS = new Set([
  ALICE,
  ' Alice@Example.COM ',
  'ＡＬＩＣＥ＠ｅｘａｍｐｌｅ．ｃｏｍ\u3000',
])

export type LoginBody = { email?: unknown; password?: unknown } | undefined
/** A request after the body parser: a Node request with `body`, or a Fastify request. */
export type LoginRequest = IncomingMessage & { body?: LoginBody }

/** The account a request names: its body's `email`, if a string. */
export const emailOf = (req: { body?: unknown }): string | undefined => {
  const email = (req.body as LoginBody)?.email
  return typeof email === 'string' ? email : undefined
}

export interface Budgets {
  perIp?: { capacity: number }
  perIpAndAccount?: { capacity: number }
  perAccount?: { ratePerSecond: number; maxQueue: number }
  onDecision?: (event: DecisionEvent) => void
}

/** The three limiters of a login guard on `store`, failing closed; generous where a test does not look. */
export function limiters(store: Store, prefix: string, budgets: Budgets = {}) {
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
    // Fast by default: the guard really waits out each delay.
    perAccount: leakyBucket({
      name: `${prefix}-account`,
      ...common,
      ratePerSecond: budgets.perAccount?.ratePerSecond ?? 1000,
      maxQueue: budgets.perAccount?.maxQueue ?? 100,
    }),
  }
}

/** The options of both guards: `limiters` on `store`, the account read from the body, and `extra`. */
export function loginOptions(
  store: Store,
  prefix: string,
  budgets: Budgets = {},
  extra: Partial<LoginGuardOptions<LoginRequest>> = {},
): LoginGuardOptions<LoginRequest> {
  return { ...limiters(store, prefix, budgets), account: emailOf, ...extra }
}

export interface LoginApp extends GuardedServer {
  /** Requests that reached the credential check (the route). */
  readonly routeHits: number
}

/** The login app on `kind`, guarded by `loginGuard` (node:http, Express) or `tollboothLogin` (Fastify). */
export async function startLoginApp(
  kind: ServerKind,
  options: LoginGuardOptions<LoginRequest>,
): Promise<LoginApp> {
  if (kind === 'fastify') {
    // The options' callbacks read only what a Fastify request has too (the parsed body, the headers).
    const login = tollboothLogin(options as unknown as TollboothLoginOptions)
    return serveGuarded(
      kind,
      {
        preHandler: function (request, reply, done) {
          if (request.url === '/check') return done()
          login.preHandler.call(this, request, reply, done)
        },
      },
      (exchange) =>
        answer(exchange, {
          check: (request) => login.check(request as FastifyRequest),
          succeeded: (request, account) => login.succeeded(request as FastifyRequest, account),
          failed: (request, account) => login.failed(request as FastifyRequest, account),
        }),
      { body: 'json' },
    )
  }
  const guard = loginGuard<LoginRequest>(options)
  return serveGuarded(
    kind,
    {
      middleware: (req, res, next) => {
        if (req.url === '/check') return next()
        guard(req as LoginRequest, res, next)
      },
    },
    (exchange) =>
      answer(exchange, {
        check: (request) => guard.check(request as LoginRequest),
        succeeded: (request, account) => guard.succeeded(request as LoginRequest, account),
        failed: (request, account) => guard.failed(request as LoginRequest, account),
      }),
    { body: 'json' },
  )
}

interface AnyLoginGuard {
  check(request: unknown): ReturnType<ReturnType<typeof loginGuard>['check']>
  succeeded(request: unknown, account: string): Promise<unknown>
  failed(request: unknown, account: string): Promise<void>
}

/** The route: `/check` answers `check`; `/login` looks the account up (only here) and reports the outcome. */
async function answer(exchange: Exchange, guard: AnyLoginGuard): Promise<void> {
  const json = { 'content-type': 'application/json' }
  if (exchange.path === '/check') {
    const checked = await guard.check(exchange.request)
    if ('allowed' in checked) exchange.send(200, JSON.stringify({ delayMs: checked.delayMs }), json)
    else exchange.send(checked.status, JSON.stringify(checked.body), checked.headers)
    return
  }
  const email = emailOf(exchange) ?? ''
  if (ALICE_SPELLINGS.has(email) && (exchange.body as LoginBody)?.password === ALICE_PASSWORD) {
    await guard.succeeded(exchange.request, email)
    exchange.send(200, '{"ok":true}', json)
  } else {
    await guard.failed(exchange.request, email)
    exchange.send(401, '{"error":"invalid credentials"}', json)
  }
}

export interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly body: unknown
}

/** A login attempt (or `path`) as JSON, from `forwardedFor` when given. */
export async function login(
  port: number,
  email: string | string[],
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
export async function rawLogin(port: number, email: string): Promise<string> {
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

/**
 * A store of `kind` on a virtual clock for each test, with a limiter-name prefix of its own; after the test, no key
 * it holds may lack a TTL. (A key may expire while they are listed: the account queues drain in milliseconds of real
 * time, which Redis' TTLs run on.)
 */
export function useLoginStore(kind: StoreKind) {
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

/** The error a guard throws for `message`'s option: TOLLBOOTH_ERR_INVALID_OPTION, its message containing it. */
export function invalidOption(message: string) {
  return expect.objectContaining({
    code: 'TOLLBOOTH_ERR_INVALID_OPTION',
    message: expect.stringContaining(message),
  })
}
