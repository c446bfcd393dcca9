import type {
  FastifyPluginAsync,
  FastifyReply,
  FastifyRequest,
  HookHandlerDoneFunction,
  RouteOptions,
} from 'fastify'
import fp from 'fastify-plugin'
import { invalidOption } from '../core/errors.js'
import { checkOptionKeys } from '../core/knownOptions.js'
import { isOptionsObject } from '../core/validate.js'
import { chargeOf } from '../http/rateLimit.js'
import { refundByOutcome } from '../http/refundByOutcome.js'
import { addReplyHeaders, answerRefusal } from './fastifyRequest.js'
import {
  checkPluginOptions,
  limitOf,
  OPTIONS,
  OWNER,
  type RouteLimit,
  type TollboothFastifyOptions,
} from './options.js'
import { checkGuardConfigKeys } from './perRoute.js'

const ROUTE_CONFIG = 'config.tollbooth'

/**
 * Spends from `limiter` for each request of every route registered after it (in its scope and below), in the
 * `hook` stage: an admitted request goes on with the RateLimit fields set on its reply; a refused one is answered
 * through Fastify's reply (429 with `Retry-After`, the RateLimit fields and a problem+json body; 400 for a cost no
 * budget can hold) and never reaches the handler. What `identify`, `cost`, `skip` or `limiter` throw goes to
 * Fastify's error handling. A route's `config: { tollbooth: { … } }` changes options for it, `false` exempts it.
 */
const plugin: FastifyPluginAsync<TollboothFastifyOptions> = async (fastify, options) => {
  checkPluginOptions(options)
  const shared = limitOf(options)

  fastify.addHook('onRoute', (route) => {
    checkGuardConfigKeys(OWNER, route.config)
    const config = route.config?.tollbooth
    if (config === false) return
    if (config === undefined) {
      addHook(route, shared)
      return
    }
    if (!isOptionsObject(config)) {
      throw invalidOption(OWNER, ROUTE_CONFIG, 'an object of options or false', config)
    }
    checkOptionKeys(OWNER, config, OPTIONS, ROUTE_CONFIG)
    addHook(route, limitOf({ ...options, ...config }, ROUTE_CONFIG))
  })
}

/** The route's own hook of the limit's stage, after any the route already has (and after the app's). */
function addHook(route: RouteOptions, limit: RouteLimit): void {
  const handler = limitHandler(limit)
  const existing = route[limit.hook]
  route[limit.hook] =
    existing === undefined
      ? [handler]
      : Array.isArray(existing)
        ? [...existing, handler]
        : [existing, handler]
}

function limitHandler(limit: RouteLimit) {
  return (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    limit.check(request).then((result) => {
      if ('allowed' in result) {
        addReplyHeaders(reply, result.headers)
        const { refundWhen } = limit
        if (refundWhen !== undefined) {
          refundByOutcome(reply.raw, chargeOf(result), () => refundWhen(request, reply))
        }
        done()
        return
      }
      // A reply sent from a hook ends the request there: `done` is not called, the handler never runs.
      answerRefusal(request, reply, result, limit.onLimited).then(undefined, done)
    }, done)
  }
}

/**
 * tollbooth's rate limit as a Fastify plugin (fastify-plugin: it applies to the scope it is registered in).
 * `app.register(tollboothRateLimit, { limiter })`, before the routes it limits.
 */
export const tollboothRateLimit = fp(plugin, { fastify: '5.x', name: 'tollbooth' })
