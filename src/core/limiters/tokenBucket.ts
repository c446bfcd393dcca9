import { invalidOption } from '../errors.js'
import { optionNames } from '../knownOptions.js'
import { resolveLimiterOptions } from '../limiterBase.js'
import { RateLimiter, type RateLimiterOptions, rateLimiterOptionKeys } from '../rateLimiter.js'
import { positiveInteger, positiveNumber } from '../validate.js'

export interface TokenBucketOptions extends RateLimiterOptions {
  /** Most tokens the bucket holds: the largest burst, and the largest single cost that can ever pass. */
  capacity: number
  /** Tokens added per second (fractions allowed: 5000 per hour is `5000 / 3600`). At most 1,000,000. */
  refillPerSecond: number
}

const OPTIONS = optionNames<TokenBucketOptions>({
  ...rateLimiterOptionKeys,
  capacity: true,
  refillPerSecond: true,
})

/**
 * Token bucket as GCRA (algorithms/gcra.ts; on Redis, stores/lua/gcra.ts): one stored number per key, millisecond-exact refill, cost-weighted. A cost above `capacity`
 * is always denied. Use it for budgets that allow bursts (API quotas, GraphQL cost budgets).
 */
export function tokenBucket(options: TokenBucketOptions): RateLimiter {
  const owner = 'tokenBucket'
  const resolved = resolveLimiterOptions(owner, options, OPTIONS)
  const capacity = positiveInteger(owner, 'capacity', options.capacity)
  const refillPerSecond = positiveNumber(owner, 'refillPerSecond', options.refillPerSecond)
  const emission = emissionMicros(owner, 'refillPerSecond', refillPerSecond, capacity)
  return new RateLimiter(
    { ...resolved, denyCache: options.denyCache },
    {
      algorithm: owner,
      step: 'gcra',
      limit: capacity,
      maxCost: capacity,
      windowSeconds: Math.ceil(capacity / refillPerSecond),
      restorePerSecond: refillPerSecond,
      args: (amount) => [emission, capacity * emission, Math.ceil(amount * emission)],
    },
  )
}

/** How far the rate kept (whole microseconds per unit) may be from the rate asked for. */
const MAX_RATE_ERROR = 0.01

/**
 * Microseconds per unit, rounded to a whole number so every sum of costs is exact in both TypeScript and Lua (the
 * rate is off by at most 0.5 µs per unit: 0.05% at 1,000 per second). A rate the rounding would change by more than
 * 1 % (above about 20,000 per second, where a unit lasts a few microseconds) is refused rather than silently kept
 * at another value: count in larger units instead (kilobytes rather than bytes).
 */
export function emissionMicros(owner: string, option: string, perSecond: number, units: number): number {
  const emission = Math.round(1_000_000 / perSecond)
  if (emission < 1) throw invalidOption(owner, option, 'at most 1000000', perSecond)
  const kept = 1_000_000 / emission
  if (Math.abs(kept - perSecond) > perSecond * MAX_RATE_ERROR) {
    throw invalidOption(
      owner,
      option,
      `a rate kept within 1 % in whole microseconds per unit (${perSecond} would be ${Math.round(kept)}; count in larger units)`,
      perSecond,
    )
  }
  if (!Number.isSafeInteger(emission * (units + 1) * 1000)) {
    throw invalidOption(owner, option, 'large enough that the bucket refills within years', perSecond)
  }
  return emission
}
