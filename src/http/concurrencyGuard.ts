import type { IncomingMessage, ServerResponse } from 'node:http'
import { invalidOption } from '../core/errors.js'
import { checkOptionKeys, optionNames } from '../core/knownOptions.js'
import { isConcurrencyLimiter } from '../core/limiterKinds.js'
import type { ConcurrencyLimiter, Lease } from '../core/limiters/concurrencyLimit.js'
import type { RateLimitPolicy } from '../core/rateLimitHeaders.js'
import { isOptionsObject, orDefault } from '../core/validate.js'
import { leaseForResponse } from './heldLease.js'
import { clientGone, type Middleware } from './middleware.js'
import { type Refusal, refusal, sendRefusal, setRateLimitHeaders } from './refusal.js'
import { type IdentityOptions, requestIdentity } from './requestIdentity.js'

export interface ConcurrencyGuardOptions<Req extends IncomingMessage = IncomingMessage>
  extends IdentityOptions<Req> {
  /**
   * The leases requests hold while they run: `concurrencyLimit({ name, max, leaseMs })`. A lease is renewed every
   * `leaseMs / 3` while its response runs, so a long response keeps it; a process that dies holding leases frees
   * them after `leaseMs`.
   */
  limiter: ConcurrencyLimiter
  /**
   * Answers a refused request, in place of the default 429 problem+json answer.
   * @default sendRefusal
   */
  onLimited?: (req: Req, res: ServerResponse, refusal: Refusal) => void | Promise<void>
}

const OPTIONS = optionNames<ConcurrencyGuardOptions>({
  limiter: true,
  onLimited: true,
  identify: true,
  trustProxy: true,
  ipv6Prefix: true,
  ipv4Prefix: true,
})

/**
 * An Express/Connect middleware (also for plain `node:http`) holding one concurrency lease per request for its
 * identity: released exactly once, when the response finishes, the client aborts or the socket fails. A request
 * beyond `max` at once is answered 429 (RateLimit fields with `qu="concurrent-requests"`, `Retry-After`) and never
 * reaches the route. Errors of `identify` go to `next(error)`.
 */
export function concurrencyGuard<Req extends IncomingMessage = IncomingMessage>(
  options: ConcurrencyGuardOptions<Req>,
): Middleware<Req> {
  const owner = 'concurrencyGuard'
  if (!isOptionsObject(options)) throw invalidOption(owner, 'options', 'an object', options)
  checkOptionKeys(owner, options, OPTIONS)
  const { limiter } = options
  if (!isConcurrencyLimiter(limiter)) {
    throw invalidOption(owner, 'limiter', 'a concurrency limiter (concurrencyLimit)', limiter)
  }
  const onLimited = orDefault(options.onLimited, defaultOnLimited)
  if (typeof onLimited !== 'function') throw invalidOption(owner, 'onLimited', 'a function', onLimited)
  const identify = requestIdentity(owner, options)
  const policy: RateLimitPolicy = Object.freeze({
    name: limiter.name,
    quota: limiter.limit,
    unit: 'concurrent-requests',
  })

  return (req, res, next) => {
    if (clientGone(req)) return
    const admit = (lease: Lease | undefined) => {
      // No lease: the client left while it was being acquired.
      if (lease === undefined) return
      if (!lease.allowed) {
        try {
          const pending = onLimited(req, res, refusal(lease, policy))
          if (pending instanceof Promise) pending.then(undefined, next)
        } catch (error) {
          next(error)
        }
        return
      }
      setRateLimitHeaders(res, lease, policy)
      next()
    }
    try {
      leaseForResponse(limiter, owner, identify(req), res).then(admit, next)
    } catch (error) {
      next(error)
    }
  }
}

function defaultOnLimited(_req: IncomingMessage, res: ServerResponse, answer: Refusal): void {
  sendRefusal(res, answer)
}
