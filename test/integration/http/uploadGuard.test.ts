/**
 * uploadGuard end to end: real node:http and Express 5 servers on 127.0.0.1 (port 0), clients writing raw bytes on
 * a socket (heads without bodies, chunked bodies, lying lengths) or using fetch, routes that read through a body
 * parser (`express.raw`) or pipe the request to a file, budgets and leases on memory, Redis and the Redis Cluster.
 */
import { randomUUID } from 'node:crypto'
import { EventEmitter, once } from 'node:events'
import { createWriteStream, mkdtempSync, rmSync, statSync } from 'node:fs'
import http, { type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pipeline } from 'node:stream/promises'
import express from 'express'
import { afterEach, describe, expect, it } from 'vitest'
import { ErrorCodes } from '../../../src/core/errors.js'
import { concurrencyLimit } from '../../../src/core/limiters/concurrencyLimit.js'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import type { RateLimiter } from '../../../src/core/rateLimiter.js'
import type { Store, StoreRequest } from '../../../src/core/stores/store.js'
import type { Middleware } from '../../../src/http/middleware.js'
import { type UploadCharge, type UploadGuardOptions, uploadGuard } from '../../../src/http/uploadGuard.js'
import { chunk, lastChunk, RawHttpClient, requestHead } from '../../helpers/rawHttp.js'
import { createStore, storeKinds } from '../../helpers/stores.js'

const MAX_BYTES = 1000
const IDENTITY = '127.0.0.1'

type Flavor = 'node:http + pipe to a file' | 'express + express.raw' | 'express + pipe to a file'
const flavors: Flavor[] = ['node:http + pipe to a file', 'express + express.raw', 'express + pipe to a file']

const cleanups: (() => unknown)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** What the route saw: 'started' when a request got past the guard, 'stored' / 'failed' when the route is done. */
class RouteLog extends EventEmitter {
  started = 0
  stored: number[] = []
  failures: string[] = []

  async waitForStarted(count: number): Promise<void> {
    while (this.started < count) await once(this, 'started')
  }

  async waitForFailures(count: number): Promise<void> {
    while (this.failures.length < count) await once(this, 'failed')
  }
}

/** A server with `POST /upload` behind `guard`, answering 201 `{ stored }` with the bytes the route got. */
async function startServer(
  flavor: Flavor,
  guard: Middleware,
  serverOptions: http.ServerOptions = {},
): Promise<{ port: number; log: RouteLog }> {
  const log = new RouteLog()
  const dir = mkdtempSync(join(tmpdir(), 'upload-'))
  const started: Middleware = (_req, _res, next) => {
    log.started++
    log.emit('started')
    next()
  }
  const stored = (res: ServerResponse, bytes: number) => {
    log.stored.push(bytes)
    res.statusCode = 201
    res.setHeader('content-type', 'application/json')
    res.end(JSON.stringify({ stored: bytes }))
  }
  const failed = (res: ServerResponse, error: unknown) => {
    log.failures.push((error as Error).message)
    log.emit('failed')
    // Body parsers give their errors a status (400 for a body that does not match its declared length).
    if (!res.headersSent) res.writeHead((error as { status?: number }).status ?? 500).end()
  }
  const pipeToFile = async (req: IncomingMessage, res: ServerResponse) => {
    const file = join(dir, randomUUID())
    try {
      await pipeline(req, createWriteStream(file))
      stored(res, statSync(file).size)
    } catch (error) {
      failed(res, error)
    }
  }

  let handler: http.RequestListener
  if (flavor === 'node:http + pipe to a file') {
    handler = (req, res) => {
      guard(req, res, (error) => {
        if (error !== undefined) return failed(res, error)
        started(req, res, () => void pipeToFile(req, res))
      })
    }
  } else {
    const app = express()
    if (flavor === 'express + express.raw') {
      app.post('/upload', guard, started, express.raw({ type: () => true, limit: '1mb' }), (req, res) => {
        stored(res, (req.body as Buffer).length)
      })
    } else {
      app.post('/upload', guard, started, (req, res) => void pipeToFile(req, res))
    }
    app.use((error: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      failed(res, error)
    })
    handler = app
  }
  const server = http.createServer(serverOptions, handler)
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  cleanups.push(async () => {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
    rmSync(dir, { recursive: true, force: true })
  })
  return { port: (server.address() as AddressInfo).port, log }
}

