import type { Decision } from './decision.js'
import { invalidOption } from './errors.js'
import { checkOptionKeys, optionNames } from './knownOptions.js'
import { msUntilMoreQuota, type QuotaRestore } from './quotaRestore.js'
import { isOptionsObject } from './validate.js'

export type { QuotaRestore }

const OWNER = 'rateLimitHeaders'

/** Largest Structured Field Integer (RFC 9651 §3.3.1). */
const SF_INTEGER_MAX = 999_999_999_999_999

export type QuotaUnit = 'requests' | 'content-bytes' | 'concurrent-requests'

/** A quota policy as advertised in `RateLimit-Policy` (draft-ietf-httpapi-ratelimit-headers §3). */
export interface RateLimitPolicy {
  /** Policy name: printable ASCII (0x20–0x7E), non-empty. Sent as a Structured Field String. */
  name: string
  /** The quota (`q`): a non-negative integer. */
  quota: number
  /** The time window (`w`) in whole seconds: a positive integer. Omitted when not given. */
  windowSeconds?: number
  /** The quota unit (`qu`). `'requests'` is the default and is not sent. */
  unit?: QuotaUnit
  /**
   * The partition key (`pk`), sent as a Structured Field Byte Sequence of its UTF-8 bytes, in both fields.
   * Clients can read it: pass a hash (e.g. from `hashKey` with a secret), never a raw e-mail, user id or IP.
   */
  partitionKey?: string
  /**
   * How spent quota comes back, which `t` is worked out from (not sent): a limiter's `policy` carries its own. Without
   * it, `t` is the time until the quota is whole again (`decision.resetMs`).
   */
  restore?: QuotaRestore
}

export interface RateLimitHeadersOptions {
  /** Also emit `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset` (seconds from now). */
  legacy?: boolean
}

const OPTIONS = optionNames<RateLimitHeadersOptions>({ legacy: true })

/**
 * Response headers for one decision under one policy, per draft-ietf-httpapi-ratelimit-headers (the fields' syntax
 * of -08 to -11, `t` as -10 defines it):
 *
 * ```
 * RateLimit-Policy: "name";q=100;w=60
 * RateLimit: "name";r=42;t=17
 * Retry-After: 17                       (denials only, and not for `neverAllowed` ones)
 * ```
 *
 * `r` is `decision.remaining`; `t` the seconds until more quota is available, rounded up: for a limiter's policy, the
 * next unit of a bucket, the end of a fixed window, for a sliding window the decision's `moreQuotaMs` (until one unit
 * more than `r` fits; 0 when nothing is spent); for a policy without `restore`, `decision.resetMs`. On a denial `Retry-After` is `decision.retryAfterMs`
 * in seconds, rounded up and at least 1 (the time until the refused request would fit), and `t` is at most that.
 * The legacy `X-RateLimit-Reset` stays the time until the quota is whole again.
 *
 * Header names are returned in their usual case; Node's `setHeader` is case-insensitive. Pure; throws
 * `TOLLBOOTH_ERR_INVALID_OPTION` on an invalid policy.
 */
export function rateLimitHeaders(
  decision: Decision,
  policy: RateLimitPolicy,
  options?: RateLimitHeadersOptions,
): Record<string, string> {
  checkOptionKeys(OWNER, options, OPTIONS)
  const { name, policyItem, pk } = policyParts(policy)
  const remaining = clampInteger(Math.floor(decision.remaining))
  let more = seconds(msUntilMoreQuota(decision, policy.restore))
  let reset = seconds(decision.resetMs)
  let retryAfter: number | undefined
  // A cost the policy can never admit is no reason to come back later.
  if (!decision.allowed && !decision.neverAllowed) {
    retryAfter = Math.max(1, seconds(decision.retryAfterMs))
    // More quota comes at the latest when the refused request fits.
    if (more > retryAfter) more = retryAfter
    if (reset > retryAfter) reset = retryAfter
  }

  const headers: Record<string, string> = {
    'RateLimit-Policy': policyItem,
    RateLimit: rateLimitItem(name, remaining, more, pk),
  }
  if (retryAfter !== undefined) headers['Retry-After'] = String(retryAfter)
  if (options?.legacy === true) {
    headers['X-RateLimit-Limit'] = String(policy.quota)
    headers['X-RateLimit-Remaining'] = String(remaining)
    headers['X-RateLimit-Reset'] = String(reset)
  }
  return headers
}

