import type { DecisionSource } from './decision.js'

/**
 * Observability callbacks. Events carry limiter and store names, never identities, so they can become metric labels.
 * A hook that throws is ignored (it must not break a decision).
 */
export interface DecisionEvent {
  readonly limiter: string
  readonly algorithm: string
  readonly op: string
  readonly allowed: boolean
  readonly source: DecisionSource
  readonly cost: number
  /** Time the decision took, in milliseconds (store round trip included). */
  readonly durationMs: number
}

export interface StoreErrorEvent {
  readonly store: string
  readonly op: string
  /** The error, whose `code` is one of `TOLLBOOTH_ERR_STORE_*`. */
  readonly error: Error & { code?: string }
}

export type BreakerState = 'closed' | 'open' | 'half-open'

export interface BreakerChangeEvent {
  readonly store: string
  readonly from: BreakerState
  readonly to: BreakerState
}

export interface LimiterHooks {
  onDecision?(event: DecisionEvent): void
}

export interface StoreHooks {
  onStoreError?(event: StoreErrorEvent): void
  onBreakerChange?(event: BreakerChangeEvent): void
  /** Round-trip time of each successful store call, in milliseconds. */
  onStoreLatency?(event: { store: string; durationMs: number }): void
}

/** Calls a hook, swallowing whatever it throws. */
export function emit<E>(hook: ((event: E) => void) | undefined, event: E): void {
  if (hook === undefined) return
  try {
    hook(event)
  } catch {
    // A broken metrics callback must not change a decision.
  }
}
