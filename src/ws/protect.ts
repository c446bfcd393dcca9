import type { IncomingMessage } from 'node:http'
import type { Duplex } from 'node:stream'
import type { WebSocket, WebSocketServer } from 'ws'
import { invalidArgument, invalidOption } from '../core/errors.js'
import type { Lease } from '../core/limiters/concurrencyLimit.js'
import { tokenBucket } from '../core/limiters/tokenBucket.js'
import { timerDelay } from '../core/validate.js'
import { CloseCodes, CloseReasons } from './closeCodes.js'
import { InflateGate, ReadingStopped } from './inflateGate.js'
import { MessageGuard, terminateAfterGrace } from './messageGuard.js'
import { MessageQueue } from './messageQueue.js'
import {
  type ProtectWebSocketOptions,
  type ResolvedWebSocketOptions,
  resolveWebSocketOptions,
} from './options.js'
import { isProtocolError, withholdsProtocolErrors } from './protocolError.js'
import { SharedBudget } from './sharedBudget.js'
import { type Admission, isWebSocketHandshake, refuse, UpgradeGuard } from './upgradeGuard.js'

/** What `protectWebSocketServer` returns. */
export interface WebSocketProtection {
  /** Open connections admitted by this protection. */
  readonly openConnections: number
  /** Upgrades being decided now. */
  readonly pendingUpgrades: number
  /** The identity a connection is counted under, or `undefined` for a socket this protection did not admit. */
  identityOf(socket: WebSocket): string | undefined
  /**
   * Moves a connection's slot to another identity, e.g. from its IP to the user named in graphql-ws
   * `connection_init`. Resolves the new identity's lease decision: when allowed, the old slot is released; when
   * denied, the connection keeps its old slot and the caller decides (graphql-ws: return `false` from `onConnect`).
   */
  rekey(socket: WebSocket, identity: string): Promise<Lease>
  /** Stops timers, restores the server's `handleUpgrade`, closes admitted sockets with 1001, releases their leases. */
  close(): Promise<void>
}

type UpgradeCallback = (socket: WebSocket, req: IncomingMessage) => void

/**
 * Protects a `ws` WebSocketServer created with `port`, `server` or `noServer` (also under graphql-ws `useServer`):
 * upgrades are admitted or refused before the 101, and admitted connections are limited per message. The app's
 * and graphql-ws' own `connection` and `message` listeners only ever see traffic that passed.
 *
 * It works by wrapping the server's `handleUpgrade` (which ws itself calls in `port`/`server` mode, and the app
 * calls in `noServer` mode) and each admitted socket's `emit`, so no listener order or app change is needed.
 */
export function protectWebSocketServer(
  wss: WebSocketServer,
  options: ProtectWebSocketOptions = {},
): WebSocketProtection {
  if (wss === null || typeof wss !== 'object' || typeof wss.handleUpgrade !== 'function') {
    throw invalidOption('protectWebSocketServer', 'wss', 'a ws WebSocketServer', wss)
  }
  const server = new ProtectedServer(wss, resolveWebSocketOptions(options))
  return {
    get openConnections() {
      return server.connections.size
    },
    get pendingUpgrades() {
      return server.upgrades.pending
    },
    identityOf: (ws) => server.connections.get(ws)?.identity,
    rekey: (ws, identity) => server.rekey(ws, identity),
    close: () => server.close(),
  }
}

/**
 * The server-level half of a protection: the wrapped `handleUpgrade`, the connections it admitted, and the two
 * timers all of them share.
 */
class ProtectedServer {
  readonly budget: SharedBudget | undefined
  readonly upgrades: UpgradeGuard
  readonly connections = new Map<WebSocket, ProtectedConnection>()
  private closed = false
  private readonly originalHandleUpgrade: WebSocketServer['handleUpgrade']
  private readonly renewTimer: NodeJS.Timeout
  private readonly heartbeatTimer: NodeJS.Timeout | undefined

  constructor(
    readonly wss: WebSocketServer,
    readonly resolved: ResolvedWebSocketOptions,
  ) {
    this.budget = createSharedBudget(resolved)
    this.upgrades = new UpgradeGuard(resolved, this.budget)
    lowerMaxPayload(wss, resolved.maxMessageBytes)
    this.originalHandleUpgrade = wss.handleUpgrade
    wss.handleUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer, callback: UpgradeCallback) =>
      this.handleUpgrade(req, socket, head, callback)

