/**
 * What `concurrencyGuard` of tollbooth/http does on node:http and Express beyond the cases every server runs
 * (test/integration/httpGuards/concurrency.test.ts): a lease freed after `leaseMs` when the process holding it is
 * SIGKILLed, errors handed to `next`, a custom `onLimited` writing the Node response, fail policies with a private
 * Redis that is stopped, and option validation.
 */
import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest'
import { ErrorCodes, TollboothError } from '../../../src/core/errors.js'
import { concurrencyLimit } from '../../../src/core/limiters/concurrencyLimit.js'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import { RedisStore } from '../../../src/core/stores/redisStore.js'
import type { ConcurrencyGuardOptions } from '../../../src/http/concurrencyGuard.js'
import { concurrencyGuard } from '../../../src/http/index.js'
import { JsonLinesProcess } from '../../helpers/childProcess.js'
import {
  type Exchange,
  type GuardedServer,
  middlewareKinds,
  type Route,
  type ServerKind,
  serveGuarded,
} from '../../helpers/guardedServers.js'
import type { HttpGuardJob } from '../../helpers/httpGuardWorker.js'
import { limitHeaders, startRequest } from '../../helpers/httpServer.js'
import { type RedisProcess, startRedis } from '../../helpers/redisServer.js'
import {
  createClusterClient,
  createRedisClient,
  limiterClientOptions,
  whenReady,
} from '../../helpers/stores.js'

const WAIT_BOUND_MS = 10_000
const identify = (req: IncomingMessage) => String(req.headers['x-user'] ?? 'anonymous')

const open: GuardedServer[] = []
afterEach(async () => {
  await Promise.all(open.splice(0).map((app) => app.close()))
})

async function serve(
  kind: ServerKind,
  options: ConcurrencyGuardOptions,
  route?: Route,
): Promise<GuardedServer> {
  const app = await serveGuarded(kind, { middleware: concurrencyGuard(options) }, route)
  open.push(app)
  return app
}

/** A route that starts its response and holds it open. */
const holdingRoute = (exchange: Exchange) => exchange.stream().write('holding\n')

describe.each(['redis', 'cluster'] as const)('a SIGKILLed process holding leases on %s', (mode) => {
  it('its lease frees after leaseMs', async () => {
    const prefix = `http-kill-${randomUUID().slice(0, 8)}:`
    const leaseMs = 1500
    const client = mode === 'redis' ? createRedisClient() : createClusterClient()
    await whenReady(client)
    const store = new RedisStore({ client, prefix, timeoutMs: 2000 })
    const limiter = concurrencyLimit({ name: 'held', store, max: 2, leaseMs })
    const job: HttpGuardJob = {
      mode,
      ...(mode === 'redis' ? { url: inject('redisUrl') } : { nodes: inject('redisClusterNodes') }),
      prefix,
      name: 'held',
      max: 2,
      leaseMs,
    }
    const worker = new JsonLinesProcess({
      script: fileURLToPath(new URL('../../helpers/httpGuardWorker.ts', import.meta.url)),
      jobVariable: 'TOLLBOOTH_HTTP_GUARD_JOB',
      job,
      label: 'http guard worker',
    })
    try {
      const { port } = await worker.next<{ port: number }>()
      const holder = await startRequest(`http://127.0.0.1:${port}/`, 'victim')
      expect(holder.first).toBe('holding\n')
      expect(await worker.next<{ held: string }>()).toEqual({ held: 'victim' })
      expect((await limiter.peek('victim')).remaining).toBe(1)

      await worker.kill()
      const killedAt = performance.now()
      let freedAfterMs = -1
      while (performance.now() - killedAt < leaseMs + WAIT_BOUND_MS) {
        if ((await limiter.peek('victim')).remaining === 2) {
          freedAfterMs = performance.now() - killedAt
          break
        }
        await new Promise((resolve) => setTimeout(resolve, 25))
      }
      expect(freedAfterMs).toBeGreaterThan(0)
      // The last renewal came at most leaseMs / 3 before the kill: the lease outlives the process by the rest.
      expect(freedAfterMs).toBeGreaterThanOrEqual((leaseMs * 2) / 3 - 50)
    } finally {
      await worker.kill()
      client.disconnect()
    }
  })
})

