import type { IncomingMessage } from 'node:http'
import type { Decision } from '../core/decision.js'
import { invalidArgument, invalidOption } from '../core/errors.js'
import { isStoreFailure } from '../core/failPolicy.js'
import { hashKey } from '../core/hashKey.js'
import { checkOptionKeys, optionNames } from '../core/knownOptions.js'
import { isLeakyBucket, isRateLimiter } from '../core/limiterKinds.js'
import type { LeakyBucketLimiter } from '../core/limiters/leakyBucket.js'
import { PROBLEM_JSON_CONTENT_TYPE } from '../core/problemJson.js'
import type { RateLimiter } from '../core/rateLimiter.js'
import { mergeRateLimitHeaders, rateLimitHeaders } from '../core/rateLimitHeaders.js'
import { isOptionsObject, MAX_KEY_LENGTH, orDefault } from '../core/validate.js'
import { normalizeAccount } from '../identity/normalizeAccount.js'
import { clientGone, type Middleware } from './middleware.js'
import { proceedAfterDelay } from './proceedAfterDelay.js'
import { addRateLimitHeaders, type Refusal, refusal, sendRefusal } from './refusal.js'
import { unreadBody } from './requestBody.js'
import { type IdentityOptions, requestIdentity } from './requestIdentity.js'
import { type TrustedDeviceOptions, type TrustedDevices, trustedDevices } from './trustedDevices.js'

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
   * Attempts per account from every address together, trusted devices apart: a `leakyBucket`. Each attempt waits its
   * turn (`delayMs`), so attempts at one account reach the route at most `ratePerSecond`, from all addresses; once
   * `maxQueue` attempts wait, further ones are refused (429, `Retry-After` until a turn frees). Its owner logs in
   * through such an attack from a trusted device (`trustedDevices`).
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
  /**
   * Trusted devices: `succeeded` issues a device token (an HMAC of the account's normalized name, a random device id
   * and an expiry) for the route to set as a cookie or return; an attempt presenting a valid token for the account it
   * names is counted in `perDevice` alone, outside the budgets every other client shares. Without it, every attempt
   * is counted per address, per (address, account) and per account.
   */
  trustedDevices?: TrustedDeviceOptions<Req>
}

