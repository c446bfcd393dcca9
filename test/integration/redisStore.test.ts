import { Cluster } from 'ioredis'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { tokenBucket } from '../../src/core/limiters/tokenBucket.js'
import { RedisStore } from '../../src/core/stores/redisStore.js'
import { createClusterClient, createRedisClient, whenReady } from '../helpers/stores.js'

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
  it('after warmUp, answers the first decisions within the default deadline, one call per decision', async () => {
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
      expect(store.maxBatch).toBe(1)
      // Connects the lazily connected nodes and loads the scripts: without it a cold node answers in ~100 ms.
      await store.warmUp()
      const limiter = tokenBucket({ name: 'c', store, capacity: 2, refillPerSecond: 0.001, denyCache: false })
      const decisions = await Promise.all(['a', 'b', 'c', 'a', 'a'].map((key) => limiter.consume(key)))
      expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, true, false])
      expect(decisions.every((d) => d.source === 'store')).toBe(true)
      expect(calls).toBe(5)
    } finally {
      client.disconnect()
    }
  })
})
