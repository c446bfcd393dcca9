/**
 * `tollboothUpload` (tollbooth/fastify) end to end: real Fastify 5 servers on 127.0.0.1 (port 0) whose upload route
 * reads the body through a content-type parser (buffered) or pipes the parser's stream to a file, clients writing raw
 * bytes on a socket (heads without bodies, chunked bodies) or using fetch, budgets and leases on memory, Redis and the
 * Redis Cluster.
 */
import { randomUUID } from 'node:crypto'
import { EventEmitter, once } from 'node:events'
import { createWriteStream, mkdtempSync, rmSync, statSync } from 'node:fs'
import type { IncomingMessage } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pipeline } from 'node:stream/promises'
import Fastify, { type FastifyRequest } from 'fastify'
import { afterEach, describe, expect, it } from 'vitest'
import { ErrorCodes } from '../../../src/core/errors.js'
import { concurrencyLimit } from '../../../src/core/limiters/concurrencyLimit.js'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import type { RateLimiter } from '../../../src/core/rateLimiter.js'
import type { Store } from '../../../src/core/stores/store.js'
import {
  type TollboothUploadOptions,
  tollboothUpload,
  type UploadCharge,
} from '../../../src/fastify/index.js'
import { CountingStore } from '../../helpers/countingStore.js'
import { chunk, lastChunk, RawHttpClient, requestHead } from '../../helpers/rawHttp.js'
import { createStore, storeKinds } from '../../helpers/stores.js'

const MAX_BYTES = 1000
const IDENTITY = '127.0.0.1'
const PROBLEM_JSON = 'application/problem+json; charset=utf-8'

type Flavor = 'buffered by a content-type parser' | 'piped to a file'
const flavors: Flavor[] = ['buffered by a content-type parser', 'piped to a file']

const cleanups: (() => unknown)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** What the route saw: 'started' when a request got past the guard, 'stored' / 'failed' when the handler is done. */
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

/** A Fastify server with `POST /upload` guarded by the plugin, answering 201 `{ stored }` with the bytes it got. */
async function startServer(flavor: Flavor, options: TollboothUploadOptions) {
  const log = new RouteLog()
  const dir = mkdtempSync(join(tmpdir(), 'fastify-upload-'))
  const app = Fastify({ logger: false })
  cleanups.push(async () => {
    await app.close()
    rmSync(dir, { recursive: true, force: true })
  })
  app.setErrorHandler((error: Error & { statusCode?: number }, _request, reply) => {
    log.failures.push(error.message)
    log.emit('failed')
    void reply.code(error.statusCode ?? 500).send({ error: error.message })
  })
  if (flavor === 'buffered by a content-type parser') {
    app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body))
  } else {
    // The body stays a stream: the handler reads it.
    app.addContentTypeParser('*', (_request, payload, done) => done(null, payload))
  }
  await app.register(tollboothUpload, options)
  app.post(
    '/upload',
    {
      // After the guard's onRequest, before the body is parsed: the request got past the guard.
      preParsing: async (_request, _reply, payload) => {
        log.started++
        log.emit('started')
        return payload
      },
    },
    async (request, reply) => {
      let stored: number
      if (flavor === 'buffered by a content-type parser') {
        stored = (request.body as Buffer).length
      } else {
        const file = join(dir, randomUUID())
        try {
          await pipeline(request.body as IncomingMessage, createWriteStream(file))
        } catch (error) {
          log.failures.push((error as Error).message)
          log.emit('failed')
          return reply
        }
        stored = statSync(file).size
      }
      log.stored.push(stored)
      return reply.code(201).send({ stored })
    },
  )
  const url = await app.listen({ port: 0, host: '127.0.0.1' })
  return { port: Number(new URL(url).port), log }
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

