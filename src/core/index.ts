export { CircuitBreaker, type CircuitBreakerOptions } from './circuitBreaker.js'
export type { Decision, DecisionSource } from './decision.js'
export { type ErrorCode, ErrorCodes, TollboothError } from './errors.js'
export type { FailPolicy } from './failPolicy.js'
export type {
  BreakerChangeEvent,
  BreakerState,
  DecisionEvent,
  LimiterHooks,
  StoreErrorEvent,
  StoreHooks,
} from './hooks.js'
export type { LimiterOptions } from './limiterBase.js'
export { type AllOfOptions, allOf, type CombinedDecision, CombinedLimiter } from './limiters/allOf.js'
export {
  ConcurrencyLimiter,
  type ConcurrencyLimitOptions,
  concurrencyLimit,
  type Lease,
} from './limiters/concurrencyLimit.js'
export { fixedWindow, type WindowOptions } from './limiters/fixedWindow.js'
export { type LeakyBucketLimiter, type LeakyBucketOptions, leakyBucket } from './limiters/leakyBucket.js'
export { slidingWindow } from './limiters/slidingWindow.js'
export { type TokenBucketOptions, tokenBucket } from './limiters/tokenBucket.js'
export { RateLimiter, type RateLimiterOptions } from './rateLimiter.js'
export { MemoryStore, type MemoryStoreOptions } from './stores/memoryStore.js'
export type { RedisClient } from './stores/redisClient.js'
export { RedisStore, type RedisStoreOptions } from './stores/redisStore.js'
export type { AlgorithmName, Reply, Store, StoreRequest } from './stores/store.js'
