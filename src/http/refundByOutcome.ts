import type { ServerResponse } from 'node:http'
import type { RateLimiter } from '../core/rateLimiter.js'

/** What an admitted request spent: from which limiter, under which key, how much. */
export interface Charge {
  readonly limiter: RateLimiter
  readonly key: string
  readonly cost: number
}

/**
 * Once `res` is over (finished or aborted: 'close' comes last and once), asks `decide` whether the request's `charge`
 * is given back, and gives it back if so. Nothing is thrown: the response is gone, and a failing decision or store
 * leaves the charge as it was, spent at the door.
 */
export function refundByOutcome(
  res: ServerResponse,
  charge: Charge | undefined,
  decide: () => boolean | Promise<boolean>,
): void {
  if (charge === undefined) return
  res.once('close', () => {
    let verdict: boolean | Promise<boolean>
    try {
      verdict = decide()
    } catch {
      return
    }
    Promise.resolve(verdict)
      .then((refund) => (refund === true ? charge.limiter.refund(charge.key, charge.cost) : undefined))
      .catch(() => {})
  })
}
