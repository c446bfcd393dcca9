/**
 * The HTTP guards on node:http2's compatibility API (`Http2ServerRequest` / `Http2ServerResponse`), over h2c on
 * 127.0.0.1 with node:http2's own client: the guards of tollbooth/http as middlewares of an `http2.createServer`
 * handler, and `tollboothUpload` on a Fastify server created with `http2: true`. Refusals are answered on their
 * stream, which is then closed (RST_STREAM NO_ERROR) so that a client stops sending a body nobody reads; none of it
 * raises an exception in the server (vitest fails a run on an uncaught one).
 */
import type { IncomingMessage } from 'node:http'
import http2, { type IncomingHttpHeaders } from 'node:http2'
import type { AddressInfo } from 'node:net'
import Fastify from 'fastify'
import { afterEach, describe, expect, it } from 'vitest'
import { concurrencyLimit } from '../../../src/core/limiters/concurrencyLimit.js'
import { leakyBucket } from '../../../src/core/limiters/leakyBucket.js'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import { tollboothLogin, tollboothUpload } from '../../../src/fastify/index.js'
import { concurrencyGuard } from '../../../src/http/concurrencyGuard.js'
import { loginGuard } from '../../../src/http/loginGuard.js'
import type { Middleware } from '../../../src/http/middleware.js'
import { rateLimit } from '../../../src/http/rateLimit.js'
import { type UploadCharge, uploadGuard } from '../../../src/http/uploadGuard.js'

const HOURLY = 1 / 3600
const IDENTITY = '127.0.0.1'

const cleanups: (() => unknown)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

type Route = (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void

/** An h2c server running `guard`, then `route` (or a 500 with the error's code). */
async function serveH2(guard: Middleware, route: Route): Promise<http2.ClientHttp2Session> {
  const server = http2.createServer((req, res) => {
    // The compatibility API's request and response stand in for node:http's, as Express's would.
    guard(req as never, res as never, (error) => {
      if (error === undefined) return route(req, res)
      res.writeHead(500).end(String((error as { code?: unknown }).code))
    })
  })
  return connect(server)
}

async function connect(server: http2.Http2Server): Promise<http2.ClientHttp2Session> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const session = http2.connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)
  session.on('error', () => {})
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        session.destroy()
        server.close(() => resolve())
      }),
  )
  return session
}

interface H2Answer {
  readonly status: number
  readonly headers: IncomingHttpHeaders
  readonly body: string
  /** The stream's RST_STREAM code once closed (0: NO_ERROR). */
  readonly rstCode: number
}

/**
 * One request on `session`. `body` is written whole; with `hold`, the request's end is never sent (a body the server
 * must refuse without waiting for it).
 */
function request(
  session: http2.ClientHttp2Session,
  headers: http2.OutgoingHttpHeaders,
  body?: string | Buffer,
  hold = false,
): Promise<H2Answer> {
  return new Promise((resolve, reject) => {
    const stream = session.request({ ':method': 'POST', ':path': '/', ...headers })
    let answer: IncomingHttpHeaders = {}
    const chunks: Buffer[] = []
    stream.on('response', (received) => {
      answer = received
    })
    stream.on('data', (data: Buffer) => chunks.push(data))
    stream.on('error', () => {})
    stream.on('close', () => {
      if (answer[':status'] === undefined) reject(new Error(`closed without an answer (${stream.rstCode})`))
      resolve({
        status: Number(answer[':status']),
        headers: answer,
        body: Buffer.concat(chunks).toString(),
        rstCode: stream.rstCode ?? 0,
      })
    })
    if (body !== undefined) stream.write(body)
    if (!hold) stream.end()
  })
}

const ok: Route = (_req, res) => {
  res.writeHead(200).end('ok')
}

