/**
 * tollbooth/socket.io per event, with real socket.io-client clients on 127.0.0.1 on both transports: events past
 * their rate or cost not delivered (not even to `onAny`), their acknowledgements carrying the refusal; graduated
 * disconnects; packets over their size, attachments included, and packet floods closing the connection.
 */

import type { Socket as ClientSocket } from 'socket.io-client'
import { afterEach, describe, expect, it } from 'vitest'
import { SOCKET_IO_DISCONNECT_EVENT } from '../../../src/socketio/index.js'
import {
  connected,
  disconnected,
  emitWithAck,
  type ProtectedSocketIo,
  refusedCode,
  startProtectedSocketIo,
  transports,
  until,
} from '../../helpers/socketIo.js'

const servers: ProtectedSocketIo[] = []
const clients: ClientSocket[] = []
afterEach(async () => {
  for (const client of clients.splice(0)) client.close()
  await Promise.all(servers.splice(0).map((server) => server.close()))
})

async function setup(
  options: Parameters<typeof startProtectedSocketIo>[0],
  transport: 'websocket' | 'polling',
): Promise<{ s: ProtectedSocketIo; client: ClientSocket }> {
  const s = await startProtectedSocketIo({ handshakesPerIp: false, ...options })
  servers.push(s)
  const client = await connected(s.url, { transport })
  clients.push(client)
  return { s, client }
}

/** Sends `count` events with acknowledgements at once and resolves with every acknowledgement's first argument. */
function burst(client: ClientSocket, event: string, count: number, ...args: unknown[]): Promise<unknown[]> {
  return Promise.all(Array.from({ length: count }, () => emitWithAck(client, event, ...args)))
}

