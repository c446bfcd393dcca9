/**
 * DistinctCounter (src/metrics/distinctCounter.ts): exact counts up to its cap, the HyperLogLog estimate within the
 * stated bound past it (on fixed inputs, so every run sees the same estimates), and a fixed size whatever is added.
 */
import { describe, expect, it } from 'vitest'
import {
  DistinctCounter,
  ESTIMATE_ERROR_BOUND,
  EXACT_CAP,
  hash53,
  REGISTERS,
} from '../../../src/metrics/distinctCounter.js'

/** `count` identities of the shape the limiters see, from a fixed seed (a linear congruential generator). */
function addresses(count: number, seed: number): string[] {
  let state = seed
  const next = () => {
    state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0
    return state
  }
  const seen = new Set<string>()
  while (seen.size < count) {
    const n = next()
    seen.add(`ip:${n >>> 24}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}:${next() & 0xffff}`)
  }
  return [...seen]
}

/** A fixed seed: the estimates of these tests are the same on every run. */
const SEED = 7

describe('DistinctCounter', () => {
  it('identities crafted against one seed inflate the estimate under it, not under another', () => {
    // One identity per register whose hash under seed 0 has ≥ 4 leading zero bits (rank 5 or more in every
    // register): what a client knowing the seed could send.
    const byRegister = new Map<number, string>()
    for (let i = 0; byRegister.size < REGISTERS; i++) {
      const hash = hash53(`crafted:${i}`, 0)
      const low = hash >>> 0
      if (Math.clz32(low) < 4) continue
      byRegister.set(((hash - low) / 2 ** 32) & (REGISTERS - 1), `crafted:${i}`)
    }
    const crafted = [...byRegister.values()]
    const known = new DistinctCounter(0)
    const unknown = new DistinctCounter(1)
    for (const identity of crafted) {
      known.add(identity)
      unknown.add(identity)
    }
    expect(known.count()).toBeGreaterThan(10 * crafted.length)
    expect(Math.abs(unknown.count() - crafted.length)).toBeLessThanOrEqual(
      ESTIMATE_ERROR_BOUND * crafted.length,
    )
  })

  it('counts exactly up to its cap, duplicates once', () => {
    const counter = new DistinctCounter(SEED)
    expect(counter.count()).toBe(0)
    for (let round = 0; round < 3; round++) {
      for (const identity of ['user:u1', 'user:u2', 'ip:10.0.0.1']) counter.add(identity)
    }
    expect(counter.count()).toBe(3)
    for (let i = 0; i < EXACT_CAP; i++) counter.add(`user:${i}`)
    // 1027 distinct: past the cap, an estimate.
    expect(counter.isExact).toBe(false)
    expect(Math.abs(counter.count() - 1027)).toBeLessThanOrEqual(ESTIMATE_ERROR_BOUND * 1027)

    const full = new DistinctCounter(SEED)
    for (let i = 0; i < EXACT_CAP; i++) full.add(`user:${i}`)
    for (let i = 0; i < EXACT_CAP; i++) full.add(`user:${i}`)
    expect(full.isExact).toBe(true)
    expect(full.count()).toBe(1024)
    expect(full.footprint).toEqual({ exactHashes: 1024, registerBytes: 0 })
  })

  it('past its cap, estimates within 5 % (fixed inputs), and adding the same identities again changes nothing', () => {
    expect(ESTIMATE_ERROR_BOUND).toBe(0.05)
    for (const n of [1025, 2000, 5000, 10_000, 20_000, 50_000, 160_000]) {
      for (const identities of [Array.from({ length: n }, (_, i) => `user:${i}`), addresses(n, n)]) {
        const counter = new DistinctCounter(SEED)
        for (const identity of identities) counter.add(identity)
        expect(counter.isExact).toBe(false)
        const estimate = counter.count()
        expect(Math.abs(estimate - n), `${identities[0]}… ×${n}: ${estimate}`).toBeLessThanOrEqual(
          ESTIMATE_ERROR_BOUND * n,
        )
        for (const identity of identities) counter.add(identity)
        expect(counter.count()).toBe(estimate)
      }
    }
  })

  it('200,000 identities leave it at 4 KiB of registers and no exact set; clear() brings exact counting back', () => {
    const counter = new DistinctCounter(SEED)
    let largestSet = 0
    for (let i = 0; i < 200_000; i++) {
      counter.add(`user:${i}`)
      largestSet = Math.max(largestSet, counter.footprint.exactHashes)
    }
    expect(largestSet).toBe(EXACT_CAP)
    expect(counter.footprint).toEqual({ exactHashes: 0, registerBytes: REGISTERS })
    expect(REGISTERS).toBe(4096)
    expect(Math.abs(counter.count() - 200_000)).toBeLessThanOrEqual(ESTIMATE_ERROR_BOUND * 200_000)

    counter.clear()
    expect(counter.footprint).toEqual({ exactHashes: 0, registerBytes: 0 })
    expect(counter.isExact).toBe(true)
    counter.add('user:1')
    counter.add('user:1')
    expect(counter.count()).toBe(1)
  })

  it('hashes to 53-bit integers, the same string to the same hash', () => {
    const hashes = ['', 'a', 'b', 'user:u1', 'x'.repeat(1024)].map((value) => hash53(value))
    for (const hash of hashes) {
      expect(Number.isSafeInteger(hash)).toBe(true)
      expect(hash).toBeGreaterThanOrEqual(0)
    }
    expect(new Set(hashes).size).toBe(5)
    expect(hash53('user:u1')).toBe(hashes[3])
  })
})
