/**
 * Real Socket.IO servers and clients on 127.0.0.1 for the tollbooth/socket.io tests: a protected server on a free
 * port that records what its handlers received, and socket.io-client sockets on a chosen transport that resolve
 * once connected or refused.
 */
import { createServer, type Server as HttpServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Server, type ServerOptions, type Socket } from 'socket.io'
import { type Socket as ClientSocket, io as connectClient } from 'socket.io-client'
import type { ProtectSocketIoOptions } from '../../src/socketio/index.js'
import { protectSocketIo, type SocketIoProtection } from '../../src/socketio/index.js'

export type Transport = 'websocket' | 'polling'
export const transports: Transport[] = ['websocket', 'polling']

export interface ProtectedSocketIo {
  readonly io: Server
  readonly http: HttpServer
  readonly protection: SocketIoProtection
  readonly url: string
  readonly port: number
  /** Events the app's handlers received, by namespace then event name. */
  readonly delivered: Map<string, Map<string, number>>
  /** Server-side sockets in the order they connected. */
  readonly sockets: Socket[]
  deliveredCount(namespace: string, event: string): number
  close(): Promise<void>
}

/**
 * A Socket.IO server with `protectSocketIo(io, options)`, namespaces `/` (and any in `namespaces`) whose handlers
 * count every event and answer an acknowledgement with `{ ok: true }`.
 */
export async function startProtectedSocketIo(
  options: ProtectSocketIoOptions = {},
  {
    namespaces = [],
    serverOptions = {},
    protect = true,
  }: {
    namespaces?: string[]
    serverOptions?: Partial<ServerOptions>
    protect?: boolean
  } = {},
): Promise<ProtectedSocketIo> {
  const http = createServer()
  const io = new Server(http, serverOptions)
  const protection = protect ? protectSocketIo(io, options) : unprotected()
  const delivered = new Map<string, Map<string, number>>()
  const sockets: Socket[] = []
  for (const name of ['/', ...namespaces]) {
    const counts = new Map<string, number>()
    delivered.set(name, counts)
    io.of(name).on('connection', (socket) => {
      sockets.push(socket)
      socket.onAny((event: string, ...args: unknown[]) => {
        counts.set(event, (counts.get(event) ?? 0) + 1)
        const ack = args[args.length - 1]
        if (typeof ack === 'function') ack({ ok: true })
      })
    })
  }
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  const port = (http.address() as AddressInfo).port
  return {
    io,
    http,
    protection,
    url: `http://127.0.0.1:${port}`,
    port,
    delivered,
    sockets,
    deliveredCount: (namespace, event) => delivered.get(namespace)?.get(event) ?? 0,
    close: async () => {
      await protection.close()
      await new Promise<void>((resolve) => io.close(() => resolve()))
    },
  }
}

function unprotected(): SocketIoProtection {
  return {
    openConnections: 0,
    pendingUpgrades: 0,
    identityOf: () => undefined,
    close: async () => {},
  }
}

export interface ConnectOptions {
  transport: Transport
  namespace?: string
  auth?: Record<string, unknown>
  /** Passed to socket.io-client as is. */
  extra?: Record<string, unknown>
}

/** The outcome of a connection attempt: the socket, and the `connect_error` if it was refused. */
export interface Attempt {
  readonly socket: ClientSocket
  readonly error: (Error & { data?: unknown; description?: unknown; context?: unknown }) | undefined
}

/** Connects one client (no reconnection, a new engine.io connection each) and waits for connect or connect_error. */
export async function attempt(url: string, options: ConnectOptions): Promise<Attempt> {
  const socket = connectClient(`${url}${options.namespace ?? '/'}`, {
    transports: [options.transport],
    reconnection: false,
    forceNew: true,
    ...(options.auth === undefined ? {} : { auth: options.auth }),
    ...options.extra,
  })
  const error = await new Promise<Attempt['error']>((resolve) => {
    socket.once('connect', () => resolve(undefined))
    socket.once('connect_error', (err) => resolve(err as Attempt['error']))
  })
  return { socket, error }
}

/** Connects and fails the test unless connected. */
export async function connected(url: string, options: ConnectOptions): Promise<ClientSocket> {
  const { socket, error } = await attempt(url, options)
  if (error !== undefined) {
    socket.close()
    throw new Error(`connection refused: ${error.message} ${JSON.stringify(error.data ?? error.description)}`)
  }
  return socket
}

/** Sends `event` with an acknowledgement and resolves with its first argument. */
export function emitWithAck(socket: ClientSocket, event: string, ...args: unknown[]): Promise<unknown> {
  return new Promise((resolve) => socket.emit(event, ...args, (response: unknown) => resolve(response)))
}

/** Resolves when the client socket disconnects, with its reason. */
export function disconnected(socket: ClientSocket): Promise<string> {
  return new Promise((resolve) => {
    if (!socket.connected && !socket.active) resolve('already')
    socket.once('disconnect', (reason) => resolve(reason))
  })
}

/** Resolves once `predicate` holds, checked after each event of the server (connections and disconnects). */
export async function until(predicate: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

/** `identify` of the tests: the user named in the handshake's `auth`. */
export const byUser = {
  identify: (socket: { handshake: { auth: Record<string, unknown> } }) => String(socket.handshake.auth.user),
}

/** The refusal code of an acknowledgement's answer, or `undefined` for an answer of the app's. */
export const refusedCode = (response: unknown): string | undefined =>
  (response as { error?: { code?: string } }).error?.code
