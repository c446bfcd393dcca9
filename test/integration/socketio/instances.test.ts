/**
 * tollbooth/socket.io across instances: two Socket.IO servers on @socket.io/redis-adapter sharing one RedisStore
 * (the test's own redis-server, never the machine's), with real socket.io-client clients. The per-identity
 * connection cap and the identity's event budget hold across both; the leases of an instance that is SIGKILLed
 * come back when they expire.
 */
import { randomUUID } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { createAdapter } from '@socket.io/redis-adapter'
import { Redis } from 'ioredis'
import type { Socket as ClientSocket } from 'socket.io-client'
import { afterEach, describe, expect, inject, it } from 'vitest'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import { RedisStore } from '../../../src/core/stores/redisStore.js'
import type { ProtectSocketIoOptions } from '../../../src/socketio/index.js'
import { JsonLinesProcess } from '../../helpers/childProcess.js'
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
import type { SocketIoWorkerJob } from '../../helpers/socketIoServerWorker.js'

const WORKER = fileURLToPath(new URL('../../helpers/socketIoServerWorker.ts', import.meta.url))

const cleanups: (() => unknown)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const { identify } = byUser

function redisClient(): Redis {
  const client = new Redis(inject('redisUrl'), { enableOfflineQueue: true, maxRetriesPerRequest: 1 })
  cleanups.push(() => client.disconnect())
  return client
}

/** One instance: its own Redis clients (store, adapter pub and sub), the shared key prefix. */
async function instance(prefix: string, options: ProtectSocketIoOptions): Promise<ProtectedSocketIo> {
  const store = new RedisStore({ client: redisClient(), prefix, timeoutMs: 5000 })
  await store.warmUp()
  const pub = redisClient()
  const sub = redisClient()
  const server = await startProtectedSocketIo(
    { identify, handshakesPerIp: false, ...options, store },
    { serverOptions: { adapter: createAdapter(pub, sub) } },
  )
  cleanups.push(() => server.close())
  return server
}

async function client(url: string, transport: 'websocket' | 'polling', user = 'ann'): Promise<ClientSocket> {
  const socket = await connected(url, { transport, auth: { user } })
  cleanups.push(() => socket.close())
  return socket
}

describe.each(transports)('two instances on the Redis adapter and one RedisStore (%s)', (transport) => {
  it('holds the per-identity connection cap across both', async () => {
    const prefix = `sio-${randomUUID().slice(0, 8)}:`
    const a = await instance(prefix, { maxConnectionsPerIdentity: 3 })
    const b = await instance(prefix, { maxConnectionsPerIdentity: 3 })
    const first = await client(a.url, transport)
    await client(a.url, transport)
    await client(b.url, transport)
    for (const url of [a.url, b.url]) {
      const refused = await attempt(url, { transport, auth: { user: 'ann' } })
      cleanups.push(() => refused.socket.close())
      expect(refused.error?.data).toMatchObject({ code: 'TOO_MANY_CONNECTIONS' })
    }
    // A slot given back on one instance is taken on the other.
    first.disconnect()
    await waitFor(async () => a.protection.openConnections === 1, 'the slot back on a')
    await client(b.url, transport)
    expect(a.protection.openConnections + b.protection.openConnections).toBe(3)
  })

  it("spends the identity's event budget across both, and gives back what was drawn and not spent", async () => {
    const prefix = `sio-${randomUUID().slice(0, 8)}:`
    const identityEvents = { capacity: 20, refillPerSecond: 0.001, batch: 2 }
    const options = { identityEvents, eventsPerSecond: 1000, dropsBeforeDisconnect: 1000 }
    const a = await instance(prefix, options)
    const b = await instance(prefix, options)
    const onA = await client(a.url, transport)
    const onB = await client(b.url, transport)
    let delivered = 0
    for (let i = 0; i < 20; i++) {
      for (const socket of [onA, onB]) {
        if (refusedCode(await emitWithAck(socket, 'chat')) === undefined) delivered++
      }
    }
    expect(a.deliveredCount('/', 'chat') + b.deliveredCount('/', 'chat')).toBe(delivered)
    // Each instance parks at most one batch it drew and has not spent.
    expect(delivered).toBeLessThanOrEqual(20)
    expect(delivered).toBeGreaterThanOrEqual(20 - 2 * identityEvents.batch)
    onA.disconnect()
    onB.disconnect()
    // The last socket of the identity on an instance gives its parked points back: the bucket holds 20 − delivered.
    const budget = tokenBucket({
      name: 'socket.io-identity-events',
      capacity: identityEvents.capacity,
      refillPerSecond: identityEvents.refillPerSecond,
      store: new RedisStore({ client: redisClient(), prefix, timeoutMs: 5000 }),
    })
    await waitFor(
      async () => (await budget.peek('ann')).remaining === 20 - delivered,
      'the parked points back',
    )
  })
})

describe('an instance killed while it holds leases', () => {
  it('its slots come back when the leases expire, not before', async () => {
    const prefix = `sio-${randomUUID().slice(0, 8)}:`
    const leaseMs = 1500
    const job: SocketIoWorkerJob = {
      redisUrl: inject('redisUrl'),
      prefix,
      protect: { maxConnectionsPerIdentity: 2, leaseMs, handshakesPerIp: false },
    }
    const worker = new JsonLinesProcess({
      script: WORKER,
      jobVariable: 'TOLLBOOTH_SOCKETIO_WORKER_JOB',
      job,
      label: 'socket.io worker',
    })
    cleanups.push(() => worker.child.kill('SIGKILL'))
    const ready = await worker.next<{ ready: boolean; port: number }>()
    expect(ready.ready, worker.describe()).toBe(true)
    const url = `http://127.0.0.1:${ready.port}`
    await client(url, 'websocket')
    await client(url, 'polling')
    expect(await worker.next<{ connected: number }>()).toEqual({ connected: 1 })
    expect(await worker.next<{ connected: number }>()).toEqual({ connected: 2 })
    worker.child.kill('SIGKILL')
    const killedAt = performance.now()
    const survivor = await instance(prefix, { maxConnectionsPerIdentity: 2, leaseMs })
    const refused = await attempt(survivor.url, { transport: 'websocket', auth: { user: 'ann' } })
    cleanups.push(() => refused.socket.close())
    expect(refused.error?.data).toMatchObject({ code: 'TOO_MANY_CONNECTIONS' })
    let admittedAt = 0
    await waitFor(async () => {
      const next = await attempt(survivor.url, { transport: 'websocket', auth: { user: 'ann' } })
      cleanups.push(() => next.socket.close())
      if (next.error !== undefined) return false
      admittedAt = performance.now()
      return true
    }, 'a slot after the leases expire')
    // The dead instance renewed its leases at most leaseMs / 3 before it died.
    expect(admittedAt - killedAt).toBeGreaterThanOrEqual((leaseMs * 2) / 3 - 50)
  })
})

/** Checks `holds` until it does (each check is a round trip to the servers or the store); fails after 15 s. */
async function waitFor(holds: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = performance.now() + 15_000
  while (!(await holds())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}
