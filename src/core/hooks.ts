import type { DecisionSource } from './decision.js'
import { invalidOption } from './errors.js'
import { checkOptionKeys, optionNames } from './knownOptions.js'
import { isOptionsObject } from './validate.js'

/**
 * Observability callbacks. Events carry limiter and store names, which can become metric labels; a decision also
 * carries the identity it was for (`key`), which must never be one. A hook that throws is ignored (it must not
 * break a decision).
 */
export interface DecisionEvent {
  readonly limiter: string
  /** The identity the decision was for: count it or hash it; never a metric label, never logged raw. */
  readonly key: string
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
  /** The node whose breaker changed: `host:port` (on a cluster, each master has a breaker of its own). */
  readonly node: string
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

const LIMITER_HOOKS = optionNames<LimiterHooks>({ onDecision: true })
const STORE_HOOKS = optionNames<StoreHooks>({
  onStoreError: true,
  onBreakerChange: true,
  onStoreLatency: true,
})

/** The `hooks` option of a limiter: a misspelt hook would never be called, so unknown keys are refused. */
export function limiterHooksOption(owner: string, hooks: LimiterHooks | undefined): LimiterHooks {
  return hooksOption(owner, hooks, LIMITER_HOOKS)
}

/** The `hooks` option of a store. */
export function storeHooksOption(owner: string, hooks: StoreHooks | undefined): StoreHooks {
  return hooksOption(owner, hooks, STORE_HOOKS)
}

function hooksOption<T extends object>(owner: string, hooks: T | undefined, known: readonly string[]): T {
  if (hooks === undefined) return {} as T
  if (!isOptionsObject(hooks)) throw invalidOption(owner, 'hooks', 'an object', hooks)
  checkOptionKeys(owner, hooks, known, 'hooks')
  for (const [name, hook] of Object.entries(hooks)) {
    if (hook !== undefined && typeof hook !== 'function') {
      throw invalidOption(owner, `hooks.${name}`, 'a function', hook)
    }
  }
  return hooks
}
