import type { IncomingMessage } from 'node:http'
import type { Decision } from '../core/decision.js'
import { invalidArgument, invalidOption } from '../core/errors.js'
import { isStoreFailure } from '../core/failPolicy.js'
import { checkOptionKeys, optionNames } from '../core/knownOptions.js'
import { LeakyBucketLimiter } from '../core/limiters/leakyBucket.js'
import { RateLimiter } from '../core/rateLimiter.js'
import { isOptionsObject, orDefault } from '../core/validate.js'
import { hashKey } from '../identity/hashKey.js'
import { normalizeAccount } from '../identity/normalizeAccount.js'
import { proceedAfterDelay } from './heldLease.js'
import { clientGone, type Middleware } from './middleware.js'
import { mergeRateLimitHeaders, rateLimitHeaders } from './rateLimitHeaders.js'
import { addRateLimitHeaders, type Refusal, refusal, sendRefusal } from './refusal.js'
import { type IdentityOptions, requestIdentity } from './requestIdentity.js'

const OWNER = 'loginGuard'

export interface LoginGuardOptions<Req extends IncomingMessage = IncomingMessage>
  extends IdentityOptions<Req> {
  /**
   * Attempts per client address (the identity: IPv6 by /56): a rate limiter that refuses (`tokenBucket`,
   * `slidingWindow`, `fixedWindow`). Stops one address spraying many accounts.
   */
  perIp: RateLimiter
  /**
   * Attempts per (client address, account): a rate limiter that refuses. Stops one address guessing one account's
   * password; a success clears it.
   */
  perIpAndAccount: RateLimiter
  /**
   * Attempts per account from everywhere: a `leakyBucket` that slows attempts down and never refuses them. Each
   * attempt waits its turn (`delayMs`), so guesses against one account from many addresses come at most
   * `ratePerSecond`; once `maxQueue` attempts wait, further ones get the longest delay and are not queued. Nobody
   * can lock an account out: its owner waits at most about `(maxQueue + 1) / ratePerSecond` seconds.
   */
  perAccount: LeakyBucketLimiter
  /**
   * The account a login request names (read the parsed body: run your body parser first). The guard never looks it
   * up; a request that names none (undefined, or empty once normalized) is counted per address only.
   */
  account: (req: Req) => string | undefined | Promise<string | undefined>
  /**
   * Turns an account name into the form it is counted under, so that variants of one name share a budget.
   * @default trims, applies Unicode NFKC (full-width letters become ASCII) and lowercases
   */
  normalize?: (account: string) => string
  /**
   * A login guard refuses limiters that would let every attempt through while their store is down
   * (`failPolicy: 'open'` on a store other than a MemoryStore). `true` accepts them.
   * @default false
   */
  allowFailOpen?: boolean
}

const OPTIONS = optionNames<LoginGuardOptions>({
  perIp: true,
  perIpAndAccount: true,
  perAccount: true,
  account: true,
  normalize: true,
  allowFailOpen: true,
  identify: true,
  trustProxy: true,
  ipv6Prefix: true,
  ipv4Prefix: true,
})

/** An attempt the guard lets through: wait `delayMs` before verifying the credentials, and send `headers`. */
export interface LoginAdmission {
  readonly allowed: true
  /** How long this attempt must wait before the credentials are checked: the account's turn (0 when none). */
  readonly delayMs: number
  /** The RateLimit fields of the per-address and per-(address, account) budgets. */
  readonly headers: Readonly<Record<string, string>>
}

/**
 * What `check` answers: an admission, or a `Refusal` to answer as is (429 with `Retry-After` and problem+json);
 * `'allowed' in result` tells them apart.
 */
export type LoginCheck = LoginAdmission | Refusal

/**
 * A login guard: an Express/Connect middleware (also callable from plain `node:http` with a `next`) that waits out
 * the account's delay and then calls `next`, or answers a refusal itself; plus the framework-free `check` and the
 * outcome reports.
 */
export interface LoginGuard<Req extends IncomingMessage = IncomingMessage> extends Middleware<Req> {
  /** Decides one attempt and counts it; does not wait (the caller waits `delayMs`). */
  check(req: Req): Promise<LoginCheck>
  /**
   * Reports that the credentials of `req` were wrong. An attempt the guard checked was counted when it was checked:
   * this settles it. A request the guard did not check (a second factor verified elsewhere) is counted now, under
   * `account`.
   */
  failed(req: Req, account: string): Promise<void>
  /**
   * Reports a successful login: clears the failures of the (address, account) pair and gives back what this attempt
   * spent per address and per account. It never clears the address's or the account's other attempts: logging in to
   * an account of one's own must not reset the budget one is spraying other accounts with. A store that is down
   * leaves the pair to expire (nothing thrown).
   */
  succeeded(req: Req, account: string): Promise<void>
}

