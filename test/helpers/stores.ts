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
export const limiterClientOptions = { enableOfflineQueue: true, maxRetriesPerRequest: 1, lazyConnect: false }

export function createRedisClient(): Redis {
  return new Redis(inject('redisUrl'), limiterClientOptions)
}

export function createClusterClient(): Cluster {
  return new Cluster(inject('redisClusterNodes'), { redisOptions: limiterClientOptions })
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
  await client.ping()
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
