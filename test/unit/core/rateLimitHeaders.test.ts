import { describe, expect, it } from 'vitest'
import type { Decision } from '../../../src/core/decision.js'
import { fixedWindow } from '../../../src/core/limiters/fixedWindow.js'
import { leakyBucket } from '../../../src/core/limiters/leakyBucket.js'
import { slidingWindow } from '../../../src/core/limiters/slidingWindow.js'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import {
  mergeRateLimitHeaders,
  type RateLimitPolicy,
  rateLimitHeaders,
} from '../../../src/core/rateLimitHeaders.js'
import { MemoryStore } from '../../../src/core/stores/memoryStore.js'
import { VirtualClock } from '../../helpers/contract.js'

function decision(overrides: Partial<Decision>): Decision {
  return {
    allowed: true,
    limit: 100,
    remaining: 42,
    resetMs: 16_001,
    retryAfterMs: 0,
    delayMs: 0,
    neverAllowed: false,
    source: 'store',
    ...overrides,
  }
}

function codeOf(fn: () => unknown): unknown {
  try {
    fn()
  } catch (error) {
    return (error as { code?: unknown }).code
  }
  return undefined
}

const burst: RateLimitPolicy = { name: 'burst', quota: 100, windowSeconds: 60 }

describe('rateLimitHeaders', () => {
  it('describes an allowed decision', () => {
    expect(rateLimitHeaders(decision({}), burst)).toEqual({
      'RateLimit-Policy': '"burst";q=100;w=60',
      RateLimit: '"burst";r=42;t=17',
    })
  })

  it('adds Retry-After to a denial', () => {
    const denied = decision({ allowed: false, remaining: 0, resetMs: 30_000, retryAfterMs: 30_000 })
    expect(rateLimitHeaders(denied, burst)).toEqual({
      'RateLimit-Policy': '"burst";q=100;w=60',
      RateLimit: '"burst";r=0;t=30',
      'Retry-After': '30',
    })
  })

  it.each([
    [0, '1'],
    [1, '1'],
    [999, '1'],
    [1000, '1'],
    [1001, '2'],
    [59_999, '60'],
  ])('rounds Retry-After of %i ms up to %s s, at least 1', (retryAfterMs, expected) => {
    const denied = decision({ allowed: false, remaining: 0, resetMs: 60_000, retryAfterMs })
    expect(rateLimitHeaders(denied, burst)['Retry-After']).toBe(expected)
  })

  it.each([
    [0, 't=0'],
    [1, 't=1'],
    [1000, 't=1'],
    [1001, 't=2'],
  ])('rounds reset of %i ms up to %s', (resetMs, expected) => {
    expect(rateLimitHeaders(decision({ resetMs }), burst).RateLimit).toBe(`"burst";r=42;${expected}`)
  })

  it('caps t at Retry-After on a denial so Retry-After never points before the window end', () => {
    // Token bucket: one token back in 1.5 s, bucket full in 60 s.
    const denied = decision({ allowed: false, remaining: 0, resetMs: 60_000, retryAfterMs: 1500 })
    expect(rateLimitHeaders(denied, burst)).toEqual({
      'RateLimit-Policy': '"burst";q=100;w=60',
      RateLimit: '"burst";r=0;t=2',
      'Retry-After': '2',
    })
  })

  it('emits no Retry-After when allowed, even with a retryAfterMs', () => {
    expect(rateLimitHeaders(decision({ retryAfterMs: 5000 }), burst)['Retry-After']).toBeUndefined()
  })

  it('adds legacy headers on request', () => {
    expect(rateLimitHeaders(decision({}), burst, { legacy: true })).toEqual({
      'RateLimit-Policy': '"burst";q=100;w=60',
      RateLimit: '"burst";r=42;t=17',
      'X-RateLimit-Limit': '100',
      'X-RateLimit-Remaining': '42',
      'X-RateLimit-Reset': '17',
    })
    const denied = decision({ allowed: false, remaining: 0, resetMs: 9000, retryAfterMs: 9000 })
    expect(rateLimitHeaders(denied, burst, { legacy: true })).toEqual({
      'RateLimit-Policy': '"burst";q=100;w=60',
      RateLimit: '"burst";r=0;t=9',
      'Retry-After': '9',
      'X-RateLimit-Limit': '100',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': '9',
    })
  })

  it('omits w when no window is given', () => {
    expect(rateLimitHeaders(decision({ remaining: 3 }), { name: 'conc', quota: 5 })).toEqual({
      'RateLimit-Policy': '"conc";q=5',
      RateLimit: '"conc";r=3;t=17',
    })
  })

  it('adds qu only for units other than requests', () => {
    const d = decision({ remaining: 7, resetMs: 0 })
    expect(
      rateLimitHeaders(d, { name: 'c', quota: 10, unit: 'concurrent-requests' })['RateLimit-Policy'],
    ).toBe('"c";q=10;qu="concurrent-requests"')
    expect(
      rateLimitHeaders(d, { name: 'b', quota: 65535, windowSeconds: 10, unit: 'content-bytes' })[
        'RateLimit-Policy'
      ],
    ).toBe('"b";q=65535;qu="content-bytes";w=10')
    expect(rateLimitHeaders(d, { name: 'r', quota: 10, unit: 'requests' })['RateLimit-Policy']).toBe(
      '"r";q=10',
    )
  })

  it('sends the partition key as a byte sequence in both fields', () => {
    // The draft's own example value: "trial121323" is dHJpYWwxMjEzMjM= in base64.
    const headers = rateLimitHeaders(decision({ remaining: 999, resetMs: 0 }), {
      name: 'default',
      quota: 1000,
      partitionKey: 'trial121323',
    })
    expect(headers).toEqual({
      'RateLimit-Policy': '"default";q=1000;pk=:dHJpYWwxMjEzMjM=:',
      RateLimit: '"default";r=999;t=0;pk=:dHJpYWwxMjEzMjM=:',
    })
  })

  it('escapes quotes and backslashes in the policy name', () => {
    const headers = rateLimitHeaders(decision({}), { name: 'a "quoted" \\ name', quota: 1 })
    expect(headers['RateLimit-Policy']).toBe('"a \\"quoted\\" \\\\ name";q=1')
    expect(headers.RateLimit).toBe('"a \\"quoted\\" \\\\ name";r=42;t=17')
  })

  it('accepts a quota of 0', () => {
    expect(rateLimitHeaders(decision({ remaining: 0 }), { name: 'off', quota: 0 })['RateLimit-Policy']).toBe(
      '"off";q=0',
    )
  })

  it.each([
    ['an empty name', { name: '', quota: 1 }, 'policy.name'],
    ['a non-ASCII name', { name: 'café', quota: 1 }, 'policy.name'],
    ['a name with a newline', { name: 'a\nb', quota: 1 }, 'policy.name'],
    ['a name with DEL', { name: 'a\u007f', quota: 1 }, 'policy.name'],
    ['a negative quota', { name: 'p', quota: -1 }, 'policy.quota'],
    ['a fractional quota', { name: 'p', quota: 1.5 }, 'policy.quota'],
    ['a NaN quota', { name: 'p', quota: Number.NaN }, 'policy.quota'],
    ['a string quota', { name: 'p', quota: '100' }, 'policy.quota'],
    ['a zero window', { name: 'p', quota: 1, windowSeconds: 0 }, 'policy.windowSeconds'],
    ['a fractional window', { name: 'p', quota: 1, windowSeconds: 0.5 }, 'policy.windowSeconds'],
    ['an unknown unit', { name: 'p', quota: 1, unit: 'bytes' }, 'policy.unit'],
    ['an empty partition key', { name: 'p', quota: 1, partitionKey: '' }, 'policy.partitionKey'],
  ])('refuses %s', (_label, policy, option) => {
    const call = () => rateLimitHeaders(decision({}), policy as unknown as RateLimitPolicy)
    expect(codeOf(call)).toBe('TOLLBOOTH_ERR_INVALID_OPTION')
    expect(call).toThrow(`"${option}"`)
  })

  it('refuses an unknown option, naming the closest known one', () => {
    const options = { legacyHeaders: true } as never
    expect(() => rateLimitHeaders(decision({}), { name: 'p', quota: 1 }, options)).toThrow(
      expect.objectContaining({
        code: 'TOLLBOOTH_ERR_INVALID_OPTION',
        message: 'rateLimitHeaders: unknown option "legacyHeaders" (known options: legacy)',
      }),
    )
  })
})

