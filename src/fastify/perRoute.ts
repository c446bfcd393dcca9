import type { FastifyInstance } from 'fastify'
import { invalidOption } from '../core/errors.js'
import { checkOptionKeys, closestName } from '../core/knownOptions.js'
import { isOptionsObject } from '../core/validate.js'
import { addRouteHook, type RouteHook } from './fastifyRequest.js'

/** How a guard plugin applies to the routes of its scope. */
export interface PerRouteGuard<Options extends object> {
  /** The plugin's name in errors. */
  readonly owner: string
  /** The key of a route's `config` holding its own options, or `false` to leave the route unguarded. */
  readonly configKey: string
  /** Every option name, for the route config's key check. */
  readonly known: readonly string[]
  /** The hook stage the guard runs in. */
  readonly stage: 'onRequest' | 'preValidation' | 'preHandler'
  /** The hook of one set of options, each checked (at startup); `path` names the route config in errors. */
  build(options: Options, path?: string): RouteHook
}

/**
 * Guards every route registered after the plugin in `fastify`'s scope and below: with the plugin's options, or with
 * the route's `config[configKey]` over them, or not at all when that is `false`. Routes are registered before the
 * server listens, so a bad route config fails `ready()`.
 */
export function guardEachRoute<Options extends object>(
  fastify: FastifyInstance,
  options: Options,
  guard: PerRouteGuard<Options>,
): void {
  const shared = guard.build(options)
  const path = `config.${guard.configKey}`
  fastify.addHook('onRoute', (route) => {
    checkGuardConfigKeys(guard.owner, route.config)
    const config = (route.config as Record<string, unknown> | undefined)?.[guard.configKey]
    if (config === false) return
    if (config === undefined) {
      addRouteHook(route, guard.stage, shared)
      return
    }
    if (!isOptionsObject(config)) {
      throw invalidOption(guard.owner, path, 'an object of options or false', config)
    }
    checkOptionKeys(guard.owner, config, guard.known, path)
    addRouteHook(route, guard.stage, guard.build({ ...options, ...config }, path))
  })
}

/** The route `config` keys tollbooth's plugins read. */
const GUARD_CONFIG_KEYS = ['tollbooth', 'tollboothConcurrency', 'tollboothUpload']

/**
 * Refuses a route `config` key that is a misspelling of one of tollbooth's (`tollboothUploads`, `tollBooth`): it would
 * be ignored, and the route would keep the plugin's defaults (a health check meant to be exempt limited, a cost meant
 * to be 5 charged 1). Other keys are the application's own and are left alone.
 */
export function checkGuardConfigKeys(owner: string, config: unknown): void {
  if (!isOptionsObject(config)) return
  for (const key of Object.keys(config)) {
    if (GUARD_CONFIG_KEYS.includes(key) || !key.toLowerCase().startsWith('toll')) continue
    const meant = closestName(key, GUARD_CONFIG_KEYS)
    if (meant !== undefined) {
      throw invalidOption(
        owner,
        `config.${key}`,
        `spelled "config.${meant}" (a misspelt key is ignored)`,
        config[key as keyof typeof config],
      )
    }
  }
}
