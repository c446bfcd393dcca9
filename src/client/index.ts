/**
 * tollbooth/client — the client's side of a 429, for browsers and Node (no Node module or global is used): how long
 * to wait (`retryDelay`), a `fetch` that retries what is safe to retry (`fetchWithRetry`), and reconnection
 * settings for graphql-ws matched to tollbooth/ws' close codes (`graphqlWsRetry`).
 */
export type { BackoffOptions } from './backoff.js'
export { type FetchLike, type FetchWithRetryOptions, fetchWithRetry } from './fetchWithRetry.js'
export { type GraphqlWsRetry, type GraphqlWsRetryOptions, graphqlWsRetry } from './graphqlWsRetry.js'
export { type RetryDelayOptions, retryDelay } from './retryDelay.js'
export {
  type GraphQLErrorLike,
  type GraphQLResultLike,
  type HeaderReader,
  type RetryAfterSource,
  rateLimitWaitMs,
  retryAfterMs,
  serverWaitMs,
} from './serverWait.js'
export type { Sleep } from './sleep.js'
export { type RefusedUpgrade, refusedUpgradeOf, withUpgradeRefusals } from './upgradeRefusals.js'