describe('mergeRateLimitHeaders', () => {
  const daily: RateLimitPolicy = { name: 'daily', quota: 1000, windowSeconds: 86400 }

  it('joins several policies into one list per field and keeps the longest Retry-After', () => {
    const a = rateLimitHeaders(
      decision({ allowed: false, remaining: 0, resetMs: 5000, retryAfterMs: 5000 }),
      burst,
    )
    const b = rateLimitHeaders(
      decision({ allowed: false, remaining: 0, resetMs: 3_600_000, retryAfterMs: 3_600_000 }),
      daily,
    )
    expect(mergeRateLimitHeaders([a, b])).toEqual({
      'RateLimit-Policy': '"burst";q=100;w=60, "daily";q=1000;w=86400',
      RateLimit: '"burst";r=0;t=5, "daily";r=0;t=3600',
      'Retry-After': '3600',
    })
  })

  it('emits Retry-After when only one policy denied', () => {
    const a = rateLimitHeaders(decision({}), burst)
    const b = rateLimitHeaders(
      decision({ allowed: false, remaining: 0, resetMs: 10, retryAfterMs: 10 }),
      daily,
    )
    expect(mergeRateLimitHeaders([a, b])).toEqual({
      'RateLimit-Policy': '"burst";q=100;w=60, "daily";q=1000;w=86400',
      RateLimit: '"burst";r=42;t=17, "daily";r=0;t=1',
      'Retry-After': '1',
    })
  })

  it('takes the legacy trio from the most restrictive policy', () => {
    const a = rateLimitHeaders(decision({ remaining: 42, resetMs: 17_000 }), burst, { legacy: true })
    const b = rateLimitHeaders(decision({ remaining: 7, resetMs: 3_600_000 }), daily, { legacy: true })
    const merged = mergeRateLimitHeaders([a, b])
    expect(merged['X-RateLimit-Limit']).toBe('1000')
    expect(merged['X-RateLimit-Remaining']).toBe('7')
    expect(merged['X-RateLimit-Reset']).toBe('3600')
    expect(merged['Retry-After']).toBeUndefined()
  })

  it('returns a single input unchanged and nothing for an empty list', () => {
    const a = rateLimitHeaders(decision({}), burst, { legacy: true })
    expect(mergeRateLimitHeaders([a])).toEqual(a)
    expect(mergeRateLimitHeaders([])).toEqual({})
  })
})

