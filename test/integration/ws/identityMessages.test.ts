import { setTimeout as sleep } from 'node:timers/promises'
import { afterEach, describe, expect, it } from 'vitest'
import { WebSocket, WebSocketServer } from 'ws'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import { MemoryStore } from '../../../src/core/stores/memoryStore.js'
import type { Store } from '../../../src/core/stores/store.js'
import { protectWebSocketServer, type WebSocketProtection } from '../../../src/ws/index.js'
import { createStore, type StoreFixture } from '../../helpers/stores.js'

const budget = { capacity: 30, refillPerSecond: 0.001, batch: 5 }

interface Server {
  wss: WebSocketServer
  protection: WebSocketProtection
  url: string
  delivered: number
}

async function protectedServer(store: Store): Promise<Server> {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' })
  await new Promise((resolve) => wss.once('listening', resolve))
  const server: Server = {
    wss,
    protection: protectWebSocketServer(wss, { store, identityMessages: budget, dropsBeforeClose: 1000 }),
    url: `ws://127.0.0.1:${(wss.address() as { port: number }).port}`,
    delivered: 0,
  }
  wss.on('connection', (ws) => ws.on('message', () => server.delivered++))
  return server
}

function connect(url: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const client = new WebSocket(url)
    client.once('open', () => resolve(client))
    client.once('error', reject)
  })
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

  it('shares one budget across connections and servers, and spends exactly what was delivered', async () => {
    fixture =
      kind === 'memory'
        ? { store: new MemoryStore(), ttls: async () => [], close: async () => {} }
        : await createStore('redis')
    // Two servers on one store stand for two processes; four clients of one identity (the loopback IP).
    servers.push(await protectedServer(fixture.store), await protectedServer(fixture.store))
    const clients = await Promise.all(servers.flatMap((s) => [connect(s.url), connect(s.url)]))
    for (let round = 0; round < 15; round++) {
      for (const client of clients) client.send('m')
      await sleep(5)
    }
    await sleep(200)
    const delivered = servers.reduce((sum, s) => sum + s.delivered, 0)
    // 60 sent, a budget of 30: never more; tokens parked in a server (at most a batch each) may go unspent.
    expect(delivered).toBeLessThanOrEqual(30)
    expect(delivered).toBeGreaterThanOrEqual(30 - 2 * budget.batch)
    for (const client of clients) client.close()
    await sleep(200)
    // The last connection of each server gave its unspent tokens back: the store spent exactly what was delivered.
    const sameBucket = tokenBucket({
      name: 'ws-identity-messages',
      store: fixture.store,
      capacity: budget.capacity,
      refillPerSecond: budget.refillPerSecond,
      denyCache: false,
    })
    expect((await sameBucket.peek('127.0.0.1')).remaining).toBe(30 - delivered)
  })
})
