import { once } from 'node:events'
import { afterEach, describe, expect, it } from 'vitest'
import { WebSocket, WebSocketServer } from 'ws'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import { MemoryStore } from '../../../src/core/stores/memoryStore.js'
import type { Store } from '../../../src/core/stores/store.js'
import { protectWebSocketServer, type WebSocketProtection } from '../../../src/ws/index.js'
import { createStore, type StoreFixture } from '../../helpers/stores.js'

const budget = { capacity: 30, refillPerSecond: 0.001, batch: 5 }
/** Every client here connects from the loopback address: one identity. */
const IDENTITY = '127.0.0.1'

interface Server {
  wss: WebSocketServer
  protection: WebSocketProtection
  url: string
  /** Messages the app's listener got. */
  delivered: number
  /** Messages the protection dropped (the shared budget refused them). */
  dropped: number
  /** Server-side sockets, in the order of their 'connection' event. */
  sockets: WebSocket[]
  /** Resolves once `n` messages in all were either delivered or dropped. */
  decided(n: number): Promise<void>
}

async function protectedServer(store: Store): Promise<Server> {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' })
  await new Promise((resolve) => wss.once('listening', resolve))
  const waiters: { n: number; resolve: () => void }[] = []
  const settle = () => {
    for (const waiter of waiters.splice(0)) {
      if (server.delivered + server.dropped >= waiter.n) waiter.resolve()
      else waiters.push(waiter)
    }
  }
  const server: Server = {
    wss,
    protection: protectWebSocketServer(wss, {
      store,
      identityMessages: budget,
      dropsBeforeClose: 1000,
      onDrop: () => {
        server.dropped++
        settle()
      },
    }),
    url: `ws://127.0.0.1:${(wss.address() as { port: number }).port}`,
    delivered: 0,
    dropped: 0,
    sockets: [],
    decided: (n) =>
      new Promise((resolve) => {
        waiters.push({ n, resolve })
        settle()
      }),
  }
  wss.on('connection', (ws) => {
    server.sockets.push(ws)
    ws.on('message', () => {
      server.delivered++
      settle()
    })
  })
  return server
}

function connect(url: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const client = new WebSocket(url)
    client.once('open', () => resolve(client))
    client.once('error', reject)
  })
}

/** Closes a client and resolves once the server saw its socket close (when the protection settles its budget). */
async function closeAndWait(client: WebSocket, serverSide: WebSocket): Promise<void> {
  const closed = once(serverSide, 'close')
  client.close()
  await closed
}

describe.each(['memory', 'redis'] as const)('identityMessages on the %s store', (kind) => {
  let fixture: StoreFixture
  const servers: Server[] = []
  afterEach(async () => {
    for (const server of servers.splice(0)) {
      await server.protection.close()
      server.wss.close()
    }
    await fixture.close()
  })

  /** A limiter reading the protection's shared bucket on the same store. */
  const sameBucket = () =>
    tokenBucket({
      name: 'ws-identity-messages',
      store: fixture.store,
      capacity: budget.capacity,
      refillPerSecond: budget.refillPerSecond,
      denyCache: false,
    })

  const useStore = async () => {
    fixture =
      kind === 'memory'
        ? { store: new MemoryStore(), ttls: async () => [], close: async () => {} }
        : await createStore('redis')
  }

  it('shares one budget across connections and servers: 60 sent, exactly the 30 of the budget delivered', async () => {
    await useStore()
    // Two servers on one store stand for two processes; four clients of one identity.
    servers.push(await protectedServer(fixture.store), await protectedServer(fixture.store))
    const [a, b] = servers as [Server, Server]
    const clients: [WebSocket, Server][] = []
    for (const server of [a, a, b, b]) clients.push([await connect(server.url), server])
    const sent = new Map<Server, number>()
    for (let round = 0; round < 15; round++) {
      for (const [client, server] of clients) {
        client.send('m')
        sent.set(server, (sent.get(server) ?? 0) + 1)
        // Each message delivered or dropped before the next: the count cannot depend on how they interleave.
        await server.decided(sent.get(server) as number)
      }
    }
    // Each server went on getting messages after the store ran dry: what it had drawn, it spent.
    expect(servers.map((s) => s.delivered + s.dropped)).toEqual([30, 30])
    expect(a.delivered + b.delivered).toBe(30)
    expect((await sameBucket().peek(IDENTITY)).remaining).toBe(0)
  })

  it("gives back the tokens drawn and not spent when the identity's last connection here closes", async () => {
    await useStore()
    const server = await protectedServer(fixture.store)
    servers.push(server)
    const first = await connect(server.url)
    const second = await connect(server.url)
    // The first connection drew one batch (5); the second found them at hand.
    expect((await sameBucket().peek(IDENTITY)).remaining).toBe(25)
    first.send('m')
    first.send('m')
    await server.decided(2)
    expect({ delivered: server.delivered, dropped: server.dropped }).toEqual({ delivered: 2, dropped: 0 })
    // 3 of the 5 are parked here, unspent (a draw starts only once half of a batch is spent).
    await closeAndWait(first, server.sockets[0] as WebSocket)
    // Another connection of the identity still spends from them: nothing given back yet.
    expect((await sameBucket().peek(IDENTITY)).remaining).toBe(25)
    await closeAndWait(second, server.sockets[1] as WebSocket)
    // The last one gave the 3 back: the store spent exactly what was delivered.
    expect((await sameBucket().peek(IDENTITY)).remaining).toBe(30 - 2)
  })
})
