import type { SharedBudget } from './sharedBudget.js'

/**
 * Messages of one connection waiting for the identity's shared budget to draw tokens. They are delivered in
 * arrival order once a token is at hand, or dropped if the budget refuses; while any wait, later messages queue
 * behind them so order is kept. At most `max` wait; beyond, a message is dropped.
 */
export class MessageQueue {
  private readonly waiting: unknown[][] = []

  constructor(
    private readonly budget: SharedBudget,
    private readonly identity: () => string,
    private readonly max: number,
    private readonly deliver: (args: unknown[]) => void,
    private readonly drop: () => void,
  ) {}

  /** Takes a token for a message: true to deliver it now, false when it was queued or dropped. */
  offer(args: unknown[]): boolean {
    if (this.waiting.length === 0) {
      const taken = this.budget.take(this.identity())
      if (taken === 'token') return true
      if (taken === 'none') {
        this.drop()
        return false
      }
    }
    if (this.waiting.length >= this.max) {
      this.drop()
      return false
    }
    this.waiting.push(args)
    if (this.waiting.length === 1) void this.drain()
    return false
  }

  private async drain(): Promise<void> {
    while (this.waiting.length > 0) {
      const granted = await this.budget.takeWhenDrawn(this.identity())
      const args = this.waiting.shift() as unknown[]
      if (granted) this.deliver(args)
      else this.drop()
    }
  }
}
