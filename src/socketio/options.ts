import type { Socket } from 'socket.io'
import { invalidOption } from '../core/errors.js'
import { type FailPolicy, failPolicies } from '../core/failPolicy.js'
import { type LimiterHooks, limiterHooksOption } from '../core/hooks.js'
import { checkOptionKeys, type OptionKeys, optionNames } from '../core/knownOptions.js'
import type { Store } from '../core/stores/store.js'
import {
  isOptionsObject,
  oneOf,
  orDefault,
  positiveInteger,
  positiveNumber,
  timerMs,
} from '../core/validate.js'
import type { TrustProxy } from '../identity/clientIp.js'
import { resolveIpKeyOptions } from '../identity/ipKey.js'

/** The price of an event: a map from event name to points (others cost 1), or a function of the event and its arguments. */
export type EventCost =
  | Readonly<Record<string, number>>
  | ((event: string, args: readonly unknown[]) => number)

/** A token bucket's settings. */
export interface BucketOptions {
  capacity: number
  refillPerSecond: number
}

/** The limits a namespace may set for itself (`namespaces`); the others hold for the whole server. */
export interface SocketIoNamespaceOptions {
  /**
   * Open connections per identity to the namespaces sharing this setting (crash-safe leases in `store`). A client
   * connected to two namespaces holds a slot in each. @default 10
   */
  maxConnectionsPerIdentity?: number
  /** Points per second per socket, each event costing its `eventCost`; checked in-process. @default 50 */
  eventsPerSecond?: number
  /** Points one socket may spend at once. @default eventsPerSecond */
  eventBurst?: number
  /** What each event costs, in points. @default 1 per event */
  eventCost?: EventCost
  /**
   * Points per identity across its sockets and processes, through `store`: a token bucket drawn from in batches of
   * `batch` (the event path waits on the store only when a batch runs out), or `false`. @default false
   */
  identityEvents?: (BucketOptions & { batch?: number }) | false
  /** Refused events within one second after which the socket is disconnected (`RATE_LIMITED`). @default 20 */
  dropsBeforeDisconnect?: number
  /**
   * A socket sending at this many times `eventsPerSecond` when it is disconnected loses its whole connection
   * (`ABUSE`, every namespace) instead of this namespace only. @default 10
   */
  abuseFactor?: number
}

export interface ProtectSocketIoOptions extends SocketIoNamespaceOptions {
  /**
   * Who is connecting, from the socket before it connects (`socket.handshake.auth`, `.headers`, `.query`): a user
   * id, API key or tenant. May be async. Throwing refuses the connection (`UNAUTHORIZED`). Identities are hashed
   * before they reach a remote store.
   * @default the client address (through `trustProxy`), IPv6 grouped by `ipv6Prefix`
   */
  identify?: (socket: Socket) => string | Promise<string>
  /** Which `X-Forwarded-For` hops to believe for the default identity and the handshake limit. @default false */
  trustProxy?: TrustProxy
  /** IPv6 client addresses are counted per network of this prefix (1..128). @default 56 */
  ipv6Prefix?: number
  /** IPv4 client addresses are counted per network of this prefix (1..32). @default 32 (each address) */
  ipv4Prefix?: number
  /** Where leases, handshake and identity budgets live; a RedisStore shares them across instances. @default MemoryStore */
  store?: Store
  /** What the store-backed limits answer while the store fails. @default 'open' */
  failPolicy?: FailPolicy
  /** Prefix of the internal limiters' names: give each protected server its own when several share one store. @default 'socket.io' */
  name?: string
  /** Decision and store hooks of the internal limiters (handshakes, connection leases, identity events). */
  hooks?: LimiterHooks
  /** Lease lifetime in ms; renewed every `leaseMs / 3` while the socket lives. @default 30000 */
  leaseMs?: number
  /**
   * New connections per client address: each engine.io handshake, and each namespace connection after the first on
   * one engine.io connection, spends a token. A token bucket, or `false`. @default { capacity: 20, refillPerSecond: 2 }
   */
  handshakesPerIp?: BucketOptions | false
  /** Open engine.io connections on this server; beyond it handshakes get 503. @default 10000 */
  maxConnections?: number
  /**
   * Largest packet in bytes, binary attachments included; engine.io's `maxHttpBufferSize` is lowered to it. A
   * packet over it closes the connection, as engine.io does for a message over `maxHttpBufferSize`.
   * @default the server's maxHttpBufferSize (1 MB unless set)
   */
  maxPacketBytes?: number
  /**
   * Packets per second per engine.io connection, of every kind and namespace (events, acknowledgements, namespace
   * connects), counted before they are decoded; a connection over it at `abuseFactor` times is closed. @default 200
   */
  packetsPerSecond?: number
  /** Limits of single namespaces by name (`'/admin'`), each over the options above. */
  namespaces?: Readonly<Record<string, SocketIoNamespaceOptions>>
  /** Called for each refused event (not delivered), e.g. to count it. */
  onDrop?: (socket: Socket, info: { event: string; code: string; retryAfterMs: number }) => void
}

