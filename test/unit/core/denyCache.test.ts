/**
 * The deny cache's answers on a clock of its own (`now` given): a denied key is answered in-process until its
 * Retry-After, counting what a bucket has refilled since the denial instead of repeating the denial's `remaining`.
 */
import { describe, expect, it } from 'vitest'
import type { Decision } from '../../../src/core/decision.js'
import { DenyCache } from '../../../src/core/denyCache.js'
import { quotaRestoreOf } from '../../../src/core/quotaRestore.js'

/** A token bucket of 100 refilled at 10 per second (a token every 100 ms): 96 spent, 60 asked. */
const denial: Decision = {
  allowed: false,
  limit: 100,
  remaining: 4,
  resetMs: 9_600,
  retryAfterMs: 5_600,
  delayMs: 0,
  neverAllowed: false,
  source: 'store',
}
const T0 = 1_000_000

describe('DenyCache', () => {
  it('counts the tokens a bucket got back: 54 left five seconds after a denial that left 4', () => {
    const cache = new DenyCache(10, quotaRestoreOf('gcra', [100_000]))
    cache.remember('k', 60, denial, T0)
    expect(cache.get('k', 60, T0)).toMatchObject({ remaining: 4, resetMs: 9_600, retryAfterMs: 5_600 })
    expect(cache.get('k', 60, T0 + 99)).toMatchObject({ remaining: 4 })
    expect(cache.get('k', 60, T0 + 100)).toMatchObject({ remaining: 5 })
    expect(cache.get('k', 60, T0 + 5_000)).toMatchObject({
      remaining: 54,
      resetMs: 4_600,
      retryAfterMs: 600,
      source: 'cache',
    })
    // Denied until the 56 missing tokens are back; then the store is asked again.
    expect(cache.get('k', 60, T0 + 5_600)).toBeUndefined()
  })

  it('keeps a window’s remaining: only its store knows when its count goes', () => {
    const cache = new DenyCache(10, quotaRestoreOf('slidingWindow', [60_000_000, 50, 1]))
    cache.remember(
      'k',
      30,
      { ...denial, limit: 50, remaining: 20, resetMs: 90_000, retryAfterMs: 30_000 },
      T0,
    )
    expect(cache.get('k', 30, T0 + 20_000)).toMatchObject({ remaining: 20, retryAfterMs: 10_000 })
  })
})