describe('tollbooth/http guards on node:http2 (h2c)', () => {
  it('rateLimit: 2 admitted with the RateLimit fields, the third 429 with Retry-After', async () => {
    const limiter = tokenBucket({ name: 'h2-api', capacity: 2, refillPerSecond: HOURLY })
    const session = await serveH2(rateLimit({ limiter }), ok)
    const answers = [await request(session, {}), await request(session, {}), await request(session, {})]
    expect(answers.map(({ status }) => status)).toEqual([200, 200, 429])
    expect(answers[0]?.headers['ratelimit-policy']).toBe('"h2-api";q=2;w=7200')
    expect(answers[2]?.headers['retry-after']).toBe('3600')
    expect(JSON.parse(answers[2]?.body ?? '')).toMatchObject({ status: 429, 'violated-policies': ['h2-api'] })
  })

  it('concurrencyGuard: one at a time; the lease comes back when the stream ends', async () => {
    const limiter = concurrencyLimit({ name: 'h2-jobs', max: 1, leaseMs: 30_000 })
    const held: http2.Http2ServerResponse[] = []
    let arrived: () => void = () => {}
    const session = await serveH2(concurrencyGuard({ limiter }), (_req, res) => {
      held.push(res)
      arrived()
    })
    const first = request(session, {})
    await new Promise<void>((resolve) => {
      arrived = resolve
    })
    expect((await request(session, {})).status).toBe(429)
    held[0]?.writeHead(200).end()
    expect((await first).status).toBe(200)
    expect((await limiter.peek(IDENTITY)).remaining).toBe(1)
  })

  it('loginGuard: a pair of 2, then 429; the account is read from the parsed body', async () => {
    const common = { failPolicy: 'closed' as const }
    const guard = loginGuard<IncomingMessage & { body?: { email?: string } }>({
      perIp: tokenBucket({ name: 'h2-ip', ...common, capacity: 100, refillPerSecond: HOURLY }),
      perIpAndAccount: tokenBucket({ name: 'h2-pair', ...common, capacity: 2, refillPerSecond: HOURLY }),
      perAccount: leakyBucket({ name: 'h2-account', ...common, ratePerSecond: 1000, maxQueue: 100 }),
      account: (req) => req.body?.email,
    })
    const server = http2.createServer(async (req, res) => {
      const chunks: Buffer[] = []
      for await (const data of req) chunks.push(data as Buffer)
      ;(req as { body?: unknown }).body = JSON.parse(Buffer.concat(chunks).toString())
      guard(req as never, res as never, () => {
        void guard.failed(req as never, 'alice@example.com').then(() => res.writeHead(401).end())
      })
    })
    const session = await connect(server)
    const body = JSON.stringify({ email: 'alice@example.com' })
    const statuses: number[] = []
    for (let i = 0; i < 3; i++)
      statuses.push((await request(session, { 'content-type': 'application/json' }, body)).status)
    expect(statuses).toEqual([401, 401, 429])
  })
})

/** The login budgets of an attack on one account: its pair and its own queue are never what refuses here. */
function loginBudgets(name: string) {
  const common = { failPolicy: 'closed' as const }
  return {
    perIp: tokenBucket({ name: `${name}-ip`, ...common, capacity: 1000, refillPerSecond: HOURLY }),
    perIpAndAccount: tokenBucket({ name: `${name}-pair`, ...common, capacity: 1000, refillPerSecond: 1 }),
    perAccount: leakyBucket({ name: `${name}-account`, ...common, ratePerSecond: 0.5, maxQueue: 2 }),
  }
}

const GUESS = JSON.stringify({ email: 'alice@example.com', password: 'guess' })

/** `count` parallel POSTs of a JSON body on `path`, without content-length (HTTP/2 needs none); their statuses. */
async function parallelGuesses(session: http2.ClientHttp2Session, path: string, count: number) {
  const answers = await Promise.all(
    Array.from({ length: count }, () =>
      request(session, { ':path': path, 'content-type': 'application/json' }, GUESS),
    ),
  )
  return answers.map(({ status }) => status)
}

describe('loginGuard before the body parser on node:http2 (h2c)', () => {
  it('50 parallel POSTs with a JSON body and no content-length are 400: none reaches the route', async () => {
    const guard = loginGuard<IncomingMessage & { body?: { email?: string } }>({
      ...loginBudgets('h2-order'),
      account: (req) => req.body?.email,
    })
    let reached = 0
    // The mistake the 400 is there for: the guard, then the route's own body parser.
    const session = await serveH2(guard, async (req, res) => {
      const chunks: Buffer[] = []
      for await (const data of req) chunks.push(data as Buffer)
      const text = Buffer.concat(chunks).toString()
      ;(req as { body?: unknown }).body = text === '' ? {} : JSON.parse(text)
      reached++
      res.writeHead(401).end()
    })
    expect(await parallelGuesses(session, '/login', 50)).toEqual(Array(50).fill(400))
    expect(reached).toBe(0)
    // A request whose headers end its stream carries no body: counted per address, it reaches the route.
    expect((await request(session, { ':method': 'GET', ':path': '/login' })).status).toBe(401)
    expect(reached).toBe(1)
  })

  it('tollboothLogin on Fastify with http2: true, its hook run in onRequest: 50 parallel POSTs are 400', async () => {
    const app = Fastify({ http2: true, logger: false })
    cleanups.push(() => app.close())
    const login = tollboothLogin({
      ...loginBudgets('h2-fastify-order'),
      account: (request) => (request.body as { email?: string } | undefined)?.email,
    })
    let reached = 0
    // tollboothLogin's hook is typed for node:http's request; on http2 the compatibility request stands in for it.
    app.post('/login', { onRequest: login.preHandler as never }, async (_request, reply) => {
      reached++
      return reply.code(401).send({ error: 'invalid credentials' })
    })
    const url = await app.listen({ port: 0, host: '127.0.0.1' })
    const session = http2.connect(url)
    session.on('error', () => {})
    cleanups.push(() => session.destroy())
    expect(await parallelGuesses(session, '/login', 50)).toEqual(Array(50).fill(400))
    expect(reached).toBe(0)
  })
})

