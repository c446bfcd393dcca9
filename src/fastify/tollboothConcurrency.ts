import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { invalidOption } from '../core/errors.js'
import { checkOptionKeys, type OptionKeys, optionNames } from '../core/knownOptions.js'
import { isConcurrencyLimiter } from '../core/limiterKinds.js'
import type { ConcurrencyLimiter, Lease } from '../core/limiters/concurrencyLimit.js'
import { type RateLimitPolicy, rateLimitHeaders } from '../core/rateLimitHeaders.js'
import { isOptionsObject } from '../core/validate.js'
import { leaseForResponse } from '../http/heldLease.js'
import { refusal } from '../http/refusal.js'
import {
  addReplyHeaders,
  answerRefusal,
  type FastifyIdentityOptions,
  type FastifyOnLimited,
  fastifyIdentity,
  namingOption,
  type RouteHook,
} from './fastifyRequest.js'
import { guardEachRoute } from './perRoute.js'

const OWNER = 'tollboothConcurrency'
const CONFIG_KEY = 'tollboothConcurrency'

/**
 * Options of `tollboothConcurrency`: those of `concurrencyGuard` from tollbooth/http, with Fastify's request and
 * reply in the callbacks. A route's `config.tollboothConcurrency` changes any of them for that route, or is `false`
 * to leave it unguarded.
 */
export interface TollboothConcurrencyOptions extends FastifyIdentityOptions {
  /**
   * The leases requests hold while they run: `concurrencyLimit({ name, max, leaseMs })`. A lease is renewed every
   * `leaseMs / 3` while its response runs; a process that dies holding leases frees them after `leaseMs`.
   */
  limiter: ConcurrencyLimiter
  /**
   * Answers a refused request through `reply`, in place of the default 429 problem+json answer; if it sends nothing,
   * the default answer is sent.
   * @default reply with the refusal's status, headers and body
   */
  onLimited?: FastifyOnLimited
}

/** A route's `config.tollboothConcurrency`: any of the plugin's options, for this route only. */
export type TollboothConcurrencyRouteOptions = Partial<TollboothConcurrencyOptions>

declare module 'fastify' {
  interface FastifyContextConfig {
    /** tollbooth's concurrency leases for this route: options replacing the plugin's, or `false` for none. */
    tollboothConcurrency?: TollboothConcurrencyRouteOptions | false
  }
}

const OPTIONS = optionNames<TollboothConcurrencyOptions>({
  limiter: true,
  onLimited: true,
  identify: true,
  trustProxy: true,
  ipv6Prefix: true,
  ipv4Prefix: true,
} satisfies OptionKeys<TollboothConcurrencyRouteOptions>)

/** The `onRequest` hook of one set of options, every option checked; `path` names a route's config in errors. */
function concurrencyHook(options: TollboothConcurrencyOptions, path?: string): RouteHook {
  const { limiter, onLimited } = options
  const name = (option: string) => (path === undefined ? option : `${path}.${option}`)
  if (!isConcurrencyLimiter(limiter)) {
    throw invalidOption(OWNER, name('limiter'), 'a concurrency limiter (concurrencyLimit)', limiter)
  }
  if (onLimited !== undefined && typeof onLimited !== 'function') {
    throw invalidOption(OWNER, name('onLimited'), 'a function', onLimited)
  }
  const identify = namingOption(OWNER, path, () => fastifyIdentity(OWNER, options))
  const policy: RateLimitPolicy = Object.freeze({
    name: limiter.name,
    quota: limiter.limit,
    unit: 'concurrent-requests',
  })

  return (request, reply, done) => {
    const admit = (lease: Lease | undefined) => {
      // No lease: the client left while it was being acquired.
      if (lease === undefined) return
      if (!lease.allowed) {
        answerRefusal(request, reply, refusal(lease, policy), onLimited).then(undefined, done)
        return
      }
      addReplyHeaders(reply, rateLimitHeaders(lease, policy))
      done()
    }
    const fail = (error: unknown) => done(error as Error)
    try {
      // Held until the response's 'finish' (when Fastify's onResponse runs) or 'close' (an abort, a socket error).
      leaseForResponse(limiter, OWNER, identify(request), reply.raw).then(admit, fail)
    } catch (error) {
      fail(error)
    }
  }
}

/**
 * Holds one concurrency lease per request for its identity, in `onRequest` (before the body is read), for every
 * route registered after it in its scope and below. The lease is renewed while the response runs and released
 * exactly once: when the response finishes, the client aborts or the socket fails. A request beyond `max` at once
 * is answered 429 through Fastify's reply (RateLimit fields with `qu="concurrent-requests"`, `Retry-After`) and never
 * reaches the handler; what `identify` throws goes to Fastify's error handling.
 */
const plugin: FastifyPluginAsync<TollboothConcurrencyOptions> = async (fastify, options) => {
  if (!isOptionsObject(options)) throw invalidOption(OWNER, 'options', 'an object', options)
  checkOptionKeys(OWNER, options, OPTIONS)
  guardEachRoute(fastify, options, {
    owner: OWNER,
    configKey: CONFIG_KEY,
    known: OPTIONS,
    stage: 'onRequest',
    build: concurrencyHook,
  })
}

/**
 * tollbooth's concurrency leases as a Fastify plugin (fastify-plugin: it applies to the scope it is registered in).
 * `app.register(tollboothConcurrency, { limiter })`, before the routes it guards.
 */
export const tollboothConcurrency = fp(plugin, { fastify: '5.x', name: 'tollbooth-concurrency' })