/**
 * Joins the headers of several policies (each from `rateLimitHeaders`) into one response's headers:
 * `RateLimit` and `RateLimit-Policy` become comma-separated Structured Field lists (in input order),
 * `Retry-After` is the largest of the inputs (a request denied by any policy waits for the slowest),
 * and the legacy `X-RateLimit-*` trio, which cannot hold a list, is taken whole from the most restrictive input
 * (lowest remaining, then longest reset). Any other header is kept from the first input that has it.
 */
export function mergeRateLimitHeaders(list: readonly Record<string, string>[]): Record<string, string> {
  const policies: string[] = []
  const limits: string[] = []
  let retryAfter = -1
  let legacy: Record<string, string> | undefined
  let legacyRemaining = Number.POSITIVE_INFINITY
  let legacyReset = Number.NEGATIVE_INFINITY
  const rest: Record<string, string> = {}

  for (const headers of list) {
    for (const [key, value] of Object.entries(headers)) {
      switch (key) {
        case 'RateLimit-Policy':
          policies.push(value)
          break
        case 'RateLimit':
          limits.push(value)
          break
        case 'Retry-After': {
          const n = Number(value)
          if (Number.isFinite(n) && n > retryAfter) retryAfter = n
          break
        }
        case 'X-RateLimit-Limit':
        case 'X-RateLimit-Remaining':
        case 'X-RateLimit-Reset':
          break
        default:
          if (!(key in rest)) rest[key] = value
      }
    }
    const remaining = headers['X-RateLimit-Remaining']
    if (remaining !== undefined) {
      const r = Number(remaining)
      const t = Number(headers['X-RateLimit-Reset'] ?? 0)
      if (r < legacyRemaining || (r === legacyRemaining && t > legacyReset)) {
        legacyRemaining = r
        legacyReset = t
        legacy = headers
      }
    }
  }

  const merged: Record<string, string> = { ...rest }
  if (policies.length > 0) merged['RateLimit-Policy'] = policies.join(', ')
  if (limits.length > 0) merged.RateLimit = limits.join(', ')
  if (retryAfter >= 0) merged['Retry-After'] = String(retryAfter)
  if (legacy !== undefined) {
    for (const key of ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset'] as const) {
      const value = legacy[key]
      if (value !== undefined) merged[key] = value
    }
  }
  return merged
}

/**
 * The `RateLimit-Policy` and `RateLimit` values `rateLimitHeaders` sends for an allowed decision with `remaining`
 * units left and more in `untilMoreMs`, one at a time: for an adapter that notes them for every operation (the
 * GraphQL plugin), without a decision and a headers object made for each. @internal
 */
export function rateLimitPolicyField(policy: RateLimitPolicy): string {
  return policyParts(policy).policyItem
}

/** See `rateLimitPolicyField`. @internal */
export function rateLimitField(policy: RateLimitPolicy, remaining: number, untilMoreMs: number): string {
  const { name, pk } = policyParts(policy)
  return rateLimitItem(name, clampInteger(Math.floor(remaining)), seconds(untilMoreMs), pk)
}

function rateLimitItem(name: string, remaining: number, moreSeconds: number, pk: string): string {
  return `${name};r=${remaining};t=${moreSeconds}${pk}`
}

interface PolicyParts {
  readonly name: string
  readonly policyItem: string
  readonly pk: string
}

