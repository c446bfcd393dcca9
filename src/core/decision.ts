/** Where a decision came from. */
export type DecisionSource =
  /** The store answered (memory or Redis). */
  | 'store'
  /** The key was denied earlier until a known time; answered in-process without calling the store. */
  | 'cache'
  /** The store failed or its breaker is open and the limiter's `failPolicy` is `open`: allowed. */
  | 'fail-open'
  /** The store failed or its breaker is open and the limiter's `failPolicy` is `closed`: denied. */
  | 'fail-closed'
  /** The store failed or its breaker is open and `failPolicy` is `local`: an in-process limiter decided. */
  | 'local'
  /**
   * No limiter was asked: a guard refused by a check of its own (an upload over its size, a login request whose
   * body nothing parsed). Such a decision only describes the refusal; it never spent anything.
   */
  | 'guard'

/**
 * The answer to one `consume`, `peek`, `refund` or `acquire`. A denial is a result, not an exception.
 * All durations are whole milliseconds, rounded up, never negative.
 */
export interface Decision {
  /** Whether the request may proceed. For `peek` and `refund`: whether a request of cost 1 would be allowed now. */
  readonly allowed: boolean
  /** The policy's quota: token bucket capacity, window limit, leaky bucket queue size or concurrency max. */
  readonly limit: number
  /** Units left after this decision (whole units, never negative). */
  readonly remaining: number
  /** Milliseconds until the budget is whole again (bucket full, window over, leases expired). */
  readonly resetMs: number
  /**
   * On a denial, milliseconds until the same request could be allowed; 0 when allowed, and 0 when it never can be
   * (`neverAllowed`).
   */
  readonly retryAfterMs: number
  /** Leaky bucket only: how long an admitted request must wait so output leaves at a constant rate; else 0. */
  readonly delayMs: number
  /**
   * Sliding window only: milliseconds until more quota is available (one unit more than `remaining`, with no other
   * traffic; for `remaining` 0 the Retry-After of a request of cost 1), 0 when nothing is spent. The RateLimit
   * field's `t`; the other algorithms' comes from `resetMs` and the policy.
   */
  readonly moreQuotaMs?: number
  /**
   * Denied because the cost is more than the policy can ever admit (above a token bucket's capacity, a window's
   * limit, a leaky bucket's queue + 1): waiting cannot help, so there is no Retry-After. Answer it as a client
   * error (HTTP 400 or 413), not as 429. Nothing is spent. Always false when allowed.
   */
  readonly neverAllowed: boolean
  readonly source: DecisionSource
}

/** The answer to a cost above what the policy can ever admit, in place of `decision` (whoever answered it). */
export function refusedForever(decision: Decision): Decision {
  return { ...decision, allowed: false, retryAfterMs: 0, delayMs: 0, neverAllowed: true }
}