    // One timer for all connections: renew leases well before they expire (a RedisStore batches the renewals).
    this.renewTimer = setInterval(() => this.renewLeases(), timerDelay(resolved.leaseMs / 3))
    this.renewTimer.unref()
    this.heartbeatTimer =
      resolved.heartbeatMs > 0 ? setInterval(() => this.heartbeat(), resolved.heartbeatMs) : undefined
    this.heartbeatTimer?.unref()
  }

  /** The size ws enforces on the server's sockets now (perhaps lowered to `maxMessageBytes` here). */
  maxPayload(): number {
    return (this.wss.options as { maxPayload?: number }).maxPayload ?? this.resolved.maxMessageBytes
  }

  private handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, callback: UpgradeCallback): void {
    const { wss } = this
    // Paths this server does not handle and malformed handshakes are ws' business (it answers 400 or 405):
    // nothing is spent on them.
    if (!wss.shouldHandle(req) || !isWebSocketHandshake(req)) {
      // Should ws upgrade one of these all the same (its checks grown laxer than ours), the socket never reaches
      // the app unguarded: it is cut at once.
      this.originalHandleUpgrade.call(wss, req, socket, head, (unguarded: WebSocket) => unguarded.terminate())
      return
    }
    // Node removed its own error listener before 'upgrade' and ws adds one only in handleUpgrade: until then, a
    // client resetting the connection would be an unhandled 'error' that ends the process.
    socket.on('error', () => socket.destroy())
    void this.upgrades.admit(req, socket, this.connections.size).then(
      (admission) => {
        if (admission === undefined) return
        if (this.closed) {
          // The protection was closed while this upgrade was being decided.
          this.budget?.leave(admission.identity)
          void admission.lease.release()
          refuse(socket, 503, { 'Retry-After': '1' })
          return
        }
        this.upgrade(admission, req, socket, head, callback)
      },
      () => socket.destroy(),
    )
  }

  private upgrade(
    admission: Admission,
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    cb: UpgradeCallback,
  ): void {
    let admitted = false
    // If the client left meanwhile, or ws refuses the handshake itself (bad headers), the callback never runs:
    // give the slot back then.
    socket.once('close', () => {
      if (admitted) return
      void admission.lease.release()
      this.budget?.leave(admission.identity)
    })
    this.originalHandleUpgrade.call(
      this.wss,
      req,
      socket,
      head,
      (ws: WebSocket, upgradedReq: IncomingMessage) => {
        admitted = true
        this.track(ws, admission, socket)
        cb(ws, upgradedReq)
      },
    )
  }

  private track(ws: WebSocket, admission: Admission, raw: Duplex): void {
    const connection = new ProtectedConnection(this, ws, admission, raw)
    this.connections.set(ws, connection)
    connection.guardTraffic()
    connection.listen(() => this.connections.delete(ws))
  }

  private renewLeases(): void {
    for (const [ws, connection] of this.connections) {
      void connection.lease.renew().then((held) => {
        if (!held && this.connections.has(ws)) ws.close(CloseCodes.TRY_AGAIN_LATER, CloseReasons.LEASE_LOST)
      })
    }
  }

  private heartbeat(): void {
    for (const connection of this.connections.values()) connection.heartbeat()
  }

  async rekey(ws: WebSocket, identity: string): Promise<Lease> {
    const connection = this.connections.get(ws)
    if (connection === undefined) {
      throw invalidArgument('rekey', 'socket', 'a socket admitted by this protection', 'another socket')
    }
    // Already counted under this identity: keep the slot it has.
    if (identity === connection.identity) return connection.lease
    const lease = await this.upgrades.connectionLeases.acquire(identity)
    if (!lease.allowed) return lease
    await this.budget?.join(identity)
    if (!this.connections.has(ws)) {
      // Closed meanwhile: the new slot must not outlive it.
      this.budget?.leave(identity)
      await lease.release()
      return lease
    }
    await connection.moveTo(identity, lease)
    return lease
  }

  async close(): Promise<void> {
    this.closed = true
    clearInterval(this.renewTimer)
    if (this.heartbeatTimer !== undefined) clearInterval(this.heartbeatTimer)
    this.wss.handleUpgrade = this.originalHandleUpgrade
    const releases: Promise<void>[] = []
    for (const [ws, connection] of this.connections) {
      connection.guard.stop()
      ws.close(CloseCodes.GOING_AWAY, CloseReasons.GOING_AWAY)
      releases.push(connection.release())
    }
    this.connections.clear()
    await Promise.all(releases)
  }
}

/**
 * One admitted socket: the identity and lease it is counted under (both change on `rekey`), its message guard and
 * queue, the heartbeat's answer, and the release of its slot, exactly once whichever way it ends.
 */
class ProtectedConnection {
  identity: string
  lease: Lease
  readonly guard: MessageGuard
  /** Whether the peer answered the heartbeat's last ping. */
  alive = true
  private released = false

  constructor(
    private readonly server: ProtectedServer,
    private readonly ws: WebSocket,
    admission: Admission,
    raw: Duplex,
  ) {
    const { resolved } = server
    this.guard = new MessageGuard(ws, resolved)
    this.guard.inflation = InflateGate.install(
      ws,
      raw,
      this.guard,
      server.maxPayload(),
      resolved.inflatedBytesPerSecond,
    )
    this.identity = admission.identity
    this.lease = admission.lease
  }

  /** Interposes on the socket's `emit` (incoming) and `send` (outgoing). */
  guardTraffic(): void {
    this.guardIncoming()
    this.guardOutgoing()
  }

