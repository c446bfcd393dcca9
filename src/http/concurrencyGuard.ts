import type { IncomingMessage, ServerResponse } from 'node:http'
import { invalidOption } from '../core/errors.js'
import { checkOptionKeys, optionNames } from '../core/knownOptions.js'
import { ConcurrencyLimiter, type Lease } from '../core/limiters/concurrencyLimit.js'
import { isOptionsObject, orDefault } from '../core/validate.js'
import { holdForResponse } from './heldLease.js'
import { clientGone, type Middleware } from './middleware.js'
import { validIdentity } from './rateLimit.js'
import type { RateLimitPolicy } from './rateLimitHeaders.js'
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
  if (!(limiter instanceof ConcurrencyLimiter)) {
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
    // A client gone while the lease was being acquired: the response closed before it could hold one.
    let closedEarly = false
    const onEarlyClose = () => {
      closedEarly = true
    }
    res.once('close', onEarlyClose)
    const admit = (lease: Lease) => {
      res.off('close', onEarlyClose)
      if (!lease.allowed) {
        try {
          const pending = onLimited(req, res, refusal(lease, policy))
          if (pending instanceof Promise) pending.then(undefined, next)
        } catch (error) {
          next(error)
        }
        return
      }
      if (closedEarly) {
        void lease.release()
        return
      }
      holdForResponse(lease, limiter.leaseMs, res)
      setRateLimitHeaders(res, lease, policy)
      next()
    }
    const fail = (error: unknown) => {
      res.off('close', onEarlyClose)
      next(error)
    }
    try {
      const key = identify(req)
      const acquired =
        typeof key === 'string'
          ? limiter.acquire(validIdentity(owner, key))
          : Promise.resolve(key).then((resolved) => limiter.acquire(validIdentity(owner, resolved)))
      acquired.then(admit, fail)
    } catch (error) {
      fail(error)
    }
  }
}

function defaultOnLimited(_req: IncomingMessage, res: ServerResponse, answer: Refusal): void {
  sendRefusal(res, answer)
}
