import { describe, expect, it } from 'vitest'
import { tokenBucket } from '../../src/core/limiters/tokenBucket.js'
import { countAllowed, useContractStore } from '../helpers/contract.js'
import { storeKinds } from '../helpers/stores.js'

describe.each(storeKinds)('tokenBucket on the %s store', (kind) => {
  const ctx = useContractStore(kind)
  const bucket = (capacity = 5, refillPerSecond = 1) =>
    tokenBucket({ name: ctx.name, store: ctx.fixture.store, capacity, refillPerSecond, denyCache: false })

  it('admits exactly the capacity at once, then one per refill interval', async () => {
    const limiter = bucket()
    const remaining: number[] = []
    for (let i = 0; i < 5; i++) {
      const decision = await limiter.consume('alice')
      expect(decision.allowed).toBe(true)
      remaining.push(decision.remaining)
      await ctx.checkTtls()
    }
    expect(remaining).toEqual([4, 3, 2, 1, 0])
    const denied = await limiter.consume('alice')
    expect(denied).toMatchObject({
      allowed: false,
      remaining: 0,
      retryAfterMs: 1000,
      limit: 5,
      source: 'store',
    })
    ctx.clock.advance(999)
    expect((await limiter.consume('alice')).allowed).toBe(false)
    ctx.clock.advance(1)
    expect((await limiter.consume('alice')).allowed).toBe(true)
    expect((await limiter.consume('alice')).allowed).toBe(false)
    ctx.clock.advance(2500)
    expect(await countAllowed(5, () => limiter.consume('alice'))).toBe(2)
  })

  it('keeps identities apart', async () => {
    const limiter = bucket(2)
    expect(await countAllowed(3, () => limiter.consume('alice'))).toBe(2)
    expect(await countAllowed(3, () => limiter.consume('bob'))).toBe(2)
  })

  it('weighs costs and denies a cost above capacity without spending anything', async () => {
    const limiter = bucket(10)
    expect((await limiter.consume('k', 6)).remaining).toBe(4)
    const denied = await limiter.consume('k', 5)
    expect(denied).toMatchObject({ allowed: false, remaining: 4, retryAfterMs: 1000 })
    expect((await limiter.consume('k', 11)).allowed).toBe(false)
    expect((await limiter.peek('k')).remaining).toBe(4)
    expect((await limiter.consume('k', 4)).remaining).toBe(0)
  })

  it('a denied request consumes nothing: hammering while empty does not delay recovery', async () => {
    const limiter = bucket(3)
    expect(await countAllowed(3, () => limiter.consume('k'))).toBe(3)
    expect(await countAllowed(50, () => limiter.consume('k'))).toBe(0)
    ctx.clock.advance(1000)
    expect(await countAllowed(5, () => limiter.consume('k'))).toBe(1)
  })

  it('peek reads without spending', async () => {
    const limiter = bucket(3)
    await limiter.consume('k')
    for (let i = 0; i < 5; i++) expect((await limiter.peek('k')).remaining).toBe(2)
    expect((await limiter.peek('fresh')).remaining).toBe(3)
  })

  it('peek allows from the very microsecond a consume would pass, not one refill later', async () => {
    const limiter = bucket(3)
    expect(await countAllowed(3, () => limiter.consume('k'))).toBe(3)
    expect(await limiter.peek('k')).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 1000 })
    ctx.clock.advance(999)
    expect(await limiter.peek('k')).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 1 })
    // Exactly one refill interval later: the token is back whole, with nothing to spare.
    ctx.clock.advance(1)
    expect(await limiter.peek('k')).toMatchObject({ allowed: true, remaining: 1, retryAfterMs: 0 })
    expect((await limiter.consume('k')).allowed).toBe(true)
    // A bucket of one, full: its only token is exactly the burst.
    expect(await bucket(1).peek('fresh')).toMatchObject({ allowed: true, remaining: 1 })
  })

  it('refunds up to what was spent and never beyond capacity', async () => {
    const limiter = bucket(5)
    await limiter.consume('k', 4)
    expect((await limiter.refund('k', 2)).remaining).toBe(3)
    await ctx.checkTtls()
    expect((await limiter.refund('k', 100)).remaining).toBe(5)
    expect((await limiter.refund('fresh', 3)).remaining).toBe(5)
    expect(await countAllowed(7, () => limiter.consume('k'))).toBe(5)
    await ctx.checkTtls()
  })

  it('debit takes what is left and goes into debt for the rest (allowed: all of it was taken); consumes wait', async () => {
    const limiter = bucket(5)
    expect((await limiter.debit('k', 2)).allowed).toBe(true)
    expect((await limiter.peek('k')).remaining).toBe(3)
    // 3 left, 4 taken: 1 owed. A unit is back in 1 s, so the next consume fits once 2 s have passed.
    expect(await limiter.debit('k', 4)).toMatchObject({ allowed: true, remaining: 0, retryAfterMs: 2000 })
    await ctx.checkTtls()
    expect(await limiter.consume('k')).toMatchObject({ allowed: false, retryAfterMs: 2000 })
    ctx.clock.advance(1999)
    expect((await limiter.consume('k')).allowed).toBe(false)
    ctx.clock.advance(1)
    expect(await countAllowed(3, () => limiter.consume('k'))).toBe(1)
  })

  it('debit owes at most the capacity, however much is asked (allowed: false, not all of it was taken)', async () => {
    const limiter = bucket(5)
    // 1,000 asked of a full bucket of 5: it owes 5, so a consume of 1 fits after 6 s.
    expect(await limiter.debit('k', 1000)).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 6000 })
    expect((await limiter.debit('k', 1000)).retryAfterMs).toBe(6000)
    ctx.clock.advance(5999)
    expect((await limiter.consume('k')).allowed).toBe(false)
    ctx.clock.advance(1)
    expect(await countAllowed(2, () => limiter.consume('k'))).toBe(1)
    ctx.clock.advance(5000)
    expect(await countAllowed(6, () => limiter.consume('k'))).toBe(5)
  })

  it('reset gives a full bucket back', async () => {
    const limiter = bucket(2)
    await limiter.consume('k', 2)
    await limiter.reset('k')
    expect((await limiter.consume('k')).remaining).toBe(1)
  })

  it('supports fractional refill rates (5000 per hour)', async () => {
    const limiter = bucket(5000, 5000 / 3600)
    expect((await limiter.consume('k', 5000)).allowed).toBe(true)
    const denied = await limiter.consume('k')
    expect(denied.retryAfterMs).toBe(720)
    ctx.clock.advance(3600)
    expect(await countAllowed(6, () => limiter.consume('k'))).toBe(5)
  })
})
