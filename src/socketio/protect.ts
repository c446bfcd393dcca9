import type { IncomingMessage } from 'node:http'
import type { Namespace, Server, Socket } from 'socket.io'
import { SOCKET_IO_DISCONNECT_EVENT } from '../client/socketIoRefusals.js'
import { invalidArgument, invalidOption } from '../core/errors.js'
import { timerDelay } from '../core/validate.js'
import { HandshakeGuard } from './handshakeGuard.js'
import { type ConnectionPool, NamespaceGuards } from './namespaceGuards.js'
import {
  type ProtectSocketIoOptions,
  type ResolvedSocketIoOptions,
  resolveSocketIoOptions,
} from './options.js'
import { type EngineConnection, PacketGate } from './packetGate.js'
import { connectError, refusal } from './refusals.js'
import type { SocketAdmission } from './socketAdmission.js'

/** What `protectSocketIo` returns. */
export interface SocketIoProtection {
  /** Sockets (one per namespace a client joined) admitted by this protection and still connected. */
  readonly openConnections: number
  /** Handshakes and namespace connections being decided now. */
  readonly pendingUpgrades: number
  /** The identity a socket is counted under, or `undefined` for one this protection did not admit. */
  identityOf(socket: Socket): string | undefined
  /**
   * Stops the timers, takes tollbooth's middlewares out, and disconnects admitted sockets (telling them
   * `UNAVAILABLE`), releasing their slots.
   */
  close(): Promise<void>
}

type Run = (socket: Socket, done: (err?: Error & { data?: unknown }) => void) => void

/**
 * Protects a Socket.IO 4 server attached to an HTTP server: engine.io handshakes are refused per client address
 * before any session (HTTP 429 with `Retry-After`, on polling and WebSocket alike); each namespace connection holds
 * a crash-safe lease per identity, taken before the app's own middlewares run and released once whichever way the
 * socket ends; every event pays its cost from the socket's budget (and the identity's, across instances) before any
 * handler sees it; packets are capped in size and rate before they are decoded.
 *
 * Connection state recovery's `skipMiddlewares` is turned off: a recovered connection is admitted like a new one,
 * or reconnecting would skip every limit.
 */
export function protectSocketIo(io: Server, options: ProtectSocketIoOptions = {}): SocketIoProtection {
  if (io === null || typeof io !== 'object' || typeof io.of !== 'function' || !(io._nsps instanceof Map)) {
    throw invalidOption('protectSocketIo', 'io', 'a socket.io Server', io)
  }
  if (io.engine === undefined) {
    throw invalidArgument(
      'protectSocketIo',
      'io',
      'a Server attached to an HTTP server (new Server(httpServer) or io.attach(httpServer))',
      'a Server not attached yet',
    )
  }
  const server = new ProtectedServer(io, resolveSocketIoOptions(options))
  return {
    get openConnections() {
      return server.admitted.size
    },
    get pendingUpgrades() {
      return server.handshakes.pending + server.pendingConnects
    },
    identityOf: (socket) => server.admissions.get(socket)?.identity,
    close: () => server.close(),
  }
}

class ProtectedServer {
  readonly handshakes: HandshakeGuard
  /** Connected sockets and their slots, until they disconnect. */
  readonly admitted = new Map<Socket, SocketAdmission>()
  /** Every socket admitted, from its admission on: the app's `connection` handler already asks `identityOf`. */
  readonly admissions = new WeakMap<Socket, SocketAdmission>()
  pendingConnects = 0
  private readonly guards: NamespaceGuards
  /** socket.io's own `run` of each namespace guarded (weakly: a dynamic namespace's children come and go). */
  private readonly runs = new WeakMap<Namespace, Run>()
  /** Engine.io connections whose one free namespace connection is used: the next ones pay a handshake token. */
  private readonly connected = new WeakSet<EngineConnection>()
  private readonly maxPacketBytes: number
  private readonly renewTimer: NodeJS.Timeout
  private readonly onEngineConnection = (conn: EngineConnection) => {
    this.handshakes.settle(conn.request)
    new PacketGate(conn, this.maxPacketBytes, this.resolved.packetsPerSecond).install()
  }
  private readonly onEngineRefusal = ({ req }: { req: IncomingMessage }) => this.handshakes.settle(req)
  private readonly onNewNamespace = (nsp: Namespace) => this.guardNamespace(nsp)

  constructor(
    readonly io: Server,
    readonly resolved: ResolvedSocketIoOptions,
  ) {
    this.handshakes = new HandshakeGuard(resolved, () => io.engine.clientsCount)
    this.guards = new NamespaceGuards(resolved)
    this.maxPacketBytes = alignPacketSize(io, resolved.maxPacketBytes)
    turnOffRecoverySkip(io)
    io.engine.use(this.handshakes.middleware)
    io.engine.on('connection', this.onEngineConnection)
    io.engine.on('connection_error', this.onEngineRefusal)
    for (const nsp of io._nsps.values()) this.guardNamespace(nsp)
    io.on('new_namespace', this.onNewNamespace)
    // One timer for all sockets: renew leases well before they expire (a RedisStore batches the renewals).
    this.renewTimer = setInterval(() => this.renewLeases(), timerDelay(resolved.leaseMs / 3))
    this.renewTimer.unref()
  }