const OPTIONS = optionNames<LoginGuardOptions>({
  perIp: true,
  perIpAndAccount: true,
  perAccount: true,
  account: true,
  normalize: true,
  allowFailOpen: true,
  trustedDevices: true,
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
  /**
   * The RateLimit fields of the budgets the attempt spent from where they are the client's own: per address and per
   * (address, account), or its device's.
   */
  readonly headers: Readonly<Record<string, string>>
  /** Whether the attempt presented a valid device token for its account (and was counted per device). */
  readonly trustedDevice: boolean
}

/** What `succeeded` answers: with `trustedDevices`, a fresh device token for the client to keep. */
export interface LoginSuccess {
  /** A new device token for the account (undefined without `trustedDevices`, or when no account was named). */
  readonly deviceToken: string | undefined
  /**
   * The `Set-Cookie` value carrying `deviceToken` in the cookie `trustedDevices.cookieName`: `Max-Age` of the token's
   * lifetime, `Path=/; HttpOnly; Secure; SameSite=Strict`.
   */
  readonly deviceCookie: string | undefined
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
   * spent (per address and per account, or per device). It never clears the address's or the account's other
   * attempts: logging in to an account of one's own must not reset the budget one is spraying other accounts with.
   * A store that is down leaves the pair to expire (nothing thrown). With `trustedDevices`, resolves a fresh device
   * token for the client: hand it over (`deviceCookie`) after the session is set up.
   */
  succeeded(req: Req, account: string): Promise<LoginSuccess>
}

/** What `check` spent for one request, so that its outcome is settled exactly once. */
type Attempt =
  | {
      readonly kind: 'shared'
      readonly identity: string
      /** Undefined when the request named no account. */
      readonly account: string | undefined
    }
  | { readonly kind: 'device'; readonly account: string; readonly deviceKey: string }

/**
 * Longest account name counted as is; a longer one is counted under its hash, so an attacker's 100 kB "e-mail"
 * neither fails the key check nor sits in a MemoryStore.
 */
const MAX_ACCOUNT_LENGTH = 256

const NO_DEVICE: LoginSuccess = Object.freeze({ deviceToken: undefined, deviceCookie: undefined })

/**
 * Rate limits for a login route, checked before the credentials are verified.
 *
 * Counting: every attempt is spent from its budgets when it is checked (all three, or its device's), and a success
 * gives back its own units. Counting only reported failures would let N parallel attempts through before the first
 * failure lands; spending at the door admits exactly the budget, however many arrive at once, and an attempt whose
 * outcome is never reported (the client hung up during the delay, the route crashed) stays counted as a failure.
 *
 * Enumeration: the guard never looks the account up, so an existing and an unknown account get the same answer after
 * the same store calls; keep your own check just as blind (verify a dummy hash for an unknown account).
 */
export function loginGuard<Req extends IncomingMessage = IncomingMessage>(
  options: LoginGuardOptions<Req>,
): LoginGuard<Req> {
  const limits = new LoginLimits(options)
  const check = (req: Req) => limits.check(req)
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
  return Object.assign(guard, {
    check,
    failed: (req: Req, account: string) => limits.failed(req, account),
    succeeded: (req: Req, account: string) => limits.succeeded(req, account),
  })
}

/** A login guard's limits, checked once, and what it decides and settles for each attempt. */
class LoginLimits<Req extends IncomingMessage> {
  private readonly perIp: RateLimiter
  private readonly perIpAndAccount: RateLimiter
  private readonly perAccount: LeakyBucketLimiter
  private readonly readAccount: LoginGuardOptions<Req>['account']
  private readonly normalize: (account: string) => string
  private readonly devices: TrustedDevices<Req> | undefined
  private readonly identify: (req: Req) => string | Promise<string>
  private readonly unparsed: Refusal
  /** Once per kind (a parser ran before the guard or not), not per content type: those are the clients' to vary. */
  private readonly warnedUnparsed = new Set<boolean>()
  /** Per request, not per identity: bounded by the requests alive, and gone with them. */
  private readonly attempts = new WeakMap<Req, Attempt>()

  constructor(options: LoginGuardOptions<Req>) {
    if (!isOptionsObject(options)) throw invalidOption(OWNER, 'options', 'an object', options)
    checkOptionKeys(OWNER, options, OPTIONS)
    this.perIp = refusingLimiter('perIp', options.perIp)
    this.perIpAndAccount = refusingLimiter('perIpAndAccount', options.perIpAndAccount)
    const perAccount = options.perAccount
    if (!isLeakyBucket(perAccount)) {
      throw invalidOption(
        OWNER,
        'perAccount',
        'a leakyBucket (it slows an account down, never locks it)',
        perAccount,
      )
    }
    this.perAccount = perAccount
    if (typeof options.account !== 'function')
      throw invalidOption(OWNER, 'account', 'a function', options.account)
    this.readAccount = options.account
    if (options.normalize !== undefined && typeof options.normalize !== 'function') {
      throw invalidOption(OWNER, 'normalize', 'a function', options.normalize)
    }
    this.normalize = orDefault(options.normalize, normalizeAccount)
    const allowFailOpen = orDefault(options.allowFailOpen, false)
    if (typeof allowFailOpen !== 'boolean')
      throw invalidOption(OWNER, 'allowFailOpen', 'a boolean', allowFailOpen)
    this.devices =
      options.trustedDevices === undefined
        ? undefined
        : trustedDevices(OWNER, options.trustedDevices, refusingLimiter)
    const limiters: Record<string, RateLimiter> = {
      perIp: this.perIp,
      perIpAndAccount: this.perIpAndAccount,
      perAccount,
    }
    if (this.devices !== undefined) limiters['trustedDevices.perDevice'] = this.devices.perDevice
    checkDistinct(limiters)
    if (!allowFailOpen)
      for (const [option, limiter] of Object.entries(limiters)) checkFailsClosed(option, limiter)
    this.identify = requestIdentity(OWNER, options)
    this.unparsed = unparsedBodyRefusal(this.perIp)
  }

  /**
   * Decides one attempt and counts it. Its awaits stay in this one function on purpose: a decision split into an async
   * function of its own would cost every attempt one promise more. The answers are steps of their own.
   */
  async check(req: Req): Promise<LoginCheck> {
    // The callbacks are called as plain functions, as the options hold them: never with this class as `this`.
    const { perIp, perIpAndAccount, perAccount, devices, identify, readAccount } = this
    const identity = await identify(req)
    const account = this.accountKey(await readAccount(req))
    if (account === undefined && unreadBody(req)) return this.refuseUnparsed(req)

    const device = await this.deviceKey(req, account)
    if (device !== undefined && devices !== undefined && account !== undefined) {
      const decision = await devices.perDevice.consume(device)
      if (decision.allowed) {
        return this.admitDevice(req, account, device, rateLimitHeaders(decision, devices.perDevice.policy))
      }
      // The device's own failures spent its budget: its token is revoked until the budget refills, and the attempt
      // counts as an untrusted client's.
    }

    // Per address first: a spray over many accounts, the usual credential-stuffing run, is refused without spending
    // anything else.
    const ip = await perIp.consume(identity)
    if (!ip.allowed) return refusal(ip, perIp.policy)
    if (account === undefined) {
      return this.admitShared(req, identity, account, 0, rateLimitHeaders(ip, perIp.policy))
    }

    const pairKey = pair(identity, account)
    const pairDecision = await perIpAndAccount.consume(pairKey)
    if (!pairDecision.allowed) {
      await perIp.refund(identity, 1)
      return refusal(pairDecision, perIpAndAccount.policy)
    }

    // The account's turn: its queue full (or its store down, failing closed), the attempt is refused, never sent on
    // later: attempts reach the route at most at the account's rate, however many addresses send them.
    const turn = await perAccount.consume(account)
    if (!turn.allowed) {
      await Promise.all([perIp.refund(identity, 1), perIpAndAccount.refund(pairKey, 1)])
      return refusal(turn, perAccount.policy)
    }
    const headers = mergeRateLimitHeaders([
      rateLimitHeaders(ip, perIp.policy),
      rateLimitHeaders(pairDecision, perIpAndAccount.policy),
    ])
    return this.admitShared(req, identity, account, turn.delayMs, headers)
  }

  async failed(req: Req, account: string): Promise<void> {
    const { attempts, devices } = this
    if (attempts.has(req)) {
      attempts.delete(req)
      return
    }
    const key = this.accountKey(account)
    const device = await this.deviceKey(req, key)
    // Counted on the device while its budget holds, as `check` would have; a revoked device counts as any client.
    if (device !== undefined && devices !== undefined && (await devices.perDevice.consume(device)).allowed)
      return
    const { identify } = this
    const identity = await identify(req)
    await this.perIp.consume(identity)
    if (key === undefined) return
    await Promise.all([this.perIpAndAccount.consume(pair(identity, key)), this.perAccount.consume(key)])
  }

  async succeeded(req: Req, account: string): Promise<LoginSuccess> {
    const { attempts, devices, identify } = this
    const attempt = attempts.get(req)
    attempts.delete(req)
    const key = attempt === undefined ? this.accountKey(account) : attempt.account
    const work: Promise<unknown>[] = []
    if (attempt?.kind === 'device') {
      if (devices !== undefined) work.push(devices.perDevice.refund(attempt.deviceKey, 1))
    } else {
      const identity = attempt?.identity ?? (await identify(req))
      if (attempt !== undefined) {
        work.push(this.perIp.refund(identity, 1))
        if (key !== undefined) work.push(this.perAccount.refund(key, 1))
      }
      if (key !== undefined) {
        work.push(
          this.perIpAndAccount.reset(pair(identity, key)).catch((error: unknown) => {
            // The pair's failures expire with its key; a login must not fail because Redis is down.
            if (!isStoreFailure(error)) throw error
          }),
        )
      }
    }
    await Promise.all(work)
    if (devices === undefined || key === undefined) return NO_DEVICE
    const issued = devices.issue(key)
    return { deviceToken: issued.token, deviceCookie: issued.cookie }
  }

  /** The key an account is counted under; undefined when the request names none. */
  private accountKey(raw: unknown): string | undefined {
    if (raw === undefined || raw === null) return undefined
    // Anything else the request names is counted as the text it becomes: a JSON array `["victim@…"]` that the
    // route's own check turns into "victim@…" must not slip past the account's budgets as "no account".
    const { normalize } = this
    const normalized = normalize(typeof raw === 'string' ? raw : String(raw))
    if (typeof normalized !== 'string') {
      throw invalidArgument(OWNER, 'normalize(account)', 'a string', normalized)
    }
    if (normalized.length === 0) return undefined
    return normalized.length > MAX_ACCOUNT_LENGTH ? `#${hashKey(normalized)}` : normalized
  }

  /** The device key of a valid token `req` presents for `account`, if any. */
  private async deviceKey(req: Req, account: string | undefined): Promise<string | undefined> {
    const { devices } = this
    if (devices === undefined || account === undefined) return undefined
    const device = await devices.deviceOf(req, account)
    return device === undefined ? undefined : storeKey([account, device])
  }

  /** A body nothing parsed and no account: refused with 400, nothing spent, a warning the first time. */
  private refuseUnparsed(req: Req): Refusal {
    const parserRan = 'body' in req
    if (!this.warnedUnparsed.has(parserRan)) {
      this.warnedUnparsed.add(parserRan)
      process.emitWarning(unparsedBodyWarning(req, parserRan), { code: 'TOLLBOOTH_LOGIN_BODY_NOT_PARSED' })
    }
    return this.unparsed
  }

  /** A trusted device's attempt, counted in its own budget alone: no turn to wait. */
  private admitDevice(
    req: Req,
    account: string,
    deviceKey: string,
    headers: Record<string, string>,
  ): LoginAdmission {
    this.attempts.set(req, { kind: 'device', account, deviceKey })
    return { allowed: true, delayMs: 0, headers, trustedDevice: true }
  }

  /** An attempt counted in the budgets every client shares; it waits `delayMs`, the account's turn. */
  private admitShared(
    req: Req,
    identity: string,
    account: string | undefined,
    delayMs: number,
    headers: Record<string, string>,
  ): LoginAdmission {
    this.attempts.set(req, { kind: 'shared', identity, account })
    return { allowed: true, delayMs, headers, trustedDevice: false }
  }
}

export { normalizeAccount }

/** The (address, account) pair's key. */
function pair(identity: string, account: string): string {
  return storeKey([identity, account])
}

/**
 * JSON keeps the parts of a key unambiguous whatever they contain; a key longer than a store takes (a long identity
 * and a long account, escapes) is counted under its hash rather than refused.
 */
function storeKey(parts: readonly string[]): string {
  const key = JSON.stringify(parts)
  return key.length > MAX_KEY_LENGTH ? `#${hashKey(key)}` : key
}

/**
 * The warning for a body that was not parsed, saying what is known. `parserRan`: `req.body` is declared, as the
 * body-parser family (Express' `express.json()`, …) does even for a content type it skips; without it, no parser ran,
 * or one that leaves no trace.
 */
function unparsedBodyWarning(req: IncomingMessage, parserRan: boolean): string {
  if (parserRan) {
    const type = String(req.headers['content-type'] ?? '').slice(0, 100)
    return (
      `loginGuard: a login request carries a body (content-type ${JSON.stringify(type)}) that the body parser ` +
      'before loginGuard did not parse, and names no account: such requests are refused with 400. If your clients ' +
      'send that content type, have a parser before loginGuard take it.'
    )
  }
  return (
    'loginGuard: a login request carries a body that was not parsed, and names no account: no body parser ran ' +
    'before loginGuard, or none that takes its content type: run your body parser (express.json(), …) before ' +
    'loginGuard, or its account cannot be counted. Such requests are refused with 400.'
  )
}

/** The answer to a login request whose body nothing has parsed: 400, nothing spent. */
function unparsedBodyRefusal(limiter: RateLimiter): Refusal {
  const decision: Decision = Object.freeze({
    allowed: false,
    limit: limiter.limit,
    remaining: 0,
    resetMs: 0,
    retryAfterMs: 0,
    delayMs: 0,
    neverAllowed: true,
    source: 'guard',
  })
  return Object.freeze({
    status: 400,
    headers: Object.freeze({ 'content-type': PROBLEM_JSON_CONTENT_TYPE }),
    body: Object.freeze({
      type: 'about:blank',
      title: 'Bad Request',
      status: 400,
      detail: 'The request body was not parsed before the login guard.',
    }),
    decision,
    policy: limiter.policy,
  })
}

function refusingLimiter(option: string, limiter: unknown): RateLimiter {
  if (!isRateLimiter(limiter) || isLeakyBucket(limiter)) {
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
