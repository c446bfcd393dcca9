/**
 * What `uploadGuard` does on node:http and Express beyond the cases every server runs
 * (test/integration/httpGuards/upload.test.ts): a body whose framings lie (Node's parser, strict or lenient, and
 * `express.raw`'s own check), an async `onCharged` that fails, the guard put behind a body parser, and option
 * validation. Real servers on 127.0.0.1 (port 0), clients writing raw bytes on a socket or using fetch.
 */
import { once } from 'node:events'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import express from 'express'
import { afterEach, describe, expect, it } from 'vitest'
import { ErrorCodes } from '../../../src/core/errors.js'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import type { Refusal } from '../../../src/http/refusal.js'
import { type UploadGuardOptions, uploadGuard } from '../../../src/http/uploadGuard.js'
import type { ServerKind } from '../../helpers/guardedServers.js'
import { chunk, lastChunk, RawHttpClient, requestHead } from '../../helpers/rawHttp.js'
import {
  byteBudget,
  chargeLog,
  MAX_BYTES,
  type Reading,
  startUploadServer,
  type UploadOptions,
} from '../../helpers/uploadApp.js'

const flavors: { name: string; kind: ServerKind; reading: Reading }[] = [
  { name: 'node:http + pipe to a file', kind: 'node:http', reading: 'stream' },
  { name: 'express + express.raw', kind: 'express', reading: 'buffer' },
  { name: 'express + pipe to a file', kind: 'express', reading: 'stream' },
]

const cleanups: (() => unknown)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function connect(port: number): Promise<RawHttpClient> {
  const client = await RawHttpClient.connect(port)
  cleanups.push(() => client.destroy())
  return client
}

describe.each(flavors)('uploadGuard through $name', ({ name: flavor, kind, reading }) => {
  async function setup(options: Partial<UploadOptions> = {}, serverOptions: http.ServerOptions = {}) {
    const bytes = byteBudget()
    const charged = chargeLog()
    const server = await startUploadServer(
      kind,
      reading,
      { maxBytes: MAX_BYTES, bytes, onCharged: charged.onCharged, ...options },
      serverOptions,
    )
    cleanups.push(() => server.close())
    return { bytes, charged, port: server.port, server }
  }

  it('a body declaring a small length and sending more, chunked: refused by Node, or counted as it really is', async () => {
    const lying = (body: string) =>
      requestHead('POST', '/upload', { 'Content-Length': 10, 'Transfer-Encoding': 'chunked' }) + body

    // Node's parser refuses a request with both framings: the guard and the route never run.
    const strict = await setup()
    const refused = await connect(strict.port)
    await refused.write(lying(chunk(300) + lastChunk()))
    expect((await refused.response).status).toBe(400)
    await refused.closed
    expect([strict.server.passed, strict.charged.charges.length]).toEqual([0, 0])

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

describe('uploadGuard refusing a declared length over maxBytes', () => {
  it('hands onLimited a decision of its own (source "guard", never allowed) and spends nothing', async () => {
    const bytes = byteBudget()
    const refusals: Refusal[] = []
    const guard = uploadGuard({
      maxBytes: MAX_BYTES,
      bytes,
      onLimited: (_req, res, refusal) => {
        refusals.push(refusal)
        res.writeHead(refusal.status).end()
      },
    })
    const server = http.createServer((req, res) => guard(req, res, () => res.writeHead(201).end()))
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    try {
      const { port } = server.address() as AddressInfo
      const response = await fetch(`http://127.0.0.1:${port}/`, {
        method: 'POST',
        body: 'x'.repeat(MAX_BYTES + 1),
      })
      expect(response.status).toBe(413)
      expect(
        refusals.map(({ status, decision }) => [status, decision.source, decision.neverAllowed]),
      ).toEqual([[413, 'guard', true]])
      expect((await bytes.peek('127.0.0.1')).remaining).toBe(MAX_BYTES)
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
