import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { tokenBucket } from '../../src/core/limiters/tokenBucket.js'
import type { Reply, Store, StoreRequest } from '../../src/core/stores/store.js'
import { createStore, type StoreFixture } from '../helpers/stores.js'

/** Counts the calls that reach the real Redis store underneath. */
function counting(store: Store): Store & { calls: number } {
  const counted = {
    kind: store.kind,
    calls: 0,
    run(request: StoreRequest): Promise<Reply> {
      counted.calls++
      return store.run(request)
    },
    consumeAll: (requests: readonly StoreRequest[]) => store.consumeAll(requests),
    delete: (limiter: string, key: string) => store.delete(limiter, key),
  }
  return counted
}

/** Moves the faked `Date`, which both the deny cache and the store's scripts read here. */
function advance(ms: number): void {
  vi.setSystemTime(Date.now() + ms)
}

describe('deny cache (real Redis, on a virtual clock)', () => {
  let fixture: StoreFixture
  beforeEach(async () => {
    // The deny cache reads Date.now(); the store's scripts are pinned to the same (faked, frozen) clock, in µs.
    vi.useFakeTimers({ toFake: ['Date'] })
    fixture = await createStore('redis', () => Date.now() * 1000)
  })
  afterEach(async () => {
    vi.useRealTimers()
    await fixture.close()
  })

  it('counts what a bucket refilled since the denial, between two readings of the store', async () => {
    // 100 tokens, 10 back a second; 96 spent, then 60 asked: refused until 56 more are back (5.6 s).
    const limiter = tokenBucket({
      name: 'refilling',
      store: fixture.store,
      capacity: 100,
      refillPerSecond: 10,
    })
    await limiter.consume('k', 96)
    const denied = await limiter.consume('k', 60)
    expect(denied).toMatchObject({ allowed: false, remaining: 4, source: 'store' })
    // 1.6 s later the store holds 20 again (a peek is never answered from the cache); the cache says so too.
    advance(1600)
    expect((await limiter.peek('k')).remaining).toBe(20)
    expect(await limiter.consume('k', 60)).toMatchObject({
      allowed: false,
      remaining: 20,
      retryAfterMs: 4000,
      source: 'cache',
    })
    expect((await limiter.peek('k')).remaining).toBe(20)
  })

  it('answers a denied key in-process until its Retry-After, then asks the store again', async () => {
    const store = counting(fixture.store)
    const limiter = tokenBucket({ name: 'cache', store, capacity: 2, refillPerSecond: 10 })
    await limiter.consume('k')
    await limiter.consume('k')
    const denied = await limiter.consume('k')
    expect(denied).toMatchObject({ allowed: false, source: 'store' })
    expect(store.calls).toBe(3)
    for (let i = 0; i < 20; i++) expect((await limiter.consume('k')).source).toBe('cache')
    expect(store.calls).toBe(3)
    advance(denied.retryAfterMs - 1)
    expect((await limiter.consume('k')).source).toBe('cache')
    expect(store.calls).toBe(3)
    advance(1)
    expect(await limiter.consume('k')).toMatchObject({ allowed: true, source: 'store' })
    expect(store.calls).toBe(4)
  })

  it('lets a cheaper request through to the store, and a refund clears the denial', async () => {
    const store = counting(fixture.store)
    const limiter = tokenBucket({ name: 'cheaper', store, capacity: 10, refillPerSecond: 0.01 })
    await limiter.consume('k', 8)
    expect((await limiter.consume('k', 5)).source).toBe('store')
    expect((await limiter.consume('k', 6)).source).toBe('cache')
    expect(await limiter.consume('k', 2)).toMatchObject({ allowed: true, source: 'store' })
    await limiter.consume('k', 5)
    await limiter.refund('k', 10)
    expect(await limiter.consume('k', 5)).toMatchObject({ allowed: true, source: 'store' })
  })

  it('a cost above the capacity is refused as never allowed, not answered from a cached denial', async () => {
    const limiter = tokenBucket({ name: 'never', store: fixture.store, capacity: 100, refillPerSecond: 0.01 })
    await limiter.consume('k', 90)
    expect(await limiter.consume('k', 50)).toMatchObject({
      allowed: false,
      source: 'store',
      neverAllowed: false,
    })
    expect((await limiter.consume('k', 60)).source).toBe('cache')
    expect(await limiter.consume('k', 150)).toMatchObject({
      allowed: false,
      neverAllowed: true,
      retryAfterMs: 0,
      source: 'store',
    })
  })

  it('is bounded', async () => {
    const limiter = tokenBucket({
      name: 'bounded',
      store: fixture.store,
      capacity: 1,
      refillPerSecond: 0.01,
      denyCache: { maxKeys: 5 },
    })
    for (let i = 0; i < 20; i++) {
      await limiter.consume(`k${i}`)
      await limiter.consume(`k${i}`)
    }
    // The oldest denials were dropped: k0 goes back to the store, k19 is still answered in-process.
    expect((await limiter.consume('k0')).source).toBe('store')
    expect((await limiter.consume('k19')).source).toBe('cache')
  })
})