describe('uploadGuard on node:http2 (h2c)', () => {
  async function start() {
    const bytes = tokenBucket({ name: 'h2-bytes', capacity: 1000, refillPerSecond: 0.01 })
    const charges: UploadCharge[] = []
    const routeErrors: string[] = []
    const session = await serveH2(
      uploadGuard({ maxBytes: 1000, bytes, onCharged: (_req, charge) => charges.push(charge) }),
      (req, res) => {
        let stored = 0
        req.on('data', (data: Buffer) => {
          stored += data.length
        })
        req.on('end', () => res.writeHead(201).end(String(stored)))
        req.on('error', (error) => routeErrors.push(error.message))
      },
    )
    return { bytes, charges, routeErrors, session }
  }

  it('admits within the budget; refuses over it with 429 (stream closed, its body never sent), no exception', async () => {
    const { bytes, charges, session } = await start()
    expect(await request(session, { 'content-length': 700 }, Buffer.alloc(700))).toMatchObject({
      status: 201,
      body: '700',
    })
    const refused = await request(session, { 'content-length': 700 }, undefined, true)
    expect(refused).toMatchObject({ status: 429, rstCode: http2.constants.NGHTTP2_NO_ERROR })
    expect(refused.headers['retry-after']).toBe('40000')
    expect(refused.headers.connection).toBeUndefined()
    // A body without a length reserves maxBytes: 300 left is not enough.
    expect((await request(session, {}, Buffer.alloc(200), true)).status).toBe(429)
    expect(charges.map(({ received, charged }) => [received, charged])).toEqual([[700, 700]])
    expect((await bytes.peek(IDENTITY)).remaining).toBe(300)
  })

  it('refuses a declared length over maxBytes with 413, and cuts off a body going past it', async () => {
    const { charges, routeErrors, session } = await start()
    expect((await request(session, { 'content-length': 2000 }, undefined, true)).status).toBe(413)
    const cut = await request(session, {}, Buffer.alloc(1500), true)
    expect(cut).toMatchObject({ status: 413, rstCode: http2.constants.NGHTTP2_NO_ERROR })
    expect(routeErrors).toEqual(['uploadGuard: the body went past maxBytes (1000); the upload was cut off'])
    while (charges.length === 0) await new Promise((resolve) => setImmediate(resolve))
    expect(charges.map(({ charged, complete }) => [charged, complete])).toEqual([[1000, false]])
  })
})

describe('tollboothUpload on Fastify with http2: true (h2c)', () => {
  it('answers a refusal by the byte budget with 429, then admits what fits', async () => {
    const app = Fastify({ http2: true, logger: false })
    cleanups.push(() => app.close())
    app.addContentTypeParser('*', (_request, payload, done) => done(null, payload))
    await app.register(tollboothUpload, {
      maxBytes: 1000,
      bytes: tokenBucket({ name: 'h2-fastify-bytes', capacity: 1000, refillPerSecond: 0.01 }),
    })
    app.post('/', async (request, reply) => {
      let stored = 0
      for await (const data of request.body as AsyncIterable<Buffer>) stored += data.length
      return reply.code(201).send({ stored })
    })
    const url = await app.listen({ port: 0, host: '127.0.0.1' })
    const session = http2.connect(url)
    session.on('error', () => {})
    cleanups.push(() => session.destroy())
    const type = { 'content-type': 'application/octet-stream' }
    expect((await request(session, { ...type, 'content-length': 800 }, Buffer.alloc(800))).status).toBe(201)
    const refused = await request(session, { ...type, 'content-length': 800 }, undefined, true)
    expect(refused.status).toBe(429)
    expect(JSON.parse(refused.body)).toMatchObject({ status: 429 })
    expect((await request(session, { ...type, 'content-length': 200 }, Buffer.alloc(200))).status).toBe(201)
  })
})
