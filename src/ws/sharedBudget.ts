import type { RateLimiter } from '../core/rateLimiter.js'

interface Allowance {
  /** Tokens drawn from the store and not yet spent by this process. */
  tokens: number
  /** A draw under way, so that concurrent messages do not start another. */
  drawing: Promise<void> | undefined
  /** When the store last refused: no draw before this time (ms). */
  deniedUntil: number
  /** Connections of this identity in this process. */
  connections: number
}

/** `token`: spent one. `wait`: none at hand, but a draw is under way (`whenDrawn`). `none`: the budget refused. */
export type Take = 'token' | 'wait' | 'none'

/**
 * A per-identity message budget shared by every connection and process, without a store round trip per message:
 * each process draws tokens from the shared token bucket `batch` at a time (one consume of cost `batch`) and
 * spends them locally; when half is spent it draws the next batch in the background. A message that arrives while
 * a draw is under way waits for it; one the budget refuses is dropped. Tokens are drawn before they are spent, so
 * the identity never gets more than its budget: the worst case is the other way, up to `batch` tokens per process
 * parked unspent (given back when the identity's last connection in the process closes).
 */
export class SharedBudget {
  private readonly allowances = new Map<string, Allowance>()

  constructor(
    private readonly limiter: RateLimiter,
    private readonly batch: number,
  ) {}

  /** A connection of `identity` opened here: draws its first tokens (awaited before the upgrade completes). */
  async join(identity: string): Promise<void> {
    const allowance = this.allowanceOf(identity)
    allowance.connections++
    if (allowance.tokens === 0) await this.draw(identity, allowance)
  }

  /** A connection of `identity` closed here; the last one gives the unspent tokens back. */
  leave(identity: string): void {
    const allowance = this.allowances.get(identity)
    if (allowance === undefined) return
    allowance.connections--
    if (allowance.connections > 0) return
    this.allowances.delete(identity)
    if (allowance.tokens > 0) void this.limiter.refund(identity, allowance.tokens).catch(() => undefined)
  }

  /**
   * Spends `cost` tokens (one message, or an event of that cost) for `identity`, synchronously. A cost above the
   * batch is drawn as one consume of that cost, so it is refused exactly when the shared bucket cannot pay it.
   */
  take(identity: string, cost = 1): Take {
    const allowance = this.allowances.get(identity)
    if (allowance === undefined) return 'none'
    // Draw the next batch when half of this one is spent, so steady traffic never waits for it.
    if (allowance.tokens - (cost - 1) <= this.batch / 2) {
      void this.draw(identity, allowance, Math.max(this.batch, cost - allowance.tokens))
    }
    if (allowance.tokens >= cost) {
      allowance.tokens -= cost
      return 'token'
    }
    return allowance.drawing === undefined ? 'none' : 'wait'
  }

  /** Spends `cost` tokens, waiting for draws under way; false when the budget refused. */
  async takeWhenDrawn(identity: string, cost = 1): Promise<boolean> {
    for (;;) {
      const taken = this.take(identity, cost)
      if (taken !== 'wait') return taken === 'token'
      await this.allowances.get(identity)?.drawing
    }
  }

  /** When the store last refused `identity`, how long until a draw is tried again (ms); 0 when none is pending. */
  retryAfterMs(identity: string): number {
    const allowance = this.allowances.get(identity)
    return allowance === undefined ? 0 : Math.max(0, allowance.deniedUntil - Date.now())
  }

  private allowanceOf(identity: string): Allowance {
    let allowance = this.allowances.get(identity)
    if (allowance === undefined) {
      allowance = { tokens: 0, drawing: undefined, deniedUntil: 0, connections: 0 }
      this.allowances.set(identity, allowance)
    }
    return allowance
  }

  private draw(identity: string, allowance: Allowance, amount = this.batch): Promise<void> {
    if (allowance.drawing !== undefined) return allowance.drawing
    if (Date.now() < allowance.deniedUntil) return Promise.resolve()
    allowance.drawing = this.limiter.consume(identity, amount).then(
      (decision) => {
        allowance.drawing = undefined
        if (decision.allowed) allowance.tokens += amount
        else allowance.deniedUntil = Date.now() + decision.retryAfterMs
      },
      () => {
        allowance.drawing = undefined
      },
    )
    return allowance.drawing
  }
}
