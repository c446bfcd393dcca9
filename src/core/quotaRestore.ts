import type { Decision } from './decision.js'
import type { AlgorithmName } from './stores/store.js'

/**
 * How a limiter's spent quota comes back: what the RateLimit field's `t` (draft-ietf-httpapi-ratelimit-headers-10:
 * "the number of seconds until additional quota … is made available") is worked out from.
 * - `steady`: one unit every `unitMs` (token bucket, leaky bucket);
 * - `window-end`: all of it when the window ends (fixed window);
 * - `sliding`: as the window slides past what was counted (sliding window of `windowMs`).
 */
export type QuotaRestore =
  | { readonly kind: 'steady'; readonly unitMs: number }
  | { readonly kind: 'window-end' }
  | { readonly kind: 'sliding'; readonly windowMs: number }

/** How quota comes back for an algorithm step, from its arguments for one unit (`args(1)`). */
export function quotaRestoreOf(step: AlgorithmName, unitArgs: readonly number[]): QuotaRestore | undefined {
  const first = (unitArgs[0] ?? 0) / 1000
  switch (step) {
    case 'gcra':
      return Object.freeze({ kind: 'steady', unitMs: first })
    case 'fixedWindow':
      return Object.freeze({ kind: 'window-end' })
    case 'slidingWindow':
      return Object.freeze({ kind: 'sliding', windowMs: first })
    default:
      return undefined
  }
}

/**
 * Milliseconds until more quota is available after `decision`; 0 when none is spent (nothing is waiting to come
 * back). Without `restore`: until the quota is whole again (`resetMs`).
 * - steady: until the next unit (GCRA's `resetMs` is the debt in time; a unit comes back each `unitMs` of it);
 * - window-end: until the window ends;
 * - sliding: the decision's `moreQuotaMs`, worked out by the step from both counters; without it (a decision made
 *   elsewhere), until the current window ends, when what it counted starts to leave — a lower bound.
 */
export function msUntilMoreQuota(decision: Decision, restore: QuotaRestore | undefined): number {
  return untilMoreQuotaMs(decision.resetMs, decision.moreQuotaMs, restore)
}

/** `msUntilMoreQuota` of a decision's `resetMs` and `moreQuotaMs`, without the decision. */
export function untilMoreQuotaMs(
  resetMs: number,
  moreQuotaMs: number | undefined,
  restore: QuotaRestore | undefined,
): number {
  if (resetMs <= 0 || restore === undefined) return Math.max(0, resetMs)
  switch (restore.kind) {
    case 'steady': {
      const phase = resetMs % restore.unitMs
      return phase === 0 ? Math.min(resetMs, restore.unitMs) : phase
    }
    case 'window-end':
      return resetMs
    case 'sliding':
      if (moreQuotaMs !== undefined) return moreQuotaMs
      return resetMs > restore.windowMs ? resetMs - restore.windowMs : resetMs
  }
}

/**
 * Units that have come back `elapsedMs` after `decision`, as far as the decision alone tells: every unit due in that
 * time for a steady refill (at most the debt it had); none for a window, whose count is only known to its store (a
 * fixed window's comes back all at once when it ends, a sliding window's as it slides: `remaining` is a lower bound).
 */
export function unitsBackAfter(
  decision: Decision,
  restore: QuotaRestore | undefined,
  elapsedMs: number,
): number {
  if (restore?.kind !== 'steady' || decision.resetMs <= 0 || elapsedMs <= 0) return 0
  const first = msUntilMoreQuota(decision, restore)
  if (elapsedMs < first) return 0
  const owed = 1 + Math.floor((decision.resetMs - first) / restore.unitMs)
  return Math.min(owed, 1 + Math.floor((elapsedMs - first) / restore.unitMs))
}
