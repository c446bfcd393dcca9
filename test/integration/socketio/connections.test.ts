/**
 * tollbooth/socket.io before the connection, with real socket.io-client clients (and raw engine.io clients where a
 * real one would behave) on 127.0.0.1, on the WebSocket transport and on long polling: handshakes per address
 * refused with HTTP 429 and Retry-After, the N+1th connection of an identity refused, and its slot back after every
 * way a socket ends.
 */
import { request } from 'node:http'
import type { Socket as ClientSocket } from 'socket.io-client'
import { afterEach, describe, expect, it } from 'vitest'
import { WebSocket } from 'ws'
import { concurrencyLimit } from '../../../src/core/limiters/concurrencyLimit.js'
import { MemoryStore } from '../../../src/core/stores/memoryStore.js'
import { SOCKET_IO_DISCONNECT_EVENT } from '../../../src/socketio/index.js'
import {
  attempt,
  byUser,
  connected,
  disconnected,
  type ProtectedSocketIo,
  startProtectedSocketIo,
  type Transport,
  transports,
  until,
} from '../../helpers/socketIo.js'

const servers: ProtectedSocketIo[] = []
const cleanups: (() => void)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) cleanup()
  await Promise.all(servers.splice(0).map((server) => server.close()))
})

async function server(...args: Parameters<typeof startProtectedSocketIo>): Promise<ProtectedSocketIo> {
  const started = await startProtectedSocketIo(...args)
  servers.push(started)
  return started
}

/** A GET of an engine.io polling handshake; resolves with the status, headers and body. */
function pollingHandshake(
  port: number,
  query = '',
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const path = `/socket.io/?EIO=4&transport=polling${query}`
    const req = request({ host: '127.0.0.1', port, path }, (res) => {
      let body = ''
      res.setEncoding('utf8').on('data', (chunk: string) => {
        body += chunk
      })
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }))
    })
    req.on('error', reject)
    req.end()
  })
}

