import { describe, expect, it } from 'vitest'
import { allOf } from '../../src/core/limiters/allOf.js'
import { fixedWindow } from '../../src/core/limiters/fixedWindow.js'
import { slidingWindow } from '../../src/core/limiters/slidingWindow.js'
import { tokenBucket } from '../../src/core/limiters/tokenBucket.js'
import { MemoryStore } from '../../src/core/stores/memoryStore.js'
import { countAllowed, useContractStore } from '../helpers/contract.js'
import { storeKinds } from '../helpers/stores.js'

describe.each(storeKinds)('allOf on the %s store', (kind) => {
  const ctx = useContractStore(kind)
  const policies = () => {
    const store = ctx.fixture.store
    const bucket = tokenBucket({
      name: `${ctx.name}-b`,
      store,
      capacity: 10,
      refillPerSecond: 1,
      denyCache: false,
    })
    const window = fixedWindow({ name: `${ctx.name}-f`, store, limit: 3, windowMs: 10_000, denyCache: false })
    const sliding = slidingWindow({
      name: `${ctx.name}-s`,
      store,
      limit: 4,
      windowMs: 10_000,
      denyCache: false,
    })
    return { bucket, window, sliding, combined: allOf([bucket, window, sliding]) }
  }

  it('admits only what every policy admits, and a denial spends nothing anywhere', async () => {
    const { bucket, sliding, combined } = policies()
    ctx.clock.at(1_000)
    const first = await combined.consume('k')
    expect(first.allowed).toBe(true)
    // The fixed window (3) has the least left: it governs the numbers.
    expect([first.remaining, first.limit, first.decisions.map((d) => d.remaining)]).toEqual([2, 3, [9, 2, 3]])
    await ctx.checkTtls()
    expect(await countAllowed(30, () => combined.consume('k'))).toBe(2)
    const denied = await combined.consume('k')
    expect(denied).toMatchObject({ allowed: false, limit: 3, retryAfterMs: 9_000 })
    // 3 spent from the bucket and the sliding window, not 33.
    expect((await bucket.peek('k')).remaining).toBe(7)
    expect((await sliding.peek('k')).remaining).toBe(1)
    // The next fixed window opens, but the sliding window still counts 3 × 90% + 0: one more fits.
    ctx.clock.at(11_000)
    expect(await countAllowed(5, () => combined.consume('k'))).toBe(1)
  })

  it('admits exactly the tightest limit under parallel calls', async () => {
    const { bucket, combined } = policies()
    ctx.clock.at(1_000)
    const decisions = await Promise.all(Array.from({ length: 200 }, () => combined.consume('k')))
    expect(decisions.filter((d) => d.allowed)).toHaveLength(3)
    expect((await bucket.peek('k')).remaining).toBe(7)
  })

  it('weighs costs, refunds every policy, and keeps identities apart', async () => {
    const { window, combined } = policies()
    ctx.clock.at(1_000)
    expect((await combined.consume('k', 3)).allowed).toBe(true)
    expect((await combined.consume('k', 1)).allowed).toBe(false)
    expect((await combined.consume('other', 3)).allowed).toBe(true)
    const refunded = await combined.refund('k', 2)
    expect(refunded.decisions.map((d) => d.remaining)).toEqual([9, 2, 3])
    expect((await window.peek('k')).remaining).toBe(2)
  })
})

describe('allOf options', () => {
  it('refuses limiters on different stores, duplicate names, and an empty list', () => {
    const a = tokenBucket({ name: 'a', capacity: 1, refillPerSecond: 1 })
    const b = tokenBucket({ name: 'b', capacity: 1, refillPerSecond: 1 })
    const store = new MemoryStore()
    const c = tokenBucket({ name: 'a', store, capacity: 1, refillPerSecond: 1 })
    const d = fixedWindow({ name: 'a', store, limit: 1, windowMs: 1000 })
    for (const limiters of [[a, b], [c, d], []]) {
      expect(() => allOf(limiters)).toThrow(expect.objectContaining({ code: 'TOLLBOOTH_ERR_INVALID_OPTION' }))
    }
  })

  it('refuses an unknown option, naming the closest known one', () => {
    const limiter = tokenBucket({ name: 'a', capacity: 1, refillPerSecond: 1 })
    // `as never`: what JavaScript would pass (TypeScript refuses an object with no key in common with the type).
    const options = { failpolicy: 'closed' } as never
    expect(() => allOf([limiter], options)).toThrow(
      expect.objectContaining({
        code: 'TOLLBOOTH_ERR_INVALID_OPTION',
        message: 'allOf: unknown option "failpolicy" (did you mean "failPolicy"?)',
      }),
    )
  })
})
