/**
 * ActiveIdentities (src/metrics/activeIdentities.ts) on a virtual clock: the last complete window per limiter,
 * windows aligned on the clock, idle windows reported as 0, the cap on limiters, and a fixed size per limiter
 * whatever the number of identities.
 */
import { describe, expect, it } from 'vitest'
import { ActiveIdentities } from '../../../src/metrics/activeIdentities.js'
import { ESTIMATE_ERROR_BOUND, REGISTERS } from '../../../src/metrics/distinctCounter.js'

const SECOND = 1_000_000

/** A tracker on a clock the test moves (microseconds). */
function tracker(windowMs = 60_000, maxLimiters = 100) {
  const clock = { now: 0 }
  const active = new ActiveIdentities({ windowMs, maxLimiters, clock: () => clock.now })
  const read = (): Record<string, number> => Object.fromEntries(active.lastWindowCounts())
  return { active, clock, read }
}

describe('ActiveIdentities', () => {
  it('reports the distinct identities of the last complete window, per limiter', () => {
    const { active, clock, read } = tracker()
    clock.now = 30 * SECOND
    for (const identity of ['user:u1', 'user:u2', 'user:u1', 'ip:10.0.0.1']) active.record('api', identity)
    active.record('login', 'ip:10.0.0.1')
    // The window [0 s, 60 s) is not complete yet.
    expect(read()).toEqual({ api: 0, login: 0 })
    clock.now = 59.999 * SECOND
    active.record('api', 'user:u3')
    expect(read()).toEqual({ api: 0, login: 0 })

    // Windows are aligned on the clock: 60 s closes the first whatever time the first decision came.
    clock.now = 60 * SECOND
    expect(read()).toEqual({ api: 4, login: 1 })
    active.record('api', 'user:u9')
    clock.now = 119.999 * SECOND
    expect(read()).toEqual({ api: 4, login: 1 })
    clock.now = 120 * SECOND
    expect(read()).toEqual({ api: 1, login: 0 })
    // A whole window without decisions: nobody was active in the last one.
    active.record('api', 'user:u1')
    clock.now = 240 * SECOND
    expect(read()).toEqual({ api: 0, login: 0 })
  })

  it('takes the window it is given', () => {
    const { active, clock, read } = tracker(5000)
    active.record('api', 'a')
    clock.now = 5 * SECOND
    active.record('api', 'b')
    active.record('api', 'c')
    expect(read()).toEqual({ api: 1 })
    clock.now = 10 * SECOND
    expect(read()).toEqual({ api: 2 })
  })

  it('tracks at most maxLimiters limiters; the others are left out', () => {
    const { active, clock, read } = tracker(60_000, 2)
    active.record('first', 'a')
    active.record('second', 'a')
    active.record('third', 'a')
    active.record('first', 'b')
    expect(active.size).toBe(2)
    clock.now = 60 * SECOND
    active.record('fourth', 'a')
    expect(read()).toEqual({ first: 2, second: 1 })
    expect(active.size).toBe(2)
  })

  it('160,000 identities in a window: a fixed 4 KiB per limiter, an estimate within 5 %, then back to exact', () => {
    const { active, clock, read } = tracker()
    for (let i = 0; i < 160_000; i++) active.record('api', `ip:${i >>> 16}.${(i >>> 8) & 255}.${i & 255}`)
    expect(active.currentCounter('api')?.footprint).toEqual({ exactHashes: 0, registerBytes: REGISTERS })
    for (let i = 0; i < 40_000; i++) active.record('api', `user:${i}`)
    expect(active.currentCounter('api')?.footprint).toEqual({ exactHashes: 0, registerBytes: REGISTERS })

    clock.now = 60 * SECOND
    const estimate = read().api as number
    expect(Math.abs(estimate - 200_000)).toBeLessThanOrEqual(ESTIMATE_ERROR_BOUND * 200_000)
    // The new window starts exact and empty: the registers are gone.
    expect(active.currentCounter('api')?.footprint).toEqual({ exactHashes: 0, registerBytes: 0 })
    active.record('api', 'user:1')
    active.record('api', 'user:2')
    clock.now = 120 * SECOND
    expect(read()).toEqual({ api: 2 })
  })
})