/** What `check` spent for one request, so that its outcome is settled exactly once. */
interface Attempt {
  readonly identity: string
  /** Undefined when the request named no account. */
  readonly account: string | undefined
  /** Whether a unit of `perAccount` was queued (a full queue queues nothing: there is nothing to give back). */
  readonly accountQueued: boolean
}

/**
 * Longest account name counted as is; a longer one is counted under its hash, so an attacker's 100 kB "e-mail"
 * neither fails the key check nor sits in a MemoryStore.
 */
const MAX_ACCOUNT_LENGTH = 256

/**
 * Rate limits for a login route, checked before the credentials are verified.
 *
 * Counting: every attempt is spent from all three budgets when it is checked, and a success gives back its own
 * units. Counting only reported failures would let N parallel attempts through before the first failure lands;
 * spending at the door admits exactly the budget, however many arrive at once, and an attempt whose outcome is never
 * reported (the client hung up during the delay, the route crashed) stays counted as a failure.
 *
 * Enumeration: the guard never looks the account up, so an existing and an unknown account get the same answer after
 * the same store calls; keep your own check just as blind (verify a dummy hash for an unknown account).
 */
export function loginGuard<Req extends IncomingMessage = IncomingMessage>(
  options: LoginGuardOptions<Req>,
): LoginGuard<Req> {
  if (!isOptionsObject(options)) throw invalidOption(OWNER, 'options', 'an object', options)
  checkOptionKeys(OWNER, options, OPTIONS)
  const perIp = refusingLimiter('perIp', options.perIp)
  const perIpAndAccount = refusingLimiter('perIpAndAccount', options.perIpAndAccount)
  const perAccount = options.perAccount
  if (!(perAccount instanceof LeakyBucketLimiter)) {
    throw invalidOption(
      OWNER,
      'perAccount',
      'a leakyBucket (it slows an account down, never locks it)',
      perAccount,
    )
  }
  if (typeof options.account !== 'function')
    throw invalidOption(OWNER, 'account', 'a function', options.account)
  const readAccount = options.account
  if (options.normalize !== undefined && typeof options.normalize !== 'function') {
    throw invalidOption(OWNER, 'normalize', 'a function', options.normalize)
  }
  const normalize = orDefault(options.normalize, normalizeAccount)
  const allowFailOpen = orDefault(options.allowFailOpen, false)
  if (typeof allowFailOpen !== 'boolean')
    throw invalidOption(OWNER, 'allowFailOpen', 'a boolean', allowFailOpen)
  const limiters = { perIp, perIpAndAccount, perAccount }
  checkDistinct(limiters)
  if (!allowFailOpen)
    for (const [option, limiter] of Object.entries(limiters)) checkFailsClosed(option, limiter)
  const identify = requestIdentity(OWNER, options)

  // Per request, not per identity: bounded by the requests alive, and gone with them.
  const attempts = new WeakMap<Req, Attempt>()

  /** The key an account is counted under; undefined when the request names none. */
  function accountKey(raw: unknown): string | undefined {
    if (raw === undefined || raw === null) return undefined
    // Anything else the request names is counted as the text it becomes: a JSON array `["victim@…"]` that the
    // route's own check turns into "victim@…" must not slip past the account's budgets as "no account".
    const normalized = normalize(typeof raw === 'string' ? raw : String(raw))
    if (typeof normalized !== 'string') {
      throw invalidArgument(OWNER, 'normalize(account)', 'a string', normalized)
    }
    if (normalized.length === 0) return undefined
    return normalized.length > MAX_ACCOUNT_LENGTH ? `#${hashKey(normalized)}` : normalized
  }

  async function check(req: Req): Promise<LoginCheck> {
    const identity = await identify(req)
    const account = accountKey(await readAccount(req))

    // Per address first: a spray over many accounts, the usual credential-stuffing run, is refused without spending
    // anything else.
    const ip = await perIp.consume(identity)
    if (!ip.allowed) return refusal(ip, perIp.policy)
    if (account === undefined) {
      attempts.set(req, { identity, account, accountQueued: false })
      return { allowed: true, delayMs: 0, headers: rateLimitHeaders(ip, perIp.policy) }
    }

    const pairKey = pair(identity, account)
    const pairDecision = await perIpAndAccount.consume(pairKey)
    if (!pairDecision.allowed) {
      await perIp.refund(identity, 1)
      return refusal(pairDecision, perIpAndAccount.policy)
    }

    const turn = await perAccount.consume(account)
    if (!turn.allowed && turn.source === 'fail-closed') {
      await Promise.all([perIp.refund(identity, 1), perIpAndAccount.refund(pairKey, 1)])
      return refusal(turn, perAccount.policy)
    }
    attempts.set(req, { identity, account, accountQueued: turn.allowed })
    return {
      allowed: true,
      delayMs: turn.allowed ? turn.delayMs : fullQueueDelay(turn, perAccount),
      headers: mergeRateLimitHeaders([
        rateLimitHeaders(ip, perIp.policy),
        rateLimitHeaders(pairDecision, perIpAndAccount.policy),
      ]),
    }
  }

  async function failed(req: Req, account: string): Promise<void> {
    if (attempts.has(req)) {
      attempts.delete(req)
      return
    }
    const identity = await identify(req)
    const key = accountKey(account)
    await perIp.consume(identity)
    if (key === undefined) return
    await Promise.all([perIpAndAccount.consume(pair(identity, key)), perAccount.consume(key)])
  }

  async function succeeded(req: Req, account: string): Promise<void> {
    const attempt = attempts.get(req)
    attempts.delete(req)
    const identity = attempt?.identity ?? (await identify(req))
    const key = attempt === undefined ? accountKey(account) : attempt.account
    const work: Promise<unknown>[] = []
    if (attempt !== undefined) {
      work.push(perIp.refund(identity, 1))
      if (attempt.accountQueued && key !== undefined) work.push(perAccount.refund(key, 1))
    }
    if (key !== undefined) {
      work.push(
        perIpAndAccount.reset(pair(identity, key)).catch((error: unknown) => {
          // The pair's failures expire with its key; a login must not fail because Redis is down.
          if (!isStoreFailure(error)) throw error
        }),
      )
    }
    await Promise.all(work)
  }

  const guard: Middleware<Req> = (req, res, next) => {
    if (clientGone(req)) return
    check(req).then((answer) => {
      if (!('allowed' in answer)) {
        sendRefusal(res, answer)
        return
      }
      if (!res.headersSent) addRateLimitHeaders(res, answer.headers)
      // A client that hangs up during its delay never reaches the route; its attempt stays counted.
      proceedAfterDelay(res, answer.delayMs, () => next())
    }, next)
  }

  return Object.assign(guard, { check, failed, succeeded })
}

