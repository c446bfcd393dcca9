import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Decision } from '../core/decision.js'
import { ErrorCodes, invalidArgument, invalidOption, TollboothError } from '../core/errors.js'
import { checkOptionKeys, type OptionKeys, optionNames } from '../core/knownOptions.js'
import { isConcurrencyLimiter, isRateLimiter } from '../core/limiterKinds.js'
import type { RateLimiter } from '../core/rateLimiter.js'
import { rateLimitHeaders } from '../core/rateLimitHeaders.js'
import { sleep } from '../core/sleep.js'
import { isOptionsObject, MAX_KEY_LENGTH, orDefault } from '../core/validate.js'
import { clientGone, type Middleware } from './middleware.js'
import { type Charge, refundByOutcome } from './refundByOutcome.js'
import { addRateLimitHeaders, type Refusal, refusal, sendRefusal } from './refusal.js'
import { type IdentityOptions, requestIdentity } from './requestIdentity.js'

/** What `rateLimitCheck` needs to decide on a request; `rateLimit` adds how a refusal is answered. */
export interface RateLimitCheckOptions<Req extends IncomingMessage = IncomingMessage>
  extends IdentityOptions<Req> {
  /**
   * The budget requests spend from: a rate limiter (`tokenBucket`, `slidingWindow`, `fixedWindow`, `leakyBucket`),
   * or a function of the request choosing one (per plan, per route; may be async). With a leaky bucket, an admitted
   * request waits out its `delayMs` before going on.
   */
  limiter: RateLimiter | ((req: Req) => RateLimiter | Promise<RateLimiter>)
  /**
   * What a request costs: a positive finite number, or a function of the request returning one (may be async). A
   * function's other answers are errors handed to `next`, never a free pass. A cost above what the limiter can ever
   * admit is refused with 400.
   * @default 1
   */
  cost?: number | ((req: Req) => number | Promise<number>)
  /** Requests for which this returns true (may be async) spend nothing and carry no RateLimit fields. */
  skip?: (req: Req) => boolean | Promise<boolean>
}

export interface RateLimitOptions<Req extends IncomingMessage = IncomingMessage>
  extends RateLimitCheckOptions<Req> {
  /**
   * Answers a refused request, in place of the default 429 (or 400) problem+json answer. The refusal carries the
   * status, the headers (RateLimit fields, `Retry-After`) and the body the default would send.
   * @default sendRefusal
   */
  onLimited?: (req: Req, res: ServerResponse, refusal: Refusal) => void | Promise<void>
  /**
   * Decides from a finished response whether an admitted request's cost is given back (may be async):
   * `(req, res) => res.statusCode < 400` counts only failed requests, `res.statusCode >= 400` only successful ones.
   * A response that did not finish (its client left) keeps its cost, and this is not asked. What it throws is
   * ignored (nothing is given back).
   */
  refundWhen?: (req: Req, res: ServerResponse) => boolean | Promise<boolean>
}

/** An admitted request: the RateLimit fields to send with its response (none when skipped). */
export interface RateLimitAllowed {
  readonly allowed: true
  readonly headers: Readonly<Record<string, string>>
  /** The limiter's decision; `undefined` when `skip` let the request through. */
  readonly decision: Decision | undefined
  /** @internal What the request spent, for a refund by outcome; absent when skipped. */
  readonly [CHARGE]?: Charge
}

/** A symbol, not a field: the hot path allocates no closure, and the charge stays out of the user's keys. */
const CHARGE = Symbol('tollbooth.rateLimit.charge')

/**
 * @internal What an admitted result spent from the store, to be given back there; undefined for a skipped request,
 * a refusal, or an admission the store did not decide (fail-open, or the in-process twin of `failPolicy: 'local'`),
 * which spent nothing there: refunding it would hand the identity units it never paid.
 */
export function chargeOf(result: RateLimitResult): Charge | undefined {
  if (!('allowed' in result) || result.decision?.source !== 'store') return undefined
  return result[CHARGE]
}

/** What `rateLimitCheck` answers: `'allowed' in result` tells an admission from a `Refusal`. */
export type RateLimitResult = RateLimitAllowed | Refusal