describe.each(transports)('events (%s)', (transport) => {
  it('delivers the burst and refuses the rest with RATE_LIMITED and retryAfter; onAny sees only what passed', async () => {
    const { s, client } = await setup(
      { eventsPerSecond: 0.01, eventBurst: 5, dropsBeforeDisconnect: 100 },
      transport,
    )
    let seenByOnAny = 0
    s.sockets[0]?.onAny(() => {
      seenByOnAny++
    })
    const acks = await burst(client, 'chat:message', 8, 'hello')
    expect(acks.filter((ack) => (ack as { ok?: boolean }).ok === true)).toHaveLength(5)
    const refused = acks.filter((ack) => refusedCode(ack) === 'RATE_LIMITED')
    expect(refused).toHaveLength(3)
    // 1 point per 100 s: the next one is due in about 100 s.
    expect((refused[0] as { error: { retryAfter: number } }).error.retryAfter).toBeGreaterThanOrEqual(99)
    expect(s.deliveredCount('/', 'chat:message')).toBe(5)
    expect(seenByOnAny).toBe(5)
  })

  it('charges each event its cost from a map: an export worth 20, a chat message worth 1', async () => {
    const { s, client } = await setup(
      { eventsPerSecond: 0.01, eventBurst: 45, eventCost: { export: 20 }, dropsBeforeDisconnect: 100 },
      transport,
    )
    const exports = await burst(client, 'export', 3)
    expect(exports.map(refusedCode)).toEqual([undefined, undefined, 'RATE_LIMITED'])
    // 45 − 40 = 5 points left: five messages of 1, then none.
    const messages = await burst(client, 'chat:message', 7)
    expect(messages.filter((ack) => refusedCode(ack) === undefined)).toHaveLength(5)
    expect(s.deliveredCount('/', 'export')).toBe(2)
    expect(s.deliveredCount('/', 'chat:message')).toBe(5)
  })

  it('prices with a function of the event and its arguments, and refuses what can never pass', async () => {
    const costs: unknown[][] = []
    const { s, client } = await setup(
      {
        eventsPerSecond: 0.01,
        eventBurst: 10,
        dropsBeforeDisconnect: 100,
        eventCost: (event, args) => {
          costs.push([event, ...args])
          if (event === 'broken') throw new Error('cannot price')
          return event === 'rows' ? (args[0] as { count: number }).count : 1
        },
      },
      transport,
    )
    expect(refusedCode(await emitWithAck(client, 'rows', { count: 11 }))).toBe('EVENT_TOO_COSTLY')
    expect(refusedCode(await emitWithAck(client, 'broken'))).toBe('EVENT_REFUSED')
    expect(refusedCode(await emitWithAck(client, 'rows', { count: 6 }))).toBeUndefined()
    expect(refusedCode(await emitWithAck(client, 'rows', { count: 6 }))).toBe('RATE_LIMITED')
    expect(s.deliveredCount('/', 'rows')).toBe(1)
    expect(s.deliveredCount('/', 'broken')).toBe(0)
    // The function sees the arguments without the acknowledgement.
    expect(costs[0]).toEqual(['rows', { count: 11 }])
  })

  it('an event its cost function prices at 0 costs 1, as the least a map can say', async () => {
    const { s, client } = await setup(
      { eventsPerSecond: 0.01, eventBurst: 3, dropsBeforeDisconnect: 100, eventCost: () => 0 },
      transport,
    )
    const acks = await burst(client, 'free', 5)
    expect(acks.map(refusedCode)).toEqual([undefined, undefined, undefined, 'RATE_LIMITED', 'RATE_LIMITED'])
    expect(s.deliveredCount('/', 'free')).toBe(3)
  })

  it('an async cost function is no price: its events are refused, and its rejections never reach the process', async () => {
    const { s, client } = await setup(
      // What a JavaScript caller (or a cast) can pass in spite of the types.
      { dropsBeforeDisconnect: 100, eventCost: (async () => Promise.reject(new Error('too late'))) as never },
      transport,
    )
    const acks = await burst(client, 'export', 3)
    expect(acks.map(refusedCode)).toEqual(['EVENT_REFUSED', 'EVENT_REFUSED', 'EVENT_REFUSED'])
    expect(s.deliveredCount('/', 'export')).toBe(0)
  })

  it('events without an acknowledgement are refused the same way, and onDrop hears every refusal', async () => {
    const drops: { event: string; code: string }[] = []
    const { s, client } = await setup(
      {
        eventsPerSecond: 0.01,
        eventBurst: 3,
        dropsBeforeDisconnect: 100,
        onDrop: (_socket, { event, code }) => drops.push({ event, code }),
      },
      transport,
    )
    for (let i = 0; i < 6; i++) client.emit('tick', i)
    // An acknowledged event after them: the server handles a socket's packets in order.
    expect(refusedCode(await emitWithAck(client, 'tick', 6))).toBe('RATE_LIMITED')
    expect(s.deliveredCount('/', 'tick')).toBe(3)
    expect(drops).toEqual(Array.from({ length: 4 }, () => ({ event: 'tick', code: 'RATE_LIMITED' })))
  })

  it('over quota for a second: told RATE_LIMITED and disconnected from the namespace', async () => {
    const { s, client } = await setup(
      { eventsPerSecond: 2, eventBurst: 2, dropsBeforeDisconnect: 3, abuseFactor: 1000 },
      transport,
    )
    const notices: unknown[] = []
    client.on(SOCKET_IO_DISCONNECT_EVENT, (notice) => notices.push(notice))
    const gone = disconnected(client)
    const acks = await Promise.race([burst(client, 'tick', 5), gone.then(() => 'disconnected')])
    expect(await gone).toBe('io server disconnect')
    expect(notices).toHaveLength(1)
    expect(notices[0]).toMatchObject({ code: 'RATE_LIMITED' })
    expect((notices[0] as { retryAfter: number }).retryAfter).toBeGreaterThanOrEqual(1)
    expect(acks).toBeDefined()
    expect(s.deliveredCount('/', 'tick')).toBe(2)
    await until(() => s.protection.openConnections === 0, 'the slot released')
  })

  it('at many times the rate: told ABUSE and the whole connection closed, every namespace', async () => {
    const s = await startProtectedSocketIo(
      { handshakesPerIp: false, eventsPerSecond: 1, eventBurst: 1, dropsBeforeDisconnect: 5, abuseFactor: 3 },
      { namespaces: ['/other'] },
    )
    servers.push(s)
    const client = await connected(s.url, { transport })
    clients.push(client)
    const other = client.io.socket('/other')
    await new Promise<void>((resolve) => other.once('connect', () => resolve()))
    const notices: unknown[] = []
    client.on(SOCKET_IO_DISCONNECT_EVENT, (notice) => notices.push(notice))
    const gone = disconnected(client)
    const otherGone = disconnected(other)
    for (let i = 0; i < 30; i++) client.emit('flood', i)
    expect(await gone).toBe('io server disconnect')
    expect(await otherGone).not.toBe('io client disconnect')
    expect(notices).toEqual([{ code: 'ABUSE', message: 'Event rate abuse' }])
    expect(s.deliveredCount('/', 'flood')).toBe(1)
    await until(
      () => s.protection.openConnections === 0 && s.io.engine.clientsCount === 0,
      'the connection closed',
    )
  })
})

