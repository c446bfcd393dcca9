import type { Decision } from './decision.js'
import { type QuotaRestore, unitsBackAfter } from './quotaRestore.js'

interface Denial {
  readonly until: number
  readonly cost: number
  readonly decision: Decision
}

/**
 * Remembers "this key is denied until T" so repeated requests from a denied identity are answered in-process until
 * T without a store round trip. Only a request costing at least as much as the denied one is answered from here
 * (a cheaper one may fit). Its answers count what has come back since the denial as far as `restore` tells (a
 * bucket's refill), not a copy of the denial's. Bounded: beyond `maxKeys` the oldest entry is dropped.
 */
export class DenyCache {
  private readonly denials = new Map<string, Denial>()

  constructor(
    private readonly maxKeys: number,
    private readonly restore?: QuotaRestore,
  ) {}

  get(key: string, cost: number, now = Date.now()): Decision | undefined {
    const denial = this.denials.get(key)
    if (denial === undefined) return undefined
    if (now >= denial.until) {
      this.denials.delete(key)
      return undefined
    }
    if (cost < denial.cost) return undefined
    const { decision } = denial
    const elapsed = now - (denial.until - decision.retryAfterMs)
    const remaining = decision.remaining + unitsBackAfter(decision, this.restore, elapsed)
    const resetMs = Math.max(0, decision.resetMs - elapsed)
    const retryAfterMs = denial.until - now
    // Two literals rather than a conditional spread: this answers every denial a flood repeats.
    if (decision.moreQuotaMs === undefined) {
      return { ...decision, remaining, resetMs, retryAfterMs, source: 'cache' }
    }
    const moreQuotaMs = Math.max(0, decision.moreQuotaMs - elapsed)
    return { ...decision, remaining, resetMs, retryAfterMs, moreQuotaMs, source: 'cache' }
  }

  remember(key: string, cost: number, decision: Decision, now = Date.now()): void {
    if (decision.retryAfterMs <= 0) return
    this.denials.delete(key)
    this.denials.set(key, { until: now + decision.retryAfterMs, cost, decision })
    if (this.denials.size > this.maxKeys) {
      const oldest = this.denials.keys().next()
      if (!oldest.done) this.denials.delete(oldest.value)
    }
  }

  forget(key: string): void {
    this.denials.delete(key)
  }

  get size(): number {
    return this.denials.size
  }
}
