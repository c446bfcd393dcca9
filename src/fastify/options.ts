import type { IncomingMessage } from 'node:http'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { invalidOption, TollboothError } from '../core/errors.js'
import { checkOptionKeys, type OptionKeys, optionNames } from '../core/knownOptions.js'
import type { RateLimiter } from '../core/rateLimiter.js'
import { isOptionsObject, oneOf, orDefault } from '../core/validate.js'
import { type RateLimitCheckOptions, type RateLimitResult, rateLimitCheck } from '../http/rateLimit.js'
import type { Refusal } from '../http/refusal.js'
import type { TrustProxy } from '../identity/clientIp.js'

export const OWNER = 'tollboothRateLimit'

/** The Fastify hooks the limit can run in: all three take `(request, reply)`. */
export type TollboothHook = 'onRequest' | 'preValidation' | 'preHandler'
const HOOKS: readonly TollboothHook[] = ['onRequest', 'preValidation', 'preHandler']

/**
 * Options of `tollboothRateLimit`: those of `rateLimit` from tollbooth/http, with Fastify's request and reply in the
 * callbacks. Every route registered after the plugin (in its scope and below) is limited; a route's
 * `config.tollbooth` changes any of them for that route, or is `false` to leave the route unlimited.
 */
export interface TollboothFastifyOptions {
  /**
   * The budget requests spend from: a rate limiter (`tokenBucket`, `slidingWindow`, `fixedWindow`, `leakyBucket`),
   * or a function of the request choosing one (per plan; may be async). With a leaky bucket, an admitted request
   * waits out its `delayMs` before going on.
   */
  limiter: RateLimiter | ((request: FastifyRequest) => RateLimiter | Promise<RateLimiter>)
  /**
   * The identity whose budget a request spends (may be async): a user id, API key or tenant. What it throws goes to
   * Fastify's error handler. Default: the client address through `trustProxy`, IPv6 grouped by `ipv6Prefix`.
   */
  identify?: (request: FastifyRequest) => string | Promise<string>
  /**
   * Which `X-Forwarded-For` hops to believe for the default identity, as in `clientIp` (Fastify's own `trustProxy`
   * is not read: `request.ip` and this may differ). @default false
   */
  trustProxy?: TrustProxy
  /** IPv6 client addresses are counted per network of this prefix (1..128). @default 56 */
  ipv6Prefix?: number
  /** IPv4 client addresses are counted per network of this prefix (1..32). @default 32 */
  ipv4Prefix?: number
  /**
   * What a request costs: a positive number, or a function of the request returning one (may be async). A cost
   * above what the limiter can ever admit is refused with 400. @default 1
   */
  cost?: number | ((request: FastifyRequest) => number | Promise<number>)
  /** Requests for which this returns true (may be async) spend nothing and carry no RateLimit fields. */
  skip?: (request: FastifyRequest) => boolean | Promise<boolean>
  /**
   * Answers a refused request through `reply`, in place of the default 429 (or 400) problem+json answer. The refusal
   * carries the status, headers (RateLimit fields, `Retry-After`) and body the default would send. If it sends
   * nothing, the default answer is sent: a refused request never reaches the route.
   * @default reply with the refusal's status, headers and body
   */
  onLimited?: (request: FastifyRequest, reply: FastifyReply, refusal: Refusal) => void | Promise<void>
  /**
   * The request hook the limit runs in. `'onRequest'` refuses before the body is read; a later hook lets
   * `identify` see what an authentication hook of that stage set on the request.
   * @default 'onRequest'
   */
  hook?: TollboothHook
  /**
   * Decides from the reply, once the response is over, whether an admitted request's cost is given back (may be
   * async): `(_request, reply) => reply.statusCode < 400` counts only failed requests. What it throws is ignored.
   */
  refundWhen?: (request: FastifyRequest, reply: FastifyReply) => boolean | Promise<boolean>
}

/** A route's `config.tollbooth`: any of the plugin's options, for this route only. */
export type TollboothRouteOptions = Partial<TollboothFastifyOptions>

declare module 'fastify' {
  interface FastifyContextConfig {
    /** tollbooth's rate limit for this route: options replacing the plugin's, or `false` for no limit. */
    tollbooth?: TollboothRouteOptions | false
  }
}

