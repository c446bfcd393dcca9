import type { IncomingMessage } from 'node:http'
import type { CanActivate, ExecutionContext } from '@nestjs/common'
import { Reflector } from '@nestjs/core'
import type { RateLimiter } from '../core/rateLimiter.js'
import { rateLimitHeaders } from '../core/rateLimitHeaders.js'
import { chargeOf, type RateLimitAllowed, type RateLimitResult, rateLimitCheck } from '../http/rateLimit.js'
import {
  limiterNamed,
  OWNER,
  type ResolvedGuardOptions,
  resolveGuardOptions,
  type TollboothGuardOptions,
} from './guardOptions.js'
import { exchangeOf, type NestExchange } from './nestHttp.js'
import {
  isSkipped,
  RATE_LIMIT_METADATA,
  type RouteLimitMetadata,
  type RouteRateLimit,
} from './rateLimitDecorators.js'
import { RateLimitedException } from './rateLimitedException.js'
import type { NestHttpRequest, RouteCost } from './routeCost.js'

/**
 * The Nest request and context of a Node request, and the identity the guard found for it, set just before the
 * check reads them (one symbol, no WeakMap).
 */
const NEST = Symbol('tollbooth.nestjs.request')
interface NestBinding {
  readonly request: unknown
  readonly context: ExecutionContext
  readonly identity: string
}
/**
 * What the tollbooth guards of one request spent: by budget and cost (a number, or the function pricing it), the
 * identities spent for; and each admission, in order.
 */
const ADMITTED = Symbol('tollbooth.nestjs.admitted')
interface Admissions {
  readonly spent: Map<RateLimiter, Map<RouteCost<unknown>, Set<string>>>
  readonly list: RateLimitAllowed[]
}
type BoundRequest = IncomingMessage & { [NEST]?: NestBinding; [ADMITTED]?: Admissions }
const nestOf = (raw: BoundRequest) => raw[NEST] as NestBinding

/** A route's budget and the check spending from it. */
interface Check {
  readonly limiter: RateLimiter
  /** What a request costs here: the route's, else the guard's (1 when neither says). */
  readonly cost: RouteCost<unknown>
  readonly run: (raw: BoundRequest) => RateLimitResult | Promise<RateLimitResult>
}

/**
 * A Nest guard spending from a rate limit budget for each HTTP request it runs for: globally
 * (`{ provide: APP_GUARD, useValue: new TollboothGuard(options) }`), or per controller or handler
 * (`@UseGuards(guard)`). A route spends from the limiter its `@RateLimit` names (the handler's over its
 * controller's), else from `default`; `@SkipRateLimit()` exempts it. An admitted request goes on with the RateLimit
 * fields on its response; a refused one never reaches the handler: the guard sets `Retry-After`, the RateLimit
 * fields and the problem+json Content-Type, and throws a `RateLimitedException` (429, or 400 for a cost no budget
 * can hold) for Nest's exception layer to answer. Other execution contexts (GraphQL resolvers, WebSocket gateways,
 * microservices) are let through untouched: tollbooth/graphql and tollbooth/ws guard those.
 */
export class TollboothGuard<Req = NestHttpRequest> implements CanActivate {
  readonly #options: ResolvedGuardOptions
  readonly #reflector = new Reflector()
  readonly #fallback: Check | undefined
  /** The check of each `@RateLimit`, built on the first request of a route that carries it. */
  readonly #checks = new WeakMap<RouteRateLimit, Check>()
  /** The handlers of other execution contexts already looked at for a `@RateLimit` that would limit nothing. */
  // biome-ignore lint/complexity/noBannedTypes: Nest's handlers are functions of any shape.
  readonly #lookedAt = new WeakSet<Function>()

  /** Checks every option now: an unknown key or a wrong value throws `TOLLBOOTH_ERR_INVALID_OPTION`. */
  constructor(options: TollboothGuardOptions<Req>) {
    this.#options = resolveGuardOptions(options)
    const { fallback } = this.#options
    this.#fallback = fallback === undefined ? undefined : this.#checkOf(fallback, undefined)
  }

