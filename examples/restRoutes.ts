/**
 * The example server's plain HTTP routes, protected by tollbooth/http:
 *
 *   POST /login   { "email", "password" } (JSON): loginGuard — per client IP, per (IP, account), and per account a
 *                 growing delay then a refusal; a device that logged in before (its cookie) is counted on its own;
 *                 the same answer whether the account exists or not
 *   POST /upload  any body: uploadGuard — at most 1 MiB per request (a longer body is cut off with 413), 10 MiB per
 *                 minute per identity, 2 uploads at once
 */
import { randomBytes } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { loginGuard, normalizeAccount, uploadGuard } from '../src/http/index.js'
import {
  concurrencyLimit,
  type FailPolicy,
  type LimiterHooks,
  leakyBucket,
  type Store,
  slidingWindow,
  type TrustProxy,
  tokenBucket,
} from '../src/index.js'
import { demoUsers } from './demo-api.js'

export interface RestRoutesOptions {
  readonly store: Store
  readonly hooks: LimiterHooks
  readonly trustProxy: TrustProxy
  /** The identity of an upload: the demo user of its bearer token, else the client's network. */
  readonly uploadIdentity: (req: IncomingMessage) => string
}

export interface RestRoutes {
  /** Answers `req` when it is one of these routes; false otherwise. */
  handle(req: IncomingMessage, res: ServerResponse): boolean
  /** Banner rows: name, what, fail policy. */
  readonly limits: [string, string, FailPolicy][]
}

/** A login body larger than this is refused before it is parsed. */
const MAX_LOGIN_BODY = 4096
export const MAX_UPLOAD_BYTES = 1024 * 1024
export const LOGIN_ATTEMPTS_PER_ACCOUNT = 5

/** A login request with its parsed body, as the guard's `account` reads it. */
type LoginRequest = IncomingMessage & { body?: { email?: unknown; password?: unknown } }

export function createRestRoutes({
  store,
  hooks,
  trustProxy,
  uploadIdentity,
}: RestRoutesOptions): RestRoutes {
  // A login limit fails closed: while the store is unreachable nobody logs in rather than everybody guesses.
  const login = loginGuard<LoginRequest>({
    perIp: slidingWindow({
      name: 'login-ip',
      store,
      limit: 20,
      windowMs: 60_000,
      failPolicy: 'closed',
      hooks,
    }),
    perIpAndAccount: tokenBucket({
      name: 'login-pair',
      store,
      capacity: LOGIN_ATTEMPTS_PER_ACCOUNT,
      refillPerSecond: 1 / 60,
      failPolicy: 'closed',
      hooks,
    }),
    perAccount: leakyBucket({
      name: 'login-account',
      store,
      ratePerSecond: 1,
      maxQueue: 5,
      failPolicy: 'closed',
      hooks,
    }),
    trustedDevices: {
      // Without DEVICE_SECRET, one of its own per start: the device cookies of an earlier start count as none.
      secret: process.env.DEVICE_SECRET ?? randomBytes(32),
      perDevice: tokenBucket({
        name: 'login-device',
        store,
        capacity: LOGIN_ATTEMPTS_PER_ACCOUNT,
        refillPerSecond: 1 / 60,
        failPolicy: 'closed',
        hooks,
      }),
    },
    account: (req) => (typeof req.body?.email === 'string' ? req.body.email : undefined),
    trustProxy,
  })
  const upload = uploadGuard({
    maxBytes: MAX_UPLOAD_BYTES,
    bytes: tokenBucket({
      name: 'upload-bytes',
      store,
      capacity: 10 * MAX_UPLOAD_BYTES,
      refillPerSecond: 10 * 1024,
      failPolicy: 'open',
      hooks,
    }),
    concurrent: concurrencyLimit({
      name: 'uploads',
      store,
      max: 2,
      leaseMs: 60_000,
      failPolicy: 'open',
      hooks,
    }),
    identify: uploadIdentity,
  })

  const answer = (res: ServerResponse, status: number, body: unknown): void => {
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body))
  }

  async function handleLogin(req: LoginRequest, res: ServerResponse): Promise<void> {
    const body = await readSmallBody(req, MAX_LOGIN_BODY)
    if (body === undefined) return answer(res, 413, { error: 'login body too large' })
    try {
      req.body = JSON.parse(body || '{}') as LoginRequest['body']
    } catch {
      return answer(res, 400, { error: 'expected a JSON body: { "email", "password" }' })
    }
    login(req, res, (error) => {
      if (error !== undefined) return answer(res, 500, { error: 'login check failed' })
      const email = typeof req.body?.email === 'string' ? req.body.email : ''
      const user = demoUsers.find((candidate) => candidate.email === normalizeAccount(email))
      // The demo compares plain passwords; a real server verifies a hash, a dummy one for unknown accounts.
      const ok = user !== undefined && user.password === req.body?.password
      if (!ok) {
        login.failed(req, email).then(
          () => answer(res, 401, { error: 'invalid credentials' }),
          () => answer(res, 500, { error: 'login check failed' }),
        )
        return
      }
      login.succeeded(req, email).then(
        ({ deviceCookie }) => {
          if (deviceCookie !== undefined) res.setHeader('set-cookie', deviceCookie)
          answer(res, 200, { token: user?.token })
        },
        () => answer(res, 500, { error: 'login check failed' }),
      )
    })
  }

  function handleUpload(req: IncomingMessage, res: ServerResponse): void {
    upload(req, res, (error) => {
      if (error !== undefined) {
        if (!res.headersSent) answer(res, 500, { error: 'upload check failed' })
        return
      }
      let received = 0
      req.on('data', (chunk: Buffer) => {
        received += chunk.length
      })
      req.once('end', () => answer(res, 201, { received }))
      // Cut off past maxBytes: the guard has answered 413 and closes the connection.
      req.once('error', () => {})
    })
  }

  return {
    handle(req, res) {
      const path = (req.url ?? '/').split('?')[0]
      if (req.method !== 'POST' || (path !== '/login' && path !== '/upload')) return false
      if (path === '/login') {
        // A client that aborts its body makes the read reject: nothing to answer, the connection is gone.
        handleLogin(req, res).catch(() => req.destroy())
      } else {
        handleUpload(req, res)
      }
      return true
    },
    limits: [
      [
        'login-ip',
        `POST /login: 20 attempts per minute per client IP; ${LOGIN_ATTEMPTS_PER_ACCOUNT} per IP and account, +1/min; account: 1/s, 5 waiting, then 429 (a device that logged in before is counted on its own)`,
        'closed',
      ],
      [
        'uploads',
        `POST /upload: ${MAX_UPLOAD_BYTES / 1024} KiB per request, ${(10 * MAX_UPLOAD_BYTES) / 1024} KiB per identity (+10 KiB/s), 2 at once`,
        'open',
      ],
    ],
  }
}

/** The body as text, or undefined once it passes `limit` bytes (the rest is not read). */
async function readSmallBody(req: IncomingMessage, limit: number): Promise<string | undefined> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length
    if (size > limit) return undefined
    chunks.push(chunk)
  }
  return Buffer.concat(chunks).toString('utf8')
}
