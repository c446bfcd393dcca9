import type { Decision } from '../decision.js'
import { optionNames } from '../knownOptions.js'
import { resolveLimiterOptions } from '../limiterBase.js'
import { LIMITER_KIND, type LimiterKind } from '../limiterKind.js'
import { RateLimiter, type RateLimiterOptions, rateLimiterOptionKeys } from '../rateLimiter.js'
import { sleep } from '../sleep.js'
import { nonNegativeInteger, positiveNumber } from '../validate.js'
import { emissionMicros } from './tokenBucket.js'

export interface LeakyBucketOptions extends RateLimiterOptions {
  /** Requests let through per second, evenly spaced. At most 1,000,000. */
  ratePerSecond: number
  /** Requests that may wait their turn; one more arriving while the queue is full is denied. */
  maxQueue: number
}

const OPTIONS = optionNames<LeakyBucketOptions>({
  ...rateLimiterOptionKeys,
  ratePerSecond: true,
  maxQueue: true,
})

/**
 * A shaper: an admitted request gets `delayMs`, the wait after which it leaves so that output flows at a constant
 * `ratePerSecond`. Use it in front of something that needs a steady rate (an upstream API, a mail relay).
 */
export class LeakyBucketLimiter extends RateLimiter {
  override get [LIMITER_KIND](): LimiterKind {
    return 'leakyBucket'
  }
  protected override reportsDelay = true

  /**
   * Consumes, then waits out the decision's `delayMs` before resolving. A denied request resolves at once.
   * Timers are unref'd: a pending wait does not keep an otherwise idle process alive.
   */
  async wait(key: string, cost = 1, options: { signal?: AbortSignal } = {}): Promise<Decision> {
    const decision = await this.consume(key, cost)
    if (decision.allowed && decision.delayMs > 0) await sleep(decision.delayMs, options.signal)
    return decision
  }
}

export function leakyBucket(options: LeakyBucketOptions): LeakyBucketLimiter {
  const owner = 'leakyBucket'
  const resolved = resolveLimiterOptions(owner, options, OPTIONS)
  const ratePerSecond = positiveNumber(owner, 'ratePerSecond', options.ratePerSecond)
  const maxQueue = nonNegativeInteger(owner, 'maxQueue', options.maxQueue)
  const emission = emissionMicros(owner, 'ratePerSecond', ratePerSecond, maxQueue + 1)
  return new LeakyBucketLimiter(
    { ...resolved, denyCache: options.denyCache },
    {
      algorithm: owner,
      step: 'gcra',
      limit: maxQueue,
      // The request in service plus the queue.
      maxCost: maxQueue + 1,
      windowSeconds: Math.ceil((maxQueue + 1) / ratePerSecond),
      restorePerSecond: ratePerSecond,
      // The request in service plus `maxQueue` waiting: GCRA with a burst of maxQueue + 1 emissions.
      args: (amount) => [emission, (maxQueue + 1) * emission, Math.ceil(amount * emission)],
    },
  )
}