describe.each(middlewareKinds)('concurrencyGuard with %s', (kind) => {
  it('identify errors go to next(error) and take no lease; custom onLimited answers refusals', async () => {
    const limiter = concurrencyLimit({ name: 'errors', max: 1, leaseMs: 30_000 })
    const boom = new Error('boom')
    const failing = await serve(kind, { limiter, identify: () => Promise.reject(boom) })
    expect((await fetch(failing.url)).status).toBe(500)
    expect(failing.errors).toEqual([boom])
    expect(failing.routeHits).toBe(0)

    const custom = await serve(
      kind,
      {
        limiter,
        identify,
        onLimited: (_req, res, refusal) => {
          res.statusCode = 503
          res.end(`busy: ${refusal.policy.name} ${refusal.policy.unit} ${refusal.decision.limit}`)
        },
      },
      holdingRoute,
    )
    const first = await startRequest(custom.url, 'one')
    const refused = await fetch(custom.url, { headers: { 'x-user': 'one' } })
    expect(refused.status).toBe(503)
    expect(await refused.text()).toBe('busy: errors concurrent-requests 1')
    first.req.destroy()
  })
})

describe('concurrencyGuard with the store down', () => {
  let redis: RedisProcess
  let client: Redis
  beforeAll(async () => {
    redis = await startRedis()
    client = new Redis(redis.url, limiterClientOptions)
    client.on('error', () => {})
  })
  afterAll(async () => {
    client.disconnect()
    await redis.stop()
  })

  it('failPolicy closed refuses with 429 and Retry-After; open admits', async () => {
    const store = new RedisStore({ client, prefix: 'http-guard-faults:', timeoutMs: 200 })
    await store.warmUp()
    const make = (failPolicy: 'open' | 'closed') =>
      serve('express', {
        limiter: concurrencyLimit({ name: `fp-${failPolicy}`, store, max: 1, leaseMs: 5000, failPolicy }),
        identify,
      })
    const closed = await make('closed')
    const opened = await make('open')
    await redis.stop()
    const refused = await fetch(closed.url)
    expect(refused.status).toBe(429)
    expect(limitHeaders(refused)).toEqual({
      'ratelimit-policy': '"fp-closed";q=1;qu="concurrent-requests"',
      ratelimit: '"fp-closed";r=0;t=1',
      'retry-after': '1',
      'content-type': 'application/problem+json',
    })
    expect((await fetch(opened.url)).status).toBe(200)
    expect([closed.routeHits, opened.routeHits]).toEqual([0, 1])
  })
})

describe('concurrencyGuard options', () => {
  const limiter = concurrencyLimit({ name: 'options', max: 1, leaseMs: 1000 })
  const message = (call: () => unknown) => {
    try {
      call()
    } catch (error) {
      expect(error).toBeInstanceOf(TollboothError)
      expect((error as TollboothError).code).toBe(ErrorCodes.INVALID_OPTION)
      return (error as Error).message
    }
    return 'did not throw'
  }

  it('refuses unknown keys with a did-you-mean and wrong types naming the option', () => {
    expect(message(() => concurrencyGuard({ limiter, identfy: identify } as never))).toBe(
      'concurrencyGuard: unknown option "identfy" (did you mean "identify"?)',
    )
    expect(
      message(() =>
        concurrencyGuard({ limiter: tokenBucket({ name: 't', capacity: 1, refillPerSecond: 1 }) as never }),
      ),
    ).toBe(
      'concurrencyGuard: "limiter" must be a concurrency limiter (concurrencyLimit), got a tokenBucket limiter ("t")',
    )
    expect(message(() => concurrencyGuard({ limiter, onLimited: 1 as never }))).toBe(
      'concurrencyGuard: "onLimited" must be a function, got 1',
    )
    expect(message(() => concurrencyGuard({ limiter, ipv4Prefix: 0 }))).toMatch(
      /^concurrencyGuard: "ipv4Prefix"/,
    )
    expect(message(() => concurrencyGuard(undefined as never))).toBe(
      'concurrencyGuard: "options" must be an object, got undefined',
    )
  })
})
