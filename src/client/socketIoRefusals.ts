/**
 * What tollbooth/socket.io tells a Socket.IO client when it refuses something, and how a client reads it. The shapes
 * are the wire format: a server built on tollbooth/socket.io sends them, this module reads them (no Node imports).
 */

/** Why a connection, an event or a socket was refused. */
export type SocketIoRefusalCode =
  /** Over a rate or a budget (handshakes, events, the identity's shared budget): `retryAfter` says when to come back. */
  | 'RATE_LIMITED'
  /** The identity holds its most connections: `retryAfter` is a hint, a slot comes back when one of them closes. */
  | 'TOO_MANY_CONNECTIONS'
  /** An event costs more than its budget can ever hold: sending it again cannot pass. */
  | 'EVENT_TOO_COSTLY'
  /** The event could not be priced (the server's cost function failed): not delivered. */
  | 'EVENT_REFUSED'
  /** The server could not tell who is connecting (`identify` threw). */
  | 'UNAUTHORIZED'
  /** The server is full, or shutting down: try again later. */
  | 'UNAVAILABLE'
  /** The connection's slot was lost (its lease expired in the store): reconnect. */
  | 'LEASE_LOST'
  /** Disconnected for sending at many times the allowed rate: do not reconnect. */
  | 'ABUSE'

/** The refusal itself: in an acknowledgement (`{ error }`), a `connect_error`'s `data`, or a disconnect notice. */
export interface SocketIoRefusal {
  readonly code: SocketIoRefusalCode
  readonly message: string
  /** Whole seconds to wait before trying again; absent when trying again cannot help. */
  readonly retryAfter?: number
}

/** What an acknowledgement of a refused event receives as its first argument. */
export interface RefusedAcknowledgement {
  readonly error: SocketIoRefusal
}

/** The event a server sends a socket just before it disconnects it for a limit; its argument is a `SocketIoRefusal`. */
export const SOCKET_IO_DISCONNECT_EVENT = 'tollbooth:disconnect'

const CODES: ReadonlySet<string> = new Set<SocketIoRefusalCode>([
  'RATE_LIMITED',
  'TOO_MANY_CONNECTIONS',
  'EVENT_TOO_COSTLY',
  'EVENT_REFUSED',
  'UNAUTHORIZED',
  'UNAVAILABLE',
  'LEASE_LOST',
  'ABUSE',
])

/** Refusals after which trying again later may pass. */
const RETRYABLE: ReadonlySet<SocketIoRefusalCode> = new Set([
  'RATE_LIMITED',
  'TOO_MANY_CONNECTIONS',
  'UNAVAILABLE',
  'LEASE_LOST',
])

/** A refusal as read by a client: its code, message, and the wait in ms (`undefined`: do not retry). */
export interface ReadRefusal {
  readonly code: SocketIoRefusalCode
  readonly message: string
  readonly retryAfterMs: number | undefined
}

/**
 * The refusal carried by a value a client received, or `undefined` when it carries none: an acknowledgement's
 * first argument (`{ error: { code, … } }`), a `connect_error`'s error (its `data`), or a disconnect notice.
 *
 * ```ts
 * socket.emit('export', query, (response) => {
 *   const refused = socketIoRefusalOf(response)
 *   if (refused?.retryAfterMs !== undefined) setTimeout(retry, refused.retryAfterMs)
 * })
 * ```
 */
export function socketIoRefusalOf(value: unknown): ReadRefusal | undefined {
  const refusal = refusalIn(value)
  if (refusal === undefined) return undefined
  const { code, message, retryAfter } = refusal as {
    code: SocketIoRefusalCode
    message?: unknown
    retryAfter?: unknown
  }
  const seconds =
    typeof retryAfter === 'number' && Number.isFinite(retryAfter) && retryAfter >= 0 ? retryAfter : undefined
  return {
    code,
    message: typeof message === 'string' ? message : code,
    retryAfterMs: RETRYABLE.has(code) ? (seconds ?? 1) * 1000 : undefined,
  }
}

function refusalIn(value: unknown): object | undefined {
  if (typeof value !== 'object' || value === null) return undefined
  if (isRefusal(value)) return value
  // An acknowledgement's `{ error }`, or a connect_error's `data`.
  const { error, data } = value as { error?: unknown; data?: unknown }
  if (isRefusal(error)) return error
  if (isRefusal(data)) return data
  return undefined
}

function isRefusal(value: unknown): value is object {
  if (typeof value !== 'object' || value === null) return false
  const { code } = value as { code?: unknown }
  return typeof code === 'string' && CODES.has(code)
}
