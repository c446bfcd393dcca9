import type { Decision } from '../../core/decision.js'
import type { RateLimiter } from '../../core/rateLimiter.js'

/**
 * Spends `cost` from the caller's budget if it holds it (a denial spends nothing), synchronously on a memory store:
 * an operation's charge at the door, a subscription event's. A free operation is only peeked at, so that its answer
 * still carries the budget's state.
 */
export function decide(limiter: RateLimiter, identity: string, cost: number): Decision | Promise<Decision> {
  const now = typeof limiter.decideNow === 'function' ? limiter.decideNow(identity, cost) : undefined
  if (now !== undefined) return now
  return cost > 0 ? limiter.consume(identity, cost) : limiter.peek(identity)
}
