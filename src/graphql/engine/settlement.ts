import type { ExecutionResult, GraphQLFormattedError } from 'graphql'
import type { Decision } from '../../core/decision.js'
import type { RateLimiter } from '../../core/rateLimiter.js'
import type { PricedOperation } from '../cost/costAnalyzer.js'

/**
 * Settlement: what an operation (or a subscription's event) pays once its work is done. The charge made at the door
 * was the estimate; what the response really holds is counted in the same model, and the difference is refunded or
 * debited. See docs/graphql.md, "What is refunded".
 */

/** What settlement needs to know of an admitted operation. */
export interface OperationToSettle {
  /** The estimate (at least `minCost`), as charged at the door. */
  readonly cost: number
  /** Undefined when the operation was too large to price (dry-run lets it run). */
  readonly priced: PricedOperation | undefined
  readonly limiter: RateLimiter
  readonly identity: string
  readonly decision: Decision
}

/** What the resolvers of an operation (or of one event) reported. */
export interface MeteredWork {
  /** The work that ran. */
  readonly work: number
  /** What the response counts for the nulls of fields refused before they ran. */
  readonly uncounted: number
}

/**
 * What an executed operation really cost: its response counted in the cost model (above the estimate when that
 * was too low) and the work its resolvers reported (`metered`: what ran, an error's null hiding it or not), the
 * larger; never below `floor`. Where the resolvers do not report (a schema the engine was not shown), a response
 * in which an error hid work that ran (see `hidesWork`) pays at least its whole estimate.
 */
export function actualCost(
  operation: Pick<OperationToSettle, 'cost' | 'priced'>,
  result: ExecutionResult,
  /** The errors as execution raised them, where the result's are already formatted (Apollo). */
  errors: ExecutionResult['errors'],
  floor: number,
  metered: MeteredWork | undefined,
): number {
  const { priced, cost } = operation
  // Too large to price (dry-run only): nothing to count against.
  if (priced === undefined) return Math.max(cost, metered?.work ?? 0)
  const counted = priced.actual(result.data)
  if (metered !== undefined) return Math.max(counted - metered.uncounted, metered.work, floor)
  return Math.max(hidesWork(result.data, errors) ? Math.max(counted, cost) : counted, floor)
}

/** What an execution error carries that matters here: where it was raised. */
type ErrorWithPath = Pick<GraphQLFormattedError, 'path'>

/**
 * Whether an error in `errors` hid work that ran: whether the null it left in `data` covers more than the field
 * that raised it. A nullable field whose resolver threw is null itself, and nothing ran below it. But when a
 * non-null field fails, graphql-js nulls its parent (and further up, to the nearest nullable field, or `data`
 * itself): the siblings that had resolved, and what they resolved, are gone from the response, so counting the
 * response would refund work that was done.
 */
export function hidesWork(data: unknown, errors: readonly ErrorWithPath[] | undefined): boolean {
  if (errors === undefined) return false
  for (const error of errors) {
    const path = error.path
    // Errors without a path (invalid variables, a refusal) come before execution: nothing ran.
    if (path === undefined || path.length === 0) continue
    let value: unknown = data
    // The null propagated above the failed field when a proper prefix of its path already reads null.
    for (let depth = 0; depth < path.length; depth++) {
      if (value === null || typeof value !== 'object') return true
      value = (value as Record<string | number, unknown>)[path[depth] as string | number]
    }
  }
  return false
}

/**
 * Whether admission spent the operation's cost from the store, so that settlement has something to move: not for a
 * fail-policy answer. A free operation was only peeked at: the store answered, so what it cost above 0 is billed.
 */
export function hasChargeToSettle(cost: number, decision: Decision): boolean {
  return spentByDecision(decision) || (cost === 0 && decision.source === 'store')
}

/** Whether a decision really spent from the store (not a fail-policy answer): only then is there anything to give back. */
export function spentByDecision(decision: Decision): boolean {
  return decision.allowed && decision.source === 'store'
}

/** What an operation paid in the end, and what went back to its budget (negative for a debit). */
export interface Settled {
  readonly paid: number
  readonly balance: number
}

/**
 * Brings what the operation paid from its estimate to `actual`: a refund of the difference, or a debit of what it
 * cost above the estimate, into debt of at most the budget's quota (as the store keeps it). `paid` is `actual`
 * unless the debt would pass that bound; nothing moves when admission spent nothing from the store (a fail-open
 * decision).
 */
export function settleCharge(
  limiter: RateLimiter,
  identity: string,
  decision: Decision,
  /** What the operation paid so far: its estimate, and any debit made while its work outran it. */
  cost: number,
  actual: number,
): Settled {
  if (!hasChargeToSettle(cost, decision) || actual === cost) return { paid: actual, balance: 0 }
  if (actual < cost) {
    const refund = cost - actual
    // Not awaited: the response need not wait for the store; a failed refund only leaves the charge in place.
    if (limiter.refundNow?.(identity, refund) === undefined) limiter.refund(identity, refund).catch(() => {})
    return { paid: actual, balance: refund }
  }
  const overage = Math.min(actual - cost, decision.remaining + limiter.limit)
  if (overage <= 0) return { paid: cost, balance: 0 }
  // The same for the debit; sent before the response is, so the caller's next operation finds it made.
  if (limiter.debitNow?.(identity, overage) === undefined) limiter.debit(identity, overage).catch(() => {})
  return { paid: cost + overage, balance: -overage }
}

/**
 * Charges what work already done cost (a subscription's event) to `limiter`, into debt if need be. Answers the
 * decision: `allowed` false when the budget could not pay without going into debt.
 */
export function debitWork(
  limiter: RateLimiter,
  identity: string,
  amount: number,
): Decision | Promise<Decision> {
  return limiter.debitNow?.(identity, amount) ?? limiter.debit(identity, amount)
}
