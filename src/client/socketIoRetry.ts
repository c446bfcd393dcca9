import { invalidArgument, invalidOption } from '../core/errors.js'
import { checkOptionKeys, optionNames } from '../core/knownOptions.js'
import { nonNegativeInteger, orDefault } from '../core/validate.js'
import { type BackoffOptions, checkOptionsObject, jitteredBackoffMs, resolveBackoff } from './backoff.js'
import { serverWaitMs } from './serverWait.js'
import { sleep as defaultSleep, type Sleep } from './sleep.js'
import { SOCKET_IO_DISCONNECT_EVENT, socketIoRefusalOf } from './socketIoRefusals.js'

const OWNER = 'socketIoRetry'

export interface SocketIoRetryOptions extends BackoffOptions {
  /** Cap of the first reconnection's delay, in ms; each one in a row doubles it. @default 1000 */
  baseMs?: number
  /** Largest cap of the backoff, in ms (a server's longer `retryAfter` is still honoured). @default 30000 */
  maxMs?: number
  /** Reconnections in a row before giving up; the count starts again at each connection. @default 10 */
  maxAttempts?: number
  /** How to wait before a reconnection; give one that records the delays in tests. @default a timer */
  sleep?: Sleep
  /** The current time, in ms since the epoch, for an HTTP-date `Retry-After`. @default Date.now */
  now?: () => number
  /** Called when it stops reconnecting: the refusal will not change, or `maxAttempts` ran out. */
  onGiveUp?: (reason: unknown) => void
}

const OPTIONS = optionNames<SocketIoRetryOptions>({
  baseMs: true,
  maxMs: true,
  random: true,
  maxAttempts: true,
  sleep: true,
  now: true,
  onGiveUp: true,
})

/** A listener as socket.io-client's typed emitter declares it (any arguments). */
// biome-ignore lint/suspicious/noExplicitAny: socket.io-client types its listeners' arguments as any.
type Listener = (...args: any[]) => void

/** The part of a socket.io-client `Socket` this uses. */
export interface SocketIoClientLike {
  readonly connected: boolean
  readonly io: { reconnection(): boolean }
  connect(): unknown
  on(event: string, listener: Listener): unknown
  off(event: string, listener: Listener): unknown
}

/** Refused handshakes a later one may pass: a limit (tollbooth/socket.io 429) or a full server (503). */
const RETRY_STATUSES: ReadonlySet<number> = new Set([429, 503])

/**
 * Reconnects a socket.io-client socket the way tollbooth/socket.io asks: after a refused handshake (HTTP 429 or
 * 503) no sooner than its `Retry-After` where the client can read it (the polling transport: engine.io-client's
 * default first request); after a refused connection (`connect_error` with `TOO_MANY_CONNECTIONS` or
 * `RATE_LIMITED`) or a disconnect notice (`tollbooth:disconnect`) no sooner than its `retryAfter`; after a network
 * failure with an exponential backoff with full jitter. It does not reconnect after a refusal that will not change
 * (`UNAUTHORIZED`, `ABUSE`, `EVENT_TOO_COSTLY`, an app middleware's error, a disconnect by the app), nor after
 * `socket.disconnect()`.
 *
 * The socket must be created with `reconnection: false`: this takes the Manager's place. Returns a function that
 * stops it.
 *
 * ```ts
 * const socket = io(url, { reconnection: false, auth: { token } })
 * const stop = socketIoRetry(socket, { baseMs: 500, maxMs: 30_000 })
 * ```
 */
