/**
 * tollbooth/fastify — tollbooth's HTTP guards for Fastify 5: the rate limit (`tollboothRateLimit`, route
 * `config.tollbooth`), concurrency leases (`tollboothConcurrency`, route `config.tollboothConcurrency`) and upload
 * limits (`tollboothUpload`, route `config.tollboothUpload`) as plugins, and the login guard as a route `preHandler`
 * with outcome reports (`tollboothLogin`). Answers go through Fastify's reply, errors to its error handling.
 */
export type { LoginSuccess } from '../http/loginGuard.js'
export type { RateLimitResult } from '../http/rateLimit.js'
export type { Refusal } from '../http/refusal.js'
export type { UploadCharge } from '../http/uploadAdmission.js'
export type { FastifyIdentityOptions, FastifyOnLimited, RouteHook } from './fastifyRequest.js'
export type { TollboothFastifyOptions, TollboothHook, TollboothRouteOptions } from './options.js'
export {
  type TollboothConcurrencyOptions,
  type TollboothConcurrencyRouteOptions,
  tollboothConcurrency,
} from './tollboothConcurrency.js'
export { type TollboothLogin, type TollboothLoginOptions, tollboothLogin } from './tollboothLogin.js'
export { tollboothRateLimit } from './tollboothRateLimit.js'
export {
  type TollboothUploadOptions,
  type TollboothUploadRouteOptions,
  tollboothUpload,
} from './tollboothUpload.js'
