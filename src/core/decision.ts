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
  /** On a denial, milliseconds until the same request could be allowed; 0 when allowed. */
  readonly retryAfterMs: number
  /** Leaky bucket only: how long an admitted request must wait so output leaves at a constant rate; else 0. */
  readonly delayMs: number
  readonly source: DecisionSource
}
