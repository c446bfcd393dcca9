import type { ServerResponse } from 'node:http'
import type { RateLimiter } from '../core/rateLimiter.js'

/** What an admitted request spent: from which limiter, under which key, how much. */
export interface Charge {
  readonly limiter: RateLimiter
  readonly key: string
  readonly cost: number
}

/**
 * Once `res` is over ('close' comes last and once), asks `decide` whether the request's `charge` is given back, and
 * gives it back if so — but only for a response that finished. A response that did not (its client hung up, the
 * stream was reset) keeps its charge without `decide` being asked: the route ran, and its status is whatever it was
 * when the client left, so a refund there would let a client that hangs up run the route without ever paying.
 * Nothing is thrown: the response is gone, and a failing decision or store leaves the charge as it was, spent at
 * the door.
 */
export function refundByOutcome(
  res: ServerResponse,
  charge: Charge | undefined,
  decide: () => boolean | Promise<boolean>,
): void {
  if (charge === undefined) return
  res.once('close', () => {
    if (!res.writableFinished) return
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
