/**
 * tollbooth/http — the same budgets at the HTTP edge: middlewares for node:http and Express/Connect (login, uploads,
 * concurrency, plain rate limits), with the RateLimit fields, Retry-After and problem+json answers of the core.
 */
export * from './headers.js'
export type { Middleware, Next } from './middleware.js'
export { type Refusal, refusal, sendRefusal, setRateLimitHeaders } from './refusal.js'
export { type IdentityOptions, requestIdentity } from './requestIdentity.js'
