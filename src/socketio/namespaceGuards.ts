import type { Socket } from 'socket.io'
import { type ConcurrencyLimiter, concurrencyLimit } from '../core/limiters/concurrencyLimit.js'
import { tokenBucket } from '../core/limiters/tokenBucket.js'
import { SharedBudget } from '../ws/sharedBudget.js'
import { EventGuard, type EventPacket } from './eventGuard.js'
import type { ResolvedNamespaceLimits, ResolvedSocketIoOptions } from './options.js'
import { connectError, refusal } from './refusals.js'
import { SocketAdmission } from './socketAdmission.js'

/**
 * The limits of the namespaces that share them: one connection pool (leases per identity) and one identity event
 * budget, unless a namespace sets its own.
 */
export class ConnectionPool {
  constructor(
    private readonly options: ResolvedSocketIoOptions,
    readonly limits: ResolvedNamespaceLimits,
    readonly leases: ConcurrencyLimiter,
    readonly budget: SharedBudget | undefined,
  ) {}

  /** Takes a slot for `identity` and guards the socket's events, or the error its client receives as `connect_error`. */
  async admit(socket: Socket, identity: string): Promise<SocketAdmission | (Error & { data: unknown })> {
    const lease = await this.leases.acquire(identity)
    if (!lease.allowed) {
      return connectError(refusal('TOO_MANY_CONNECTIONS', 'Too many connections', lease.retryAfterMs))
    }
    const { budget } = this
    await budget?.join(identity)
    const internals = socket as unknown as SocketInternals
    const guard = new EventGuard(socket, this.limits, budget, identity, this.options.onDrop, (id) =>
      internals.ack.call(socket, id),
    )
    guardEvents(internals, guard)
    return new SocketAdmission(identity, lease, guard, budget)
  }
}

/**
 * Every namespace's pool: those that set no `maxConnectionsPerIdentity` share the server's leases, those that set
 * no `identityEvents` share the server's identity budget (limiter names `<name>-connections`,
 * `<name>-identity-events`); a namespace's own are named `<name><namespace>-…`.
 */
export class NamespaceGuards {
  /** The configured namespaces' pools, by name (a finite list: the `namespaces` option's). */
  private readonly pools = new Map<string, ConnectionPool>()
  private readonly rootLeases: ConcurrencyLimiter
  private readonly rootBudget: SharedBudget | undefined
  private readonly rootPool: ConnectionPool

  constructor(private readonly options: ResolvedSocketIoOptions) {
    this.rootLeases = this.leasesFor(options.name, options.limits)
    this.rootBudget = this.budgetFor(options.name, options.limits)
    this.rootPool = new ConnectionPool(options, options.limits, this.rootLeases, this.rootBudget)
  }

  of(namespace: string): ConnectionPool {
    const own = this.options.namespaces.get(namespace)
    if (own === undefined) return this.rootPool
    const known = this.pools.get(namespace)
    if (known !== undefined) return known
    const limits = { ...this.options.limits, ...own }
    const prefix = `${this.options.name}${namespace}`
    const pool = new ConnectionPool(
      this.options,
      limits,
      own.maxConnectionsPerIdentity === undefined ? this.rootLeases : this.leasesFor(prefix, limits),
      own.identityEvents === undefined ? this.rootBudget : this.budgetFor(prefix, limits),
    )
    this.pools.set(namespace, pool)
    return pool
  }

  private leasesFor(name: string, limits: ResolvedNamespaceLimits): ConcurrencyLimiter {
    const { store, failPolicy, hooks, leaseMs } = this.options
    return concurrencyLimit({
      name: `${name}-connections`,
      max: limits.maxConnectionsPerIdentity,
      leaseMs,
      failPolicy,
      ...(store === undefined ? {} : { store }),
      ...(hooks === undefined ? {} : { hooks }),
    })
  }

  private budgetFor(name: string, limits: ResolvedNamespaceLimits): SharedBudget | undefined {
    if (limits.identityEvents === false) return undefined
    const { capacity, refillPerSecond, batch } = limits.identityEvents
    const { store, failPolicy, hooks } = this.options
    const limiter = tokenBucket({
      name: `${name}-identity-events`,
      capacity,
      refillPerSecond,
      failPolicy,
      ...(store === undefined ? {} : { store }),
      ...(hooks === undefined ? {} : { hooks }),
    })
    return new SharedBudget(limiter, batch)
  }
}

/** The parts of a socket.io `Socket` the guard takes over: where an event packet enters, and its acknowledgement. */
interface SocketInternals {
  onevent(packet: EventPacket): void
  ack(id: number): (response: unknown) => void
}

/**
 * Puts the guard where socket.io takes an event packet in (`onevent`): before `onAny` listeners, which socket.io
 * calls ahead of `socket.use` middlewares, so no listener of the app sees a refused event.
 */
function guardEvents(socket: SocketInternals, guard: EventGuard): void {
  const onevent = socket.onevent
  socket.onevent = (packet: EventPacket) => {
    guard.admit(packet, () => onevent.call(socket, packet))
  }
}
