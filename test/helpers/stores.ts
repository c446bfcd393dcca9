import { randomUUID } from 'node:crypto'
import { Cluster, Redis } from 'ioredis'
import { inject } from 'vitest'
import type { Clock } from '../../src/core/clock.js'
import { MemoryStore } from '../../src/core/stores/memoryStore.js'
import { RedisStore } from '../../src/core/stores/redisStore.js'
import type { Store } from '../../src/core/stores/store.js'

/** A store under test, with a way to list the TTL of every key it holds and to clean up. */
export interface StoreFixture {
  readonly store: Store
  /** Remaining TTL in ms of every key the store holds; -1 for a key without TTL. */
  ttls(): Promise<number[]>
  close(): Promise<void>
}

export type StoreKind = 'memory' | 'redis' | 'cluster'

export const storeKinds: StoreKind[] = ['memory', 'redis', 'cluster']

/** Client settings the README recommends for a limiter. */
export const limiterClientOptions = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 1,
  connectTimeout: 1000,
}

/** Without an offline queue, commands sent before the connection is ready fail: wait for it. */
export async function whenReady(client: Redis | Cluster): Promise<void> {
  if (client.status === 'ready') return
  await new Promise<void>((resolve, reject) => {
    client.once('ready', resolve)
    client.once('end', () => reject(new Error('redis connection ended before it was ready')))
  })
}

export function createRedisClient(): Redis {
  return new Redis(inject('redisUrl'), limiterClientOptions)
}

export function createClusterClient(): Cluster {
  const { enableOfflineQueue, ...redisOptions } = limiterClientOptions
  return new Cluster(inject('redisClusterNodes'), { redisOptions, enableOfflineQueue })
}

/** A store of the given kind with its own key prefix, optionally on a virtual clock (µs). */
export async function createStore(kind: StoreKind, clock?: Clock): Promise<StoreFixture> {
  if (kind === 'memory') {
    const store = new MemoryStore(clock === undefined ? {} : { clock })
    return {
      store,
      ttls: async () => store.snapshot().map((entry) => (Number.isFinite(entry.ttlMs) ? entry.ttlMs : -1)),
      close: async () => store.close(),
    }
  }
  const client = kind === 'redis' ? createRedisClient() : createClusterClient()
  const prefix = `test-${randomUUID().slice(0, 8)}:`
  // A generous deadline: contract tests check behaviour, the fault tests check deadlines.
  const store = new RedisStore({ client, prefix, timeoutMs: 2000, ...(clock === undefined ? {} : { clock }) })
  await whenReady(client)
  return {
    store,
    ttls: async () => {
      const masters = client instanceof Cluster ? client.nodes('master') : [client]
      const ttls: number[] = []
      for (const node of masters) {
        const keys = await node.keys(`${prefix}*`)
        for (const key of keys) ttls.push(await node.pttl(key))
      }
      return ttls
    },
    close: async () => {
      client.disconnect()
    },
  }
}
