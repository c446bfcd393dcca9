import type { IncomingMessage } from 'node:http'
import type { WebSocket } from 'ws'
import { invalidOption } from '../core/errors.js'
import { type FailPolicy, failPolicies } from '../core/failPolicy.js'
import { type LimiterHooks, limiterHooksOption } from '../core/hooks.js'
import { checkOptionKeys, optionNames } from '../core/knownOptions.js'
import type { Store } from '../core/stores/store.js'
import {
  isOptionsObject,
  MAX_TIMER_MS,
  nonNegativeInteger,
  oneOf,
  orDefault,
  positiveInteger,
  positiveNumber,
  timerMs,
} from '../core/validate.js'
import type { TrustProxy } from '../identity/clientIp.js'
import { resolveIpKeyOptions } from '../identity/ipKey.js'
import type { WebSocketProtocolError } from './protocolError.js'

export interface ProtectWebSocketOptions {
  /**
   * Who is connecting: a user id, API key, tenant, from a token, cookie or header. May be async. Throwing refuses
   * the upgrade with 401. Identities are hashed before they reach a remote store.
   * @default the client IP (through `trustProxy`), IPv6 grouped by `ipv6Prefix`
   */
  identify?: (req: IncomingMessage) => string | Promise<string>
  /** Which `X-Forwarded-For` hops to believe for the default identity and the handshake limit. @default false */
  trustProxy?: TrustProxy
  /** IPv6 client addresses are counted per network of this prefix (1..128). @default 56 */
  ipv6Prefix?: number
  /** IPv4 client addresses are counted per network of this prefix (1..32). @default 32 (each address) */
  ipv4Prefix?: number
  /** Where connection leases and handshake budgets live; a RedisStore shares them across processes. @default MemoryStore */
  store?: Store
  /** What the store-backed limits answer while the store fails. @default 'open' */
  failPolicy?: FailPolicy
  /**
   * Prefix of the internal limiters' names (`<name>-connections`, `<name>-handshakes`, `<name>-identity-messages`):
   * give each protected server its own when several share one store, or their caps are shared. @default 'ws'
   */
  name?: string
  /** Decision and store hooks of the internal limiters (connection leases, handshakes, identity messages). */
  hooks?: LimiterHooks
  /** Open connections per identity (crash-safe leases). @default 10 */
  maxConnectionsPerIdentity?: number
  /** Lease lifetime in ms; renewed every `leaseMs / 3` while the socket lives. @default 30000 */
  leaseMs?: number
  /** New connections per client IP: a token bucket, or `false` for none. @default { capacity: 20, refillPerSecond: 2 } */
  handshakesPerIp?: { capacity: number; refillPerSecond: number } | false
  /** Open connections on this server; beyond it upgrades get 503. @default 10000 */
  maxConnections?: number
  /**
   * Largest message in bytes, enforced by ws itself before reading the payload (close 1009). Applied as the
   * server's `maxPayload` unless the app set a smaller one.
   * @default 65536
   */
  maxMessageBytes?: number
  /**
   * With permessage-deflate: bytes one connection may have inflated per second, a second's worth at once, checked
   * before each frame inflates (each reserves `maxMessageBytes` and gets back what it did not use). Over it, the
   * socket is not read until the budget refills. At least `maxMessageBytes`.
   * @default 8 × maxMessageBytes (512 KiB with the default maxMessageBytes)
   */
  inflatedBytesPerSecond?: number
  /** Messages (and pings) per second per connection, checked in-process. @default 50 */
  messagesPerSecond?: number
  /** Burst of messages a connection may send at once. @default messagesPerSecond */
  messageBurst?: number
  /** Dropped messages within one second after which the connection is closed (1013, or 1008 for abuse). @default 20 */
  dropsBeforeClose?: number
  /** A connection sending at this many times `messagesPerSecond` when it is closed gets 1008 instead of 1013. @default 10 */
  abuseFactor?: number
  /**
   * Messages per identity across all its connections and processes, through `store`: a token bucket drawn from in
   * batches of `batch` (so the message path never waits on the store), or `false`.
   * @default false
   */
  identityMessages?: { capacity: number; refillPerSecond: number; batch?: number } | false
  /** Bytes queued for a client that does not read, beyond which it is terminated. @default 1048576 */
  maxBufferedBytes?: number
  /** Interval of heartbeat pings in ms; a connection that missed the previous pong is terminated. 0: off. @default 30000 */
  heartbeatMs?: number
  /**
   * graphql-ws: most concurrent `subscribe` operations per connection; one more is answered with an `error`
   * message for its id and not passed on. 0: no limit. @default 0
   */
  maxSubscriptionsPerConnection?: number
  /**
   * Called for a dropped message (over quota), e.g. to send an error reply. Not called once the connection is
   * being closed.
   */
  onDrop?: (socket: WebSocket, info: { retryAfterMs: number }) => void
  /**
   * Called for each frame ws refused on its own (`error.code` is ws' `WS_ERR_*`: a message over `maxMessageBytes`,
   * a bad opcode, invalid UTF-8, …), once ws has closed the socket with its code (1009, 1002, 1007), e.g. to count
   * them. Any client can cause these at will: count them, do not log each one. The socket's 'error' event carries
   * them too, except on a server graphql-ws' `useServer` handles (and on sockets of subprotocol
   * `graphql-transport-ws`), whose 'error' listener would log each one with its stack.
   */
  onProtocolError?: (socket: WebSocket, error: WebSocketProtocolError) => void
}

