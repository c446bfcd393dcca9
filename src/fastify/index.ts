/**
 * tollbooth/fastify — tollbooth's rate limit as a Fastify 5 plugin: the options of tollbooth/http's `rateLimit`,
 * per-route settings through route `config.tollbooth`, answers through Fastify's reply and error handling.
 */
export type { RateLimitResult } from '../http/rateLimit.js'
export type { Refusal } from '../http/refusal.js'
export type { TollboothFastifyOptions, TollboothHook, TollboothRouteOptions } from './options.js'
export { tollboothRateLimit } from './tollboothRateLimit.js'
