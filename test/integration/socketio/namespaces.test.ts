/**
 * tollbooth/socket.io's options per namespace: an admin namespace tighter than the public one, one identity budget
 * shared across namespaces or separate as configured, and dynamic namespaces guarded like the others.
 */

import type { Socket as ClientSocket } from 'socket.io-client'
import { afterEach, describe, expect, it } from 'vitest'
import {
  attempt,
  byUser,
  connected,
  emitWithAck,
  type ProtectedSocketIo,
  refusedCode,
  startProtectedSocketIo,
  transports,
} from '../../helpers/socketIo.js'

const servers: ProtectedSocketIo[] = []
const clients: ClientSocket[] = []
afterEach(async () => {
  for (const client of clients.splice(0)) client.close()
  await Promise.all(servers.splice(0).map((server) => server.close()))
})

const { identify } = byUser

async function join(
  s: ProtectedSocketIo,
  namespace: string,
  transport: 'websocket' | 'polling',
  user = 'ann',
) {
  const socket = await connected(s.url, { transport, namespace, auth: { user } })
  clients.push(socket)
  return socket
}

async function delivered(socket: ClientSocket, event: string, count: number): Promise<number> {
  const acks = await Promise.all(Array.from({ length: count }, () => emitWithAck(socket, event)))
  return acks.filter((ack) => refusedCode(ack) === undefined).length
}

describe.each(transports)('namespaces (%s)', (transport) => {
  it('the admin namespace has its own, tighter connection cap and event rate', async () => {
    const s = await startProtectedSocketIo(
      {
        identify,
        handshakesPerIp: false,
        maxConnectionsPerIdentity: 5,
        eventsPerSecond: 0.01,
        eventBurst: 10,
        dropsBeforeDisconnect: 100,
        namespaces: { '/admin': { maxConnectionsPerIdentity: 1, eventsPerSecond: 0.01, eventBurst: 2 } },
      },
      { namespaces: ['/admin'] },
    )
    servers.push(s)
    const admin = await join(s, '/admin', transport)
    const second = await attempt(s.url, { transport, namespace: '/admin', auth: { user: 'ann' } })
    clients.push(second.socket)
    expect(second.error?.data).toMatchObject({ code: 'TOO_MANY_CONNECTIONS' })
    // The public namespace's pool is another one: ann still has 5 slots there.
    const publics = []
    for (let i = 0; i < 5; i++) publics.push(await join(s, '/', transport))
    expect(await delivered(admin, 'purge', 5)).toBe(2)
    expect(await delivered(publics[0] as ClientSocket, 'chat', 12)).toBe(10)
  })

  it('namespaces without identityEvents of their own share the identity budget; one with its own is apart', async () => {
    const s = await startProtectedSocketIo(
      {
        identify,
        handshakesPerIp: false,
        eventsPerSecond: 1000,
        identityEvents: { capacity: 12, refillPerSecond: 0.001, batch: 1 },
        dropsBeforeDisconnect: 1000,
        namespaces: {
          '/admin': { identityEvents: { capacity: 3, refillPerSecond: 0.001, batch: 1 } },
          '/chat': { eventsPerSecond: 500 },
        },
      },
      { namespaces: ['/admin', '/chat'] },
    )
    servers.push(s)
    const root = await join(s, '/', transport)
    const chat = await join(s, '/chat', transport)
    const admin = await join(s, '/admin', transport)
    // '/' and '/chat' draw from one budget of 12; '/admin' from its own 3.
    const fromRoot = await delivered(root, 'a', 8)
    const fromChat = await delivered(chat, 'b', 8)
    expect(fromRoot + fromChat).toBe(12)
    expect(fromRoot).toBe(8)
    expect(await delivered(admin, 'c', 5)).toBe(3)
  })

  it('guards the children of a dynamic namespace', async () => {
    const s = await startProtectedSocketIo({ identify, handshakesPerIp: false, maxConnectionsPerIdentity: 1 })
    servers.push(s)
    s.io.of(/^\/room-\d+$/).on('connection', () => {})
    await join(s, '/room-1', transport)
    const second = await attempt(s.url, { transport, namespace: '/room-2', auth: { user: 'ann' } })
    clients.push(second.socket)
    // Children share the server's pool: ann's one slot is taken by /room-1.
    expect(second.error?.data).toMatchObject({ code: 'TOO_MANY_CONNECTIONS' })
  })
})

describe('namespace options are checked at startup', () => {
  it('names the option of a namespace that is misspelt', async () => {
    const { resolveSocketIoOptions } = await import('../../../src/socketio/options.js')
    expect(() =>
      resolveSocketIoOptions({ namespaces: { '/admin': { eventsPerSecnd: 2 } as never } }),
    ).toThrow(/namespaces\.\/admin.*eventsPerSecnd/)
    expect(() => resolveSocketIoOptions({ namespaces: { admin: {} } })).toThrow(/namespaces\.admin/)
  })
})