export interface ResolvedWebSocketOptions {
  readonly identify: ((req: IncomingMessage) => string | Promise<string>) | undefined
  readonly trustProxy: TrustProxy
  readonly ipv6Prefix: number
  readonly ipv4Prefix: number
  readonly store: Store | undefined
  readonly failPolicy: FailPolicy
  readonly maxConnectionsPerIdentity: number
  readonly leaseMs: number
  readonly name: string
  readonly hooks: LimiterHooks | undefined
  readonly handshakesPerIp: { capacity: number; refillPerSecond: number } | false
  readonly maxConnections: number
  readonly maxMessageBytes: number
  readonly inflatedBytesPerSecond: number
  readonly messagesPerSecond: number
  readonly messageBurst: number
  readonly dropsBeforeClose: number
  readonly abuseFactor: number
  readonly identityMessages: { capacity: number; refillPerSecond: number; batch: number } | false
  readonly maxBufferedBytes: number
  readonly heartbeatMs: number
  readonly maxSubscriptionsPerConnection: number
  readonly onDrop: ProtectWebSocketOptions['onDrop']
  readonly onProtocolError: ProtectWebSocketOptions['onProtocolError']
}

const owner = 'protectWebSocketServer'

const OPTIONS = optionNames<ProtectWebSocketOptions>({
  identify: true,
  trustProxy: true,
  ipv6Prefix: true,
  ipv4Prefix: true,
  store: true,
  failPolicy: true,
  name: true,
  hooks: true,
  maxConnectionsPerIdentity: true,
  leaseMs: true,
  handshakesPerIp: true,
  maxConnections: true,
  maxMessageBytes: true,
  inflatedBytesPerSecond: true,
  messagesPerSecond: true,
  messageBurst: true,
  dropsBeforeClose: true,
  abuseFactor: true,
  identityMessages: true,
  maxBufferedBytes: true,
  heartbeatMs: true,
  maxSubscriptionsPerConnection: true,
  onDrop: true,
  onProtocolError: true,
})
const HANDSHAKES_OPTIONS = optionNames<
  Exclude<ProtectWebSocketOptions['handshakesPerIp'], false | undefined>
>({
  capacity: true,
  refillPerSecond: true,
})
const IDENTITY_MESSAGES_OPTIONS = optionNames<
  Exclude<ProtectWebSocketOptions['identityMessages'], false | undefined>
>({ capacity: true, refillPerSecond: true, batch: true })

/**
 * Validates every option once, at startup, and freezes the result. One function, one entry per option: read top to
 * bottom it is the list of options with their checks and defaults.
 */
