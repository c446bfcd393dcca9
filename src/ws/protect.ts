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

interface Connection {
  identity: string
  lease: Lease
  readonly guard: MessageGuard
  /** Messages waiting for the identity's shared budget, when `identityMessages` is on. */
  queue: MessageQueue | undefined
  alive: boolean
  released: boolean
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
  const resolved = resolveWebSocketOptions(options)
  const budget = createSharedBudget(resolved)
  const upgrades = new UpgradeGuard(resolved, budget)
  let closed = false
  const connections = new Map<WebSocket, Connection>()

  // ws checks the size from the frame header before reading the payload, and closes with 1009.
  const serverOptions = wss.options as { maxPayload?: number }
  if (serverOptions.maxPayload === undefined || serverOptions.maxPayload > resolved.maxMessageBytes) {
    serverOptions.maxPayload = resolved.maxMessageBytes
  }

  const originalHandleUpgrade = wss.handleUpgrade
  wss.handleUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer, callback: UpgradeCallback) => {
    // Paths this server does not handle and malformed handshakes are ws' business (it answers 400 or 405):
    // nothing is spent on them.
    if (!wss.shouldHandle(req) || !isWebSocketHandshake(req)) {
      // Should ws upgrade one of these all the same (its checks grown laxer than ours), the socket never reaches
      // the app unguarded: it is cut at once.
      return originalHandleUpgrade.call(wss, req, socket, head, (unguarded: WebSocket) =>
        unguarded.terminate(),
      )
    }
    // Node removed its own error listener before 'upgrade' and ws adds one only in handleUpgrade: until then, a
    // client resetting the connection would be an unhandled 'error' that ends the process.
    socket.on('error', () => socket.destroy())
    void upgrades.admit(req, socket, connections.size).then(
      (admission) => {
        if (admission === undefined) return
        if (closed) {
          // The protection was closed while this upgrade was being decided.
          budget?.leave(admission.identity)
          void admission.lease.release()
          refuse(socket, 503, { 'Retry-After': '1' })
          return
        }
        upgrade(admission, req, socket, head, callback)
      },
      () => socket.destroy(),
    )
  }

  function upgrade(
    admission: Admission,
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    cb: UpgradeCallback,
  ) {
    let admitted = false
    // If the client left meanwhile, or ws refuses the handshake itself (bad headers), the callback never runs:
    // give the slot back then.
    socket.once('close', () => {
      if (admitted) return
      void admission.lease.release()
      budget?.leave(admission.identity)
    })
    originalHandleUpgrade.call(wss, req, socket, head, (ws: WebSocket, upgradedReq: IncomingMessage) => {
      admitted = true
      track(ws, admission, socket)
      cb(ws, upgradedReq)
    })
  }

  function track(ws: WebSocket, admission: Admission, raw: Duplex): void {
    const guard = new MessageGuard(ws, resolved)
    guard.inflation = InflateGate.install(
      ws,
      raw,
      guard,
      serverOptions.maxPayload ?? resolved.maxMessageBytes,
      resolved.inflatedBytesPerSecond,
    )
    const connection: Connection = {
      identity: admission.identity,
      lease: admission.lease,
      guard,
      queue: undefined,
      alive: true,
      released: false,
    }
    connections.set(ws, connection)
    guardTraffic(ws, connection)
    // ws reports a protocol error or an oversized message (now likelier: maxPayload may have been lowered) as an
    // 'error' on the socket and closes it (1002, 1007, 1008, 1009). Without a listener that 'error' would throw and
    // end the process; and the client gets the same short grace to finish closing as for our own closes.
    ws.on('error', () => terminateAfterGrace(ws))
    ws.on('pong', () => {
      connection.alive = true
    })
    // Every close path (close handshake, error, terminate(), 1006) ends in 'close': release exactly once there.
    ws.once('close', () => {
      connection.guard.stop()
      connections.delete(ws)
      release(connection)
    })
  }

  /** Interposes on the socket's `emit` (incoming) and `send` (outgoing). */
  function guardTraffic(ws: WebSocket, connection: Connection): void {
    const emit = ws.emit
    const { guard } = connection
    const deliver = (args: unknown[]) => {
      if (ws.readyState === ws.OPEN && guard.admitMessage(args[0])) emit.call(ws, 'message', ...args)
    }
    if (budget !== undefined) {
      connection.queue = new MessageQueue(
        budget,
        () => connection.identity,
        resolved.messageBurst,
        deliver,
        () => guard.drop(0),
      )
    }
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
          // What the 'error' listener of track() does; the app's listeners never see it.
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
      if (connection.queue !== undefined && !connection.queue.offer(args)) return false
      if (!guard.admitMessage(args[0])) return false
      return emit.call(this, event, ...args)
    } as typeof ws.emit
    const send = ws.send
    ws.send = function guardedSend(this: WebSocket, ...args: Parameters<WebSocket['send']>): void {
      connection.guard.observeOutgoing(args[0])
      send.apply(this, args)
      if (ws.bufferedAmount > resolved.maxBufferedBytes) ws.terminate()
    } as typeof ws.send
  }

  function release(connection: Connection): Promise<void> {
    if (connection.released) return Promise.resolve()
    connection.released = true
    budget?.leave(connection.identity)
    return connection.lease.release()
  }

  // One timer for all connections: renew leases well before they expire (a RedisStore batches the renewals).
  const renewTimer = setInterval(
    () => {
      for (const [ws, connection] of connections) {
        void connection.lease.renew().then((held) => {
          if (!held && connections.has(ws)) ws.close(CloseCodes.TRY_AGAIN_LATER, CloseReasons.LEASE_LOST)
        })
      }
    },
    timerDelay(resolved.leaseMs / 3),
  )
  renewTimer.unref()

  // Heartbeat: a peer that did not answer the previous ping is gone; terminate it so its slot is released.
  const heartbeatTimer =
    resolved.heartbeatMs > 0
      ? setInterval(() => {
          for (const [ws, connection] of connections) {
            if (!connection.alive) {
              ws.terminate()
              continue
            }
            connection.alive = false
            ws.ping()
          }
        }, resolved.heartbeatMs)
      : undefined
  heartbeatTimer?.unref()

  return {
    get openConnections() {
      return connections.size
    },
    get pendingUpgrades() {
      return upgrades.pending
    },
    identityOf: (ws) => connections.get(ws)?.identity,
    async rekey(ws, identity) {
      const connection = connections.get(ws)
      if (connection === undefined) {
        throw invalidArgument('rekey', 'socket', 'a socket admitted by this protection', 'another socket')
      }
      // Already counted under this identity: keep the slot it has.
      if (identity === connection.identity) return connection.lease
      const lease = await upgrades.connections.acquire(identity)
      if (!lease.allowed) return lease
      await budget?.join(identity)
      if (!connections.has(ws)) {
        // Closed meanwhile: the new slot must not outlive it.
        budget?.leave(identity)
        await lease.release()
        return lease
      }
      const previous = { identity: connection.identity, lease: connection.lease }
      connection.identity = identity
      connection.lease = lease
      budget?.leave(previous.identity)
      await previous.lease.release()
      return lease
    },
    async close() {
      closed = true
      clearInterval(renewTimer)
      if (heartbeatTimer !== undefined) clearInterval(heartbeatTimer)
      wss.handleUpgrade = originalHandleUpgrade
      const releases: Promise<void>[] = []
      for (const [ws, connection] of connections) {
        connection.guard.stop()
        ws.close(CloseCodes.GOING_AWAY, CloseReasons.GOING_AWAY)
        releases.push(release(connection))
      }
      connections.clear()
      await Promise.all(releases)
    },
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
