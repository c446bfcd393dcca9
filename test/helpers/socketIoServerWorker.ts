/**
 * A protected Socket.IO server in a process of its own, for test/integration/socketio/instances.test.ts: an instance
 * that is SIGKILLed while it holds connection leases in Redis.
 *
 * Run it as `node --import <absolute URL of tsx's loader> test/helpers/socketIoServerWorker.ts` (see childProcess.ts),
 * with the job as JSON in TOLLBOOTH_SOCKETIO_WORKER_JOB. It prints `{"ready":true,"port":N}` once it listens on
 * 127.0.0.1 with the store's scripts loaded, then `{"connected":N}` after each connection it admitted. Identities are
 * `auth.user`. It exits when its stdin closes.
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createInterface } from 'node:readline'
import { Redis } from 'ioredis'
import { Server } from 'socket.io'
import { RedisStore } from '../../src/core/stores/redisStore.js'
import { type ProtectSocketIoOptions, protectSocketIo } from '../../src/socketio/index.js'
import { jobFromEnvironment, runScript, send } from './childScript.js'

export interface SocketIoWorkerJob {
  redisUrl: string
  prefix: string
  /** protectSocketIo options that survive JSON (no `identify`, `store`, `onDrop`). */
  protect: Omit<ProtectSocketIoOptions, 'identify' | 'store' | 'onDrop' | 'eventCost'>
}

async function main(): Promise<void> {
  const job = jobFromEnvironment<SocketIoWorkerJob>('TOLLBOOTH_SOCKETIO_WORKER_JOB')
  const redis = new Redis(job.redisUrl, { enableOfflineQueue: true, maxRetriesPerRequest: 1 })
  const store = new RedisStore({ client: redis, prefix: job.prefix, timeoutMs: 5000 })
  await store.warmUp()
  const http = createServer()
  const io = new Server(http)
  const protection = protectSocketIo(io, {
    ...job.protect,
    store,
    identify: (socket) => String(socket.handshake.auth.user),
  })
  let connected = 0
  io.on('connection', () => {
    connected++
    void send({ connected })
  })
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  createInterface({ input: process.stdin }).on('close', () => {
    void protection.close().finally(() => {
      io.close()
      redis.disconnect()
      process.exit(0)
    })
  })
  await send({ ready: true, port: (http.address() as AddressInfo).port })
}

runScript('socket.io worker', main)