describe.each(transports)('packets (%s)', (transport) => {
  it('a text packet over maxPacketBytes closes the connection before any handler', async () => {
    const { s, client } = await setup({ maxPacketBytes: 2000 }, transport)
    expect((await emitWithAck(client, 'note', 'x'.repeat(1500))) as object).toEqual({ ok: true })
    const gone = disconnected(client)
    client.emit('note', 'x'.repeat(3000))
    expect(await gone).not.toBe('io client disconnect')
    expect(s.deliveredCount('/', 'note')).toBe(1)
  })

  it('a binary packet whose attachments add up past maxPacketBytes is refused whole', async () => {
    const { s, client } = await setup({ maxPacketBytes: 2000 }, transport)
    // Each part fits engine.io's own cap (maxHttpBufferSize lowered to 2000); together they do not.
    const part = Buffer.alloc(900, 1)
    expect((await emitWithAck(client, 'upload', part)) as object).toEqual({ ok: true })
    const gone = disconnected(client)
    client.emit('upload', part, part, part)
    expect(await gone).not.toBe('io client disconnect')
    expect(s.deliveredCount('/', 'upload')).toBe(1)
  })

  it('reads an attachment count as socket.io-parser does: a count written 00003 is 3, and the packet is refused whole', async () => {
    const { s, client } = await setup({ maxPacketBytes: 2000 }, transport)
    const part = Buffer.alloc(900, 1)
    const gone = disconnected(client)
    // The packet as socket.io-client would write it for emit('upload', part, part, part), its count written "00003".
    const placeholders = [0, 1, 2].map((num) => ({ _placeholder: true, num }))
    const engine = client.io.engine
    engine.write(`500003-${JSON.stringify(['upload', ...placeholders])}`)
    for (let i = 0; i < 3; i++) engine.write(part)
    expect(await gone).not.toBe('io client disconnect')
    expect(s.deliveredCount('/', 'upload')).toBe(0)
  })

  it('a header claiming more attachments than socket.io-parser takes is refused at once, and attachments count as packets', async () => {
    const { s, client } = await setup({ packetsPerSecond: 50, eventsPerSecond: 1000 }, transport)
    const gone = disconnected(client)
    const engine = client.io.engine
    // socket.io-parser refuses more than 10 attachments: the header closes the connection, nothing is held for it.
    engine.write(`51000000000000-${JSON.stringify(['upload', { _placeholder: true, num: 0 }])}`)
    for (let i = 0; i < 100; i++) engine.write(Buffer.alloc(0))
    expect(await gone).not.toBe('io client disconnect')
    expect(s.deliveredCount('/', 'upload')).toBe(0)
  })

  it('each attachment counts as a packet: 10 empty parts are 10 packets of packetsPerSecond', async () => {
    // One second's worth is 12 packets: the namespace connect, then one header with 10 parts, leave nothing.
    const { s, client } = await setup({ packetsPerSecond: 12, eventsPerSecond: 1000 }, transport)
    const gone = disconnected(client)
    const engine = client.io.engine
    const placeholders = Array.from({ length: 10 }, (_, num) => ({ _placeholder: true, num }))
    const upload = () => {
      engine.write(`510-${JSON.stringify(['upload', ...placeholders])}`)
      for (let part = 0; part < 10; part++) engine.write(Buffer.alloc(0))
    }
    upload()
    await until(() => s.deliveredCount('/', 'upload') === 1, 'the first upload')
    upload()
    expect(await gone).not.toBe('io client disconnect')
    expect(s.deliveredCount('/', 'upload')).toBe(1)
  })

  it('lowers engine.io maxHttpBufferSize to maxPacketBytes', async () => {
    const { s } = await setup({ maxPacketBytes: 4096 }, transport)
    expect((s.io.engine as unknown as { opts: { maxHttpBufferSize: number } }).opts.maxHttpBufferSize).toBe(
      4096,
    )
  })

  it('a connection over packetsPerSecond is closed, acknowledgements of unknown ids included', async () => {
    const { s, client } = await setup({ packetsPerSecond: 20, eventsPerSecond: 1000 }, transport)
    const gone = disconnected(client)
    // ACK packets for ids the server never sent: socket.io would ignore each one; the gate counts them all.
    const engine = client.io.engine
    for (let i = 0; i < 60; i++) engine.write(`3${i}[]`)
    expect(await gone).not.toBe('io client disconnect')
    await until(() => s.io.engine.clientsCount === 0, 'the connection closed')
  })
})