export interface ResolvedNamespaceLimits {
  readonly maxConnectionsPerIdentity: number
  readonly eventsPerSecond: number
  readonly eventBurst: number
  readonly eventCost: EventCost | undefined
  readonly identityEvents: (BucketOptions & { batch: number }) | false
  readonly dropsBeforeDisconnect: number
  readonly abuseFactor: number
}

export interface ResolvedSocketIoOptions {
  readonly identify: ((socket: Socket) => string | Promise<string>) | undefined
  readonly trustProxy: TrustProxy
  readonly ipv6Prefix: number
  readonly ipv4Prefix: number
  readonly store: Store | undefined
  readonly failPolicy: FailPolicy
  readonly name: string
  readonly hooks: LimiterHooks | undefined
  readonly leaseMs: number
  readonly handshakesPerIp: BucketOptions | false
  readonly maxConnections: number
  readonly maxPacketBytes: number | undefined
  readonly packetsPerSecond: number
  readonly limits: ResolvedNamespaceLimits
  /** Each namespace's own options (only what it set), already checked. */
  readonly namespaces: ReadonlyMap<string, Partial<ResolvedNamespaceLimits>>
  readonly onDrop: ProtectSocketIoOptions['onDrop']
}

const owner = 'protectSocketIo'

const NAMESPACE_KEYS: OptionKeys<SocketIoNamespaceOptions> = {
  maxConnectionsPerIdentity: true,
  eventsPerSecond: true,
  eventBurst: true,
  eventCost: true,
  identityEvents: true,
  dropsBeforeDisconnect: true,
  abuseFactor: true,
}
const NAMESPACE_OPTIONS = optionNames<SocketIoNamespaceOptions>(NAMESPACE_KEYS)
const OPTIONS = optionNames<ProtectSocketIoOptions>({
  ...NAMESPACE_KEYS,
  identify: true,
  trustProxy: true,
  ipv6Prefix: true,
  ipv4Prefix: true,
  store: true,
  failPolicy: true,
  name: true,
  hooks: true,
  leaseMs: true,
  handshakesPerIp: true,
  maxConnections: true,
  maxPacketBytes: true,
  packetsPerSecond: true,
  namespaces: true,
  onDrop: true,
})
const BUCKET_OPTIONS = optionNames<BucketOptions>({ capacity: true, refillPerSecond: true })
const IDENTITY_EVENTS_OPTIONS = optionNames<BucketOptions & { batch?: number }>({
  capacity: true,
  refillPerSecond: true,
  batch: true,
})

/** Validates every option once, at startup, and freezes the result. */
export function resolveSocketIoOptions(options: ProtectSocketIoOptions = {}): ResolvedSocketIoOptions {
  if (!isOptionsObject(options)) throw invalidOption(owner, 'options', 'an object', options)
  checkOptionKeys(owner, options, OPTIONS)
  checkOptionKeys(owner, options.handshakesPerIp, BUCKET_OPTIONS, 'handshakesPerIp')
  if (options.identify !== undefined && typeof options.identify !== 'function') {
    throw invalidOption(owner, 'identify', 'a function (socket) => identity', options.identify)
  }
  if (options.onDrop !== undefined && typeof options.onDrop !== 'function') {
    throw invalidOption(owner, 'onDrop', 'a function', options.onDrop)
  }
  const handshakes = orDefault(options.handshakesPerIp, { capacity: 20, refillPerSecond: 2 })
  if (handshakes !== false && !isOptionsObject(handshakes)) {
    throw invalidOption(owner, 'handshakesPerIp', '{ capacity, refillPerSecond } or false', handshakes)
  }
  const limits = resolveLimits('', options, DEFAULT_LIMITS)
  return Object.freeze({
    identify: options.identify,
    trustProxy: orDefault(options.trustProxy, false),
    ...resolveIpKeyOptions(options, owner),
    store: options.store,
    failPolicy: oneOf(owner, 'failPolicy', orDefault(options.failPolicy, 'open'), failPolicies),
    name: limiterPrefix(options.name),
    hooks: options.hooks === undefined ? undefined : limiterHooksOption(owner, options.hooks),
    leaseMs: timerMs(owner, 'leaseMs', orDefault(options.leaseMs, 30_000)),
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
    maxPacketBytes:
      options.maxPacketBytes === undefined
        ? undefined
        : positiveInteger(owner, 'maxPacketBytes', options.maxPacketBytes),
    packetsPerSecond: positiveNumber(owner, 'packetsPerSecond', orDefault(options.packetsPerSecond, 200)),
    limits,
    namespaces: resolveNamespaces(options.namespaces, limits),
    onDrop: options.onDrop,
  })
}

const DEFAULT_LIMITS = {
  maxConnectionsPerIdentity: 10,
  eventsPerSecond: 50,
  eventCost: undefined,
  identityEvents: false,
  dropsBeforeDisconnect: 20,
  abuseFactor: 10,
} as const

/**
 * The limits `options` sets, over `base`. `path` is the option's prefix in error messages (`namespaces./admin.`).
 * A burst is derived from the rate of the same level when not given.
 */
