/**
 * The mark every limiter carries, under a key of the global symbol registry: a limiter made by another copy of
 * tollbooth in the same tree (two versions in a monorepo) carries the same mark, which `instanceof` would miss.
 */
export const LIMITER_KIND = Symbol.for('tollbooth.limiterKind')

/** What a limiter is: a rate limiter (token bucket, sliding or fixed window), a leaky bucket, or leases. */
export type LimiterKind = 'rate' | 'leakyBucket' | 'concurrency'
