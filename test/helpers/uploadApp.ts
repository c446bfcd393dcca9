/**
 * The upload app of the upload-guard tests, on node:http, Express or Fastify (test/helpers/guardedServers.ts):
 * `POST /upload` behind `uploadGuard` or `tollboothUpload`, its route buffering the body or piping it to a file and
 * answering 201 `{ stored }` with the bytes it got; byte budgets that barely refill and a log of the charges.
 */
import { randomUUID } from 'node:crypto'
import { EventEmitter, once } from 'node:events'
import { createWriteStream, mkdtempSync, rmSync, statSync } from 'node:fs'
import type { ServerOptions } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { tokenBucket } from '../../src/core/limiters/tokenBucket.js'
import type { RateLimiter } from '../../src/core/rateLimiter.js'
import type { Store } from '../../src/core/stores/store.js'
import { type TollboothUploadOptions, tollboothUpload } from '../../src/fastify/index.js'
import { type UploadCharge, type UploadGuardOptions, uploadGuard } from '../../src/http/uploadGuard.js'
import { type GuardedServer, type ServerKind, serveGuarded } from './guardedServers.js'
import { requestHead } from './rawHttp.js'

export const MAX_BYTES = 1000
export const IDENTITY = '127.0.0.1'
export const OCTETS = { 'Content-Type': 'application/octet-stream' }

export type Reading = 'buffer' | 'stream'

/** The options of both guards; `onCharged` is given the server's own request. */
export type UploadOptions = Omit<UploadGuardOptions, 'onCharged'> & {
  onCharged?: (req: unknown, charge: UploadCharge) => void
}

export interface UploadServer extends GuardedServer {
  /** The sizes the route stored. */
  readonly stored: number[]
}

/**
 * `POST /upload` behind the guard on `kind`, answering 201 `{ stored }` with the bytes the route got. Requests past
 * the guard are `passed`, the route's failing body reads `errors`.
 */
export async function startUploadServer(
  kind: ServerKind,
  reading: Reading,
  options: UploadOptions,
  serverOptions?: ServerOptions,
): Promise<UploadServer> {
  const dir = mkdtempSync(join(tmpdir(), 'upload-'))
  const stored: number[] = []
  const server = await serveGuarded(
    kind,
    kind === 'fastify'
      ? { register: (app) => app.register(tollboothUpload, options as TollboothUploadOptions) }
      : { middleware: uploadGuard(options as UploadGuardOptions) },
    async (exchange) => {
      let bytes: number
      if (reading === 'buffer') {
        bytes = (exchange.body as Buffer).length
      } else {
        const file = join(dir, randomUUID())
        try {
          await pipeline(exchange.body as Readable, createWriteStream(file))
        } catch (error) {
          return exchange.fail(error)
        }
        bytes = statSync(file).size
      }
      stored.push(bytes)
      exchange.send(201, JSON.stringify({ stored: bytes }), { 'content-type': 'application/json' })
    },
    { body: reading, ...(serverOptions === undefined ? {} : { serverOptions }) },
  )
  const close = server.close
  return Object.assign(server, {
    stored,
    close: async () => {
      await close()
      rmSync(dir, { recursive: true, force: true })
    },
  })
}

/** A byte budget that barely refills (one byte per 100 s), so what remains is exactly what was not charged. */
export function byteBudget(store?: Store, capacity = MAX_BYTES): RateLimiter {
  return tokenBucket({
    name: `bytes-${randomUUID().slice(0, 8)}`,
    capacity,
    refillPerSecond: 0.01,
    ...(store === undefined ? {} : { store }),
  })
}

/** Charges reported by the guard, in the order they came, and the requests they were reported for. */
export function chargeLog() {
  const events = new EventEmitter()
  const charges: UploadCharge[] = []
  const requests: unknown[] = []
  return {
    charges,
    requests,
    onCharged: (req: unknown, charge: UploadCharge) => {
      charges.push(charge)
      requests.push(req)
      events.emit('charged')
    },
    async waitFor(count: number) {
      while (charges.length < count) await once(events, 'charged')
    },
  }
}

export function summary(charges: UploadCharge[]) {
  return charges.map(({ received, charged, complete }) => ({ received, charged, complete }))
}

export const chunkedHead = () => requestHead('POST', '/upload', { 'Transfer-Encoding': 'chunked', ...OCTETS })

export function upload(server: GuardedServer, size: number): Promise<Response> {
  return fetch(`${server.url}/upload`, {
    method: 'POST',
    headers: { 'content-type': 'application/octet-stream' },
    body: 'x'.repeat(size),
  })
}
