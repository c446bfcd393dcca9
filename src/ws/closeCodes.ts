/**
 * Close codes and reasons tollbooth/ws uses. Reasons are short and stable (a close reason is at most 123 bytes);
 * clients may match on them.
 *
 * graphql-ws clients treat 1008 and 1009 as fatal (no retry) and retry 1013 with exponential backoff and jitter,
 * which is why over-quota traffic gets 1013 and only abuse gets 1008.
 */
export const CloseCodes = {
  /** Server shutting down (sent by `close()` of the protection handle). */
  GOING_AWAY: 1001,
  /** Abuse far beyond the limit (messages at many times the allowed rate); clients should not retry. */
  POLICY_VIOLATION: 1008,
  /** Message larger than `maxMessageBytes` (sent by ws itself). */
  MESSAGE_TOO_BIG: 1009,
  /** Over quota: try again later; clients back off and retry. */
  TRY_AGAIN_LATER: 1013,
} as const

export const CloseReasons = {
  GOING_AWAY: 'server shutting down',
  RATE_LIMITED: 'rate limited',
  ABUSE: 'message rate abuse',
  /**
   * @deprecated Never sent: a peer that misses a heartbeat's pong is terminated without a close frame (it sees
   * 1006), since one that does not answer pings would not answer a close either.
   */
  IDLE: 'no pong',
  LEASE_LOST: 'connection lease lost',
} as const