/**
 * `t` as draft -10 defines it ("the number of seconds until additional quota … is made available"), on the policies of
 * real limiters (their `restore`), over a MemoryStore on a virtual clock: exact times, nothing slept.
 */
describe('RateLimit t of real limiters (draft -10)', () => {
  function onClock() {
    const clock = new VirtualClock()
    return { clock, store: new MemoryStore({ clock: clock.now }) }
  }

  it('token bucket of 10 refilled at 1/s: one request of cost 10 says t=1 (the next token), and so does a refusal a millisecond later', async () => {
    const { clock, store } = onClock()
    const refill = tokenBucket({ name: 'refill', store, capacity: 10, refillPerSecond: 1 })
    expect(rateLimitHeaders(await refill.consume('k', 10), refill.policy)).toEqual({
      'RateLimit-Policy': '"refill";q=10;w=10',
      RateLimit: '"refill";r=0;t=1',
    })
    clock.advance(1)
    expect(rateLimitHeaders(await refill.consume('k'), refill.policy)).toEqual({
      'RateLimit-Policy': '"refill";q=10;w=10',
      RateLimit: '"refill";r=0;t=1',
      'Retry-After': '1',
    })
    // The token is back at 1 s: spent at once, the next one is a second away.
    clock.advance(999)
    expect(rateLimitHeaders(await refill.consume('k'), refill.policy).RateLimit).toBe('"refill";r=0;t=1')
    // Half of what was spent comes back over 5 s; the next token is still at most a second away.
    clock.advance(5_400)
    expect(rateLimitHeaders(await refill.peek('k'), refill.policy).RateLimit).toBe('"refill";r=5;t=1')
    // Full: nothing is coming back.
    clock.advance(10_000)
    expect(rateLimitHeaders(await refill.peek('k'), refill.policy).RateLimit).toBe('"refill";r=10;t=0')
  })

  it('token bucket refilled every 4 s: t counts down to the next token, then starts again', async () => {
    const { clock, store } = onClock()
    const slow = tokenBucket({ name: 'slow', store, capacity: 3, refillPerSecond: 0.25 })
    await slow.consume('k', 3)
    const seen: string[] = []
    for (let second = 0; second < 6; second++) {
      seen.push(rateLimitHeaders(await slow.peek('k'), slow.policy).RateLimit as string)
      clock.advance(1000)
    }
    expect(seen).toEqual([
      '"slow";r=0;t=4',
      '"slow";r=0;t=3',
      '"slow";r=0;t=2',
      '"slow";r=0;t=1',
      '"slow";r=1;t=4',
      '"slow";r=1;t=3',
    ])
  })

  it('sliding window of 50 per 60 s with 30 used: t is when one more unit is back, as the window slides', async () => {
    const { clock, store } = onClock()
    const window = slidingWindow({ name: 'window', store, limit: 50, windowMs: 60_000 })
    // The clock starts on a minute boundary: 30 used one second into the window. The 21st unit is back once the 30
    // weigh 29, 2 s into the next window.
    clock.at(1_000)
    expect(rateLimitHeaders(await window.consume('k', 30), window.policy).RateLimit).toBe(
      '"window";r=20;t=61',
    )
    clock.at(11_000)
    expect(rateLimitHeaders(await window.consume('k'), window.policy).RateLimit).toBe('"window";r=19;t=51')
    // A refusal of 25: one more unit is back before those 25 fit; t is at most the Retry-After.
    expect(rateLimitHeaders(await window.consume('k', 25), window.policy)).toMatchObject({
      RateLimit: '"window";r=19;t=51',
      'Retry-After': '61',
    })
    // In the next window the 31 counted weigh 15.5 half-way: the 35th unit is back when they weigh 15, in 0.97 s.
    clock.at(90_000)
    expect(rateLimitHeaders(await window.peek('k'), window.policy).RateLimit).toBe('"window";r=34;t=1')
  })

  it('sliding window: at t seconds one more unit is back, at t - 1 it is not, and t is Retry-After for a cost of 1', async () => {
    const scenarios: [atMs: number, cost: number][][] = [
      [
        [4_000, 3],
        [4_000, 1],
      ],
      [
        [0, 1],
        [2_500, 1],
        [9_999, 1],
        [10_000, 2],
        [13_000, 1],
      ],
      [
        [7_000, 2],
        [12_000, 3],
        [12_001, 1],
      ],
      [
        [1_000, 5],
        [19_999, 1],
      ],
      [
        [9_000, 1],
        [11_000, 4],
        [15_500, 1],
      ],
    ]
    for (const scenario of scenarios) {
      const { clock, store } = onClock()
      const window = slidingWindow({ name: 'w', store, limit: 5, windowMs: 10_000 })
      let last: Decision | undefined
      for (const [atMs, cost] of scenario) {
        clock.at(atMs)
        last = await window.consume('k', cost)
      }
      const now = (scenario.at(-1) as [number, number])[0]
      const headers = rateLimitHeaders(last as Decision, window.policy)
      const [, r, t] = (/;r=(\d+);t=(\d+)/.exec(headers.RateLimit as string) ?? []).map(Number)
      if (!(last as Decision).allowed && r === 0)
        expect(headers['Retry-After'], `${scenario}`).toBe(String(t))
      clock.at(now + ((t as number) - 1) * 1000)
      expect((await window.peek('k')).remaining, `${scenario} at t - 1`).toBe(r)
      clock.at(now + (t as number) * 1000)
      expect((await window.peek('k')).remaining, `${scenario} at t`).toBeGreaterThan(r as number)
    }
  })

  it('fixed window of 5 per 10 s: t is the window end', async () => {
    const { clock, store } = onClock()
    const fixed = fixedWindow({ name: 'fixed', store, limit: 5, windowMs: 10_000 })
    clock.at(2_000)
    expect(rateLimitHeaders(await fixed.consume('k', 5), fixed.policy).RateLimit).toBe('"fixed";r=0;t=8')
    clock.at(2_001)
    expect(rateLimitHeaders(await fixed.consume('k'), fixed.policy)).toMatchObject({
      RateLimit: '"fixed";r=0;t=8',
      'Retry-After': '8',
    })
  })

  it('leaky bucket of 2 per second, queue of 3: t is the next turn', async () => {
    const { store } = onClock()
    const shaper = leakyBucket({ name: 'shaper', store, ratePerSecond: 2, maxQueue: 3 })
    for (let i = 0; i < 3; i++) await shaper.consume('k')
    expect(rateLimitHeaders(await shaper.consume('k'), shaper.policy).RateLimit).toBe('"shaper";r=0;t=1')
    expect(rateLimitHeaders(await shaper.consume('k'), shaper.policy)).toMatchObject({
      RateLimit: '"shaper";r=0;t=1',
      'Retry-After': '1',
    })
  })

  it('refuses a policy restore it cannot use, naming it', () => {
    const restore = { kind: 'steady', unitMs: -1 } as const
    expect(codeOf(() => rateLimitHeaders(decision({}), { ...burst, restore }))).toBe(
      'TOLLBOOTH_ERR_INVALID_OPTION',
    )
  })
})