/** An engine.io WebSocket handshake; resolves with the status of a refusal, or 101 once upgraded (then closed). */
function webSocketHandshake(
  port: number,
  query = '',
): Promise<{ status: number; headers: Record<string, unknown> }> {
  return new Promise((resolve) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/socket.io/?EIO=4&transport=websocket${query}`)
    ws.on('unexpected-response', (_req, res) => {
      resolve({ status: res.statusCode ?? 0, headers: res.headers })
      res.resume()
      ws.terminate()
    })
    ws.on('open', () => {
      resolve({ status: 101, headers: {} })
      ws.terminate()
    })
    ws.on('error', () => {})
  })
}

describe('handshakes per client address', () => {
  it('refuses the handshake past its budget with 429, Retry-After and a JSON refusal on polling', async () => {
    const s = await server({ handshakesPerIp: { capacity: 3, refillPerSecond: 0.01 } })
    const answers = []
    for (let i = 0; i < 5; i++) answers.push(await pollingHandshake(s.port))
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200, 429, 429])
    const refused = answers[3] as (typeof answers)[number]
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(99)
    expect(refused.headers['access-control-expose-headers']).toContain('Retry-After')
    expect(JSON.parse(refused.body)).toMatchObject({
      code: 'RATE_LIMITED',
      retryAfter: Number(refused.headers['retry-after']),
    })
  })

  it('refuses a WebSocket handshake past its budget with 429 and Retry-After before the upgrade', async () => {
    const s = await server({ handshakesPerIp: { capacity: 2, refillPerSecond: 0.01 } })
    const answers = []
    for (let i = 0; i < 4; i++) answers.push(await webSocketHandshake(s.port))
    expect(answers.map((answer) => answer.status)).toEqual([101, 101, 429, 429])
    expect(Number(answers[2]?.headers['retry-after'])).toBeGreaterThanOrEqual(99)
    expect(s.io.engine.clientsCount).toBeLessThanOrEqual(2)
  })

  it.each(transports)(
    'a client refused at the handshake gets connect_error, and nothing was opened (%s)',
    async (transport) => {
      const s = await server({ handshakesPerIp: { capacity: 1, refillPerSecond: 0.01 } })
      const first = await connected(s.url, { transport })
      cleanups.push(() => first.close())
      const second = await attempt(s.url, { transport })
      cleanups.push(() => second.socket.close())
      expect(second.error).toBeDefined()
      expect(s.protection.openConnections).toBe(1)
      expect(s.io.engine.clientsCount).toBe(1)
    },
  )

  it('a namespace connection after the first on one engine.io connection pays a handshake token', async () => {
    const s = await server(
      { handshakesPerIp: { capacity: 3, refillPerSecond: 0.01 } },
      { namespaces: ['/a', '/b', '/c'] },
    )
    // One engine.io connection (one Manager) joining four namespaces: 1 handshake + 3 more connects = 4 > 3.
    const root = await connected(s.url, { transport: 'websocket' })
    cleanups.push(() => root.close())
    const manager = root.io
    const outcomes: string[] = []
    for (const name of ['/a', '/b', '/c']) {
      // The Manager connects a socket it makes at once (autoConnect).
      const socket = manager.socket(name)
      cleanups.push(() => socket.close())
      outcomes.push(
        await new Promise<string>((resolve) => {
          socket.once('connect', () => resolve('connected'))
          socket.once('connect_error', (err) =>
            resolve((err as { data?: { code?: string } }).data?.code ?? err.message),
          )
        }),
      )
    }
    expect(outcomes).toEqual(['connected', 'connected', 'RATE_LIMITED'])
    expect(s.io.engine.clientsCount).toBe(1)
  })

  it("holds maxConnections while the app's own allowRequest decides", async () => {
    const s = await server(
      { maxConnections: 3, handshakesPerIp: false },
      {
        serverOptions: {
          // An app check that takes its time (a database lookup, say): sessions open only after it.
          allowRequest: (_req, callback) => void setTimeout(() => callback(null, true), 50),
        },
      },
    )
    const answers = await Promise.all([
      ...Array.from({ length: 6 }, () => pollingHandshake(s.port)),
      ...Array.from({ length: 6 }, () => webSocketHandshake(s.port)),
    ])
    const statuses = answers.map((answer) => answer.status)
    expect(statuses.filter((status) => status === 200 || status === 101)).toHaveLength(3)
    expect(statuses.filter((status) => status === 503)).toHaveLength(9)
    expect(s.io.engine.clientsCount).toBeLessThanOrEqual(3)
  })

  it('counts a handshake with an empty sid, which engine.io takes for a new one', async () => {
    const s = await server({ handshakesPerIp: { capacity: 2, refillPerSecond: 0.01 }, maxConnections: 100 })
    const polling = [await pollingHandshake(s.port, '&sid='), await pollingHandshake(s.port, '&sid=')]
    expect(polling.map((answer) => answer.status)).toEqual([200, 200])
    expect((await pollingHandshake(s.port, '&sid=')).status).toBe(429)
    expect((await webSocketHandshake(s.port, '&sid=')).status).toBe(429)
    expect(s.io.engine.clientsCount).toBe(2)
  })

  it('refuses handshakes past maxConnections with 503', async () => {
    const s = await server({ maxConnections: 2, handshakesPerIp: false })
    const a = await connected(s.url, { transport: 'websocket' })
    const b = await connected(s.url, { transport: 'polling' })
    cleanups.push(
      () => a.close(),
      () => b.close(),
    )
    expect((await pollingHandshake(s.port)).status).toBe(503)
    expect((await webSocketHandshake(s.port)).status).toBe(503)
  })
})

describe('connections per identity', () => {
  it.each(transports)(
    'refuses the N+1th connection of one identity with TOO_MANY_CONNECTIONS (%s)',
    async (transport) => {
      const s = await server({ ...byUser, maxConnectionsPerIdentity: 3, handshakesPerIp: false })
      const open: ClientSocket[] = []
      for (let i = 0; i < 3; i++) open.push(await connected(s.url, { transport, auth: { user: 'ann' } }))
      cleanups.push(() => {
        for (const socket of open) socket.close()
      })
      const fourth = await attempt(s.url, { transport, auth: { user: 'ann' } })
      cleanups.push(() => fourth.socket.close())
      expect(fourth.error?.data).toMatchObject({ code: 'TOO_MANY_CONNECTIONS' })
      expect(fourth.error?.data).toHaveProperty('retryAfter')
      expect((fourth.error?.data as { retryAfter: number } | undefined)?.retryAfter).toBeGreaterThanOrEqual(1)
      // Another identity is not affected.
      const other = await connected(s.url, { transport, auth: { user: 'bob' } })
      cleanups.push(() => other.close())
      expect(s.protection.openConnections).toBe(4)
      expect(s.sockets).toHaveLength(4)
    },
  )

  it("identityOf names the socket's identity from the app's connection handler on", async () => {
    const s = await server({ ...byUser, handshakesPerIp: false })
    const seen: (string | undefined)[] = []
    s.io.on('connection', (socket) => seen.push(s.protection.identityOf(socket)))
    const socket = await connected(s.url, { transport: 'websocket', auth: { user: 'ann' } })
    cleanups.push(() => socket.close())
    await until(() => seen.length === 1, 'the connection handler')
    expect(seen).toEqual(['ann'])
  })

  it('the app middleware never runs for a refused connection, and a later middleware refusing gives the slot back', async () => {
    const s = await server({ ...byUser, maxConnectionsPerIdentity: 1, handshakesPerIp: false })
    let middlewareRuns = 0
    s.io.use((socket, next) => {
      middlewareRuns++
      if (socket.handshake.auth.deny === true) next(new Error('denied by the app'))
      else next()
    })
    const denied = await attempt(s.url, { transport: 'websocket', auth: { user: 'ann', deny: true } })
    cleanups.push(() => denied.socket.close())
    expect(denied.error?.message).toBe('denied by the app')
    // The slot the denied attempt held is free again: ann connects.
    const ann = await connected(s.url, { transport: 'websocket', auth: { user: 'ann' } })
    cleanups.push(() => ann.close())
    const refused = await attempt(s.url, { transport: 'websocket', auth: { user: 'ann' } })
    cleanups.push(() => refused.socket.close())
    expect(refused.error?.data).toMatchObject({ code: 'TOO_MANY_CONNECTIONS' })
    expect(middlewareRuns).toBe(2)
  })

  it('refuses a connection whose identify throws with UNAUTHORIZED', async () => {
    const s = await server({
      identify: (socket) => {
        if (typeof socket.handshake.auth.token !== 'string') throw new Error('no token')
        return socket.handshake.auth.token
      },
    })
    const refused = await attempt(s.url, { transport: 'polling' })
    cleanups.push(() => refused.socket.close())
    expect(refused.error?.data).toMatchObject({ code: 'UNAUTHORIZED' })
    expect(s.protection.openConnections).toBe(0)
  })

  it('counts a connection recovered with connectionStateRecovery like a new one', async () => {
    const s = await server(
      { ...byUser, maxConnectionsPerIdentity: 1, handshakesPerIp: false },
      { serverOptions: { connectionStateRecovery: { maxDisconnectionDuration: 60_000 } } },
    )
    const first = await connected(s.url, { transport: 'websocket', auth: { user: 'ann' } })
    cleanups.push(() => first.close())
    const recoveryAuth = { user: 'ann', pid: (first as unknown as { _pid: string })._pid, offset: '' }
    expect(typeof recoveryAuth.pid).toBe('string')
    // A second client presenting the first one's session: socket.io would restore it without running middlewares.
    const second = await attempt(s.url, { transport: 'websocket', auth: recoveryAuth })
    cleanups.push(() => second.socket.close())
    expect(second.error?.data).toMatchObject({ code: 'TOO_MANY_CONNECTIONS' })
  })
})

/** Each way a socket ends, on a transport; resolves once the client side is gone. */
type Ending = (s: ProtectedSocketIo, transport: Transport, user: string) => Promise<void>

/** A raw engine.io client on the WebSocket transport, connected to `/` as `user`: it never answers pings. */
async function rawWebSocketClient(s: ProtectedSocketIo, user: string): Promise<WebSocket> {
  const ws = new WebSocket(`ws://127.0.0.1:${s.port}/socket.io/?EIO=4&transport=websocket`)
  ws.on('error', () => {})
  await new Promise<void>((resolve, reject) => {
    ws.on('message', (data) => {
      const text = String(data)
      if (text.startsWith('0')) ws.send(`40${JSON.stringify({ user })}`)
      if (text.startsWith('40')) resolve()
      if (text.startsWith('44')) reject(new Error(`refused: ${text}`))
    })
  })
  return ws
}

/** A raw engine.io client on long polling, connected to `/` as `user`, that stops polling: it never answers pings. */
async function rawPollingClient(s: ProtectedSocketIo, user: string): Promise<void> {
  const open = await pollingHandshake(s.port)
  const sid = (JSON.parse(open.body.slice(1)) as { sid: string }).sid
  await new Promise<void>((resolve, reject) => {
    const body = `40${JSON.stringify({ user })}`
    const req = request(
      {
        host: '127.0.0.1',
        port: s.port,
        method: 'POST',
        path: `/socket.io/?EIO=4&transport=polling&sid=${sid}`,
        headers: { 'Content-Type': 'text/plain;charset=UTF-8', 'Content-Length': Buffer.byteLength(body) },
      },
      (res) => {
        res.resume()
        res.on('end', resolve)
      },
    )
    req.on('error', reject)
    req.end(body)
  })
}

const endings: Record<string, Ending> = {
  'client close': async (s, transport, user) => {
    const socket = await connected(s.url, { transport, auth: { user } })
    socket.disconnect()
  },
  'server close': async (s, transport, user) => {
    const socket = await connected(s.url, { transport, auth: { user } })
    const gone = disconnected(socket)
    await until(
      () => s.sockets.some((server) => server.handshake.auth.user === user && server.connected),
      'the server socket',
    )
    for (const server of s.sockets) if (server.handshake.auth.user === user) server.disconnect(true)
    expect(await gone).toBe('io server disconnect')
  },
  'transport dropped': async (s, transport, user) => {
    const socket = await connected(s.url, { transport, auth: { user } })
    // The client's network goes away: its engine.io connection ends without a goodbye.
    ;(
      socket.io.engine as unknown as { transport: { ws?: WebSocket; close(): void } }
    ).transport.ws?.terminate()
    if (transport === 'polling') socket.io.engine.close()
  },
  'transport error': async (s, transport, user) => {
    if (transport === 'websocket') {
      const ws = await rawWebSocketClient(s, user)
      // A frame with a reserved opcode: ws fails the connection, engine.io reports a transport error.
      ;(ws as unknown as { _socket: { write(data: Buffer): void } })._socket.write(
        Buffer.from([0x8f, 0x80, 1, 2, 3, 4]),
      )
      return
    }
    await rawPollingClient(s, user)
    // A polling request whose payload is not engine.io's: the session fails with a parse error.
    const server = s.sockets.find((socket) => socket.handshake.auth.user === user)
    const sid = (server?.conn as unknown as { id: string } | undefined)?.id
    await new Promise<void>((resolve) => {
      const req = request(
        {
          host: '127.0.0.1',
          port: s.port,
          method: 'POST',
          path: `/socket.io/?EIO=4&transport=polling&sid=${sid}`,
        },
        (res) => {
          res.resume()
          res.on('end', resolve)
        },
      )
      req.on('error', () => resolve())
      req.end('\u0000garbage')
    })
  },
  'ping timeout': async (s, transport, user) => {
    if (transport === 'websocket') await rawWebSocketClient(s, user)
    else await rawPollingClient(s, user)
  },
}

describe('a slot comes back after every kind of disconnect', () => {
  for (const transport of transports) {
    for (const [name, end] of Object.entries(endings)) {
      it(`${name} (${transport})`, async () => {
        const s = await server(
          { ...byUser, maxConnectionsPerIdentity: 1, handshakesPerIp: false },
          { serverOptions: { pingInterval: 200, pingTimeout: 200 } },
        )
        const user = `user-${name}`
        const reasons: string[] = []
        s.io.on('connection', (socket) => socket.on('disconnect', (reason) => reasons.push(reason)))
        await end(s, transport, user)
        await until(() => reasons.length === 1 && s.protection.openConnections === 0, 'the disconnect')
        // The identity's one slot is free: it connects again, and a second connection is refused.
        const again = await connected(s.url, { transport, auth: { user } })
        cleanups.push(() => again.close())
        const refused = await attempt(s.url, { transport, auth: { user } })
        cleanups.push(() => refused.socket.close())
        expect(refused.error?.data).toMatchObject({ code: 'TOO_MANY_CONNECTIONS' })
        expect(s.protection.openConnections).toBe(1)
        expect(reasons).toHaveLength(1)
      })
    }
  }
})

describe('the end of a slot the server no longer holds, and of the protection', () => {
  it('a socket whose slot the store gave to another is told LEASE_LOST and disconnected', async () => {
    const store = new MemoryStore()
    const s = await server({
      ...byUser,
      store,
      leaseMs: 300,
      maxConnectionsPerIdentity: 1,
      handshakesPerIp: false,
    })
    const socket = await connected(s.url, { transport: 'websocket', auth: { user: 'ann' } })
    cleanups.push(() => socket.close())
    const notices: unknown[] = []
    socket.on(SOCKET_IO_DISCONNECT_EVENT, (notice) => notices.push(notice))
    const gone = disconnected(socket)
    // The store loses the lease (a flush, a failover without the key) and another holder takes the slot before the
    // next renewal: the renewal finds the identity full.
    await store.delete('socket.io-connections', 'ann')
    const intruder = await concurrencyLimit({
      name: 'socket.io-connections',
      store,
      max: 1,
      leaseMs: 30_000,
    }).acquire('ann')
    expect(intruder.allowed).toBe(true)
    expect(await gone).toBe('io server disconnect')
    expect(notices).toEqual([{ code: 'LEASE_LOST', message: 'Connection slot lost', retryAfter: 1 }])
    await until(() => s.protection.openConnections === 0, 'the socket forgotten')
    await intruder.release()
    const again = await connected(s.url, { transport: 'websocket', auth: { user: 'ann' } })
    cleanups.push(() => again.close())
  })

  it('close() tells every socket UNAVAILABLE, releases its slot and takes the middlewares out', async () => {
    const store = new MemoryStore()
    const s = await server({
      ...byUser,
      store,
      maxConnectionsPerIdentity: 1,
      handshakesPerIp: { capacity: 1, refillPerSecond: 0.01 },
    })
    const socket = await connected(s.url, { transport: 'polling', auth: { user: 'ann' } })
    cleanups.push(() => socket.close())
    const notices: unknown[] = []
    socket.on(SOCKET_IO_DISCONNECT_EVENT, (notice) => notices.push(notice))
    const gone = disconnected(socket)
    await s.protection.close()
    expect(await gone).toBe('io server disconnect')
    expect(notices).toEqual([{ code: 'UNAVAILABLE', message: 'Server shutting down', retryAfter: 1 }])
    expect(s.protection.openConnections).toBe(0)
    // The lease is back in the store, and the server is as it was: no handshake budget, no connection cap.
    const lease = await concurrencyLimit({
      name: 'socket.io-connections',
      store,
      max: 1,
      leaseMs: 30_000,
    }).acquire('ann')
    expect(lease.allowed).toBe(true)
    const first = await connected(s.url, { transport: 'websocket', auth: { user: 'ann' } })
    const second = await connected(s.url, { transport: 'websocket', auth: { user: 'ann' } })
    cleanups.push(
      () => first.close(),
      () => second.close(),
    )
  })
})