const checkOptionKeysList: OptionKeys<RateLimitCheckOptions> = {
  limiter: true,
  cost: true,
  skip: true,
  identify: true,
  trustProxy: true,
  ipv6Prefix: true,
  ipv4Prefix: true,
}
const CHECK_OPTIONS = optionNames<RateLimitCheckOptions>(checkOptionKeysList)
const OPTIONS = optionNames<RateLimitOptions>({ ...checkOptionKeysList, onLimited: true, refundWhen: true })

const SKIPPED: RateLimitAllowed = Object.freeze({
  allowed: true,
  headers: Object.freeze({}),
  decision: undefined,
})

/**
 * The decision of `rateLimit` without a framework: resolves to `{ allowed: true, headers }` (send the headers with
 * the response) or to a `Refusal` to answer. Rejects with what `identify`, `cost`, `skip` or `limiter` threw, and
 * with a `TOLLBOOTH_ERR_INVALID_ARGUMENT` for an invalid cost or identity. Options are checked here, at startup.
 */
export function rateLimitCheck<Req extends IncomingMessage = IncomingMessage>(
  options: RateLimitCheckOptions<Req>,
): (req: Req) => Promise<RateLimitResult> {
  const owner = 'rateLimitCheck'
  if (!isOptionsObject(options)) throw invalidOption(owner, 'options', 'an object', options)
  if ('onLimited' in options) {
    // The closest known name would be "limiter", which is not what was meant.
    throw new TollboothError(
      ErrorCodes.INVALID_OPTION,
      `${owner}: unknown option "onLimited" (a Refusal is answered by the caller, e.g. with sendRefusal)`,
    )
  }
  checkOptionKeys(owner, options, CHECK_OPTIONS)
  const decide = createDecider(owner, options)
  return (req) => {
    try {
      return Promise.resolve(decide(req))
    } catch (error) {
      return Promise.reject(error)
    }
  }
}

/**
 * An Express/Connect middleware (also for plain `node:http`, called with a `next`) spending from `limiter` for
 * each request: an admitted request goes on with the RateLimit fields set; a refused one is answered 429 with
 * `Retry-After`, the RateLimit fields and a problem+json body (400 for a cost no budget can hold) and never reaches
 * the route. Errors of `identify`, `cost`, `skip` or `limiter` go to `next(error)`.
 */
export function rateLimit<Req extends IncomingMessage = IncomingMessage>(
  options: RateLimitOptions<Req>,
): Middleware<Req> {
  const owner = 'rateLimit'
  if (!isOptionsObject(options)) throw invalidOption(owner, 'options', 'an object', options)
  checkOptionKeys(owner, options, OPTIONS)
  const onLimited = orDefault(options.onLimited, defaultOnLimited)
  if (typeof onLimited !== 'function') throw invalidOption(owner, 'onLimited', 'a function', onLimited)
  const { refundWhen } = options
  if (refundWhen !== undefined && typeof refundWhen !== 'function') {
    throw invalidOption(owner, 'refundWhen', 'a function (req, res) => boolean', refundWhen)
  }
  const decide = createDecider(owner, options)

  return (req, res, next) => {
    if (clientGone(req)) return
    const answer = (result: RateLimitResult) => {
      if ('allowed' in result) {
        if (!res.headersSent) addRateLimitHeaders(res, result.headers)
        if (refundWhen !== undefined) refundByOutcome(res, chargeOf(result), () => refundWhen(req, res))
        next()
        return
      }
      try {
        const pending = onLimited(req, res, result)
        if (pending instanceof Promise) pending.then(undefined, next)
      } catch (error) {
        next(error)
      }
    }
    let result: RateLimitResult | Promise<RateLimitResult>
    try {
      result = decide(req)
    } catch (error) {
      next(error)
      return
    }
    if (result instanceof Promise) result.then(answer, next)
    else answer(result)
  }
}

function defaultOnLimited(_req: IncomingMessage, res: ServerResponse, answer: Refusal): void {
  sendRefusal(res, answer)
}

/**
 * The decision for one request, checked once here. Synchronous when it can be (a fixed limiter on a memory store,
 * a synchronous identity, no `skip` or `cost`): the common case then costs no promise.
 */