export { normalizeAccount }

/** JSON keeps the pair unambiguous whatever either part contains. */
function pair(identity: string, account: string): string {
  return JSON.stringify([identity, account])
}

/**
 * The delay of an attempt that finds the account's queue full: it waits as if at the end of the queue (until a slot
 * frees, then the whole queue). Not queued, so an attacker cannot push it further out: the owner's wait is bounded.
 */
function fullQueueDelay(decision: Decision, limiter: LeakyBucketLimiter): number {
  return decision.retryAfterMs + Math.ceil((limiter.limit * 1000) / limiter.restorePerSecond)
}

function refusingLimiter(option: string, limiter: unknown): RateLimiter {
  if (!(limiter instanceof RateLimiter) || limiter instanceof LeakyBucketLimiter) {
    throw invalidOption(
      OWNER,
      option,
      'a rate limiter that refuses (tokenBucket, slidingWindow, fixedWindow)',
      limiter,
    )
  }
  return limiter
}

/** Two budgets under one name on one store would count in each other's keys (an account named like an address). */
function checkDistinct(limiters: Record<string, RateLimiter>): void {
  const entries = Object.entries(limiters)
  entries.forEach(([option, limiter], i) => {
    for (const [otherOption, other] of entries.slice(0, i)) {
      if (other.name === limiter.name && other.store === limiter.store) {
        throw invalidOption(
          OWNER,
          option,
          `a limiter of its own, not one sharing the name and the store of "${otherOption}"`,
          limiter.name,
        )
      }
    }
  })
}

/**
 * A login limit that lets everything through while Redis is down is what a credential-stuffing run waits for, and a
 * warning in a log is read after the fact: refuse it at startup, unless `allowFailOpen` says it is wanted. A
 * MemoryStore never fails, so its policy never applies; `local` still limits (per instance).
 */
function checkFailsClosed(option: string, limiter: RateLimiter): void {
  if (limiter.failPolicy === 'open' && limiter.store.kind !== 'memory') {
    throw invalidOption(
      OWNER,
      option,
      "a limiter with failPolicy 'closed' or 'local' when its store is remote (allowFailOpen: true accepts 'open')",
      limiter.failPolicy,
    )
  }
}
