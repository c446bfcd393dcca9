import { type CustomDecorator, SetMetadata } from '@nestjs/common'
import { invalidOption } from '../core/errors.js'
import { checkOptionKeys, optionNames } from '../core/knownOptions.js'
import { isConcurrencyLimiter, isRateLimiter } from '../core/limiterKinds.js'
import type { RateLimiter } from '../core/rateLimiter.js'
import { isOptionsObject } from '../core/validate.js'
import { checkCost, type NestHttpRequest, type RouteCost } from './routeCost.js'

/**
 * The metadata key of `@RateLimit` and `@SkipRateLimit` (both write it, so the one nearest the handler wins). A
 * string rather than a symbol: decorators and guard from two copies of tollbooth in one tree still agree.
 */
export const RATE_LIMIT_METADATA = 'tollbooth:rateLimit'

/** The options of `@RateLimit`. */
export interface RateLimitRouteOptions<Req = NestHttpRequest> {
  /**
   * What a request of this route costs (a number, or a function of the request and context). A cost above what the
   * limiter can ever admit is refused with 400.
   * @default the guard's `cost` (1 unless set)
   */
  cost?: RouteCost<Req>
}

/** What `@RateLimit` records on a class or handler. */
export interface RouteRateLimit {
  /** A limiter, or the name of one of the guard's `limiters` (resolved by the guard). */
  readonly limiter: RateLimiter | string
  readonly cost: RouteCost<unknown> | undefined
}

/** What `@SkipRateLimit` records: a plain object, so that two copies of tollbooth recognize it alike. */
export interface RouteSkipped {
  readonly skip: true
}

export type RouteLimitMetadata = RouteRateLimit | RouteSkipped

const OWNER = '@RateLimit'
const ROUTE_OPTIONS = optionNames<RateLimitRouteOptions>({ cost: true })
const SKIPPED: RouteSkipped = Object.freeze({ skip: true })

/**
 * Limits a controller (every handler of it) or one handler with `limiter`: a rate limiter (`tokenBucket`,
 * `slidingWindow`, `fixedWindow`, `leakyBucket`), or the name of one registered in the guard's `limiters`. A
 * handler's own `@RateLimit` or `@SkipRateLimit` replaces its controller's. Checked when the class is defined; a
 * name is looked up by the guard (a name it does not know fails the request with `TOLLBOOTH_ERR_INVALID_OPTION`).
 */
export function RateLimit<Req = NestHttpRequest>(
  limiter: RateLimiter | string,
  options: RateLimitRouteOptions<Req> = {},
): CustomDecorator<string> {
  if (typeof limiter === 'string') {
    if (limiter.length === 0)
      throw invalidOption(OWNER, 'limiter', 'a rate limiter or a non-empty name', limiter)
  } else if (isConcurrencyLimiter(limiter)) {
    throw invalidOption(
      OWNER,
      'limiter',
      'a rate limiter (a concurrencyLimit is no budget of requests)',
      limiter,
    )
  } else if (!isRateLimiter(limiter)) {
    throw invalidOption(
      OWNER,
      'limiter',
      "a rate limiter (tokenBucket, slidingWindow, fixedWindow, leakyBucket) or the name of one of the guard's limiters",
      limiter,
    )
  }
  if (!isOptionsObject(options)) throw invalidOption(OWNER, 'options', 'an object', options)
  checkOptionKeys(OWNER, options, ROUTE_OPTIONS)
  if (options.cost !== undefined) checkCost(OWNER, 'cost', options.cost)
  const metadata: RouteRateLimit = Object.freeze({
    limiter,
    cost: options.cost as RouteCost<unknown> | undefined,
  })
  return SetMetadata(RATE_LIMIT_METADATA, metadata)
}

/**
 * Leaves a controller (every handler of it) or one handler unlimited by the guard: no budget spent, no RateLimit
 * fields. A handler's own `@RateLimit` limits it all the same.
 */
export function SkipRateLimit(): CustomDecorator<string> {
  return SetMetadata(RATE_LIMIT_METADATA, SKIPPED)
}

/** Whether route metadata says "not limited". */
export function isSkipped(metadata: RouteLimitMetadata): metadata is RouteSkipped {
  return (metadata as Partial<RouteSkipped>).skip === true
}
