/**
 * tollbooth/client — the client's side of a 429, for browsers and Node (no Node module or global is used): how long
 * to wait (`retryDelay`), a `fetch` that retries what is safe to retry (`fetchWithRetry`), reconnection settings
 * for graphql-ws matched to tollbooth/ws' close codes (`graphqlWsRetry`), and the socket.io-client counterpart
 * (`socketIoRetry`, `socketIoRefusalOf` for a refused acknowledgement).
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
export {
  type ReadRefusal,
  type RefusedAcknowledgement,
  SOCKET_IO_DISCONNECT_EVENT,
  type SocketIoRefusal,
  type SocketIoRefusalCode,
  socketIoRefusalOf,
} from './socketIoRefusals.js'
export { type SocketIoClientLike, type SocketIoRetryOptions, socketIoRetry } from './socketIoRetry.js'
export { type RefusedUpgrade, refusedUpgradeOf, withUpgradeRefusals } from './upgradeRefusals.js'