/** Charges reported by the guard, in the order they came, and the Fastify requests they were reported for. */
function chargeLog() {
  const events = new EventEmitter()
  const charges: UploadCharge[] = []
  const routes: (string | undefined)[] = []
  return {
    charges,
    routes,
    onCharged: (request: FastifyRequest, charge: UploadCharge) => {
      charges.push(charge)
      routes.push(request.routeOptions.url)
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

const chunkedHead = () =>
  requestHead('POST', '/upload', {
    'Transfer-Encoding': 'chunked',
    'Content-Type': 'application/octet-stream',
  })

function summary(charges: UploadCharge[]) {
  return charges.map(({ received, charged, complete }) => ({ received, charged, complete }))
}

describe.each(flavors)('tollboothUpload with the body %s', (flavor) => {
  async function setup(options: Partial<TollboothUploadOptions> = {}) {
    const bytes = byteBudget()
    const charged = chargeLog()
    const { port, log } = await startServer(flavor, {
      maxBytes: MAX_BYTES,
      bytes,
      onCharged: charged.onCharged,
      ...options,
    })
    return { bytes, charged, port, log }
  }

  it('hands the whole body to the handler and charges exactly what arrived, with or without a length', async () => {
    const { bytes, charged, port, log } = await setup()
    // Without a length first: it may bring up to maxBytes, so it needs the whole budget free, and is charged 300.
    const client = await connect(port)
    await client.write(chunkedHead() + chunk(100) + chunk(200) + lastChunk())
    expect(await client.response).toMatchObject({ status: 201, body: '{"stored":300}' })
    await charged.waitFor(1)

    const response = await fetch(`http://127.0.0.1:${port}/upload`, {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream' },
      body: 'x'.repeat(700),
    })
    expect(response.status).toBe(201)
    expect(await response.json()).toEqual({ stored: 700 })
    expect(response.headers.get('ratelimit-policy')).toBe(
      `"${bytes.name}";q=1000;qu="content-bytes";w=100000`,
    )
    // What the budget holds once the upload's 700 are reserved: empty, the next byte back in 100 s.
    expect(response.headers.get('ratelimit')).toBe(`"${bytes.name}";r=0;t=100`)

    await charged.waitFor(2)
    expect(summary(charged.charges)).toEqual([
      { received: 300, charged: 300, complete: true },
      { received: 700, charged: 700, complete: true },
    ])
    expect(charged.routes).toEqual(['/upload', '/upload'])
    expect((await bytes.peek(IDENTITY)).remaining).toBe(0)
    expect(log.stored).toEqual([300, 700])
  })

  it('refuses a declared Content-Length over maxBytes with 413 before reading a byte of the body', async () => {
    const { charged, port, log } = await setup()
    const client = await connect(port)
    // The head only: the answer comes while the client still holds its whole body.
    await client.write(
      requestHead('POST', '/upload', {
        'Content-Length': MAX_BYTES + 1,
        'Content-Type': 'application/octet-stream',
      }),
    )
    const response = await client.response
    expect(response.status).toBe(413)
    expect(response.headers['content-type']).toBe(PROBLEM_JSON)
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
    const first = await fetch(`http://127.0.0.1:${port}/upload`, {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream' },
      body: 'x'.repeat(700),
    })
    expect(first.status).toBe(201)
    await charged.waitFor(1)

    const client = await connect(port)
    await client.write(
      requestHead('POST', '/upload', { 'Content-Length': 400, 'Content-Type': 'application/octet-stream' }),
    )
    const response = await client.response
    expect(response.status).toBe(429)
    // 100 bytes short at one byte per 100 s; the next byte comes back in 100 s.
    expect(response.headers['retry-after']).toBe('10000')
    expect(response.headers.ratelimit).toBe(`"${bytes.name}";r=300;t=100`)
    expect(response.headers.connection).toBe('close')
    expect(JSON.parse(response.body)).toMatchObject({ status: 429, 'violated-policies': [bytes.name] })
    await client.closed
    expect([log.started, charged.charges.length]).toEqual([1, 1])
    expect((await bytes.peek(IDENTITY)).remaining).toBe(300)
  })

  it('cuts off a chunked body past maxBytes with 413 and closes the connection; charges what fits', async () => {
    const { bytes, charged, port, log } = await setup()
    const client = await connect(port)
    await client.write(chunkedHead() + chunk(600) + chunk(600))
    const response = await client.response
    expect(response.status).toBe(413)
    expect(response.headers.connection).toBe('close')
    expect(JSON.parse(response.body)).toEqual({
      type: 'about:blank',
      title: 'Content Too Large',
      status: 413,
    })
    await client.closed
    await charged.waitFor(1)
    // 1200 bytes arrived; the budget holds 1000 at most: it is emptied.
    expect(summary(charged.charges)).toEqual([{ received: 1200, charged: 1000, complete: false }])
    expect((await bytes.peek(IDENTITY)).remaining).toBe(0)
    expect(log.stored).toEqual([])
  })

  it('cuts off a body the handler is already reading when it passes maxBytes, and charges maxBytes', async () => {
    const { charged, port, log } = await setup({ bytes: byteBudget(undefined, 5000) })
    const client = await connect(port)
    await client.write(chunkedHead() + chunk(600))
    await log.waitForStarted(1)
    await client.write(chunk(600))
    const response = await client.response
    expect(response.status).toBe(413)
    expect(response.headers.connection).toBe('close')
    await client.closed
    await charged.waitFor(1)
    expect(summary(charged.charges)).toEqual([{ received: 1200, charged: 1000, complete: false }])
    expect(log.stored).toEqual([])
  })
})

describe.each(storeKinds)('tollboothUpload budgets and leases on the %s store', (kind) => {
  async function fixture() {
    const store = await createStore(kind)
    cleanups.push(() => store.close())
    return store.store
  }

  it('reserves at the door: of two overlapping uploads without a length, the second is refused before its body', async () => {
    const bytes = byteBudget(await fixture())
    const charged = chargeLog()
    const { port, log } = await startServer('piped to a file', {
      maxBytes: MAX_BYTES,
      bytes,
      onCharged: charged.onCharged,
    })
    const first = await connect(port)
    await first.write(chunkedHead() + chunk(300))
    // Admitted: it holds maxBytes (the whole budget) until its body is over.
    await log.waitForStarted(1)
    const second = await connect(port)
    await second.write(chunkedHead() + chunk(300))
    expect((await second.response).status).toBe(429)
    await first.write(chunk(300) + lastChunk())
    expect((await first.response).status).toBe(201)
    await charged.waitFor(1)
    // It brought 600: the 400 it did not bring are given back.
    expect(charged.charges.map((c) => [c.received, c.charged])).toEqual([[600, 600]])
    expect((await bytes.peek(IDENTITY)).remaining).toBe(400)
    expect(log.started).toBe(1)
  })

  it('caps simultaneous uploads exactly; each lease is released once: on end, on abort, on a socket error', async () => {
    const store = new CountingStore(await fixture())
    const concurrent = concurrencyLimit({
      name: `up-${randomUUID().slice(0, 8)}`,
      store,
      max: 2,
      leaseMs: 30_000,
    })
    const { port, log } = await startServer('buffered by a content-type parser', {
      maxBytes: MAX_BYTES,
      concurrent,
    })
    const releases = (count: number) => store.until(() => store.count('release') === count)

    const [a, b] = [await connect(port), await connect(port)]
    await a.write(chunkedHead() + chunk(10))
    await b.write(chunkedHead() + chunk(10))
    await log.waitForStarted(2)

    const third = await connect(port)
    await third.write(chunkedHead())
    const refused = await third.response
    expect(refused.status).toBe(429)
    expect(refused.headers['ratelimit-policy']).toBe(`"${concurrent.name}";q=2;qu="concurrent-requests"`)
    expect(refused.headers['retry-after']).toBe('30')
    await third.closed
    expect(log.started).toBe(2)

    // End: the response is over.
    await a.write(chunk(10) + lastChunk())
    expect(await a.response).toMatchObject({ status: 201, body: '{"stored":20}' })
    await releases(1)
    expect((await concurrent.peek(IDENTITY)).remaining).toBe(1)

    // Abort: the client goes away mid-body.
    const c = await connect(port)
    await c.write(chunkedHead() + chunk(10))
    await log.waitForStarted(3)
    b.destroy()
    await releases(2)
    expect((await concurrent.peek(IDENTITY)).remaining).toBe(1)

    // Socket error: a malformed chunk size makes Node's parser fail and destroy the socket.
    await c.write('zz\r\n')
    await c.closed
    await releases(3)
    expect((await concurrent.peek(IDENTITY)).remaining).toBe(2)

    // Three leases granted, three releases: a fourth upload takes one and gives it back, once.
    const d = await connect(port)
    await d.write(chunkedHead() + chunk(5) + lastChunk())
    expect((await d.response).status).toBe(201)
    await releases(4)
    expect((await concurrent.peek(IDENTITY)).remaining).toBe(2)
    expect([store.count('acquire'), store.count('release')]).toEqual([5, 4])
  })
})

describe('tollboothUpload route config and options', () => {
  it("a route's own maxBytes, and a route left unguarded", async () => {
    const app = Fastify({ logger: false })
    cleanups.push(() => app.close())
    app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body))
    await app.register(tollboothUpload, { maxBytes: MAX_BYTES })
    const stored = async (request: FastifyRequest) => ({ stored: (request.body as Buffer).length })
    app.post('/upload', stored)
    app.post('/small', { config: { tollboothUpload: { maxBytes: 10 } } }, stored)
    app.post('/free', { config: { tollboothUpload: false } }, stored)
    const url = await app.listen({ port: 0, host: '127.0.0.1' })
    const upload = async (path: string, size: number) => {
      const response = await fetch(`${url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/octet-stream' },
        body: 'x'.repeat(size),
      })
      return [response.status, await response.json()]
    }
    expect(await upload('/upload', 11)).toEqual([200, { stored: 11 }])
    expect(await upload('/small', 11)).toEqual([
      413,
      { type: 'about:blank', title: 'Content Too Large', status: 413 },
    ])
    expect(await upload('/free', 2000)).toEqual([200, { stored: 2000 }])
    expect((await upload('/upload', 2000))[0]).toBe(413)
  })

  async function startupError(options: unknown, routeConfig?: unknown) {
    const app = Fastify({ logger: false })
    cleanups.push(() => app.close())
    const start = async () => {
      await app.register(tollboothUpload, options as TollboothUploadOptions)
      app.post('/upload', { config: { tollboothUpload: routeConfig as false } }, async () => ({}))
      await app.ready()
    }
    const error = await start().then(
      () => undefined,
      (rejection: unknown) => rejection,
    )
    expect(error).toBeInstanceOf(Error)
    return { code: (error as { code: string }).code, message: (error as Error).message }
  }

  it.each([
    [{ maxBytes: 10, maxbytes: 10 }, 'tollboothUpload: unknown option "maxbytes" (did you mean "maxBytes"?)'],
    [{ maxBytes: 0 }, 'tollboothUpload: "maxBytes" must be a positive integer, got 0'],
    [
      { maxBytes: 10, bytes: {} },
      'tollboothUpload: "bytes" must be a tokenBucket, slidingWindow or fixedWindow',
    ],
    [
      { maxBytes: 2000, bytes: byteBudget() },
      'tollboothUpload: "maxBytes" must be at most the capacity of "bytes" (1000)',
    ],
    [
      { maxBytes: 10, concurrent: byteBudget() },
      'tollboothUpload: "concurrent" must be a concurrency limiter',
    ],
    [{ maxBytes: 10, onLimited: 'no' }, 'tollboothUpload: "onLimited" must be a function'],
    [{ maxBytes: 10, onCharged: 1 }, 'tollboothUpload: "onCharged" must be a function'],
    [{ maxBytes: 10, identify: 'x-user' }, 'tollboothUpload: "identify" must be a function'],
    [{ maxBytes: 10, ipv6Prefix: 200 }, 'tollboothUpload: "ipv6Prefix" must be'],
    ['big', 'tollboothUpload: "options" must be an object'],
  ])('plugin options %j are refused', async (options, message) => {
    const error = await startupError(options)
    expect(error.code).toBe(ErrorCodes.INVALID_OPTION)
    expect(error.message.startsWith(message)).toBe(true)
  })

  it.each([
    [
      { maxByte: 10 },
      'tollboothUpload: unknown option "config.tollboothUpload.maxByte" (did you mean "maxBytes"?)',
    ],
    [
      { maxBytes: -1 },
      'tollboothUpload: "config.tollboothUpload.maxBytes" must be a positive integer, got -1',
    ],
    [{ onLimited: 1 }, 'tollboothUpload: "config.tollboothUpload.onLimited" must be a function'],
    [{ ipv4Prefix: 40 }, 'tollboothUpload: "config.tollboothUpload.ipv4Prefix" must be'],
    [true, 'tollboothUpload: "config.tollboothUpload" must be an object of options or false, got true'],
  ])('route config %j is refused', async (routeConfig, message) => {
    const error = await startupError({ maxBytes: 100 }, routeConfig)
    expect(error.code).toBe(ErrorCodes.INVALID_OPTION)
    expect(error.message.startsWith(message)).toBe(true)
  })
})
