/**
 * `RedisStore` takes its client as a structural type of its own (`RedisClient`, src/core/stores/redisClient.ts), so
 * that its published types need no ioredis: real ioredis `Redis` and `Cluster` instances must satisfy it. The
 * clients are made with `lazyConnect` and never connect (nothing is sent while a store is constructed).
 */
import { fileURLToPath } from 'node:url'
import { Cluster, Redis } from 'ioredis'
import { describe, expect, expectTypeOf, it } from 'vitest'
import type {
  RedisClient,
  RedisClusterClient,
  RedisConnection,
} from '../../../src/core/stores/redisClient.js'
import { RedisStore, type RedisStoreOptions } from '../../../src/index.js'
import { typeErrors } from './typecheck.js'

describe('RedisClient: what RedisStore uses of an ioredis client', () => {
  it('is satisfied by ioredis Redis and Cluster, and by each node of a Cluster', () => {
    expectTypeOf<Redis>().toExtend<RedisConnection>()
    expectTypeOf<Cluster>().toExtend<RedisClusterClient>()
    expectTypeOf<Redis>().toExtend<RedisStoreOptions['client']>()
    expectTypeOf<Cluster>().toExtend<RedisStoreOptions['client']>()
    expectTypeOf<ReturnType<Cluster['nodes']>[number]>().toExtend<RedisConnection>()
    // A standalone client is not mistaken for a cluster by its type.
    expectTypeOf<RedisConnection>().not.toExtend<RedisClusterClient>()
  })

  it('takes real ioredis instances in RedisStore, standalone and cluster', () => {
    const redis = new Redis({ host: '127.0.0.1', port: 1, lazyConnect: true })
    const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true })
    try {
      const clients: RedisClient[] = [redis, cluster]
      const stores = clients.map((client, i) => new RedisStore({ client, prefix: `types-${i}:` }))
      expect(stores.map((store) => store.keyOf('api', 'alice').startsWith(store.prefix))).toEqual([
        true,
        true,
      ])
      expect([redis.status, cluster.status]).toEqual(['wait', 'wait'])
    } finally {
      redis.disconnect()
      cluster.disconnect()
    }
  })

  it('compiles under the project compiler options (strict)', () => {
    expect(typeErrors(fileURLToPath(import.meta.url))).toEqual([])
  }, 60_000)
})
