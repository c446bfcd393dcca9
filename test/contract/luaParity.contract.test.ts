import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Decision } from '../../src/core/decision.js'
import { allOf } from '../../src/core/limiters/allOf.js'
import { concurrencyLimit } from '../../src/core/limiters/concurrencyLimit.js'
import { fixedWindow } from '../../src/core/limiters/fixedWindow.js'
import { leakyBucket } from '../../src/core/limiters/leakyBucket.js'
import { slidingWindow } from '../../src/core/limiters/slidingWindow.js'
import { tokenBucket } from '../../src/core/limiters/tokenBucket.js'
import type { RateLimiter } from '../../src/core/rateLimiter.js'
import type { Store } from '../../src/core/stores/store.js'
import { VirtualClock } from '../helpers/contract.js'
import { createStore, type StoreFixture } from '../helpers/stores.js'

/**
 * The pure TypeScript steps (run by the memory store) and their Lua twins (run by Redis) must answer alike: the same
 * random sequence of operations, at the same virtual times, gives the same decisions, field for field.
 */

/** A small seeded PRNG (mulberry32), so a failing sequence can be replayed from its seed. */
function random(seed: number): () => number {
  let state = seed
  return () => {
    state = (state + 0x6d2b79f5) | 0
    let t = Math.imul(state ^ (state >>> 15), 1 | state)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

type RateFactory = (store: Store, name: string) => RateLimiter

const rateLimiters: [string, RateFactory, number][] = [
  [
    'tokenBucket 7 @ 3/s',
    (store, name) => tokenBucket({ name, store, capacity: 7, refillPerSecond: 3, denyCache: false }),
    7,
  ],
  [
    'tokenBucket 100 @ 1/h',
    (store, name) => tokenBucket({ name, store, capacity: 100, refillPerSecond: 1 / 3600, denyCache: false }),
    100,
  ],
  [
    'fixedWindow 5 / 1.5 s',
    (store, name) => fixedWindow({ name, store, limit: 5, windowMs: 1500, denyCache: false }),
    5,
  ],
  [
    'slidingWindow 9 / 2 s',
    (store, name) => slidingWindow({ name, store, limit: 9, windowMs: 2000, denyCache: false }),
    9,
  ],
  [
    'slidingWindow 1000 / 700 ms',
    (store, name) => slidingWindow({ name, store, limit: 1000, windowMs: 700, denyCache: false }),
    1000,
  ],
  [
    'leakyBucket 7/s queue 4',
    (store, name) => leakyBucket({ name, store, ratePerSecond: 7, maxQueue: 4, denyCache: false }),
    5,
  ],
]

describe('Lua and TypeScript twins decide alike', () => {
  let redis: StoreFixture
  let memory: StoreFixture
  const clock = new VirtualClock()

  beforeAll(async () => {
    redis = await createStore('redis', clock.now)
    memory = await createStore('memory', clock.now)
  })
  afterAll(async () => {
    await redis.close()
    await memory.close()
  })

  /** One random operation: which, and with what amount. */
  type Pick = (next: () => number, quota: number) => { op: string; amount: number }

  /** Ordinary traffic: consumes mostly, whole costs mostly; fractional and above-quota ones sometimes. */
  const ordinary: Pick = (next, quota) => {
    const roll = next()
    const amount = roll < 0.1 ? quota + 1 : roll < 0.2 ? 0.5 + next() * 2 : 1 + Math.floor(next() * 3)
    return { op: roll < 0.5 ? 'consume' : roll < 0.65 ? 'debit' : roll < 0.8 ? 'refund' : 'peek', amount }
  }
  /** A budget driven into debt and up to its cap: large debits, with consumes, refunds and peeks between them. */
  const inDebt: Pick = (next, quota) => {
    const roll = next()
    const amount = roll < 0.45 ? quota * (0.5 + next()) : 1 + Math.floor(next() * 3)
    return { op: roll < 0.45 ? 'debit' : roll < 0.7 ? 'consume' : roll < 0.8 ? 'refund' : 'peek', amount }
  }

  async function replay(label: string, create: RateFactory, quota: number, pick: Pick, seed: number) {
    const next = random(seed * 7919 + label.length)
    const name = `parity-${label.replace(/\W/g, '')}-${seed}`
    const onMemory = create(memory.store, name)
    const onRedis = create(redis.store, name)
    for (let i = 0; i < 150; i++) {
      // Advance by a random number of microseconds, sometimes not at all, sometimes across windows.
      clock.advance((next() < 0.3 ? 0 : next() ** 3 * 3000) + Math.floor(next() * 1000) / 1000)
      const key = `k${Math.floor(next() * 3)}`
      const { op, amount } = pick(next, quota)
      const call = (limiter: RateLimiter): Promise<Decision> =>
        op === 'consume'
          ? limiter.consume(key, amount)
          : op === 'debit'
            ? limiter.debit(key, amount)
            : op === 'refund'
              ? limiter.refund(key, amount)
              : limiter.peek(key)
      const [fromMemory, fromRedis] = [await call(onMemory), await call(onRedis)]
      expect({ step: i, seed, op, ...fromRedis }).toEqual({ step: i, seed, op, ...fromMemory })
    }
  }

  it.each(rateLimiters)('%s', async (label, create, quota) => {
    for (const seed of [1, 2, 3]) await replay(label, create, quota, ordinary, seed)
  })

  it.each(rateLimiters)('%s, in debt', async (label, create, quota) => {
    for (const seed of [4, 5, 6]) await replay(`${label} in debt`, create, quota, inDebt, seed)
  })

  it('allOf: token bucket + fixed window + sliding window, all or nothing', async () => {
    const next = random(99)
    const combine = (store: Store) =>
      allOf([
        tokenBucket({ name: 'parity-all-b', store, capacity: 6, refillPerSecond: 2 }),
        fixedWindow({ name: 'parity-all-f', store, limit: 4, windowMs: 1200 }),
        slidingWindow({ name: 'parity-all-s', store, limit: 5, windowMs: 900 }),
      ])
    const onMemory = combine(memory.store)
    const onRedis = combine(redis.store)
    for (let i = 0; i < 300; i++) {
      clock.advance(next() < 0.4 ? 0 : next() ** 2 * 800)
      const key = `k${Math.floor(next() * 2)}`
      const cost = 1 + Math.floor(next() * 3)
      expect({ i, ...(await onRedis.consume(key, cost)) }).toEqual({
        i,
        ...(await onMemory.consume(key, cost)),
      })
    }
  })

  it('concurrency leases', async () => {
    const next = random(42)
    const onMemory = concurrencyLimit({ name: 'parity-leases', store: memory.store, max: 3, leaseMs: 800 })
    const onRedis = concurrencyLimit({ name: 'parity-leases', store: redis.store, max: 3, leaseMs: 800 })
    const held: {
      memory: Awaited<ReturnType<typeof onMemory.acquire>>
      redis: Awaited<ReturnType<typeof onRedis.acquire>>
    }[] = []
    for (let i = 0; i < 200; i++) {
      clock.advance(next() ** 2 * 600)
      const roll = next()
      if (roll < 0.5) {
        const pair = { memory: await onMemory.acquire('k'), redis: await onRedis.acquire('k') }
        const { leaseId: _m, release: _mr, renew: _mn, ...memoryDecision } = pair.memory
        const { leaseId: _r, release: _rr, renew: _rn, ...redisDecision } = pair.redis
        expect({ i, ...redisDecision }).toEqual({ i, ...memoryDecision })
        if (pair.memory.allowed) held.push(pair)
      } else if (roll < 0.7 && held.length > 0) {
        const pair = held.splice(Math.floor(next() * held.length), 1)[0]
        await pair?.memory.release()
        await pair?.redis.release()
      } else if (roll < 0.85 && held.length > 0) {
        const pair = held[Math.floor(next() * held.length)]
        expect(await pair?.redis.renew()).toBe(await pair?.memory.renew())
      } else {
        expect({ i, ...(await onRedis.peek('k')) }).toEqual({ i, ...(await onMemory.peek('k')) })
      }
    }
  })
})
