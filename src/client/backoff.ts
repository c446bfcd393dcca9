import { invalidOption } from '../core/errors.js'
import { isOptionsObject, orDefault, positiveNumber } from '../core/validate.js'

/** Exponential backoff settings shared by `retryDelay`, `fetchWithRetry` and `graphqlWsRetry`. */
export interface BackoffOptions {
  /** Cap of the first retry's delay, in ms; each retry doubles it. */
  baseMs?: number
  /** Largest cap of the backoff, in ms (a server's own wait may be longer, and is honoured). */
  maxMs?: number
  /**
   * Source of uniform numbers in [0, 1) for the jitter: give a fixed one in tests. @default Math.random
   */
  random?: () => number
}

export interface ResolvedBackoff {
  readonly baseMs: number
  readonly maxMs: number
  readonly random: () => number
}

/** Checks the backoff options of `owner` once; `defaults` fills what the caller left out (when it may). */
export function resolveBackoff(
  owner: string,
  options: BackoffOptions,
  defaults: { baseMs?: number; maxMs?: number },
): ResolvedBackoff {
  const baseMs = positiveNumber(owner, 'baseMs', orDefault(options.baseMs, defaults.baseMs))
  // A default cap below the caller's own base would refuse an option the caller never gave: it rises to the base.
  const maxMs = positiveNumber(
    owner,
    'maxMs',
    orDefault(options.maxMs, defaults.maxMs === undefined ? undefined : Math.max(defaults.maxMs, baseMs)),
  )
  if (maxMs < baseMs) throw invalidOption(owner, 'maxMs', `at least baseMs (${baseMs})`, maxMs)
  const random = orDefault(options.random, Math.random)
  if (typeof random !== 'function') throw invalidOption(owner, 'random', 'a function', random)
  return { baseMs, maxMs, random }
}

/** Whether `options` is an options object, else the error naming it. */
export function checkOptionsObject(owner: string, options: unknown): void {
  if (!isOptionsObject(options)) throw invalidOption(owner, 'options', 'an object', options)
}

/**
 * Full jitter (AWS Architecture Blog, "Exponential Backoff And Jitter"): uniform in [0, min(maxMs, baseMs × 2^n)).
 * Spreading retries over the whole range is what keeps a crowd of refused clients from coming back in step.
 */
export function jitteredBackoffMs(retry: number, backoff: ResolvedBackoff): number {
  const cap = Math.min(backoff.maxMs, backoff.baseMs * 2 ** retry)
  const u = backoff.random()
  // A `random` outside [0, 1) (a test's, or a broken one) must not produce a negative or out-of-range delay.
  const unit = Number.isFinite(u) ? Math.min(Math.max(u, 0), 1) : 0
  return Math.floor(unit * cap)
}
