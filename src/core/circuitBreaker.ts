import type { BreakerState } from './hooks.js'
import { checkOptionKeys, optionNames } from './knownOptions.js'
import { positiveInteger } from './validate.js'

export interface CircuitBreakerOptions {
  /** Consecutive failures that open the breaker. @default 5 */
  failureThreshold?: number
  /** How long an open breaker refuses calls before letting one probe through, in milliseconds. @default 1000 */
  cooldownMs?: number
}

const OPTIONS = optionNames<CircuitBreakerOptions>({ failureThreshold: true, cooldownMs: true })

const SEVERITY: Record<BreakerState, number> = { closed: 0, 'half-open': 1, open: 2 }

/** Of several breakers' states: `open` when any is open, else `half-open` when any is, else `closed`. */
export function worstBreakerState(states: Iterable<BreakerState>): BreakerState {
  let worst: BreakerState = 'closed'
  for (const state of states) if (SEVERITY[state] > SEVERITY[worst]) worst = state
  return worst
}

/**
 * Stops calling a failing store. Closed: calls go through; `failureThreshold` consecutive failures open it. Open:
 * calls are refused without touching the store until `cooldownMs` passes. Then half-open: exactly one probe call
 * goes through; its success closes the breaker, its failure opens it for another cooldown.
 */
export class CircuitBreaker {
  private current: BreakerState = 'closed'
  private failures = 0
  private openUntil = 0
  private readonly failureThreshold: number
  private readonly cooldownMs: number

  constructor(
    owner: string,
    options: CircuitBreakerOptions,
    private readonly onChange: (from: BreakerState, to: BreakerState) => void,
  ) {
    checkOptionKeys(owner, options, OPTIONS, 'breaker')
    this.failureThreshold = positiveInteger(owner, 'breaker.failureThreshold', options.failureThreshold ?? 5)
    this.cooldownMs = positiveInteger(owner, 'breaker.cooldownMs', options.cooldownMs ?? 1000)
  }

  get state(): BreakerState {
    return this.current
  }

  /** Milliseconds until an open breaker lets a probe through; 0 otherwise. */
  remainingCooldownMs(now = Date.now()): number {
    return this.current === 'open' ? Math.max(0, this.openUntil - now) : 0
  }

  /** Whether a call may go to the store now. In half-open state only the first caller (the probe) gets `true`. */
  tryCall(now = Date.now()): boolean {
    if (this.current === 'closed') return true
    if (this.current === 'open' && now >= this.openUntil) {
      this.moveTo('half-open')
      return true
    }
    return false
  }

  succeeded(): void {
    this.failures = 0
    if (this.current !== 'closed') this.moveTo('closed')
  }

  failed(now = Date.now()): void {
    this.failures += 1
    if (
      this.current === 'half-open' ||
      (this.current === 'closed' && this.failures >= this.failureThreshold)
    ) {
      this.openUntil = now + this.cooldownMs
      this.moveTo('open')
    }
  }

  private moveTo(next: BreakerState): void {
    const previous = this.current
    this.current = next
    this.onChange(previous, next)
  }
}
