import { invalidArgument, invalidOption } from '../core/errors.js'
import { checkOptionKeys, optionNames } from '../core/knownOptions.js'
import { orDefault } from '../core/validate.js'
import { type BackoffOptions, checkOptionsObject, jitteredBackoffMs, resolveBackoff } from './backoff.js'
import { type RetryAfterSource, serverWaitMs } from './serverWait.js'

const OWNER = 'retryDelay'

export interface RetryDelayOptions extends BackoffOptions {
  /** Cap of the first retry's delay, in ms; each retry doubles it. */
  baseMs: number
  /** Largest cap of the backoff, in ms. */
  maxMs: number
  /**
   * The refused answer: a fetch `Response`, its `Headers`, a header record, a GraphQL result or its errors. The
   * delay is never shorter than the wait it asks for (`Retry-After`, RateLimit `t`, `extensions.retryAfter`).
   */
  retryAfter?: RetryAfterSource | undefined
  /** The current time in ms since the epoch, against which an HTTP-date `Retry-After` is measured. @default Date.now() */
  now?: number
}

const OPTIONS = optionNames<RetryDelayOptions>({
  baseMs: true,
  maxMs: true,
  retryAfter: true,
  random: true,
  now: true,
})

/**
 * How long to wait before retry number `attempt` (0 for the first retry), in ms: exponential backoff with full
 * jitter, a uniform draw in [0, min(maxMs, baseMs × 2^attempt)), and never sooner than the server asked.
 *
 * ```ts
 * const response = await fetch(url)
 * if (response.status === 429) await wait(retryDelay(0, { baseMs: 200, maxMs: 10_000, retryAfter: response }))
 * ```
 */
export function retryDelay(attempt: number, options: RetryDelayOptions): number {
  checkOptionsObject(OWNER, options)
  checkOptionKeys(OWNER, options, OPTIONS)
  if (typeof attempt !== 'number' || !Number.isSafeInteger(attempt) || attempt < 0) {
    throw invalidArgument(OWNER, 'attempt', 'a non-negative integer', attempt)
  }
  const backoff = resolveBackoff(OWNER, options, {})
  const now = orDefault(options.now, Date.now())
  if (typeof now !== 'number' || !Number.isFinite(now))
    throw invalidOption(OWNER, 'now', 'a finite number', now)
  const jittered = jitteredBackoffMs(attempt, backoff)
  const serverWait = serverWaitMs(options.retryAfter, now)
  return serverWait === undefined ? jittered : Math.max(jittered, serverWait)
}