  async canActivate(context: ExecutionContext): Promise<boolean> {
    if (context.getType() !== 'http') {
      this.#warnOfLimitOutsideHttp(context)
      return true
    }
    const check = this.#routeCheck(context)
    if (check === undefined) return true
    const http = context.switchToHttp()
    const request: unknown = http.getRequest()
    const exchange = exchangeOf(OWNER, request, http.getResponse())
    const raw = exchange.raw as BoundRequest
    // Skipped first: a health check or an allow-listed caller is not even identified.
    const { skip, identify } = this.#options
    if (skip !== undefined && (await skip(request, context))) return true
    const found = identify(raw, request, context)
    const identity = typeof found === 'string' ? found : await found
    const admitted: Admissions = raw[ADMITTED] ?? { spent: new Map(), list: [] }
    raw[ADMITTED] = admitted
    // A budget is spent once per request for one identity and cost, however many guards name it: the same guard
    // as APP_GUARD and in @UseGuards, or two guards reading the same @RateLimit. Another identity, or another
    // cost, spends on its own.
    let byCost = admitted.spent.get(check.limiter)
    let identities = byCost?.get(check.cost)
    if (identities?.has(identity)) return true
    raw[NEST] = { request, context, identity }
    const result = await check.run(raw)
    if ('allowed' in result) {
      exchange.addHeaders(result.headers)
      if (byCost === undefined) {
        byCost = new Map()
        admitted.spent.set(check.limiter, byCost)
      }
      if (identities === undefined) {
        identities = new Set()
        byCost.set(check.cost, identities)
      }
      identities.add(identity)
      admitted.list.push(result)
      return true
    }
    // The request never reaches its handler: what the guards before this one spent on it is given back. The
    // refunds' items come after the refusal's, so that a budget both name reads as it stands after the refund.
    exchange.prepareRefusal(result)
    await refundAll(admitted.list, exchange)
    throw new RateLimitedException(result)
  }

  /**
   * A `@RateLimit` on a resolver or a gateway handler limits nothing (this guard prices HTTP routes only): said once
   * per handler, as a process warning `TOLLBOOTH_RATE_LIMIT_NOT_HTTP`.
   */
  #warnOfLimitOutsideHttp(context: ExecutionContext): void {
    const handler = context.getHandler()
    if (this.#lookedAt.has(handler)) return
    this.#lookedAt.add(handler)
    const metadata = this.#reflector.getAllAndOverride<RouteLimitMetadata | undefined>(RATE_LIMIT_METADATA, [
      handler,
      context.getClass(),
    ])
    if (metadata === undefined || isSkipped(metadata)) return
    process.emitWarning(
      `${OWNER}: @RateLimit on ${context.getClass().name}.${handler.name}, a ${context.getType()} handler, limits nothing: TollboothGuard limits HTTP routes. Price GraphQL operations with the GraphQL plugin (fieldLimits or @rateLimit for one field) and WebSocket messages with protectWebSocketServer.`,
      { code: 'TOLLBOOTH_RATE_LIMIT_NOT_HTTP' },
    )
  }

  /** The check of the route `context` runs, or undefined when it is not limited. */
  #routeCheck(context: ExecutionContext): Check | undefined {
    const metadata = this.#reflector.getAllAndOverride<RouteLimitMetadata | undefined>(RATE_LIMIT_METADATA, [
      context.getHandler(),
      context.getClass(),
    ])
    if (metadata === undefined) return this.#fallback
    if (isSkipped(metadata)) return undefined
    let check = this.#checks.get(metadata)
    if (check === undefined) {
      const limiter =
        typeof metadata.limiter === 'string'
          ? limiterNamed(metadata.limiter, this.#options.limiters, `@RateLimit('${metadata.limiter}')`)
          : metadata.limiter
      check = this.#checkOf(limiter, metadata.cost)
      this.#checks.set(metadata, check)
    }
    return check
  }

  #checkOf(limiter: RateLimiter, routeCost: RouteCost<unknown> | undefined): Check {
    const cost = routeCost ?? this.#options.cost
    const run = rateLimitCheck<BoundRequest>({
      limiter,
      // Found by the guard (after `skip`), so that it knows whose budget an earlier guard spent.
      identify: (raw) => nestOf(raw).identity,
      // A number stays a number: rateLimitCheck then decides a memory store's request without a promise.
      cost:
        typeof cost === 'function'
          ? (raw) => {
              const { request, context } = nestOf(raw)
              return cost(request, context)
            }
          : cost,
    })
    return { limiter, cost: cost ?? 1, run }
  }
}

/**
 * Gives back what each admission spent, and sends each budget's `RateLimit` item as it stands after its refund (an
 * item replaces its namesake). A store that fails leaves its charge spent, as at the door, and its item as it was.
 */
async function refundAll(admissions: Iterable<RateLimitAllowed>, exchange: NestExchange): Promise<void> {
  const refunds: Promise<void>[] = []
  for (const admission of admissions) {
    const charge = chargeOf(admission)
    if (charge === undefined) continue
    const { limiter, key, cost } = charge
    refunds.push(
      limiter.refund(key, cost).then((decision) => {
        const { RateLimit } = rateLimitHeaders(decision, limiter.policy)
        if (RateLimit !== undefined) exchange.addHeaders({ RateLimit })
      }),
    )
  }
  await Promise.allSettled(refunds)
}
