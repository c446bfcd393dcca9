/**
 * The upload guard's bound, measured with an attacker's traffic through real Express 5 (`uploadGuard`) and Fastify 5
 * (`tollboothUpload`) servers on 127.0.0.1: one identity storing more than its byte budget plus the refill over the
 * time taken, with parallel uploads whose bodies come late (every head is decided before any body is sent: a guard
 * that peeks at the door and charges at the end admits them all), with or without a declared length, with or without
 * `concurrent`, with bodies aborted halfway and bodies going past `maxBytes`. Raw sockets write the requests.
 *
 * Exact counts run on a MemoryStore whose virtual clock stands still (no refill during the test); one test per server
 * runs on the wall clock and bounds what was stored by the budget plus the refill over the time it took.
 */
import { once } from 'node:events'
import http from 'node:http'
import express from 'express'
import Fastify from 'fastify'
import { afterEach, describe, expect, it } from 'vitest'
import { concurrencyLimit } from '../../../src/core/limiters/concurrencyLimit.js'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import { MemoryStore } from '../../../src/core/stores/memoryStore.js'
import { tollboothUpload } from '../../../src/fastify/index.js'
import { type UploadCharge, uploadGuard } from '../../../src/http/uploadGuard.js'
import { VirtualClock } from '../../helpers/contract.js'
import { listenOnLoopback } from '../../helpers/httpServer.js'
import { chunk, lastChunk, RawHttpClient, requestHead } from '../../helpers/rawHttp.js'

const MB = 1_000_000
const IDENTITY = '127.0.0.1'

const cleanups: (() => unknown)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

interface Limits {
  /** A budget of 1 MB refilled at `refillPerSecond` bytes per second; on a standing clock unless `realClock`. */
  readonly refillPerSecond: number
  readonly maxBytes: number
  readonly concurrent?: number
  readonly realClock?: boolean
}

interface UploadApp {
  readonly port: number
  readonly bytes: ReturnType<typeof tokenBucket>
  /** Uploads that got past the guard. */
  started: number
  /** Body bytes the route read, over every upload (complete or not). */
  stored: number
  readonly charges: UploadCharge[]
  /** Resolves once `count` uploads got past the guard. */
  waitForStarted(count: number): Promise<void>
}

function limitsOf(limits: Limits) {
  const store = new MemoryStore(limits.realClock === true ? {} : { clock: new VirtualClock().now })
  return {
    maxBytes: limits.maxBytes,
    bytes: tokenBucket({
      name: 'upload-bytes',
      store,
      capacity: MB,
      refillPerSecond: limits.refillPerSecond,
    }),
    ...(limits.concurrent === undefined
      ? {}
      : {
          concurrent: concurrencyLimit({ name: 'uploads', store, max: limits.concurrent, leaseMs: 60_000 }),
        }),
  }
}

function appState(bytes: UploadApp['bytes']) {
  const events = new (class extends EventTarget {})()
  const app = {
    port: 0,
    bytes,
    started: 0,
    stored: 0,
    charges: [] as UploadCharge[],
    entered() {
      app.started++
      events.dispatchEvent(new Event('started'))
    },
    async waitForStarted(count: number) {
      while (app.started < count) await once(events, 'started')
    },
  }
  return app
}

async function expressApp(limits: Limits): Promise<UploadApp> {
  const options = limitsOf(limits)
  const app = appState(options.bytes)
  const server = express()
  server.post(
    '/upload',
    uploadGuard({ ...options, onCharged: (_req, charge) => app.charges.push(charge) }),
    (req, res) => {
      app.entered()
      req.on('data', (data: Buffer) => {
        app.stored += data.length
      })
      req.on('end', () => res.status(201).end())
      req.on('error', () => {})
    },
  )
  const listening = await listenOnLoopback(http.createServer(server))
  cleanups.push(listening.close)
  app.port = listening.port
  return app
}

async function fastifyApp(limits: Limits): Promise<UploadApp> {
  const options = limitsOf(limits)
  const app = appState(options.bytes)
  const server = Fastify({ logger: false, bodyLimit: 10 * MB })
  cleanups.push(() => server.close())
  server.addContentTypeParser('*', (_request, payload, done) => done(null, payload))
  await server.register(tollboothUpload, {
    ...options,
    onCharged: (_request, charge) => app.charges.push(charge),
  })
  server.post('/upload', async (request, reply) => {
    app.entered()
    try {
      for await (const data of request.body as AsyncIterable<Buffer>) app.stored += data.length
    } catch {
      return reply
    }
    return reply.code(201).send()
  })
  const url = await server.listen({ port: 0, host: '127.0.0.1' })
  app.port = Number(new URL(url).port)
  return app
}

const servers = [
  ['Express', expressApp],
  ['Fastify', fastifyApp],
] as const

async function connect(port: number): Promise<RawHttpClient> {
  const client = await RawHttpClient.connect(port)
  cleanups.push(() => client.destroy())
  return client
}

/**
 * `count` uploads of `size` bytes at once: every head first (with a `Content-Length`, or chunked), then, once each
 * upload is refused or past the guard, the bodies of those past it. Resolves when all are answered.
 */
