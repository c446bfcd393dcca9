import { describe, expect, it } from 'vitest'
import { fixedWindow } from '../../src/core/limiters/fixedWindow.js'
import { slidingWindow } from '../../src/core/limiters/slidingWindow.js'
import { countAllowed, useContractStore } from '../helpers/contract.js'
import { storeKinds } from '../helpers/stores.js'

// Windows of 10 s keep Redis TTLs (which run on real time) far longer than the test's real duration.
const windowMs = 10_000

describe.each(storeKinds)('fixedWindow on the %s store', (kind) => {
  const ctx = useContractStore(kind)
  const limiter = (limit = 3) =>
    fixedWindow({ name: ctx.name, store: ctx.fixture.store, limit, windowMs, denyCache: false })

  it('admits the limit per window and resets exactly at the boundary', async () => {
    const window = limiter()
    ctx.clock.at(9_000)
    expect((await window.consume('k')).remaining).toBe(2)
    await ctx.checkTtls()
    expect(await countAllowed(5, () => window.consume('k'))).toBe(2)
    const denied = await window.consume('k')
    expect(denied).toMatchObject({ allowed: false, retryAfterMs: 1000, resetMs: 1000 })
    ctx.clock.at(9_999)
    expect((await window.consume('k')).allowed).toBe(false)
    ctx.clock.at(10_000)
    // The known weakness of fixed windows: 2 × limit within one millisecond around the boundary.
    expect(await countAllowed(5, () => window.consume('k'))).toBe(3)
  })

  it('weighs costs, spends nothing on denial and refunds down to zero only', async () => {
    const window = limiter(10)
    expect((await window.consume('k', 7)).remaining).toBe(3)
    expect((await window.consume('k', 4)).allowed).toBe(false)
    expect((await window.peek('k')).remaining).toBe(3)
    expect((await window.refund('k', 5)).remaining).toBe(8)
    await ctx.checkTtls()
    expect((await window.refund('k', 50)).remaining).toBe(10)
    expect((await window.consume('k', 10)).allowed).toBe(true)
  })

  it('debit goes into debt for what the window no longer holds, and the debt carries into the next window', async () => {
    const window = limiter(3)
    ctx.clock.at(9_000)
    expect((await window.consume('k', 2)).remaining).toBe(1)
    // 1 left, 3 taken: 2 owed, carried into the next window, which then has room for 1.
    expect(await window.debit('k', 3)).toMatchObject({
      allowed: true,
      remaining: 0,
      retryAfterMs: 1000,
      resetMs: 11_000,
    })
    await ctx.checkTtls()
    expect((await window.consume('k')).allowed).toBe(false)
    ctx.clock.at(10_000)
    expect(await countAllowed(3, () => window.consume('k'))).toBe(1)
    ctx.clock.at(20_000)
    expect(await countAllowed(4, () => window.consume('k'))).toBe(3)
  })

  it('debit owes at most the limit: a whole window, however much is taken', async () => {
    const window = limiter(3)
    ctx.clock.at(0)
    expect(await window.debit('k', 1000)).toMatchObject({ allowed: false, retryAfterMs: 20_000 })
    ctx.clock.at(10_000)
    expect((await window.consume('k')).allowed).toBe(false)
    ctx.clock.at(20_000)
    expect(await countAllowed(4, () => window.consume('k'))).toBe(3)
  })

  it('reset starts the window over', async () => {
    const window = limiter(1)
    await window.consume('k')
    await window.reset('k')
    expect((await window.consume('k')).allowed).toBe(true)
  })
})

describe.each(storeKinds)('slidingWindow on the %s store', (kind) => {
  const ctx = useContractStore(kind)
  const limiter = (limit = 10) =>
    slidingWindow({ name: ctx.name, store: ctx.fixture.store, limit, windowMs, denyCache: false })

  it('does not reset at the boundary: the previous window fades in proportion', async () => {
    const window = limiter()
    ctx.clock.at(9_000)
    expect(await countAllowed(12, () => window.consume('k'))).toBe(10)
    await ctx.checkTtls()
    ctx.clock.at(10_000)
    // The previous window still weighs 100%: this is what separates a sliding window from a fixed one.
    const denied = await window.consume('k')
    expect(denied.allowed).toBe(false)
    // One unit fits once the previous 10 weigh 9 or less: 10% into the window.
    expect(denied.retryAfterMs).toBe(1000)
    ctx.clock.at(10_999)
    expect((await window.consume('k')).allowed).toBe(false)
    ctx.clock.at(11_000)
    expect(await countAllowed(3, () => window.consume('k'))).toBe(1)
    ctx.clock.at(15_000)
    // 10 × 50% + 1 = 6 counted: 4 more fit.
    expect(await countAllowed(6, () => window.consume('k'))).toBe(4)
    ctx.clock.at(30_000)
    expect(await countAllowed(12, () => window.consume('k'))).toBe(10)
  })

  it('rejects before incrementing: a denied burst leaves the counters as they were', async () => {
    const window = limiter(5)
    ctx.clock.at(1_000)
    expect(await countAllowed(5, () => window.consume('k'))).toBe(5)
    expect(await countAllowed(100, () => window.consume('k'))).toBe(0)
    ctx.clock.at(15_000)
    // The previous window held exactly 5 (not 105): at 50% it weighs 2.5, leaving room for 2.
    expect(await countAllowed(5, () => window.consume('k'))).toBe(2)
  })

  it('debit goes into debt: consumes wait until the count has slid back under the limit', async () => {
    const window = limiter(10)
    ctx.clock.at(0)
    expect((await window.consume('k', 4)).remaining).toBe(6)
    // 14 counted against 10: a unit fits once 14 × (1 − t) + 1 ≤ 10 in the next window, t = 5/14 (13,571.4 ms).
    expect(await window.debit('k', 10)).toMatchObject({ allowed: true, remaining: 0, retryAfterMs: 13_572 })
    await ctx.checkTtls()
    ctx.clock.at(13_571)
    expect((await window.consume('k')).allowed).toBe(false)
    ctx.clock.at(13_572)
    expect(await countAllowed(2, () => window.consume('k'))).toBe(1)
  })

  it('debit owes at most the limit: the estimate stops at twice the limit', async () => {
    const window = limiter(10)
    ctx.clock.at(0)
    // 20 counted: a unit fits once 20 × (1 − t) + 1 ≤ 10, t = 11/20, 15.5 s from now.
    expect(await window.debit('k', 1000)).toMatchObject({ allowed: false, retryAfterMs: 15_500 })
    expect((await window.debit('k', 1000)).retryAfterMs).toBe(15_500)
    ctx.clock.at(15_499)
    expect((await window.consume('k')).allowed).toBe(false)
    ctx.clock.at(15_500)
    expect(await countAllowed(2, () => window.consume('k'))).toBe(1)
  })

  it('refunds the current window only, never below zero', async () => {
    const window = limiter(5)
    ctx.clock.at(1_000)
    await window.consume('k', 4)
    expect((await window.refund('k', 3)).remaining).toBe(4)
    expect((await window.refund('k', 10)).remaining).toBe(5)
    await ctx.checkTtls()
    expect(await countAllowed(7, () => window.consume('k'))).toBe(5)
  })
})