export function socketIoRetry(socket: SocketIoClientLike, options: SocketIoRetryOptions = {}): () => void {
  checkOptionsObject(OWNER, options)
  checkOptionKeys(OWNER, options, OPTIONS)
  const backoff = resolveBackoff(OWNER, options, { baseMs: 1000, maxMs: 30_000 })
  const maxAttempts = nonNegativeInteger(OWNER, 'maxAttempts', orDefault(options.maxAttempts, 10))
  const sleep = orDefault(options.sleep, defaultSleep)
  if (typeof sleep !== 'function') throw invalidOption(OWNER, 'sleep', 'a function', sleep)
  const now = orDefault(options.now, Date.now)
  if (typeof now !== 'function') throw invalidOption(OWNER, 'now', 'a function', now)
  const onGiveUp = options.onGiveUp
  if (onGiveUp !== undefined && typeof onGiveUp !== 'function') {
    throw invalidOption(OWNER, 'onGiveUp', 'a function', onGiveUp)
  }
  if (typeof socket?.io?.reconnection !== 'function' || socket.io.reconnection()) {
    throw invalidArgument(
      OWNER,
      'socket',
      'a socket.io-client socket created with reconnection: false',
      socket,
    )
  }

  let attempts = 0
  let stopped = false
  let notice: unknown
  const controller = new AbortController()

  const giveUp = (reason: unknown) => {
    stopped = true
    onGiveUp?.(reason)
  }
  const reconnect = (serverWait: number | undefined, reason: unknown) => {
    if (stopped) return
    if (attempts >= maxAttempts) {
      giveUp(reason)
      return
    }
    const delay = Math.max(jitteredBackoffMs(attempts, backoff), serverWait ?? 0)
    attempts++
    sleep(delay, controller.signal).then(
      () => {
        if (!stopped && !socket.connected) socket.connect()
      },
      () => undefined,
    )
  }

  const onConnect = () => {
    attempts = 0
  }
  const onNotice = (value: unknown) => {
    notice = value
  }
  const onDisconnect = (reason: string) => {
    const told = notice
    notice = undefined
    if (reason === 'io client disconnect') return
    if (reason !== 'io server disconnect') {
      reconnect(undefined, reason)
      return
    }
    const refused = socketIoRefusalOf(told)
    if (refused?.retryAfterMs === undefined) giveUp(told ?? reason)
    else reconnect(refused.retryAfterMs, refused)
  }
  const onConnectError = (error: unknown) => {
    const refused = socketIoRefusalOf(error)
    if (refused !== undefined) {
      if (refused.retryAfterMs === undefined) giveUp(refused)
      else reconnect(refused.retryAfterMs, refused)
      return
    }
    const handshake = refusedHandshakeOf(error)
    if (handshake === undefined) {
      // An app middleware's refusal: socket.io's own client does not reconnect after one either.
      if (typeof error === 'object' && error !== null && 'data' in error) giveUp(error)
      else reconnect(undefined, error)
      return
    }
    if (!RETRY_STATUSES.has(handshake.status)) {
      giveUp(error)
      return
    }
    reconnect(handshake.headers === undefined ? undefined : serverWaitMs(handshake.headers, now()), error)
  }

  socket.on('connect', onConnect)
  socket.on(SOCKET_IO_DISCONNECT_EVENT, onNotice)
  socket.on('disconnect', onDisconnect)
  socket.on('connect_error', onConnectError)
  return () => {
    stopped = true
    controller.abort()
    socket.off('connect', onConnect)
    socket.off(SOCKET_IO_DISCONNECT_EVENT, onNotice)
    socket.off('disconnect', onDisconnect)
    socket.off('connect_error', onConnectError)
  }
}

/**
 * The HTTP status of a refused engine.io handshake in a `connect_error`, and its headers when the client can read
 * them: on polling, engine.io-client's error carries the request's status (`description`) and the XHR (`context`);
 * on the WebSocket transport, only the message of the `ws` error names the status.
 */
function refusedHandshakeOf(
  error: unknown,
): { status: number; headers: { get(name: string): string | null } | undefined } | undefined {
  if (typeof error !== 'object' || error === null) return undefined
  const { description, context } = error as { description?: unknown; context?: unknown }
  if (typeof description === 'number' && description >= 400) {
    const xhr = context as { getResponseHeader?: (name: string) => string | null } | undefined
    const read = xhr?.getResponseHeader
    const headers =
      typeof read === 'function'
        ? { get: (name: string) => (read.call(xhr, name) as string | null | undefined) ?? null }
        : undefined
    return { status: description, headers }
  }
  const message = (description as { message?: unknown } | undefined)?.message
  const status =
    typeof message === 'string' ? /Unexpected server response: (\d{3})/.exec(message)?.[1] : undefined
  return status === undefined ? undefined : { status: Number(status), headers: undefined }
}