function createDecider<Req extends IncomingMessage>(
  owner: string,
  options: RateLimitCheckOptions<Req>,
): (req: Req) => RateLimitResult | Promise<RateLimitResult> {
  const { limiter, skip } = options
  const { cost, constantCost } = costOption(owner, options.cost)
  if (isConcurrencyLimiter(limiter)) {
    throw invalidOption(
      owner,
      'limiter',
      'a rate limiter (a concurrencyLimit goes to concurrencyGuard)',
      limiter,
    )
  }
  if (!isRateLimiter(limiter) && typeof limiter !== 'function') {
    throw invalidOption(
      owner,
      'limiter',
      'a rate limiter (tokenBucket, slidingWindow, fixedWindow, leakyBucket) or a function of the request returning one',
      limiter,
    )
  }
  if (skip !== undefined && typeof skip !== 'function') throw invalidOption(owner, 'skip', 'a function', skip)
  const identify = requestIdentity(owner, options)
  const fixed = isRateLimiter(limiter) ? limiter : undefined
  const choose = isRateLimiter(limiter) ? undefined : limiter

  const limiterOf = async (req: Req): Promise<RateLimiter> => {
    const chosen = await (choose as (req: Req) => RateLimiter | Promise<RateLimiter>)(req)
    if (!isRateLimiter(chosen)) {
      throw invalidOption(owner, 'limiter', 'a function returning a rate limiter', chosen)
    }
    return chosen
  }

  const decideAsync = async (req: Req, knownKey?: string | Promise<string>): Promise<RateLimitResult> => {
    // Skip first: a health check or an allow-listed caller is not even identified.
    if (skip !== undefined && (await skip(req))) return SKIPPED
    const chosen = fixed ?? (await limiterOf(req))
    const key = validIdentity(owner, await (knownKey ?? identify(req)))
    const amount = cost === undefined ? constantCost : validCost(owner, await cost(req))
    return settle(await chosen.consume(key, amount), { limiter: chosen, key, cost: amount })
  }

  if (fixed === undefined || skip !== undefined || cost !== undefined) return (req) => decideAsync(req)
  return (req) => {
    const key = identify(req)
    if (typeof key !== 'string') return decideAsync(req, key)
    const now = fixed.decideNow(validIdentity(owner, key), constantCost)
    const charge = { limiter: fixed, key, cost: constantCost }
    if (now !== undefined) return settle(now, charge)
    return fixed.consume(key, constantCost).then((decision) => settle(decision, charge))
  }
}

/** The answer to a decision; a leaky bucket's admitted request first waits out its turn. */
function settle(decision: Decision, charge: Charge): RateLimitResult | Promise<RateLimitResult> {
  const { limiter } = charge
  if (!decision.allowed) return refusal(decision, limiter.policy)
  const allowed: RateLimitAllowed = {
    allowed: true,
    headers: rateLimitHeaders(decision, limiter.policy),
    decision,
    [CHARGE]: charge,
  }
  if (decision.delayMs > 0) return sleep(decision.delayMs).then(() => allowed)
  return allowed
}

/** @internal A request's identity as a store key, checked with the guard's name in the error. */
export function validIdentity(owner: string, key: unknown): string {
  if (typeof key !== 'string' || key.length === 0 || key.length > MAX_KEY_LENGTH) {
    throw invalidArgument(
      owner,
      'identify(req)',
      `a non-empty string of at most ${MAX_KEY_LENGTH} characters`,
      key,
    )
  }
  return key
}

function validCost(owner: string, amount: unknown): number {
  // A cost that is not a positive number is a bug in the application: an error, never a free request.
  if (typeof amount !== 'number' || !Number.isFinite(amount) || amount <= 0) {
    throw invalidArgument(owner, 'cost(req)', 'a positive finite number', amount)
  }
  return amount
}

/** The `cost` option: a function of the request, or one number for every request (1 when not given). */
function costOption<Req>(
  owner: string,
  cost: RateLimitCheckOptions<IncomingMessage>['cost'] | ((req: Req) => number | Promise<number>),
): { cost: ((req: Req) => number | Promise<number>) | undefined; constantCost: number } {
  if (cost === undefined) return { cost: undefined, constantCost: 1 }
  if (typeof cost === 'function')
    return { cost: cost as (req: Req) => number | Promise<number>, constantCost: 1 }
  if (typeof cost !== 'number' || !Number.isFinite(cost) || cost <= 0) {
    throw invalidOption(owner, 'cost', 'a positive finite number or a function of the request', cost)
  }
  return { cost: undefined, constantCost: cost }
}