/** A byte budget that barely refills (one byte per 100 s), so what remains is exactly what was not charged. */
function byteBudget(store?: Store, capacity = MAX_BYTES): RateLimiter {
  return tokenBucket({
    name: `bytes-${randomUUID().slice(0, 8)}`,
    capacity,
    refillPerSecond: 0.01,
    ...(store === undefined ? {} : { store }),
  })
}

/** Charges reported by the guard, in the order they came. */
function chargeLog() {
  const events = new EventEmitter()
  const charges: UploadCharge[] = []
  return {
    charges,
    onCharged: (_req: IncomingMessage, charge: UploadCharge) => {
      charges.push(charge)
      events.emit('charged')
    },
    async waitFor(count: number) {
      while (charges.length < count) await once(events, 'charged')
    },
  }
}

async function connect(port: number): Promise<RawHttpClient> {
  const client = await RawHttpClient.connect(port)
  cleanups.push(() => client.destroy())
  return client
}

describe.each(flavors)('uploadGuard through %s', (flavor) => {
  async function setup(options: Partial<UploadGuardOptions> = {}, serverOptions: http.ServerOptions = {}) {
    const bytes = byteBudget()
    const charged = chargeLog()
    const guard = uploadGuard({ maxBytes: MAX_BYTES, bytes, onCharged: charged.onCharged, ...options })
    const { port, log } = await startServer(flavor, guard, serverOptions)
    return { bytes, charged, port, log }
  }

  it('hands the whole body to the route and charges exactly what arrived, with or without a length', async () => {
    const { bytes, charged, port, log } = await setup()
    // Without a length first: it may bring up to maxBytes, so it needs the whole budget free, and is charged 300.
    const client = await connect(port)
    const head = requestHead('POST', '/upload', { 'Transfer-Encoding': 'chunked' })
    await client.write(head + chunk(100) + chunk(200) + lastChunk())
    expect(await client.response).toMatchObject({ status: 201, body: '{"stored":300}' })
    await charged.waitFor(1)

    const response = await fetch(`http://127.0.0.1:${port}/upload`, { method: 'POST', body: 'x'.repeat(700) })
    expect(response.status).toBe(201)
    expect(await response.json()).toEqual({ stored: 700 })
    expect(response.headers.get('ratelimit-policy')).toBe(
      `"${bytes.name}";q=1000;qu="content-bytes";w=100000`,
    )

    await charged.waitFor(2)
    expect(
      charged.charges.map(({ received, charged, complete }) => ({ received, charged, complete })),
    ).toEqual([
      { received: 300, charged: 300, complete: true },
      { received: 700, charged: 700, complete: true },
    ])
    expect((await bytes.peek(IDENTITY)).remaining).toBe(0)
    expect(log.stored).toEqual([300, 700])
  })

  it('refuses a declared Content-Length over maxBytes with 413 before reading a byte of the body', async () => {
    const { charged, port, log } = await setup()
    const client = await connect(port)
    // The head only: the answer comes while the client still holds its whole body.
    await client.write(requestHead('POST', '/upload', { 'Content-Length': MAX_BYTES + 1 }))
    const response = await client.response
    expect(response.status).toBe(413)
    expect(response.headers['content-type']).toBe('application/problem+json')
    expect(response.headers.connection).toBe('close')
    expect(response.headers['ratelimit-policy']).toBe('"upload-size";q=1000;qu="content-bytes"')
    expect(response.headers['retry-after']).toBeUndefined()
    expect(JSON.parse(response.body)).toEqual({
      type: 'about:blank',
      title: 'Content Too Large',
      status: 413,
    })
    await client.closed
    expect([log.started, charged.charges.length]).toEqual([0, 0])
  })

  it('refuses a declared length over the remaining byte budget with 429 before reading the body', async () => {
    const { bytes, charged, port, log } = await setup()
    const first = await fetch(`http://127.0.0.1:${port}/upload`, { method: 'POST', body: 'x'.repeat(700) })
    expect(first.status).toBe(201)
    await charged.waitFor(1)

    const client = await connect(port)
    await client.write(requestHead('POST', '/upload', { 'Content-Length': 400 }))
    const response = await client.response
    expect(response.status).toBe(429)
    // 100 bytes short at one byte per 100 s; the next byte comes back in 100 s.
    expect(response.headers['retry-after']).toBe('10000')
    expect(response.headers.ratelimit).toBe(`"${bytes.name}";r=300;t=100`)
    expect(JSON.parse(response.body)).toMatchObject({ status: 429, 'violated-policies': [bytes.name] })
    await client.closed
    expect([log.started, charged.charges.length]).toEqual([1, 1])
    expect((await bytes.peek(IDENTITY)).remaining).toBe(300)
  })

  it('cuts off a chunked body past maxBytes with 413 and closes the connection; charges what fits', async () => {
    const { bytes, charged, port, log } = await setup()
    const client = await connect(port)
    const head = requestHead('POST', '/upload', { 'Transfer-Encoding': 'chunked' })
    await client.write(head + chunk(600) + chunk(600))
    const response = await client.response
    expect(response.status).toBe(413)
    expect(response.headers.connection).toBe('close')
    await client.closed
    await charged.waitFor(1)
    // 1200 bytes arrived; the budget holds 1000 at most: it is emptied.
    expect(
      charged.charges.map(({ received, charged, complete }) => ({ received, charged, complete })),
    ).toEqual([{ received: 1200, charged: 1000, complete: false }])
    expect((await bytes.peek(IDENTITY)).remaining).toBe(0)
    expect(log.stored).toEqual([])
  })

  it('cuts off a body the route is already reading when it passes maxBytes, and charges maxBytes', async () => {
    const { charged, port, log } = await setup({ bytes: byteBudget(undefined, 5000) })
    const client = await connect(port)
    await client.write(requestHead('POST', '/upload', { 'Transfer-Encoding': 'chunked' }) + chunk(600))
    await log.waitForStarted(1)
    await client.write(chunk(600))
    const response = await client.response
    expect(response.status).toBe(413)
    await client.closed
    await charged.waitFor(1)
    expect(
      charged.charges.map(({ received, charged, complete }) => ({ received, charged, complete })),
    ).toEqual([{ received: 1200, charged: 1000, complete: false }])
    // The route never sees the end of the body: its reader fails, nothing is stored.
    await log.waitForFailures(1)
    expect(log.stored).toEqual([])
  })

  it('a body declaring a small length and sending more, chunked: refused by Node, or counted as it really is', async () => {
    const lying = (body: string) =>
      requestHead('POST', '/upload', { 'Content-Length': 10, 'Transfer-Encoding': 'chunked' }) + body

    // Node's parser refuses a request with both framings: the guard and the route never run.
    const strict = await setup()
    const refused = await connect(strict.port)
    await refused.write(lying(chunk(300) + lastChunk()))
    expect((await refused.response).status).toBe(400)
    await refused.closed
    expect([strict.log.started, strict.charged.charges.length]).toEqual([0, 0])

    // With insecureHTTPParser the chunked framing wins: what arrives is counted, not what was declared, and each
    // such upload reserves maxBytes.
    const lenient = await setup({ bytes: byteBudget(undefined, 5000) }, { insecureHTTPParser: true })
    const small = await connect(lenient.port)
    await small.write(lying(chunk(300) + lastChunk()))
    // express.raw checks the declared length against what it read, and refuses the difference on its own.
    expect(await small.response).toMatchObject(
      flavor === 'express + express.raw' ? { status: 400 } : { status: 201, body: '{"stored":300}' },
    )
    const large = await connect(lenient.port)
    await large.write(lying(chunk(600) + chunk(600)))
    expect((await large.response).status).toBe(413)
    await large.closed
    await lenient.charged.waitFor(2)
    expect(lenient.charged.charges.map(({ received, charged }) => [received, charged])).toEqual([
      [300, 300],
      [1200, 1000],
    ])
  })
})