function resolveLimits(
  path: string,
  options: SocketIoNamespaceOptions,
  base: Omit<ResolvedNamespaceLimits, 'eventBurst'> & { eventBurst?: number },
): ResolvedNamespaceLimits {
  const eventsPerSecond = positiveNumber(
    owner,
    `${path}eventsPerSecond`,
    orDefault(options.eventsPerSecond, base.eventsPerSecond),
  )
  const burstFallback =
    options.eventsPerSecond !== undefined || base.eventBurst === undefined
      ? Math.ceil(eventsPerSecond)
      : base.eventBurst
  return {
    maxConnectionsPerIdentity: positiveInteger(
      owner,
      `${path}maxConnectionsPerIdentity`,
      orDefault(options.maxConnectionsPerIdentity, base.maxConnectionsPerIdentity),
    ),
    eventsPerSecond,
    eventBurst: positiveInteger(owner, `${path}eventBurst`, orDefault(options.eventBurst, burstFallback)),
    eventCost: resolveEventCost(`${path}eventCost`, orDefault(options.eventCost, base.eventCost)),
    identityEvents:
      options.identityEvents === undefined
        ? base.identityEvents
        : resolveIdentityEvents(`${path}identityEvents`, options.identityEvents),
    dropsBeforeDisconnect: positiveInteger(
      owner,
      `${path}dropsBeforeDisconnect`,
      orDefault(options.dropsBeforeDisconnect, base.dropsBeforeDisconnect),
    ),
    abuseFactor: positiveNumber(
      owner,
      `${path}abuseFactor`,
      orDefault(options.abuseFactor, base.abuseFactor),
    ),
  }
}

/** Each namespace's options: checked in full over the root's, kept only for what the namespace set. */
function resolveNamespaces(
  namespaces: ProtectSocketIoOptions['namespaces'],
  root: ResolvedNamespaceLimits,
): ReadonlyMap<string, Partial<ResolvedNamespaceLimits>> {
  const resolved = new Map<string, Partial<ResolvedNamespaceLimits>>()
  if (namespaces === undefined) return resolved
  if (!isOptionsObject(namespaces)) {
    throw invalidOption(owner, 'namespaces', "an object of namespace options by name ('/admin')", namespaces)
  }
  for (const [name, options] of Object.entries(namespaces)) {
    const path = `namespaces.${name}.`
    if (!name.startsWith('/'))
      throw invalidOption(owner, `namespaces.${name}`, "a name starting with '/'", name)
    if (!isOptionsObject(options)) throw invalidOption(owner, `namespaces.${name}`, 'an object', options)
    checkOptionKeys(owner, options, NAMESPACE_OPTIONS, `namespaces.${name}`)
    const limits = resolveLimits(path, options, root)
    const own: Partial<Record<keyof ResolvedNamespaceLimits, unknown>> = {}
    for (const key of Object.keys(options) as (keyof SocketIoNamespaceOptions)[]) {
      if (options[key] !== undefined) own[key] = limits[key]
    }
    // A rate set here without a burst brings its own burst, not the root's.
    if (options.eventsPerSecond !== undefined) own.eventBurst = limits.eventBurst
    resolved.set(name, own as Partial<ResolvedNamespaceLimits>)
  }
  return resolved
}

function resolveEventCost(option: string, cost: unknown): EventCost | undefined {
  if (cost === undefined || typeof cost === 'function') return cost as EventCost | undefined
  if (!isOptionsObject(cost))
    throw invalidOption(owner, option, 'an object of points by event name, or a function', cost)
  const costs: Record<string, number> = Object.create(null)
  for (const [event, points] of Object.entries(cost)) {
    costs[event] = positiveInteger(owner, `${option}.${event}`, points)
  }
  return Object.freeze(costs)
}

function resolveIdentityEvents(option: string, value: unknown): ResolvedNamespaceLimits['identityEvents'] {
  if (value === false) return false
  if (!isOptionsObject(value))
    throw invalidOption(owner, option, '{ capacity, refillPerSecond, batch? } or false', value)
  checkOptionKeys(owner, value, IDENTITY_EVENTS_OPTIONS, option)
  const { capacity: c, refillPerSecond: r, batch: b } = value as BucketOptions & { batch?: number }
  const capacity = positiveInteger(owner, `${option}.capacity`, c)
  const refillPerSecond = positiveNumber(owner, `${option}.refillPerSecond`, r)
  // About ten draws a second at the full rate: few store calls, few points parked per process.
  const batch = positiveInteger(
    owner,
    `${option}.batch`,
    orDefault(b, Math.min(capacity, Math.max(1, Math.ceil(refillPerSecond / 10)))),
  )
  if (batch > capacity) throw invalidOption(owner, `${option}.batch`, `at most capacity (${capacity})`, batch)
  return { capacity, refillPerSecond, batch }
}

function limiterPrefix(name: unknown): string {
  if (name === undefined) return 'socket.io'
  if (typeof name !== 'string' || name.length === 0 || name.length > 64 || /[{}]/.test(name)) {
    throw invalidOption(owner, 'name', 'a string of 1 to 64 characters without "{" or "}"', name)
  }
  return name
}
