import { optionNames } from '../knownOptions.js'
import { resolveLimiterOptions } from '../limiterBase.js'
import { RateLimiter, type RateLimiterOptions, rateLimiterOptionKeys } from '../rateLimiter.js'
import { positiveInteger } from '../validate.js'

export interface WindowOptions extends RateLimiterOptions {
  /** Units allowed per window. */
  limit: number
  /** Window length in milliseconds (whole). */
  windowMs: number
}

const OPTIONS = optionNames<WindowOptions>({ ...rateLimiterOptionKeys, limit: true, windowMs: true })

/**
 * Fixed window counter, windows aligned on the epoch. Cheapest and easiest to explain, but admits up to 2× `limit`
 * around a window boundary (`npx tollbooth simulate` shows it). Prefer `slidingWindow` unless you need calendar
 * windows.
 */
export function fixedWindow(options: WindowOptions): RateLimiter {
  return windowLimiter('fixedWindow', options)
}

export function windowLimiter(
  algorithm: 'fixedWindow' | 'slidingWindow',
  options: WindowOptions,
): RateLimiter {
  const resolved = resolveLimiterOptions(algorithm, options, OPTIONS)
  const limit = positiveInteger(algorithm, 'limit', options.limit)
  const windowMs = positiveInteger(algorithm, 'windowMs', options.windowMs)
  const windowUs = windowMs * 1000
  return new RateLimiter(
    { ...resolved, denyCache: options.denyCache },
    {
      algorithm,
      step: algorithm,
      limit,
      maxCost: limit,
      windowSeconds: Math.ceil(windowMs / 1000),
      restorePerSecond: limit / (windowMs / 1000),
      args: (amount) => [windowUs, limit, amount],
    },
  )
}