/** A store passing every step on to `inner`, and telling when each is done (to wait for a lease's release). */
class ObservedStore extends EventEmitter implements Store {
  readonly kind: Store['kind']
  releases = 0

  constructor(private readonly inner: Store) {
    super()
    this.kind = inner.kind
  }

  async run(request: StoreRequest) {
    const reply = await this.inner.run(request)
    if (request.op === 'release') this.releases++
    this.emit(request.op)
    return reply
  }

  consumeAll(requests: readonly StoreRequest[]) {
    return this.inner.consumeAll(requests)
  }

  delete(limiter: string, key: string) {
    return this.inner.delete(limiter, key)
  }

  async waitForReleases(count: number): Promise<void> {
    while (this.releases < count) await once(this, 'release')
  }
}

describe.each(storeKinds)('uploadGuard budgets and leases on the %s store', (kind) => {
  async function fixture() {
    const store = await createStore(kind)
    cleanups.push(() => store.close())
    return store.store
  }

  it('reserves at the door: of two overlapping uploads without a length, the second is refused before its body', async () => {
    const bytes = byteBudget(await fixture())
    const charged = chargeLog()
    const guard = uploadGuard({ maxBytes: MAX_BYTES, bytes, onCharged: charged.onCharged })
    const { port, log } = await startServer('node:http + pipe to a file', guard)
    const head = requestHead('POST', '/upload', { 'Transfer-Encoding': 'chunked' })
    const first = await connect(port)
    await first.write(head + chunk(300))
    // Admitted: it holds maxBytes (the whole budget) until its body is over.
    await log.waitForStarted(1)
    const second = await connect(port)
    await second.write(head + chunk(300))
    expect((await second.response).status).toBe(429)
    await first.write(chunk(300) + lastChunk())
    expect((await first.response).status).toBe(201)
    await charged.waitFor(1)
    // It brought 600: the 400 it did not bring are given back.
    expect(charged.charges.map(({ received, charged }) => [received, charged])).toEqual([[600, 600]])
    expect((await bytes.peek(IDENTITY)).remaining).toBe(400)
    const fits = await fetch(`http://127.0.0.1:${port}/upload`, { method: 'POST', body: 'x'.repeat(400) })
    expect(fits.status).toBe(201)
    expect(log.started).toBe(2)
  })

  it('an upload without a declared length needs room for maxBytes: chunked uploads cannot drain past the budget', async () => {
    const bytes = byteBudget(await fixture(), 2500)
    const charged = chargeLog()
    const guard = uploadGuard({ maxBytes: MAX_BYTES, bytes, onCharged: charged.onCharged })
    const { port, log } = await startServer('node:http + pipe to a file', guard)
    const head = requestHead('POST', '/upload', { 'Transfer-Encoding': 'chunked' })
    for (let i = 0; i < 2; i++) {
      const client = await connect(port)
      await client.write(head + chunk(1000) + lastChunk())
      expect((await client.response).status).toBe(201)
    }
    await charged.waitFor(2)
    expect((await bytes.peek(IDENTITY)).remaining).toBe(500)
    // 500 left: a body of unknown length may bring 1000, so it is refused before it is read.
    const third = await connect(port)
    await third.write(head)
    expect((await third.response).status).toBe(429)
    expect(log.started).toBe(2)
  })

  it('caps simultaneous uploads exactly; each lease is released once: on end, on abort, on a socket error', async () => {
    const store = new ObservedStore(await fixture())
    const concurrent = concurrencyLimit({
      name: `up-${randomUUID().slice(0, 8)}`,
      store,
      max: 2,
      leaseMs: 30_000,
    })
    const guard = uploadGuard({ maxBytes: MAX_BYTES, concurrent })
    const { port, log } = await startServer('express + express.raw', guard)
    const head = requestHead('POST', '/upload', { 'Transfer-Encoding': 'chunked' })

    const [a, b] = [await connect(port), await connect(port)]
    await a.write(head + chunk(10))
    await b.write(head + chunk(10))
    await log.waitForStarted(2)

    const third = await connect(port)
    await third.write(head)
    const refused = await third.response
    expect(refused.status).toBe(429)
    expect(refused.headers['ratelimit-policy']).toBe(`"${concurrent.name}";q=2;qu="concurrent-requests"`)
    expect(refused.headers['retry-after']).toBe('30')
    await third.closed
    expect(log.started).toBe(2)

    // End: the response is over.
    await a.write(chunk(10) + lastChunk())
    expect(await a.response).toMatchObject({ status: 201, body: '{"stored":20}' })
    await store.waitForReleases(1)
    expect((await concurrent.peek(IDENTITY)).remaining).toBe(1)

    // Abort: the client goes away mid-body.
    const c = await connect(port)
    await c.write(head + chunk(10))
    await log.waitForStarted(3)
    b.destroy()
    await store.waitForReleases(2)
    expect((await concurrent.peek(IDENTITY)).remaining).toBe(1)

    // Socket error: a malformed chunk size makes Node's parser fail and destroy the socket.
    await c.write('zz\r\n')
    await c.closed
    await store.waitForReleases(3)
    expect((await concurrent.peek(IDENTITY)).remaining).toBe(2)

    // Three leases granted, three releases: a fourth upload takes one and gives it back, once.
    const d = await connect(port)
    await d.write(head + chunk(5) + lastChunk())
    expect((await d.response).status).toBe(201)
    await store.waitForReleases(4)
    expect((await concurrent.peek(IDENTITY)).remaining).toBe(2)
    expect(store.releases).toBe(4)
  })
})

