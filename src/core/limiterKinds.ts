import { LIMITER_KIND, type LimiterKind } from './limiterKind.js'
import type { ConcurrencyLimiter } from './limiters/concurrencyLimit.js'
import type { LeakyBucketLimiter } from './limiters/leakyBucket.js'
import type { RateLimiter } from './rateLimiter.js'

/**
 * What kind of limiter a value is, told by the mark tollbooth's limiters carry (`LIMITER_KIND`) rather than by
 * `instanceof`: a limiter of another copy of tollbooth is accepted as one of this copy, while an object that only
 * looks like a limiter (a wrapper, a mock) is refused at startup rather than failing on the first request.
 */
function kindOf(value: unknown): LimiterKind | undefined {
  if (typeof value !== 'object' || value === null) return undefined
  try {
    return (value as { [LIMITER_KIND]?: LimiterKind })[LIMITER_KIND]
  } catch {
    // A Proxy whose trap throws is no limiter.
    return undefined
  }
}

/** A token bucket, sliding or fixed window, or leaky bucket. */
export function isRateLimiter(value: unknown): value is RateLimiter {
  const kind = kindOf(value)
  return kind === 'rate' || kind === 'leakyBucket'
}

/** A `leakyBucket`: a rate limiter that queues (its decisions carry a delay). */
export function isLeakyBucket(value: unknown): value is LeakyBucketLimiter {
  return kindOf(value) === 'leakyBucket'
}

/** A `concurrencyLimit`: leases acquired and released. */
export function isConcurrencyLimiter(value: unknown): value is ConcurrencyLimiter {
  return kindOf(value) === 'concurrency'
}