/** Serialized parts of frozen policies (a limiter's `policy` is frozen): built and checked once, not per response. */
const frozenPolicyParts = new WeakMap<RateLimitPolicy, PolicyParts>()

function policyParts(policy: RateLimitPolicy): PolicyParts {
  if (!isOptionsObject(policy)) throw invalidOption(OWNER, 'policy', 'an object', policy)
  const known = frozenPolicyParts.get(policy)
  if (known !== undefined) return known
  const name = sfString(policy.name)
  const quota = policy.quota
  if (typeof quota !== 'number' || !Number.isSafeInteger(quota) || quota < 0 || quota > SF_INTEGER_MAX) {
    throw invalidOption(OWNER, 'policy.quota', 'a non-negative integer', quota)
  }
  let policyItem = `${name};q=${quota}`
  const unit = policy.unit
  if (unit !== undefined) {
    if (unit !== 'requests' && unit !== 'content-bytes' && unit !== 'concurrent-requests') {
      throw invalidOption(
        OWNER,
        'policy.unit',
        "one of 'requests', 'content-bytes', 'concurrent-requests'",
        unit,
      )
    }
    if (unit !== 'requests') policyItem += `;qu="${unit}"`
  }
  const window = policy.windowSeconds
  if (window !== undefined) {
    if (
      typeof window !== 'number' ||
      !Number.isSafeInteger(window) ||
      window <= 0 ||
      window > SF_INTEGER_MAX
    ) {
      throw invalidOption(OWNER, 'policy.windowSeconds', 'a positive integer number of seconds', window)
    }
    policyItem += `;w=${window}`
  }
  let pk = ''
  if (policy.partitionKey !== undefined) {
    if (typeof policy.partitionKey !== 'string' || policy.partitionKey.length === 0) {
      throw invalidOption(OWNER, 'policy.partitionKey', 'a non-empty string', policy.partitionKey)
    }
    pk = `;pk=:${Buffer.from(policy.partitionKey, 'utf8').toString('base64')}:`
    policyItem += pk
  }

  checkRestore(policy.restore)
  const parts = { name, policyItem, pk }
  if (Object.isFrozen(policy)) frozenPolicyParts.set(policy, parts)
  return parts
}

function checkRestore(restore: unknown): void {
  if (restore === undefined) return
  const { kind, unitMs, windowMs } = (isOptionsObject(restore) ? restore : {}) as Record<string, unknown>
  const positive = (value: unknown) => typeof value === 'number' && Number.isFinite(value) && value > 0
  if (
    (kind === 'steady' && positive(unitMs)) ||
    kind === 'window-end' ||
    (kind === 'sliding' && positive(windowMs))
  ) {
    return
  }
  throw invalidOption(
    OWNER,
    'policy.restore',
    "{ kind: 'steady', unitMs }, { kind: 'window-end' } or { kind: 'sliding', windowMs }",
    restore,
  )
}

/** Serializes a policy name as a Structured Field String (RFC 9651 §4.1.6). */
function sfString(value: unknown): string {
  if (typeof value !== 'string' || value.length === 0) {
    throw invalidOption(OWNER, 'policy.name', 'a non-empty string of printable ASCII', value)
  }
  let out = '"'
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i)
    if (c < 0x20 || c > 0x7e) {
      throw invalidOption(OWNER, 'policy.name', 'a non-empty string of printable ASCII (0x20-0x7E)', value)
    }
    if (c === 0x22 /* " */ || c === 0x5c /* \ */) out += '\\'
    out += value[i]
  }
  return `${out}"`
}

/** Milliseconds → whole seconds, rounded up, clamped to a valid non-negative SF Integer. */
function seconds(ms: number): number {
  return clampInteger(Math.ceil(ms / 1000))
}

function clampInteger(n: number): number {
  if (Number.isNaN(n) || n < 0) return 0
  return Math.min(n, SF_INTEGER_MAX)
}