async function slowParallelUploads(app: UploadApp, count: number, size: number, chunked: boolean) {
  const type = { 'Content-Type': 'application/octet-stream' }
  const head = requestHead(
    'POST',
    '/upload',
    chunked ? { ...type, 'Transfer-Encoding': 'chunked' } : { ...type, 'Content-Length': size },
  )
  const clients = await Promise.all(Array.from({ length: count }, () => connect(app.port)))
  await Promise.all(clients.map((client) => client.write(head)))
  let refused = 0
  const decided = new EventTarget()
  const answered = clients.map((client) =>
    client.response.then(
      (response) => {
        if (response.status === 429) refused++
        decided.dispatchEvent(new Event('answer'))
        return response.status
      },
      () => 0,
    ),
  )
  // Every upload decided (refused, or past the guard) before any body is sent.
  while (refused + app.started < count) {
    await Promise.race([once(decided, 'answer'), app.waitForStarted(app.started + 1)])
  }
  const started = app.started
  const body = chunked ? `${chunk(size, 'b')}${lastChunk()}` : 'b'.repeat(size)
  await Promise.all(
    clients.map(async (client, i) => {
      if ((await Promise.race([answered[i], 'pending'])) === 'pending') await client.write(body)
    }),
  )
  return { statuses: await Promise.all(answered), started }
}

const counts = (statuses: readonly number[]) => {
  const found: Record<number, number> = {}
  for (const status of statuses) found[status] = (found[status] ?? 0) + 1
  return found
}

describe.each(servers)('upload bounds through %s', (_name, start) => {
  for (const chunked of [false, true]) {
    for (const concurrent of [undefined, 2]) {
      it(`50 parallel 1 MB uploads whose bodies come late (${chunked ? 'chunked' : 'Content-Length'}, concurrent ${concurrent ?? 'none'}): one is admitted, 1 MB stored`, async () => {
        const app = await start({
          refillPerSecond: 100_000,
          maxBytes: MB,
          ...(concurrent === undefined ? {} : { concurrent }),
        })
        const { statuses, started } = await slowParallelUploads(app, 50, MB, chunked)
        expect(started).toBe(1)
        expect(counts(statuses)).toEqual({ 201: 1, 429: 49 })
        expect(app.stored).toBe(MB)
        expect(app.charges.map(({ charged }) => charged)).toEqual([MB])
        expect((await app.bytes.peek(IDENTITY)).remaining).toBe(0)
      })
    }
  }

  it('on the wall clock, 50 parallel late uploads of 200 kB store at most 1 MB + 100 kB/s × the time taken', async () => {
    const app = await start({ refillPerSecond: 100_000, maxBytes: 200_000, realClock: true })
    const started = performance.now()
    const { statuses } = await slowParallelUploads(app, 50, 200_000, false)
    const seconds = (performance.now() - started) / 1000
    expect(statuses.filter((status) => status !== 201 && status !== 429)).toEqual([])
    expect(app.stored).toBe(200_000 * statuses.filter((status) => status === 201).length)
    expect(app.stored).toBeGreaterThanOrEqual(MB)
    expect(app.stored).toBeLessThanOrEqual(MB + 100_000 * seconds)
  })

  it('10 uploads declaring 100 kB, aborted after 30 kB: each keeps 30 kB of the budget, gives back 70 kB', async () => {
    const app = await start({ refillPerSecond: 100_000, maxBytes: 100_000 })
    const head = requestHead('POST', '/upload', {
      'Content-Type': 'application/octet-stream',
      'Content-Length': 100_000,
    })
    for (let i = 0; i < 10; i++) {
      const client = await connect(app.port)
      await client.write(head + 'a'.repeat(30_000))
      while (app.stored < (i + 1) * 30_000) await new Promise((resolve) => setImmediate(resolve))
      client.destroy()
      while (app.charges.length < i + 1) await new Promise((resolve) => setImmediate(resolve))
    }
    expect(app.charges.map(({ received, charged, complete }) => [received, charged, complete])).toEqual(
      Array.from({ length: 10 }, () => [30_000, 30_000, false]),
    )
    expect((await app.bytes.peek(IDENTITY)).remaining).toBe(MB - 300_000)
  })

  it('a chunked upload cut off past maxBytes (100,000) is charged 100,000, however much more it sent', async () => {
    const app = await start({ refillPerSecond: 100_000, maxBytes: 100_000 })
    const client = await connect(app.port)
    await client.write(
      requestHead('POST', '/upload', {
        'Content-Type': 'application/octet-stream',
        'Transfer-Encoding': 'chunked',
      }) +
        chunk(65_536) +
        chunk(65_536),
    )
    expect((await client.response).status).toBe(413)
    while (app.charges.length === 0) await new Promise((resolve) => setImmediate(resolve))
    expect(app.charges[0]?.charged).toBe(100_000)
    expect(app.stored).toBeLessThanOrEqual(100_000)
    expect((await app.bytes.peek(IDENTITY)).remaining).toBe(MB - 100_000)
  })
})
