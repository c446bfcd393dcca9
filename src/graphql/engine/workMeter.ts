import type { OperationDefinitionNode } from 'graphql'
import type { Decision } from '../../core/decision.js'
import type { RateLimiter } from '../../core/rateLimiter.js'
import { debitWork, hasChargeToSettle } from './settlement.js'

/**
 * The work an admitted operation's resolvers have done so far, as they report it (cost/resolverWeights.ts), and
 * what it has paid: the estimate at the door, then debits as the work outruns it. Work is refused (a list before its
 * items run, any other weighted field before its resolver runs) once it would pass what the operation can ever pay:
 * what the budget held when it was admitted, plus the budget's capacity, the most it may owe. That bound needs no
 * answer from the store, so it holds as well on Redis, where a debit's answer comes after the work it pays for has
 * run on. A debit the store refuses (other operations of the caller spent the budget meanwhile) exhausts the
 * operation as well: nothing of it runs after that answer arrives. A memory store answers before the work runs: a
 * debit it cannot take whole within the budget's debt takes nothing, and the work it was for is refused.
 */
export class WorkMeter {
  /** Points of work the resolvers reported. */
  work = 0
  /** Points charged so far. */
  paid: number
  /** No more of this operation runs: it reached what it can pay, or the store refused a debit. */
  exhausted = false
  /** The store refused a debit: the budget owes its whole capacity, however much of that debit it took. */
  owesCapacity = false
  /** The decision of the last debit, for the refusal's Retry-After. */
  lastDecision: Decision | undefined
  /** What the response counts for fields refused before they ran (their nulls): work that never happened. */
  uncounted = 0
  /** Work already counted by a subscription's events, and what of `uncounted` they took into account. */
  counted = 0
  uncountedBefore = 0
  /** The operation was settled: work reported later (a deferred part its client left) is debited as it comes. */
  private settled = false
  private readonly bills: boolean
  /** Debited beyond the work reached, so that a long response debits now and then rather than at every field. */
  private readonly slack: number
  /** The most work the operation can ever pay: what the budget held at admission, plus what it may owe. */
  private readonly ceiling: number
  /** A subscription's: the most work one event can be paid (its budget for events, full, plus what it may owe). */
  private eventCeiling = Number.POSITIVE_INFINITY

  /**
   * The operation as admission charged it: its budget and whose, its estimate, and the decision. Taken field by
   * field rather than as an object, which would be one more per operation.
   */
  constructor(
    readonly limiter: RateLimiter,
    readonly identity: string,
    cost: number,
    decision: Decision,
    /** The operation's definition in its document, by which its context finds this meter. */
    readonly operation: OperationDefinitionNode,
    /** Whether an exhausted operation's lists are refused (not in dry-run). */
    private readonly enforce: boolean,
    /** False for a subscription: its events pay a budget of their own, event by event. */
    billsOperation = true,
  ) {
    this.paid = cost
    this.bills = billsOperation && hasChargeToSettle(cost, decision)
    this.slack = Math.ceil(limiter.limit / 20)
    this.ceiling = this.bills
      ? cost + Math.max(0, decision.remaining) + limiter.limit
      : Number.POSITIVE_INFINITY
  }

  /** A subscription's events are paid from `limiter`: one event's work is bounded by what that budget can pay. */
  boundEvents(limiter: { readonly limit: number }): void {
    this.eventCeiling = 2 * limiter.limit
  }

  /** Whether weighted fields are refused now (the operation can pay for no more work). */
  get stopped(): boolean {
    return this.exhausted && this.enforce
  }

  /**
   * A resolver's work; answers whether it may go on (false: a list is refused before its items run, another field
   * before its resolver runs; the work is not counted).
   */
  report(points: number): boolean {
    if (this.stopped) return false
    if (this.enforce && this.beyondCeiling(this.work + points)) {
      // A subscription's next event starts afresh; an operation stops here.
      if (this.bills) this.exhausted = true
      return false
    }
    this.work += points
    this.cover(this.work, true)
    if (!this.stopped) return true
    this.work -= points
    return false
  }

  /**
   * Makes sure the operation has paid at least `total`: debits the difference, and some slack, when it has not.
   * Answers the debit's decision, if there was one. `beforeWork`: the work beyond what was paid has not run yet (it
   * runs only if paid), so on a memory store a debit the budget cannot take within its debt takes nothing.
   */
  cover(total: number, beforeWork = false): Decision | Promise<Decision | undefined> | undefined {
    if (!this.bills || total <= this.paid) return undefined
    // The slack never takes the operation past what it can pay: a refusal there is the ceiling's, not the store's.
    const amount = Math.min(
      total - this.paid + (this.settled ? 0 : this.slack),
      Math.max(0, this.ceiling - this.paid),
    )
    if (amount <= 0) return undefined
    if (beforeWork) {
      const inMemory = this.limiter.debitWithinDebtNow?.(this.identity, amount, total - this.paid)
      if (inMemory !== undefined) {
        this.paid += inMemory.taken
        this.lastDecision = inMemory.decision
        // Refused, nothing was taken: the work it was for is refused, and the operation ends there.
        if (inMemory.taken === 0) this.exhausted = true
        return inMemory.decision
      }
    }
    this.paid += amount
    const decision = debitWork(this.limiter, this.identity, amount)
    if (decision instanceof Promise) {
      // A store that fails answers with its fail policy, not a rejection: a debit that rejects all the same (an
      // unexpected error) leaves the operation going, as the error says nothing of the budget.
      return decision.then(
        (decided) => this.judge(decided),
        () => undefined,
      )
    }
    return this.judge(decision)
  }

  /** The operation was settled at `paid`: later work is debited exactly, with no slack to give back. */
  settle(paid: number): void {
    this.paid = paid
    this.settled = true
  }

  private beyondCeiling(work: number): boolean {
    return work > this.ceiling || work - this.counted > this.eventCeiling
  }

  private judge(decision: Decision): Decision {
    this.lastDecision = decision
    if (!decision.allowed) {
      this.exhausted = true
      this.owesCapacity = true
    }
    return decision
  }
}
