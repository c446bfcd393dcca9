import type { IncomingMessage } from 'node:http'
import type { ExecutionContext } from '@nestjs/common'
import { invalidOption } from '../core/errors.js'
import { checkOptionKeys, closestName, optionNames } from '../core/knownOptions.js'
import { isConcurrencyLimiter, isRateLimiter } from '../core/limiterKinds.js'
import type { RateLimiter } from '../core/rateLimiter.js'
import { isOptionsObject } from '../core/validate.js'
import { requestIdentity } from '../http/requestIdentity.js'
import type { TrustProxy } from '../identity/clientIp.js'
import { checkCost, type NestHttpRequest, type RouteCost } from './routeCost.js'

export const OWNER = 'TollboothGuard'

/**
 * Options of `TollboothGuard`. Every HTTP route the guard runs for spends from a budget: the one its `@RateLimit`
 * names, else `default`. Identity, cost and the answers are those of tollbooth/http's `rateLimit`.
 */
export interface TollboothGuardOptions<Req = NestHttpRequest> {
  /**
   * Budgets by name, for `@RateLimit('login')` and for `default: 'api'`: rate limiters (`tokenBucket`,
   * `slidingWindow`, `fixedWindow`, `leakyBucket`). A route may also name a limiter object itself.
   * @default {}
   */
  limiters?: Readonly<Record<string, RateLimiter>>
  /**
   * The budget of a route that has no `@RateLimit` (of its own or of its controller): a rate limiter, the name of
   * one of `limiters`, or `false` to limit only the routes that carry `@RateLimit`. Required, so that a guard never
   * leaves routes unlimited by omission.
   */
  default: RateLimiter | string | false
  /**
   * What a request costs where its `@RateLimit` sets none: a positive number, or a function of the request and its
   * execution context (may be async).
   * @default 1
   */
  cost?: RouteCost<Req>
  /**
   * The identity whose budget a request spends (may be async): a user id, API key or tenant from your
   * authentication. What it throws goes to Nest's exception layer.
   * @default the client address through `trustProxy`, IPv6 grouped by `ipv6Prefix`
   */
  identify?: (request: Req, context: ExecutionContext) => string | Promise<string>
  /**
   * Which `X-Forwarded-For` hops to believe for the default identity, as in `clientIp` (Express' `trust proxy`
   * setting and Fastify's `trustProxy` are not read). @default false
   */
  trustProxy?: TrustProxy
  /** IPv6 client addresses are counted per network of this prefix (1..128). @default 56 */
  ipv6Prefix?: number
  /** IPv4 client addresses are counted per network of this prefix (1..32). @default 32 */
  ipv4Prefix?: number
  /** Requests for which this returns true (may be async) spend nothing and carry no RateLimit fields. */
  skip?: (request: Req, context: ExecutionContext) => boolean | Promise<boolean>
}

const OPTIONS = optionNames<TollboothGuardOptions>({
  limiters: true,
  default: true,
  cost: true,
  identify: true,
  trustProxy: true,
  ipv6Prefix: true,
  ipv4Prefix: true,
  skip: true,
})

/** The guard's options, each checked once, at construction. */
export interface ResolvedGuardOptions {
  readonly limiters: ReadonlyMap<string, RateLimiter>
  readonly fallback: RateLimiter | undefined
  readonly cost: RouteCost<unknown> | undefined
  /** The identity of a request: `identify`, or the client address of the Node request. */
  readonly identify: (
    raw: IncomingMessage,
    request: unknown,
    context: ExecutionContext,
  ) => string | Promise<string>
  readonly skip: ((request: unknown, context: ExecutionContext) => boolean | Promise<boolean>) | undefined
}

export function resolveGuardOptions<Req>(options: TollboothGuardOptions<Req>): ResolvedGuardOptions {
  if (!isOptionsObject(options)) throw invalidOption(OWNER, 'options', 'an object', options)
  checkOptionKeys(OWNER, options, OPTIONS)
  const limiters = limitersOption(options.limiters)
  const { cost, skip } = options
  if (cost !== undefined) checkCost(OWNER, 'cost', cost)
  if (skip !== undefined && typeof skip !== 'function') throw invalidOption(OWNER, 'skip', 'a function', skip)
  return Object.freeze({
    limiters,
    fallback: defaultOption(options.default, limiters),
    cost: cost as RouteCost<unknown> | undefined,
    identify: identityOption(options),
    skip: skip as ResolvedGuardOptions['skip'],
  })
}

function limitersOption(limiters: unknown): ReadonlyMap<string, RateLimiter> {
  if (limiters === undefined) return new Map()
  if (!isOptionsObject(limiters))
    throw invalidOption(OWNER, 'limiters', 'an object of rate limiters by name', limiters)
  const byName = new Map<string, RateLimiter>()
  for (const [name, limiter] of Object.entries(limiters)) {
    byName.set(name, rateLimiterOption(`limiters.${name}`, limiter))
  }
  return byName
}

function rateLimiterOption(option: string, limiter: unknown): RateLimiter {
  if (isRateLimiter(limiter)) return limiter
  throw invalidOption(
    OWNER,
    option,
    isConcurrencyLimiter(limiter)
      ? 'a rate limiter (a concurrencyLimit is no budget of requests)'
      : 'a rate limiter (tokenBucket, slidingWindow, fixedWindow, leakyBucket)',
    limiter,
  )
}

function defaultOption(
  fallback: unknown,
  limiters: ReadonlyMap<string, RateLimiter>,
): RateLimiter | undefined {
  if (fallback === false) return undefined
  if (typeof fallback === 'string') return limiterNamed(fallback, limiters, 'default')
  if (fallback === undefined) {
    throw invalidOption(
      OWNER,
      'default',
      'a rate limiter, the name of one of "limiters", or false (only routes with @RateLimit are limited)',
      fallback,
    )
  }
  return rateLimiterOption('default', fallback)
}

/** The limiter `name` of the guard's `limiters`; `where` says who named it, for the error. */
export function limiterNamed(
  name: string,
  limiters: ReadonlyMap<string, RateLimiter>,
  where: string,
): RateLimiter {
  const limiter = limiters.get(name)
  if (limiter !== undefined) return limiter
  const known = [...limiters.keys()]
  const closest = closestName(name, known)
  const hint =
    closest !== undefined
      ? `did you mean "${closest}"?`
      : known.length === 0
        ? 'the guard has no "limiters"'
        : `known: ${known.join(', ')}`
  throw invalidOption(OWNER, where, `the name of one of "limiters" (${hint})`, name)
}

function identityOption<Req>(options: TollboothGuardOptions<Req>): ResolvedGuardOptions['identify'] {
  const { identify } = options
  if (identify !== undefined) {
    if (typeof identify !== 'function') throw invalidOption(OWNER, 'identify', 'a function', identify)
    return (_raw, request, context) => identify(request as Req, context)
  }
  const byAddress = requestIdentity(OWNER, {
    trustProxy: options.trustProxy,
    ipv6Prefix: options.ipv6Prefix,
    ipv4Prefix: options.ipv4Prefix,
  })
  return (raw) => byAddress(raw)
}