export const OPTIONS = optionNames<TollboothFastifyOptions>({
  limiter: true,
  identify: true,
  trustProxy: true,
  ipv6Prefix: true,
  ipv4Prefix: true,
  cost: true,
  skip: true,
  onLimited: true,
  hook: true,
  refundWhen: true,
} satisfies OptionKeys<TollboothRouteOptions>)

/** How one route is limited: the check, where it runs and how a refusal is answered. */
export interface RouteLimit {
  readonly check: (request: FastifyRequest) => Promise<RateLimitResult>
  readonly hook: TollboothHook
  readonly onLimited: TollboothFastifyOptions['onLimited']
  readonly refundWhen: TollboothFastifyOptions['refundWhen']
}

/** The Fastify request of a raw one, set by the hook just before the check reads it. */
const fastifyRequest = Symbol('tollbooth.fastifyRequest')
type RawRequest = IncomingMessage & { [fastifyRequest]?: FastifyRequest }
const requestOf = (raw: RawRequest) => raw[fastifyRequest] as FastifyRequest

/** Checks that the plugin's options are an object of known keys; `limitOf` checks their values. */
export function checkPluginOptions(options: unknown): asserts options is TollboothFastifyOptions {
  if (!isOptionsObject(options)) throw invalidOption(OWNER, 'options', 'an object', options)
  checkOptionKeys(OWNER, options, OPTIONS)
}

/**
 * The limit of a route: the plugin's options with the route's `config.tollbooth` over them, every option checked
 * (at startup: Fastify registers routes before it listens). `path` names the option set in errors.
 */
export function limitOf(options: TollboothRouteOptions, path?: string): RouteLimit {
  const name = (option: string) => (path === undefined ? option : `${path}.${option}`)
  const hook = oneOf(OWNER, name('hook'), orDefault(options.hook, 'onRequest'), HOOKS)
  const { onLimited, cost, refundWhen } = options
  if (onLimited !== undefined && typeof onLimited !== 'function') {
    throw invalidOption(OWNER, name('onLimited'), 'a function', onLimited)
  }
  if (refundWhen !== undefined && typeof refundWhen !== 'function') {
    throw invalidOption(OWNER, name('refundWhen'), 'a function (request, reply) => boolean', refundWhen)
  }
  if (
    cost !== undefined &&
    typeof cost !== 'function' &&
    (typeof cost !== 'number' || !Number.isFinite(cost) || cost <= 0)
  ) {
    throw invalidOption(OWNER, name('cost'), 'a positive finite number or a function of the request', cost)
  }
  const { limiter } = options
  const check = namingOwner(path, () =>
    rateLimitCheck<RawRequest>({
      limiter:
        typeof limiter === 'function'
          ? (raw: RawRequest) => limiter(requestOf(raw))
          : (limiter as RateLimiter),
      identify: ofRaw(options.identify),
      trustProxy: options.trustProxy,
      ipv6Prefix: options.ipv6Prefix,
      ipv4Prefix: options.ipv4Prefix,
      cost: typeof cost === 'number' ? () => cost : ofRaw(cost),
      skip: ofRaw(options.skip),
    } satisfies Record<keyof RateLimitCheckOptions, unknown>),
  )
  return {
    check: (request) => {
      const raw = request.raw as RawRequest
      raw[fastifyRequest] = request
      return check(raw)
    },
    hook,
    onLimited,
    refundWhen,
  }
}

/**
 * A callback of the options, called with the Fastify request of the raw one `rateLimitCheck` sees; anything but a
 * function is passed as it is, for `rateLimitCheck` to refuse.
 */
function ofRaw<Result>(
  callback: ((request: FastifyRequest) => Result) | undefined,
): ((raw: RawRequest) => Result) | undefined {
  if (typeof callback !== 'function') return callback
  return (raw) => callback(requestOf(raw))
}

/** `rateLimitCheck`'s refusals of an option, reworded to name this plugin and the option as the user wrote it. */
function namingOwner<T>(path: string | undefined, build: () => T): T {
  try {
    return build()
  } catch (error) {
    const prefix = 'rateLimitCheck: '
    if (!(error instanceof TollboothError) || !error.message.startsWith(prefix)) throw error
    const rest = error.message.slice(prefix.length)
    const message = path === undefined ? rest : rest.replace(/^(unknown option )?"/, `$1"${path}.`)
    throw new TollboothError(error.code, `${OWNER}: ${message}`)
  }
}
