/**
 * The concurrency guard's behaviour, the same cases on node:http and Express (`concurrencyGuard`) and Fastify
 * (`tollboothConcurrency`), on memory, Redis and the cluster, through real servers and clients: one lease per
 * request, released exactly once when the response finishes, when the client aborts mid-response and when the
 * client socket is reset; renewed while a long response runs; two apps sharing the slots of a store. Store
 * operations are counted by a pass-through wrapper around the real store. What only one server has stays beside
 * its own guard: test/integration/http/concurrencyGuard.test.ts, test/integration/fastify/tollboothConcurrency.test.ts.
 */
import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import { connect } from 'node:net'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { type ConcurrencyLimiter, concurrencyLimit } from '../../../src/core/limiters/concurrencyLimit.js'
import { tollboothConcurrency } from '../../../src/fastify/index.js'
import { concurrencyGuard } from '../../../src/http/index.js'
import { CountingStore } from '../../helpers/countingStore.js'
import {
  type Exchange,
  type GuardedServer,
  type HeldResponse,
  partnerOf,
  type ServerKind,
  serveGuarded,
  serverKinds,
} from '../../helpers/guardedServers.js'
import { limitHeaders, startRequest } from '../../helpers/httpServer.js'
import { createStore, type StoreFixture, storeKinds } from '../../helpers/stores.js'

const identify = (req: { headers: IncomingMessage['headers'] }) =>
  String(req.headers['x-user'] ?? 'anonymous')

const open: GuardedServer[] = []
afterEach(async () => {
  await Promise.all(open.splice(0).map((server) => server.close()))
})

/** `limiter` guarding the route on `kind`, each request identified by its `x-user`. */
async function serve(
  kind: ServerKind,
  limiter: ConcurrencyLimiter,
  route: (exchange: Exchange) => void,
): Promise<GuardedServer> {
  const options = { limiter, identify }
  const server = await serveGuarded(
    kind,
    kind === 'fastify'
      ? { register: (app) => app.register(tollboothConcurrency, options) }
      : { middleware: concurrencyGuard(options) },
    route,
  )
  open.push(server)
  return server
}

/** A route that starts its response and holds it open until the test ends it. */
function holdingRoute() {
  const held: (HeldResponse & { exchange: Exchange })[] = []
  const route = (exchange: Exchange) => {
    const response = exchange.stream()
    response.write('holding\n')
    held.push({ ...response, exchange })
  }
  return { held, route }
}

const uniqueName = (what: string) => `${what}-${randomUUID().slice(0, 6)}`

