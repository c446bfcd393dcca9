import calculateSlot from 'cluster-key-slot'
import { Cluster, Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest'
import { fixedWindow } from '../../src/core/limiters/fixedWindow.js'
import { tokenBucket } from '../../src/core/limiters/tokenBucket.js'
import { RedisStore } from '../../src/core/stores/redisStore.js'
import { type RedisClusterProcess, startRedisCluster } from '../helpers/redisServer.js'
import { createClusterClient, createRedisClient, limiterClientOptions, whenReady } from '../helpers/stores.js'

describe('RedisStore batching', () => {
  let calls: number
  let store: RedisStore
  let client: ReturnType<typeof createRedisClient>
  beforeEach(async () => {
    calls = 0
    client = createRedisClient()
    await whenReady(client)
    store = new RedisStore({
      client,
      prefix: `batch-${Date.now()}:`,
      timeoutMs: 1000,
      hooks: { onStoreLatency: () => calls++ },
    })
  })
  afterEach(() => client.disconnect())

  it('sends the decisions asked for in one synchronous run together, and each caller gets its own answer', async () => {
    const limiter = tokenBucket({ name: 'b', store, capacity: 5, refillPerSecond: 0.001, denyCache: false })
    const keys = Array.from({ length: 200 }, (_, i) => `k${i % 20}`)
    const decisions = await Promise.all(keys.map((key) => limiter.consume(key)))
    // 200 requests, at most 32 per script call.
    expect(calls).toBe(7)
    for (let k = 0; k < 20; k++) {
      const ofKey = decisions.filter((_, i) => i % 20 === k)
      // Same key in one batch: applied in order, exactly as separate calls would be.
      expect(ofKey.map((d) => d.remaining)).toEqual([4, 3, 2, 1, 0, 0, 0, 0, 0, 0])
      expect(ofKey.filter((d) => d.allowed)).toHaveLength(5)
    }
  })

  it('sends the decisions of one event-loop turn together, each asked for in a callback of its own', async () => {
    // Ten immediates queued together run in one check phase, each its own callback with its microtasks drained in
    // between: the way Node hands an HTTP server the requests it read in one poll phase. The store's own
    // end-of-turn immediate, queued from inside that phase, runs only in the next one, after all ten. (Ten
    // setTimeout(0) need not share a timers phase: the loop creating them may cross a millisecond.)
    const limiter = tokenBucket({ name: 't', store, capacity: 100, refillPerSecond: 0.001, denyCache: false })
    const decisions = await Promise.all(
      Array.from(
        { length: 10 },
        (_, i) => new Promise((resolve) => setImmediate(() => resolve(limiter.consume(`key-${i}`)))),
      ),
    )
    expect(decisions).toHaveLength(10)
    expect(calls).toBe(1)
  })

  it('one call mixing limiters, costs and ops: each request is decided by its own algorithm, cost and limit', async () => {
    const small = tokenBucket({ name: 'small', store, capacity: 3, refillPerSecond: 0.001, denyCache: false })
    const large = tokenBucket({
      name: 'large',
      store,
      capacity: 10,
      refillPerSecond: 0.001,
      denyCache: false,
    })
    const windowed = fixedWindow({ name: 'window', store, limit: 2, windowMs: 60_000, denyCache: false })
    const decisions = await Promise.all([
      small.consume('k'),
      large.consume('k', 4),
      windowed.consume('k'),
      small.consume('k', 2),
      large.consume('k', 4),
      windowed.consume('k'),
      small.consume('k'),
      large.consume('k', 4),
      windowed.consume('k'),
      large.peek('k'),
    ])
    expect(calls).toBe(1)
    expect(decisions.map((d) => [d.allowed, d.remaining])).toEqual([
      [true, 2],
      [true, 6],
      [true, 1],
      [true, 0],
      [true, 2],
      [true, 0],
      [false, 0],
      [false, 2],
      [false, 0],
      [true, 2],
    ])
  })

  it("a token bucket's key lasts until its bucket is full again, and less than a second longer", async () => {
    // Refilled 1 token a millisecond: a consume of 100 puts the TAT 100 ms ahead, and of 1, 1 ms more, most of them
    // within one second of the server's clock, some across its end.
    const limiter = tokenBucket({
      name: 'ttl',
      store,
      capacity: 1000,
      refillPerSecond: 1000,
      denyCache: false,
    })
    const key = store.keyOf('ttl', 'k')
    for (let i = 0; i < 60; i++) {
      const started = performance.now()
      const decision = await limiter.consume('k', i % 10 === 0 ? 100 : 1)
      const ttl = await client.pttl(key)
      const elapsed = Math.ceil(performance.now() - started)
      expect(decision.allowed).toBe(true)
      // resetMs: until the bucket is full again, as of the decision; the TTL is read up to `elapsed` ms later.
      expect(ttl).toBeGreaterThanOrEqual(decision.resetMs - elapsed - 1)
      expect(ttl).toBeLessThanOrEqual(decision.resetMs + 1000)
    }
  })

  it('a key an earlier version wrote (its TTL ending at its TAT) gets a TTL of its own on the next write', async () => {
    // Written as an earlier version did (a rolling upgrade): the TAT 100 ms into the next second, and a TTL to the
    // TAT exactly. A consume of 500 (1 token a millisecond) moves the TAT within the same second: a write keeping
    // that TTL (`KEEPTTL`) would drop the key 500 ms before its bucket is full.
    const limiter = tokenBucket({
      name: 'legacy',
      store,
      capacity: 3000,
      refillPerSecond: 1000,
      denyCache: false,
    })
    const key = store.keyOf('legacy', 'k')
    const [seconds, micros] = (await client.time()).map(Number) as [number, number]
    const now = seconds * 1e6 + micros
    const tat = Math.ceil(now / 1e6) * 1e6 + 100_000
    await client.set(key, String(tat), 'PX', Math.ceil((tat - now) / 1000))
    const started = performance.now()
    const decision = await limiter.consume('k', 500)
    const ttl = await client.pttl(key)
    const elapsed = Math.ceil(performance.now() - started)
    expect(decision.allowed).toBe(true)
    expect(ttl).toBeGreaterThanOrEqual(decision.resetMs - elapsed - 1)
  })

  it('answers while the test runner fakes timers: the batch is sent on a real setImmediate', async () => {
    const limiter = tokenBucket({ name: 'f', store, capacity: 5, refillPerSecond: 0.001, denyCache: false })
    vi.useFakeTimers()
    try {
      const decision = await limiter.consume('k')
      expect(decision).toMatchObject({ allowed: true, remaining: 4, source: 'store' })
    } finally {
      vi.useRealTimers()
    }
  })

  it('reads a reply that arrived during an event-loop stall longer than the deadline instead of timing out', async () => {
    const stalled = new RedisStore({ client, prefix: `stall-${Date.now()}:`, timeoutMs: 20 })
    const limiter = tokenBucket({ name: 's', store: stalled, capacity: 5, refillPerSecond: 1 })
    const pending = limiter.consume('k')
    // Let the request go out (the store's setImmediate was queued first, so it runs before this one), then stall.
    await new Promise((resolve) => setImmediate(resolve))
    const until = performance.now() + 100
    while (performance.now() < until) {
      // Busy: the reply arrives on the socket while due timers pile up.
    }
    expect(await pending).toMatchObject({ allowed: true, source: 'store' })
  })
})

describe('RedisStore on a cluster', () => {
  it('after warmUp, sends the decisions of one turn for one node in one call, whatever their slots', async () => {
    let calls = 0
    const client = createClusterClient()
    try {
      expect(client).toBeInstanceOf(Cluster)
      await whenReady(client)
      const store = new RedisStore({
        client,
        prefix: `cb-${Date.now()}:`,
        hooks: { onStoreLatency: () => calls++ },
      })
      // Connects the lazily connected nodes and loads the scripts: without it a cold node answers in ~100 ms.
      await store.warmUp()
      calls = 0
      const limiter = tokenBucket({ name: 'c', store, capacity: 2, refillPerSecond: 0.001, denyCache: false })
      const identities = Array.from({ length: 30 }, (_, i) => `user-${i}`)
      // Each identity three times: the third of each is denied, in order within its node's call.
      const decisions = await Promise.all(
        [...identities, ...identities, ...identities].map((key) => limiter.consume(key)),
      )
      expect(decisions.map((d) => d.allowed)).toEqual([
        ...identities.map(() => true),
        ...identities.map(() => true),
        ...identities.map(() => false),
      ])
      expect(decisions.every((d) => d.source === 'store')).toBe(true)
      // One call per node holding any of these keys (the 30 keys are in 30 slots, spread over the 3 masters).
      const nodes = new Set(identities.map((id) => client.slots[calculateSlot(store.keyOf('c', id))]?.[0]))
      expect(nodes.size).toBe(3)
      expect(calls).toBe(nodes.size)

      // Two limiters at two costs in the same node calls: each request read by its own spec.
      calls = 0
      const other = tokenBucket({ name: 'c2', store, capacity: 5, refillPerSecond: 0.001, denyCache: false })
      const mixed = await Promise.all(
        identities.flatMap((key) => [other.consume(key, 3), limiter.consume(key), other.consume(key, 2)]),
      )
      expect(calls).toBe(nodes.size)
      expect(mixed.map((d) => [d.allowed, d.remaining])).toEqual(
        identities.flatMap(() => [
          [true, 2],
          [false, 0],
          [true, 0],
        ]),
      )
    } finally {
      client.disconnect()
    }
  })
})

describe('RedisStore on a cluster whose slot is being migrated', () => {
  let cluster: RedisClusterProcess
  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3 })
  })
  afterAll(async () => {
    await cluster?.stop()
  })

  it('a key that has left its node mid-migration is decided where it went, with its state: no fresh bucket', async () => {
    const { enableOfflineQueue, ...redisOptions } = limiterClientOptions
    const client = new Cluster(cluster.startupNodes, { redisOptions, enableOfflineQueue })
    const direct = new Map<number, Redis>()
    try {
      const store = new RedisStore({ client, prefix: `mig-${Date.now()}:`, timeoutMs: 5000 })
      await store.warmUp()
      const limiter = tokenBucket({ name: 'm', store, capacity: 3, refillPerSecond: 0.001, denyCache: false })
      const key = store.keyOf('m', 'alice')
      const slot = calculateSlot(key)
      const owner = client.slots[slot]?.[0] as string
      // Another identity on the same node, so that one node call holds both.
      let neighbour = ''
      for (let i = 0; neighbour === ''; i++) {
        const other = `neighbour-${i}`
        const otherSlot = calculateSlot(store.keyOf('m', other))
        if (otherSlot !== slot && client.slots[otherSlot]?.[0] === owner) neighbour = other
      }
      expect((await limiter.consume('alice', 2)).remaining).toBe(1)

      // Move alice's key to another master the way redis-cli --cluster reshard does, and stop half-way: the slot
      // stays MIGRATING on its owner (which still serves its other keys) and IMPORTING on the target.
      const node = (address: string) => {
        const port = Number(address.split(':')[1])
        let redis = direct.get(port)
        if (redis === undefined) {
          redis = new Redis(port, '127.0.0.1')
          direct.set(port, redis)
        }
        return redis
      }
      const source = node(owner)
      const targetAddress = cluster.startupNodes
        .map((n) => `127.0.0.1:${n.port}`)
        .find((a) => a !== owner) as string
      const target = node(targetAddress)
      const [sourceId, targetId] = await Promise.all([source.cluster('MYID'), target.cluster('MYID')])
      await target.cluster('SETSLOT', slot, 'IMPORTING', sourceId as string)
      await source.cluster('SETSLOT', slot, 'MIGRATING', targetId as string)
      const [host, port] = targetAddress.split(':') as [string, string]
      await source.call('MIGRATE', host, port, '', 0, 5000, 'KEYS', key)
      // (EXISTS would answer ASK now: count what the node holds in the slot instead.)
      expect(await source.cluster('COUNTKEYSINSLOT', slot)).toBe(0)

      // One turn: the node call holds both; alice's key is not there any more, her request goes again alone and
      // follows the ASK to the target, where her bucket holds 1.
      const [alice, other] = await Promise.all([limiter.consume('alice'), limiter.consume(neighbour)])
      expect(alice).toMatchObject({ allowed: true, remaining: 0, source: 'store' })
      expect(other).toMatchObject({ allowed: true, remaining: 2, source: 'store' })
      expect(await limiter.consume('alice')).toMatchObject({ allowed: false, source: 'store' })
      // Nothing of alice's was written back on the node she left.
      expect(await source.cluster('COUNTKEYSINSLOT', slot)).toBe(0)
    } finally {
      client.disconnect()
      for (const redis of direct.values()) redis.disconnect()
    }
  })
})
