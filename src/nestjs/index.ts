/**
 * tollbooth/nestjs — tollbooth's rate limit for NestJS 11 and 12 HTTP routes, on Express and on Fastify: a guard
 * (`TollboothGuard`, global or per controller) and the decorators `@RateLimit(limiter, { cost })` and
 * `@SkipRateLimit()`. A refusal goes through Nest's exception layer as a `RateLimitedException` carrying the answer
 * of tollbooth/http (429, `Retry-After`, RateLimit fields, problem+json). GraphQL drivers take the plugins of
 * tollbooth/graphql and tollbooth/apollo, `ws` gateways `protectWebSocketServer` of tollbooth/ws (docs/nestjs.md).
 */
export type { Refusal } from '../http/refusal.js'
export type { TollboothGuardOptions } from './guardOptions.js'
export {
  RATE_LIMIT_METADATA,
  RateLimit,
  type RateLimitRouteOptions,
  SkipRateLimit,
} from './rateLimitDecorators.js'
export { RateLimitedException } from './rateLimitedException.js'
export type { NestHttpRequest, RouteCost } from './routeCost.js'
export { TollboothGuard } from './tollboothGuard.js'
