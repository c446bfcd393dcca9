import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { describe, expect, it, vi } from 'vitest'
import { MemoryStore } from '../../../src/core/stores/memoryStore.js'
import { tokenBucket } from '../../../src/index.js'

describe('MemoryStore', () => {
  it('never holds more than maxKeys, evicting the least recently written', async () => {
    const store = new MemoryStore({ maxKeys: 100 })
    const limiter = tokenBucket({ name: 'bounded', store, capacity: 1, refillPerSecond: 0.001 })
    await limiter.consume('hot')
    for (let i = 0; i < 1000; i++) {
      await limiter.consume(`k${i}`)
      expect(store.size).toBeLessThanOrEqual(100)
      if (i % 50 === 0) await limiter.consume('hot')
    }
    expect(store.size).toBe(100)
    // 'hot' was written recently, so it survived; k0 was evicted and starts full again.
    expect((await limiter.consume('hot')).allowed).toBe(false)
    expect((await limiter.consume('k0')).allowed).toBe(true)
    store.close()
  })

  it('reads an expired key as gone, and drops it on the next sweep', async () => {
    // The sweeper's interval on a virtual timer, the keys on a virtual clock: both move only when told to.
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] })
    try {
      let now = 1_000_000_000
      const store = new MemoryStore({ clock: () => now, sweepIntervalMs: 10 })
      const limiter = tokenBucket({ name: 'sweep', store, capacity: 2, refillPerSecond: 1 })
      for (let i = 0; i < 10; i++) await limiter.consume(`k${i}`)
      expect(store.size).toBe(10)
      // Each key lives 1 s (one token spent of a bucket refilled at 1/s).
      now += 1001 * 1000
      // Read as gone (a full bucket), though still held until the sweeper runs.
      expect((await limiter.peek('k0')).remaining).toBe(2)
      vi.advanceTimersByTime(9)
      expect(store.size).toBe(10)
      vi.advanceTimersByTime(1)
      expect(store.size).toBe(0)
      store.close()
    } finally {
      vi.useRealTimers()
    }
  })
})

describe('MemoryStore lifetime', () => {
  it('a store no longer referenced is garbage-collected although its sweeper was never stopped', async () => {
    setFlagsFromString('--expose-gc')
    const gc = runInNewContext('gc') as () => void
    // A limiter per request with its own default store: the pattern that must not leak.
    const useOnce = async () => {
      const limiter = tokenBucket({ name: 'per-request', capacity: 5, refillPerSecond: 1 })
      await limiter.consume('k')
      return new WeakRef(limiter.store as MemoryStore)
    }
    const refs: WeakRef<MemoryStore>[] = []
    for (let i = 0; i < 20; i++) refs.push(await useOnce())
    for (let i = 0; i < 5 && refs.some((ref) => ref.deref() !== undefined); i++) {
      await new Promise((resolve) => setTimeout(resolve, 10))
      gc()
    }
    expect(refs.filter((ref) => ref.deref() !== undefined)).toHaveLength(0)
  })
})
