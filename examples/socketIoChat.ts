/**
 * The example's chat over Socket.IO, at /socket.io/ on the same port: `chat:message` events (text) in, `message`
 * events out, protected by tollbooth/socket.io with the server's store, hooks and trusted proxies.
 */
import type { Server as HttpServer, IncomingMessage } from 'node:http'
import { Server } from 'socket.io'
import type { FailPolicy, LimiterHooks, Store, TrustProxy } from '../src/index.js'
import { protectSocketIo, type SocketIoProtection } from '../src/socketio/index.js'
import type { Chat, DemoUser } from './demo-api.js'

export interface SocketIoChatSetup {
  server: HttpServer
  store: Store
  hooks: LimiterHooks
  trustProxy: TrustProxy
  leaseMs: number
  chat: Chat
  /** The demo user of `auth.token`, if any. */
  userByToken: (token: string) => DemoUser | undefined
  /** Who a client without a token is: its network, as the other endpoints count it. */
  anonymousIdentity: (req: IncomingMessage) => string
  onDrop: () => void
}

export const socketIoLimits = {
  maxConnectionsPerIdentity: 2,
  eventsPerSecond: 5,
  eventBurst: 10,
  maxPacketBytes: 4096,
}
export const socketIoPolicy: FailPolicy = 'local'

export function attachSocketIoChat(setup: SocketIoChatSetup): { io: Server; protection: SocketIoProtection } {
  const io = new Server(setup.server)
  const protection = protectSocketIo(io, {
    store: setup.store,
    hooks: setup.hooks,
    trustProxy: setup.trustProxy,
    leaseMs: setup.leaseMs,
    failPolicy: socketIoPolicy,
    // `auth: { token }` names the user; an unknown token is refused (connect_error UNAUTHORIZED).
    identify: (socket) => {
      const token = socket.handshake.auth.token
      if (token === undefined) return setup.anonymousIdentity(socket.request)
      const user = typeof token === 'string' ? setup.userByToken(token) : undefined
      if (user === undefined) throw new Error('unknown token')
      return `user:${user.id}`
    },
    ...socketIoLimits,
    onDrop: setup.onDrop,
  })
  io.on('connection', (socket) => {
    const identity = protection.identityOf(socket) ?? ''
    const name = identity.startsWith('user:') ? identity.slice(5) : 'guest'
    socket.on('chat:message', (text: unknown, ack?: (answer: unknown) => void) => {
      if (typeof text === 'string' && text.trim().length > 0) setup.chat.post(name, text.trim())
      if (typeof ack === 'function') ack({ ok: true })
    })
  })
  setup.chat.onMessage((message) => io.emit('message', message))
  return { io, protection }
}