export function resolveWebSocketOptions(options: ProtectWebSocketOptions = {}): ResolvedWebSocketOptions {
  if (!isOptionsObject(options)) throw invalidOption(owner, 'options', 'an object', options)
  checkOptionKeys(owner, options, OPTIONS)
  checkOptionKeys(owner, options.handshakesPerIp, HANDSHAKES_OPTIONS, 'handshakesPerIp')
  checkOptionKeys(owner, options.identityMessages, IDENTITY_MESSAGES_OPTIONS, 'identityMessages')
  if (options.identify !== undefined && typeof options.identify !== 'function') {
    throw invalidOption(owner, 'identify', 'a function (req) => identity', options.identify)
  }
  if (options.onDrop !== undefined && typeof options.onDrop !== 'function') {
    throw invalidOption(owner, 'onDrop', 'a function', options.onDrop)
  }
  if (options.onProtocolError !== undefined && typeof options.onProtocolError !== 'function') {
    throw invalidOption(owner, 'onProtocolError', 'a function', options.onProtocolError)
  }
  const handshakes = orDefault(options.handshakesPerIp, { capacity: 20, refillPerSecond: 2 })
  if (handshakes !== false && !isOptionsObject(handshakes)) {
    throw invalidOption(owner, 'handshakesPerIp', '{ capacity, refillPerSecond } or false', handshakes)
  }
  const messagesPerSecond = positiveNumber(
    owner,
    'messagesPerSecond',
    orDefault(options.messagesPerSecond, 50),
  )
  const maxMessageBytes = positiveInteger(
    owner,
    'maxMessageBytes',
    orDefault(options.maxMessageBytes, 64 * 1024),
  )
  const inflatedBytesPerSecond = positiveInteger(
    owner,
    'inflatedBytesPerSecond',
    orDefault(options.inflatedBytesPerSecond, 8 * maxMessageBytes),
  )
  if (inflatedBytesPerSecond < maxMessageBytes) {
    throw invalidOption(
      owner,
      'inflatedBytesPerSecond',
      `at least maxMessageBytes (${maxMessageBytes}): a message must fit`,
      inflatedBytesPerSecond,
    )
  }
  return Object.freeze({
    identify: options.identify,
    trustProxy: orDefault(options.trustProxy, false),
    ...resolveIpKeyOptions(options, owner),
    store: options.store,
    failPolicy: oneOf(owner, 'failPolicy', orDefault(options.failPolicy, 'open'), failPolicies),
    maxConnectionsPerIdentity: positiveInteger(
      owner,
      'maxConnectionsPerIdentity',
      orDefault(options.maxConnectionsPerIdentity, 10),
    ),
    leaseMs: timerMs(owner, 'leaseMs', orDefault(options.leaseMs, 30_000)),
    name: limiterPrefix(options.name),
    hooks: options.hooks === undefined ? undefined : limiterHooksOption(owner, options.hooks),
    handshakesPerIp:
      handshakes === false
        ? false
        : {
            capacity: positiveInteger(owner, 'handshakesPerIp.capacity', handshakes.capacity),
            refillPerSecond: positiveNumber(
              owner,
              'handshakesPerIp.refillPerSecond',
              handshakes.refillPerSecond,
            ),
          },
    maxConnections: positiveInteger(owner, 'maxConnections', orDefault(options.maxConnections, 10_000)),
    maxMessageBytes,
    inflatedBytesPerSecond,
    messagesPerSecond,
    messageBurst: positiveInteger(
      owner,
      'messageBurst',
      orDefault(options.messageBurst, Math.ceil(messagesPerSecond)),
    ),
    dropsBeforeClose: positiveInteger(owner, 'dropsBeforeClose', orDefault(options.dropsBeforeClose, 20)),
    abuseFactor: positiveNumber(owner, 'abuseFactor', orDefault(options.abuseFactor, 10)),
    identityMessages: resolveIdentityMessages(orDefault(options.identityMessages, false)),
    maxBufferedBytes: positiveInteger(
      owner,
      'maxBufferedBytes',
      orDefault(options.maxBufferedBytes, 1024 * 1024),
    ),
    heartbeatMs: heartbeatOption(owner, orDefault(options.heartbeatMs, 30_000)),
    maxSubscriptionsPerConnection: nonNegativeInteger(
      owner,
      'maxSubscriptionsPerConnection',
      orDefault(options.maxSubscriptionsPerConnection, 0),
    ),
    onDrop: options.onDrop,
    onProtocolError: options.onProtocolError,
  })
}

function resolveIdentityMessages(
  option: ProtectWebSocketOptions['identityMessages'],
): ResolvedWebSocketOptions['identityMessages'] {
  if (option === false) return false
  if (!isOptionsObject(option)) {
    throw invalidOption(owner, 'identityMessages', '{ capacity, refillPerSecond, batch? } or false', option)
  }
  const capacity = positiveInteger(owner, 'identityMessages.capacity', option.capacity)
  const refillPerSecond = positiveNumber(owner, 'identityMessages.refillPerSecond', option.refillPerSecond)
  // About ten draws a second at the full rate: few store calls, few tokens parked per process.
  const batch = positiveInteger(
    owner,
    'identityMessages.batch',
    orDefault(option.batch, Math.min(capacity, Math.max(1, Math.ceil(refillPerSecond / 10)))),
  )
  if (batch > capacity)
    throw invalidOption(owner, 'identityMessages.batch', `at most capacity (${capacity})`, batch)
  return { capacity, refillPerSecond, batch }
}

function limiterPrefix(name: unknown): string {
  if (name === undefined) return 'ws'
  if (typeof name !== 'string' || name.length === 0 || name.length > 64 || /[{}]/.test(name)) {
    throw invalidOption(owner, 'name', 'a string of 1 to 64 characters without "{" or "}"', name)
  }
  return name
}

/** `heartbeatMs`: 0 turns the heartbeat off; anything else is the interval of a timer. */
function heartbeatOption(owner: string, value: unknown): number {
  if (value === 0) return 0
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > MAX_TIMER_MS) {
    throw invalidOption(
      owner,
      'heartbeatMs',
      `0 (off) or a positive integer of at most ${MAX_TIMER_MS} (2^31 - 1)`,
      value,
    )
  }
  return value
}
