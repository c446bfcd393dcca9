import type { ConcurrencyLimiter } from './limiters/concurrencyLimit.js'
import type { LeakyBucketLimiter } from './limiters/leakyBucket.js'
import type { RateLimiter } from './rateLimiter.js'

/**
 * What kind of limiter a value is, told by its shape rather than by `instanceof`: a limiter made by another copy of
 * tollbooth in the same tree (two versions in a monorepo) is accepted as one made by this copy.
 */

/** A token bucket, sliding or fixed window, leaky bucket or `allOf`: anything that consumes and refunds. */
export function isRateLimiter(value: unknown): value is RateLimiter {
  const candidate = value as Partial<RateLimiter> | null
  return (
    typeof candidate === 'object' &&
    candidate !== null &&
    typeof candidate.consume === 'function' &&
    typeof candidate.refund === 'function' &&
    typeof candidate.policy === 'object'
  )
}

/** A `leakyBucket`: a rate limiter that queues (its decisions carry a delay). */
export function isLeakyBucket(value: unknown): value is LeakyBucketLimiter {
  return isRateLimiter(value) && value.algorithm === 'leakyBucket'
}

/** A `concurrencyLimit`: leases acquired and released. */
export function isConcurrencyLimiter(value: unknown): value is ConcurrencyLimiter {
  const candidate = value as Partial<ConcurrencyLimiter> | null
  return (
    typeof candidate === 'object' &&
    candidate !== null &&
    typeof candidate.acquire === 'function' &&
    candidate.algorithm === 'concurrencyLimit'
  )
}
