import type { Decision } from '../../core/decision.js'
import { type Charged, debitWork, spentFromStore } from './settlement.js'

/**
 * The work an admitted operation's resolvers have done so far, as they report it (cost/resolverWeights.ts), and
 * what it has paid: the estimate at the door, then debits as the work outruns it. A debit the budget cannot pay
 * without going into debt exhausts the operation: its lists are refused from then on, so that a response that
 * outruns its estimate stops near what its caller can pay, however long its lists turn out to be. On a memory
 * store the debit is decided at once; on a remote one its answer stops the lists reported after it arrives.
 */
export class WorkMeter {
  /** Points of work the resolvers reported. */
  work = 0
  /** Points charged so far. */
  paid: number
  /** The budget could not pay for more of this operation. */
  exhausted = false
  /** The decision of the last debit, for the refusal's Retry-After. */
  lastDecision: Decision | undefined
  /** Work already counted by a subscription's events. */
  counted = 0
  /** The operation was settled: work reported later (a deferred part its client left) is debited as it comes. */
  private settled = false
  private readonly bills: boolean
  /** Debited beyond the work reached, so that a long response debits now and then rather than at every field. */
  private readonly slack: number

  constructor(
    /** The operation, as admission charged it. */
    readonly admission: Charged & { readonly context?: unknown },
    /** Whether an exhausted operation's lists are refused (not in dry-run). */
    private readonly enforce: boolean,
    /** False for a subscription: its events pay a budget of their own, event by event. */
    billsOperation = true,
  ) {
    this.paid = admission.cost
    this.bills = billsOperation && spentFromStore(admission)
    this.slack = Math.ceil(admission.limiter.limit / 20)
  }

  /** Whether lists are refused now. */
  get stopped(): boolean {
    return this.exhausted && this.enforce
  }

  /** A resolver's work; answers whether the list it returned may be completed (false: it is refused, uncounted). */
  report(points: number): boolean {
    if (this.stopped) return false
    this.work += points
    this.cover(this.work)
    if (!this.stopped) return true
    this.work -= points
    return false
  }

  /**
   * Makes sure the operation has paid at least `total`: debits the difference, and some slack, when it has not.
   * Answers the debit's decision, if there was one.
   */
  cover(total: number): Decision | Promise<Decision | undefined> | undefined {
    if (!this.bills || total <= this.paid) return undefined
    const amount = total - this.paid + (this.settled ? 0 : this.slack)
    this.paid += amount
    const decision = debitWork(this.admission.limiter, this.admission.identity, amount)
    if (decision instanceof Promise) {
      // A debit that fails leaves the operation going: the store's fail policy has answered for it.
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

  private judge(decision: Decision): Decision {
    this.lastDecision = decision
    if (!decision.allowed) this.exhausted = true
    return decision
  }
}
