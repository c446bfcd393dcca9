/**
 * Ready at start: with the recommended client settings (no offline queue), a command sent before the client is
 * ready fails at once. `warmUp()` waits for the client (standalone, and a cluster with replicas) and every master;
 * a decision asked while the client still connects waits for it within its own deadline; an unreachable store
 * makes `warmUp()` reject with a TOLLBOOTH_ERR_STORE_* error naming the address.
 */
import { once } from 'node:events'
import { type AddressInfo, createServer } from 'node:net'
import { Cluster, Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import type { Decision } from '../../src/core/decision.js'
import { ErrorCodes } from '../../src/core/errors.js'
import { tokenBucket } from '../../src/core/limiters/tokenBucket.js'
import { RedisStore } from '../../src/core/stores/redisStore.js'
import { type RedisClusterProcess, startRedisCluster } from '../helpers/redisServer.js'
import { limiterClientOptions, whenReady } from '../helpers/stores.js'

/**
 * A deadline long enough that no decision of a busy machine misses it: what is tested is whether the client is
 * ready, which the recommended settings turn into an immediate failure when it is not, whatever the deadline.
 */
const TIMEOUT_MS = 5000
const DECISIONS = 1000

/** 1,000 decisions in parallel, 1,000 identities; the sources that answered them. */
async function firstDecisions(store: RedisStore, name: string): Promise<string[]> {
  const limiter = tokenBucket({ name, store, capacity: 10, refillPerSecond: 1, denyCache: false })
  const decisions: Decision[] = await Promise.all(
    Array.from({ length: DECISIONS }, (_, i) => limiter.consume(`user-${i}`)),
  )
  return [...new Set(decisions.map((decision) => `${decision.source}:${decision.allowed}`))]
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  await new Promise((resolve) => server.close(resolve))
  return port
}

function codeOf(error: unknown): unknown {
  return (error as { code?: unknown }).code
}

describe('a standalone Redis with the recommended settings', () => {
  const url = inject('redisUrl')

  it('warmUp() right after new Redis() resolves with the client ready; the first 1,000 decisions come from the store', async () => {
    const client = new Redis(url, limiterClientOptions)
    try {
      expect(client.status).not.toBe('ready')
      const store = new RedisStore({ client, prefix: `ready-${Date.now()}:`, timeoutMs: TIMEOUT_MS })
      await store.warmUp()
      expect(client.status).toBe('ready')
      expect(await firstDecisions(store, 'warm')).toEqual(['store:true'])
    } finally {
      client.disconnect()
    }
  })

  it('without warmUp(), decisions asked while the client connects wait for it instead of failing', async () => {
    const client = new Redis(url, limiterClientOptions)
    try {
      const store = new RedisStore({ client, prefix: `cold-${Date.now()}:`, timeoutMs: TIMEOUT_MS })
      expect(client.status).not.toBe('ready')
      expect(await firstDecisions(store, 'cold')).toEqual(['store:true'])
    } finally {
      client.disconnect()
    }
  })

  it('a client made with lazyConnect is connected by warmUp()', async () => {
    const client = new Redis(url, { ...limiterClientOptions, lazyConnect: true })
    try {
      const store = new RedisStore({ client, prefix: `lazy-${Date.now()}:`, timeoutMs: TIMEOUT_MS })
      expect(client.status).toBe('wait')
      await store.warmUp()
      expect(client.status).toBe('ready')
    } finally {
      client.disconnect()
    }
  })

  it('an unreachable Redis: warmUp() rejects with TOLLBOOTH_ERR_STORE_TIMEOUT naming the address and the error', async () => {
    const port = await closedPort()
    const client = new Redis({ ...limiterClientOptions, host: '127.0.0.1', port })
    client.on('error', () => {})
    try {
      const store = new RedisStore({ client })
      const error = await store.warmUp({ timeoutMs: 300 }).catch((thrown: unknown) => thrown)
      expect(codeOf(error)).toBe(ErrorCodes.STORE_TIMEOUT)
      expect((error as Error).message).toMatch(
        new RegExp(`^redis: 127\\.0\\.0\\.1:${port} not ready within 300 ms \\(last error: .*ECONNREFUSED`),
      )
    } finally {
      client.disconnect()
    }
  })

  it('a client that has ended: warmUp() rejects at once with TOLLBOOTH_ERR_STORE_ERROR', async () => {
    const client = new Redis(url, limiterClientOptions)
    const store = new RedisStore({ client })
    await store.warmUp()
    const ended = once(client, 'end')
    client.disconnect()
    await ended
    const error = await store.warmUp().catch((thrown: unknown) => thrown)
    expect(codeOf(error)).toBe(ErrorCodes.STORE_ERROR)
    expect((error as Error).message).toContain('has ended')
  })
})

describe('a Redis Cluster of 3 masters and 3 replicas, with the recommended settings', () => {
  let cluster: RedisClusterProcess

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3, replicas: 1, nodeTimeoutMs: 1000 })
  })
  afterAll(async () => {
    await cluster?.stop()
  })

  function clusterClient(): Cluster {
    const { enableOfflineQueue, ...redisOptions } = limiterClientOptions
    return new Cluster(cluster.startupNodes, { redisOptions, enableOfflineQueue })
  }

  it('warmUp() right after new Cluster() leaves the client and every master ready; the first 1,000 decisions come from the store', async () => {
    const client = clusterClient()
    try {
      expect(client.status).not.toBe('ready')
      const store = new RedisStore({ client, prefix: `cready-${Date.now()}:`, timeoutMs: TIMEOUT_MS })
      await store.warmUp()
      expect(client.status).toBe('ready')
      const masters = client.nodes('master')
      expect(masters).toHaveLength(3)
      expect(masters.map((node) => node.status)).toEqual(['ready', 'ready', 'ready'])
      expect(await firstDecisions(store, 'cwarm')).toEqual(['store:true'])
    } finally {
      client.disconnect()
    }
  })

  it('without warmUp(), decisions asked while the cluster client loads its slots wait for it', async () => {
    const client = clusterClient()
    try {
      const store = new RedisStore({ client, prefix: `ccold-${Date.now()}:`, timeoutMs: TIMEOUT_MS })
      expect(await firstDecisions(store, 'ccold')).toEqual(['store:true'])
    } finally {
      client.disconnect()
    }
  })

  it('an unreachable cluster: warmUp() rejects with TOLLBOOTH_ERR_STORE_TIMEOUT naming its nodes', async () => {
    const port = await closedPort()
    const { enableOfflineQueue, ...redisOptions } = limiterClientOptions
    const client = new Cluster([{ host: '127.0.0.1', port }], { redisOptions, enableOfflineQueue })
    client.on('error', () => {})
    try {
      const error = await new RedisStore({ client })
        .warmUp({ timeoutMs: 300 })
        .catch((thrown: unknown) => thrown)
      expect(codeOf(error)).toBe(ErrorCodes.STORE_TIMEOUT)
      expect((error as Error).message).toContain(`the Redis Cluster (127.0.0.1:${port})`)
    } finally {
      client.disconnect()
    }
  })

  it('many stores on one client, warming up at once, share one listener per event', async () => {
    const client = clusterClient()
    const warnings: Error[] = []
    const onWarning = (warning: Error) => warnings.push(warning)
    process.on('warning', onWarning)
    try {
      const stores = Array.from({ length: 20 }, (_, i) => new RedisStore({ client, name: `store-${i}` }))
      await Promise.all(stores.map((store) => store.warmUp()))
      expect(client.listenerCount('ready')).toBe(0)
      expect(client.listenerCount('error')).toBe(0)
      // Warnings are emitted on the next tick.
      await new Promise((resolve) => setImmediate(resolve))
      expect(warnings.map((warning) => warning.name)).not.toContain('MaxListenersExceededWarning')
    } finally {
      process.off('warning', onWarning)
      client.disconnect()
    }
  })

  it('a master that does not answer is named when warmUp() gives up', async () => {
    const client = clusterClient()
    const [stuck] = await cluster.masters()
    if (stuck === undefined) throw new Error('no master')
    try {
      await whenReady(client)
      stuck.pause()
      const error = await new RedisStore({ client })
        .warmUp({ timeoutMs: 500 })
        .catch((thrown: unknown) => thrown)
      expect(codeOf(error)).toBe(ErrorCodes.STORE_TIMEOUT)
      expect((error as Error).message).toBe(
        `redis: warm-up did not finish in time: no answer from 127.0.0.1:${stuck.port}`,
      )
    } finally {
      stuck.resume()
      client.disconnect()
    }
  })
})
