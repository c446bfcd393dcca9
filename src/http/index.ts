/**
 * tollbooth/http — the same budgets at the HTTP edge: middlewares for node:http and Express/Connect (login, uploads,
 * concurrency, plain rate limits), with the RateLimit fields, Retry-After and problem+json answers of the core.
 */

export * from '../core/headers.js'
export { type ConcurrencyGuardOptions, concurrencyGuard } from './concurrencyGuard.js'
export {
  type JobAdmission,
  type JobAdmissionOptions,
  type JobAdmissionResult,
  type JobRefused,
  type JobTicket,
  jobAdmission,
} from './jobs.js'
export {
  type LoginAdmission,
  type LoginCheck,
  type LoginGuard,
  type LoginGuardOptions,
  type LoginSuccess,
  loginGuard,
  normalizeAccount,
} from './loginGuard.js'
export type { Middleware, Next } from './middleware.js'
export {
  type RateLimitAllowed,
  type RateLimitCheckOptions,
  type RateLimitOptions,
  type RateLimitResult,
  rateLimit,
  rateLimitCheck,
} from './rateLimit.js'
export { addRateLimitHeaders, type Refusal, refusal, sendRefusal, setRateLimitHeaders } from './refusal.js'
export { type IdentityOptions, requestIdentity } from './requestIdentity.js'
export type { TrustedDeviceOptions } from './trustedDevices.js'
export {
  UPLOAD_SIZE_POLICY,
  type UploadCharge,
  type UploadGuardOptions,
  UploadTooLargeError,
  uploadGuard,
} from './uploadGuard.js'