  /** `forget` takes the socket out of the server's connections once it has closed. */
  listen(forget: () => void): void {
    const { ws } = this
    // ws reports a protocol error or an oversized message (now likelier: maxPayload may have been lowered) as an
    // 'error' on the socket and closes it (1002, 1007, 1008, 1009). Without a listener that 'error' would throw and
    // end the process; and the client gets the same short grace to finish closing as for our own closes.
    ws.on('error', () => terminateAfterGrace(ws))
    ws.on('pong', () => {
      this.alive = true
    })
    // Every close path (close handshake, error, terminate(), 1006) ends in 'close': release exactly once there.
    ws.once('close', () => {
      this.guard.stop()
      forget()
      void this.release()
    })
  }

  /**
   * The socket's `emit`, guarded: the per-message path. What it reads is bound once per socket here, so a message
   * brings no allocation of its own.
   */
  private guardIncoming(): void {
    const { ws, guard } = this
    const { resolved, wss, budget } = this.server
    const emit = ws.emit
    const deliver = (args: unknown[]) => {
      if (ws.readyState === ws.OPEN && guard.admitMessage(args[0])) emit.call(ws, 'message', ...args)
    }
    // Messages waiting for the identity's shared budget, when `identityMessages` is on.
    const queue =
      budget === undefined
        ? undefined
        : new MessageQueue(
            budget,
            () => this.identity,
            resolved.messageBurst,
            deliver,
            () => guard.drop(0),
          )
    ws.emit = function guardedEmit(this: WebSocket, event: string | symbol, ...args: unknown[]): boolean {
      // Our own end of the receiver, for a socket the guard is closing: not the app's error.
      if (event === 'error' && args[0] instanceof ReadingStopped) return true
      if (event === 'error' && isProtocolError(args[0])) {
        try {
          resolved.onProtocolError?.(ws, args[0])
        } catch {
          // A broken counting callback must not break the socket's handling.
        }
        if (withholdsProtocolErrors(ws, wss)) {
          // What the 'error' listener of listen() does; the app's listeners never see it.
          terminateAfterGrace(ws)
          return true
        }
      }
      if (event !== 'message' && event !== 'ping') return emit.call(this, event, ...args)
      if (ws.bufferedAmount > resolved.maxBufferedBytes) {
        // A client that sends but does not read (pongs pile up): end it before it grows our memory.
        ws.terminate()
        return false
      }
      if (!guard.admitRate()) return false
      if (event === 'ping') return emit.call(this, event, ...args)
      if (queue !== undefined && !queue.offer(args)) return false
      if (!guard.admitMessage(args[0])) return false
      return emit.call(this, event, ...args)
    } as typeof ws.emit
  }

  private guardOutgoing(): void {
    const { ws, guard } = this
    const { resolved } = this.server
    const send = ws.send
    ws.send = function guardedSend(this: WebSocket, ...args: Parameters<WebSocket['send']>): void {
      guard.observeOutgoing(args[0])
      send.apply(this, args)
      if (ws.bufferedAmount > resolved.maxBufferedBytes) ws.terminate()
    } as typeof ws.send
  }

  /** Heartbeat: a peer that did not answer the previous ping is gone; terminate it so its slot is released. */
  heartbeat(): void {
    if (!this.alive) {
      this.ws.terminate()
      return
    }
    this.alive = false
    this.ws.ping()
  }

  /** Counts the connection under `identity` on `lease` from now on, and gives back the slot it held. */
  async moveTo(identity: string, lease: Lease): Promise<void> {
    const previous = { identity: this.identity, lease: this.lease }
    this.identity = identity
    this.lease = lease
    this.server.budget?.leave(previous.identity)
    await previous.lease.release()
  }

  /** Gives back the slot (and the shared budget's share) the connection holds now: once, whichever path comes first. */
  release(): Promise<void> {
    if (this.released) return Promise.resolve()
    this.released = true
    this.server.budget?.leave(this.identity)
    return this.lease.release()
  }
}

/** ws checks the size from the frame header before reading the payload, and closes with 1009. */
function lowerMaxPayload(wss: WebSocketServer, maxMessageBytes: number): void {
  const serverOptions = wss.options as { maxPayload?: number }
  if (serverOptions.maxPayload === undefined || serverOptions.maxPayload > maxMessageBytes) {
    serverOptions.maxPayload = maxMessageBytes
  }
}

/** The identity-wide message budget shared through the store, when `identityMessages` is set. */
function createSharedBudget(options: ResolvedWebSocketOptions): SharedBudget | undefined {
  if (options.identityMessages === false) return undefined
  const { capacity, refillPerSecond, batch } = options.identityMessages
  const limiter = tokenBucket({
    name: `${options.name}-identity-messages`,
    capacity,
    refillPerSecond,
    failPolicy: options.failPolicy,
    ...(options.store === undefined ? {} : { store: options.store }),
    ...(options.hooks === undefined ? {} : { hooks: options.hooks }),
  })
  return new SharedBudget(limiter, batch)
}