describe.each(storeKinds)('the concurrency guard on a %s store', (storeKind) => {
  let fixture: StoreFixture
  beforeAll(async () => {
    fixture = await createStore(storeKind)
  })
  afterAll(async () => {
    await fixture.close()
  })

  describe.each(serverKinds)('on %s', (kind) => {
    it(`two apps (${kind} and ${partnerOf(kind)}) share the slots of an identity: the third is refused with exact headers; each lease is released once when its response finishes`, async () => {
      const store = new CountingStore(fixture.store)
      const options = { name: uniqueName('jobs'), store, max: 2, leaseMs: 30_000 }
      const holding = holdingRoute()
      // Two apps, each with its own limiter object, as two processes would have.
      const a = await serve(kind, concurrencyLimit(options), holding.route)
      const b = await serve(partnerOf(kind), concurrencyLimit(options), holding.route)
      const first = await startRequest(a.url, 'u1')
      const second = await startRequest(b.url, 'u1')
      await a.waitForRouteHits(1)
      await b.waitForRouteHits(1)
      expect(first.first).toBe('holding\n')
      expect(first.res.headers.ratelimit).toBe(`"${options.name}";r=1;t=30`)
      expect(second.res.headers.ratelimit).toBe(`"${options.name}";r=0;t=30`)
      expect(first.res.headers['ratelimit-policy']).toBe(`"${options.name}";q=2;qu="concurrent-requests"`)

      for (const app of [a, b]) {
        const refused = await fetch(app.url, { headers: { 'x-user': 'u1' } })
        expect(refused.status).toBe(429)
        expect(limitHeaders(refused)).toEqual({
          'ratelimit-policy': `"${options.name}";q=2;qu="concurrent-requests"`,
          ratelimit: `"${options.name}";r=0;t=30`,
          'retry-after': '30',
          'content-type': app.jsonType('application/problem+json'),
        })
        expect(await refused.json()).toMatchObject({
          status: 429,
          'violated-policies': [options.name],
          retryAfter: 30,
        })
      }
      // Another identity has slots of its own.
      const other = await startRequest(a.url, 'u2')
      await a.waitForRouteHits(2)
      expect(other.res.headers.ratelimit).toBe(`"${options.name}";r=1;t=30`)

      for (const held of holding.held) held.end('done\n')
      await Promise.all(holding.held.map((held) => held.closed))
      await store.until(() => store.count('release') === 3)
      expect(store.count('acquire')).toBe(5)
      expect(store.count('release', 'u1')).toBe(2)
      expect(store.count('release', 'u2')).toBe(1)
      expect((await concurrencyLimit(options).peek('u1')).remaining).toBe(2)
      expect([a.routeHits, b.routeHits]).toEqual([2, 1])
      // Nothing more is released later (a second release would be counted).
      const settled = await startRequest(a.url, 'u3')
      settled.req.destroy()
      await store.until(() => store.count('release') === 4)
      expect([store.count('acquire'), store.count('release'), store.count('release', 'u1')]).toEqual([
        6, 4, 2,
      ])
    })

    it('a client abort mid-response releases the lease exactly once', async () => {
      const store = new CountingStore(fixture.store)
      const limiter = concurrencyLimit({ name: uniqueName('abort'), store, max: 1, leaseMs: 30_000 })
      const holding = holdingRoute()
      const app = await serve(kind, limiter, holding.route)
      const { req, first } = await startRequest(app.url, 'aborter')
      expect(first).toBe('holding\n')
      expect((await limiter.peek('aborter')).remaining).toBe(0)

      req.destroy()
      await holding.held[0]?.closed
      await store.until(() => store.count('release') === 1)
      expect(holding.held[0]?.raw.writableEnded).toBe(false)
      expect((await limiter.peek('aborter')).remaining).toBe(1)
      // The slot is free again for the same identity.
      const again = await startRequest(app.url, 'aborter')
      again.req.destroy()
      await store.until(() => store.count('release') === 2)
      expect([store.count('acquire'), store.count('release')]).toEqual([2, 2])
    })

    it('a socket error (client reset) releases the lease exactly once', async () => {
      const store = new CountingStore(fixture.store)
      const limiter = concurrencyLimit({ name: uniqueName('reset'), store, max: 1, leaseMs: 30_000 })
      const socketErrors: string[] = []
      const holding = holdingRoute()
      const app = await serve(kind, limiter, (exchange) => {
        exchange.req.socket.on('error', (error: NodeJS.ErrnoException) =>
          socketErrors.push(error.code ?? error.message),
        )
        holding.route(exchange)
      })
      const socket = connect(app.port, '127.0.0.1')
      socket.on('error', () => {})
      socket.write('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nx-user: resetter\r\n\r\n')
      await new Promise<void>((resolve) => {
        let seen = ''
        socket.on('data', (chunk: Buffer) => {
          seen += chunk.toString()
          if (seen.includes('holding')) resolve()
        })
      })
      expect((await limiter.peek('resetter')).remaining).toBe(0)

      socket.resetAndDestroy()
      await holding.held[0]?.closed
      await store.until(() => store.count('release') === 1)
      expect(socketErrors).toEqual(['ECONNRESET'])
      expect([store.count('acquire'), store.count('release')]).toEqual([1, 1])
      expect((await limiter.peek('resetter')).remaining).toBe(1)
    })

    it('a long response keeps its lease by renewing it every leaseMs / 3; renewal stops on release', async () => {
      const store = new CountingStore(fixture.store)
      const limiter = concurrencyLimit({ name: uniqueName('renewed'), store, max: 2, leaseMs: 300 })
      const holding = holdingRoute()
      const app = await serve(kind, limiter, holding.route)
      const long = await startRequest(app.url, 'long')
      // Four renewals: over 400 ms, longer than the lease would have lived without them.
      await store.until(() => store.count('renew', 'long') >= 4)
      expect((await limiter.peek('long')).remaining).toBe(1)
      holding.held[0]?.end()
      await store.until(() => store.count('release', 'long') === 1)
      const renewalsAtRelease = store.count('renew', 'long')
      expect((await limiter.peek('long')).remaining).toBe(2)
      long.req.destroy()

      // Another request renews three times; the released one no more.
      const other = await startRequest(app.url, 'other')
      await store.until(() => store.count('renew', 'other') >= 3)
      expect(store.count('renew', 'long')).toBe(renewalsAtRelease)
      other.req.destroy()
      await store.until(() => store.count('release', 'other') === 1)
    })
  })
})
