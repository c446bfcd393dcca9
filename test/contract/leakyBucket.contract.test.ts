import { describe, expect, it } from 'vitest'
import { leakyBucket } from '../../src/core/limiters/leakyBucket.js'
import { useContractStore } from '../helpers/contract.js'
import { storeKinds } from '../helpers/stores.js'

describe.each(storeKinds)('leakyBucket on the %s store', (kind) => {
  const ctx = useContractStore(kind)

  it('spaces admitted requests at a constant rate and denies beyond the queue', async () => {
    const bucket = leakyBucket({
      name: ctx.name,
      store: ctx.fixture.store,
      ratePerSecond: 10,
      maxQueue: 3,
      denyCache: false,
    })
    const delays: number[] = []
    for (let i = 0; i < 4; i++) {
      const decision = await bucket.consume('k')
      expect(decision.allowed).toBe(true)
      delays.push(decision.delayMs)
      await ctx.checkTtls()
    }
    expect(delays).toEqual([0, 100, 200, 300])
    expect(await bucket.consume('k')).toMatchObject({
      allowed: false,
      retryAfterMs: 100,
      remaining: 0,
      limit: 3,
    })
    ctx.clock.advance(100)
    // One slot drained: the next request waits behind the three still queued.
    expect(await bucket.consume('k')).toMatchObject({ allowed: true, delayMs: 300 })
    expect((await bucket.consume('k')).allowed).toBe(false)
  })

  it('wait() resolves after the delay it was given', async () => {
    // Real time here (memory only would not prove more): the second request must wait about 50 ms.
    const bucket = leakyBucket({ name: ctx.name, store: ctx.fixture.store, ratePerSecond: 20, maxQueue: 1 })
    const first = await bucket.wait('k')
    expect(first.delayMs).toBe(0)
    const started = performance.now()
    const second = await bucket.wait('k')
    expect(second.delayMs).toBe(50)
    expect(performance.now() - started).toBeGreaterThanOrEqual(45)
  })
})
