import type { Decision } from './decision.js'
import { ErrorCodes } from './errors.js'

/**
 * What a limiter answers while its store fails (error, deadline passed, breaker open):
 * - `open`: allow. For public read APIs, where an outage of the limiter must not become an outage of the API.
 * - `closed`: deny with Retry-After. For endpoints abuse would hurt more than downtime: login, password reset, SMS.
 * - `local`: an in-process limiter with the same parameters decides (per instance, so N instances admit up to N×).
 */
export type FailPolicy = 'open' | 'closed' | 'local'

export const failPolicies: readonly FailPolicy[] = ['open', 'closed', 'local']

/** Whether an error means "the store failed" (answered by the fail policy) rather than a bug or bad input. */
export function isStoreFailure(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code
  return (
    code === ErrorCodes.STORE_ERROR ||
    code === ErrorCodes.STORE_TIMEOUT ||
    code === ErrorCodes.STORE_UNAVAILABLE
  )
}

export function failOpenDecision(limit: number): Decision {
  return {
    allowed: true,
    limit,
    remaining: limit,
    resetMs: 0,
    retryAfterMs: 0,
    delayMs: 0,
    neverAllowed: false,
    source: 'fail-open',
  }
}

export function failClosedDecision(limit: number, retryAfterMs: number): Decision {
  return {
    allowed: false,
    limit,
    remaining: 0,
    resetMs: retryAfterMs,
    retryAfterMs,
    delayMs: 0,
    neverAllowed: false,
    source: 'fail-closed',
  }
}