  /** Puts the admission in front of every middleware of `nsp`, the app's included, whenever they were added. */
  private guardNamespace(nsp: Namespace): void {
    if (this.runs.has(nsp)) return
    const guard = this.guards.of(nsp.name)
    const run = (nsp as unknown as { run: Run }).run
    this.runs.set(nsp, run)
    ;(nsp as unknown as { run: Run }).run = (socket, done) => {
      this.pendingConnects++
      this.admit(socket, guard).then(
        (admission) => {
          this.pendingConnects--
          if (admission instanceof Error) {
            done(admission)
            return
          }
          this.admissions.set(socket, admission)
          run.call(nsp, socket, (err) => {
            done(err)
            // socket.io connects the socket (or drops it, its client gone) on the tick `done` scheduled: this one
            // comes after it, and gives the slot back unless the socket is connected.
            process.nextTick(() => this.settle(socket, admission, err === undefined || err === null))
          })
        },
        () => {
          this.pendingConnects--
          done(connectError(refusal('UNAVAILABLE', 'Unavailable', 1000)))
        },
      )
    }
  }

  /** Admits `socket` to its namespace, or the error its client receives as `connect_error`. */
  private async admit(
    socket: Socket,
    guard: ConnectionPool,
  ): Promise<SocketAdmission | (Error & { data: unknown })> {
    const conn = socket.conn
    if (this.connected.has(conn)) {
      // A namespace connection beyond the first on one engine.io connection is a handshake of its own: a client
      // cannot connect and disconnect in a loop on one connection for free.
      const handshake = await this.handshakes.spend(socket.request)
      if (!handshake.allowed) {
        return connectError(refusal('RATE_LIMITED', 'Too many connections', handshake.retryAfterMs))
      }
    }
    this.connected.add(conn)
    let identity: string
    try {
      identity =
        this.resolved.identify === undefined
          ? this.handshakes.addressOf(socket.request)
          : await this.resolved.identify(socket)
    } catch {
      return connectError(refusal('UNAUTHORIZED', 'Unauthorized'))
    }
    if (typeof identity !== 'string' || identity.length === 0) {
      return connectError(refusal('UNAUTHORIZED', 'Unauthorized'))
    }
    return guard.admit(socket, identity)
  }

  /** After the app's middlewares: a connected socket is tracked until it disconnects, any other gives its slot back. */
  private settle(socket: Socket, admission: SocketAdmission, passed: boolean): void {
    if (!passed || !socket.connected || this.closing) {
      void admission.release()
      if (this.closing && socket.connected) socket.disconnect(true)
      return
    }
    this.admitted.set(socket, admission)
    // Every way a connected socket ends (client or server disconnect, transport error or close, ping timeout)
    // emits 'disconnect' once.
    socket.once('disconnect', () => {
      this.admitted.delete(socket)
      void admission.release()
    })
  }

  private renewLeases(): void {
    for (const [socket, admission] of this.admitted) {
      if (!socket.connected) {
        // Its 'disconnect' listener was removed by the app: the slot is given back here.
        this.admitted.delete(socket)
        void admission.release()
        continue
      }
      void admission.lease.renew().then((held) => {
        if (held || !this.admitted.has(socket)) return
        admission.guard.stop()
        socket.emit(SOCKET_IO_DISCONNECT_EVENT, refusal('LEASE_LOST', 'Connection slot lost', 1000))
        socket.disconnect()
      })
    }
  }

  private closing = false

  async close(): Promise<void> {
    this.closing = true
    this.handshakes.closed = true
    clearInterval(this.renewTimer)
    this.io.engine.off('connection', this.onEngineConnection)
    this.io.engine.off('connection_error', this.onEngineRefusal)
    this.io.off('new_namespace', this.onNewNamespace)
    for (const nsp of this.io._nsps.values()) {
      const run = this.runs.get(nsp)
      if (run !== undefined) (nsp as unknown as { run: Run }).run = run
    }
    const middlewares = (this.io.engine as unknown as { middlewares: unknown[] }).middlewares
    const at = middlewares.indexOf(this.handshakes.middleware)
    if (at !== -1) middlewares.splice(at, 1)
    const releases: Promise<void>[] = []
    for (const [socket, admission] of this.admitted) {
      admission.guard.stop()
      socket.emit(SOCKET_IO_DISCONNECT_EVENT, refusal('UNAVAILABLE', 'Server shutting down', 1000))
      socket.disconnect(true)
      releases.push(admission.release())
    }
    this.admitted.clear()
    await Promise.all(releases)
  }
}

/**
 * The packet cap: `maxPacketBytes`, or the server's `maxHttpBufferSize` when not given; engine.io's own cap (each
 * polling request and WebSocket message) is lowered to it, for the connections made from now on.
 */
function alignPacketSize(io: Server, maxPacketBytes: number | undefined): number {
  const engine = io.engine as unknown as {
    opts: { maxHttpBufferSize?: number }
    ws?: { options?: { maxPayload?: number } }
  }
  const engineMax = engine.opts.maxHttpBufferSize ?? 1e6
  const max = maxPacketBytes ?? engineMax
  if (engineMax > max) {
    engine.opts.maxHttpBufferSize = max
    // ws took its maxPayload from maxHttpBufferSize when engine.io created it; it reads it again per upgrade.
    if (engine.ws?.options !== undefined) engine.ws.options.maxPayload = max
  }
  return max
}

/** A recovered connection goes through the middlewares like a new one (socket.io skips them by default). */
function turnOffRecoverySkip(io: Server): void {
  const recovery = io._opts.connectionStateRecovery as { skipMiddlewares?: boolean } | undefined
  if (recovery !== undefined) recovery.skipMiddlewares = false
}