describe('uploadGuard with an async onCharged that fails', () => {
  it('the upload succeeds and the process stays up (no unhandled rejection)', async () => {
    let calls = 0
    const guard = uploadGuard({
      maxBytes: 1000,
      bytes: tokenBucket({ name: 'async-observer', capacity: 10_000, refillPerSecond: 1 }),
      onCharged: async () => {
        calls++
        throw new Error('audit store down')
      },
    })
    const server = http.createServer((req, res) => {
      guard(req, res, () => {
        req.resume()
        req.once('end', () => res.writeHead(201).end())
      })
    })
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    try {
      const { port } = server.address() as AddressInfo
      for (let i = 0; i < 2; i++) {
        const response = await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body: 'x'.repeat(100) })
        expect(response.status).toBe(201)
      }
      while (calls < 2) await new Promise((resolve) => setImmediate(resolve))
      expect(calls).toBe(2)
    } finally {
      server.closeAllConnections()
      server.close()
    }
  })
})

describe('uploadGuard behind a body parser', () => {
  it('is an error handed to next, not a guard that counts nothing: the route is not reached', async () => {
    const bytes = tokenBucket({ name: 'after-parser', capacity: 10_000, refillPerSecond: 1 })
    let reached = 0
    const errors: unknown[] = []
    const app = express()
    app.use(express.raw({ type: () => true, limit: '1mb' }))
    app.post('/upload', uploadGuard({ maxBytes: 1000, bytes }) as express.RequestHandler, (_req, res) => {
      reached++
      res.status(201).end()
    })
    app.use((error: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      errors.push(error)
      res.status(500).end()
    })
    const server = app.listen(0, '127.0.0.1')
    await once(server, 'listening')
    try {
      const { port } = server.address() as AddressInfo
      const response = await fetch(`http://127.0.0.1:${port}/upload`, {
        method: 'POST',
        body: 'x'.repeat(5000),
      })
      expect(response.status).toBe(500)
      expect(reached).toBe(0)
      expect(errors).toEqual([
        expect.objectContaining({
          code: ErrorCodes.INVALID_OPTION,
          message:
            'uploadGuard: the request body was read before the guard (a body parser ran first): put uploadGuard before any body parser, app-wide ones included',
        }),
      ])
      expect((await bytes.peek('127.0.0.1')).remaining).toBe(10_000)
    } finally {
      server.closeAllConnections()
      server.close()
    }
  })
})

