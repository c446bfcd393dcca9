import { describe, expect, it } from 'vitest'
import { concurrencyLimit } from '../../src/core/limiters/concurrencyLimit.js'
import { useContractStore } from '../helpers/contract.js'
import { storeKinds } from '../helpers/stores.js'

describe.each(storeKinds)('concurrencyLimit on the %s store', (kind) => {
  const ctx = useContractStore(kind)
  const limiter = () => concurrencyLimit({ name: ctx.name, store: ctx.fixture.store, max: 2, leaseMs: 5000 })

  it('grants at most max leases and frees a slot on release, once', async () => {
    const leases = limiter()
    const first = await leases.acquire('k')
    const second = await leases.acquire('k')
    expect([first.allowed, second.allowed, first.remaining, second.remaining]).toEqual([true, true, 1, 0])
    await ctx.checkTtls()
    const third = await leases.acquire('k')
    expect(third).toMatchObject({ allowed: false, leaseId: undefined, retryAfterMs: 5000 })
    await first.release()
    await first.release()
    expect((await leases.peek('k')).remaining).toBe(1)
    expect((await leases.acquire('k')).allowed).toBe(true)
    expect((await leases.acquire('k')).allowed).toBe(false)
  })

  it('expires leases that are not renewed, and keeps renewed ones', async () => {
    const leases = limiter()
    const kept = await leases.acquire('k')
    ctx.clock.advance(3000)
    const dropped = await leases.acquire('k')
    expect(dropped.allowed).toBe(true)
    ctx.clock.advance(1000)
    expect(await kept.renew()).toBe(true)
    await ctx.checkTtls()
    // kept was first acquired 4 s ago and renewed: it outlives its first 5 s. dropped expires at +8 s.
    ctx.clock.advance(2000)
    expect((await leases.peek('k')).remaining).toBe(0)
    ctx.clock.advance(2001)
    expect((await leases.peek('k')).remaining).toBe(1)
    ctx.clock.advance(1000)
    expect((await leases.peek('k')).remaining).toBe(2)
  })

  it('renew takes a free slot again for a lost lease, and reports it lost when the slots are full', async () => {
    const leases = limiter()
    const late = await leases.acquire('k')
    ctx.clock.advance(5001)
    expect((await leases.peek('k')).remaining).toBe(2)
    // Expired, but a slot is free: the holder is alive, it keeps going.
    expect(await late.renew()).toBe(true)
    expect((await leases.peek('k')).remaining).toBe(1)
    await ctx.checkTtls()
    ctx.clock.advance(5001)
    const others = [await leases.acquire('k'), await leases.acquire('k')]
    expect(others.map((lease) => lease.allowed)).toEqual([true, true])
    // Expired and both slots taken since: lost.
    expect(await late.renew()).toBe(false)
    expect((await leases.peek('k')).remaining).toBe(0)
  })

  it('renew after release reports the lease gone', async () => {
    const leases = limiter()
    const lease = await leases.acquire('k')
    await lease.release()
    expect(await lease.renew()).toBe(false)
  })
})