describe('uploadGuard options', () => {
  it('refuses unknown, mistyped and inconsistent options at startup, naming the option', () => {
    const attempts: [unknown, string][] = [
      [{ maxBytes: 10, maxbytes: 10 }, 'uploadGuard: unknown option "maxbytes" (did you mean "maxBytes"?)'],
      [{ maxBytes: 0 }, 'uploadGuard: "maxBytes" must be a positive integer, got 0'],
      [{ maxBytes: 10, bytes: {} }, '"bytes" must be a tokenBucket, slidingWindow or fixedWindow'],
      [{ maxBytes: 2000, bytes: byteBudget() }, '"maxBytes" must be at most the capacity of "bytes" (1000)'],
      [{ maxBytes: 10, concurrent: byteBudget() }, '"concurrent" must be a concurrency limiter'],
      [{ maxBytes: 10, onLimited: 'no' }, '"onLimited" must be a function'],
      [{ maxBytes: 10, onCharged: 1 }, '"onCharged" must be a function'],
      [{ maxBytes: 10, ipv6Prefix: 200 }, 'ipv6Prefix'],
    ]
    for (const [options, message] of attempts) {
      expect(() => uploadGuard(options as UploadGuardOptions)).toThrow(
        expect.objectContaining({
          code: ErrorCodes.INVALID_OPTION,
          message: expect.stringContaining(message),
        }),
      )
    }
  })
})
