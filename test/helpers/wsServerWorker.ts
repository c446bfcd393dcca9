/**
 * A protected `ws` server in a process of its own, for test/integration/ws/upgrade.test.ts (several processes sharing
 * one Redis, a server SIGKILLed while it holds leases, a client resetting its TCP connection mid-admission).
 *
 * Run it as `node --import <absolute URL of tsx's loader> test/helpers/wsServerWorker.ts`, with the job as JSON in the
 * TOLLBOOTH_WS_WORKER_JOB environment variable. (Not through the tsx CLI: `tsx file.ts` runs the script in a
 * grandchild process, so a SIGKILL of the spawned pid would leave the real server running; see worker.ts.)
 *
 * Protocol, one JSON line each on stdout:
 * 1. `{"ready":true,"port":N}` once the server listens on 127.0.0.1 (and, with a Redis store, the scripts are loaded);
 * 2. for each line `stats` on stdin, a WsWorkerStats line; for a line `renewals N`, one as soon as the connection leases
 *    were renewed N times in all (at once if they were).
 * With `slowLimiter`, the store answers that limiter's requests `delayMs` late (a slow store round trip, to hold a
 * window of the admission open); every other request, and all state, is the real store's.
 * The process exits when its stdin closes. An uncaught error is not caught here: the process dies with its stack on
 * stderr, which is what the parent checks for.
 */
import { createInterface } from 'node:readline'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { WebSocketServer } from 'ws'
import { MemoryStore } from '../../src/core/stores/memoryStore.js'
import { RedisStore } from '../../src/core/stores/redisStore.js'
import type { Store } from '../../src/core/stores/store.js'
import { type ProtectWebSocketOptions, protectWebSocketServer } from '../../src/ws/index.js'
import { jobFromEnvironment, runScript, send } from './childScript.js'

export interface WsWorkerJob {
  /** Redis URL for a RedisStore; without it the server uses a MemoryStore. */
  redisUrl?: string
  /** RedisStore key prefix. */
  prefix?: string
  /** RedisStore deadline. @default 5000 (far above any reply time, so no decision falls to the fail policy) */
  storeTimeoutMs?: number
  /** protectWebSocketServer options that survive JSON (no `identify`, `store`, `onDrop`). */
  protect: Omit<ProtectWebSocketOptions, 'identify' | 'store' | 'onDrop'>
  /** With it, `identify` waits this long and then answers the identity `slow-user`. */
  identifyDelayMs?: number
  /** Requests of this limiter (e.g. `ws-identity-messages`) are answered `delayMs` late. */
  slowLimiter?: { name: string; delayMs: number }
  /** Count the connection lease renewals (stats `renewals`, the `renewals N` command). */
  countRenewals?: boolean
}

export interface WsWorkerStats {
  /** How many times the server's 'connection' listener ran. */
  connections: number
  /** `openConnections` of the protection. */
  open: number
  /** `pendingUpgrades` of the protection. */
  pending: number
  /** Requests of `slowLimiter` started so far. */
  slowCalls: number
  /** Connection lease renewals sent to the store so far (one per open connection every `leaseMs / 3`). */
  renewals: number
}

async function main(): Promise<void> {
  const job = jobFromEnvironment<WsWorkerJob>('TOLLBOOTH_WS_WORKER_JOB')
  let store: Store
  let redis: Redis | undefined
  if (job.redisUrl !== undefined) {
    redis = new Redis(job.redisUrl, { enableOfflineQueue: true, maxRetriesPerRequest: 1 })
    redis.on('error', (error: Error) =>
      process.stderr.write(`ws worker ${process.pid}: redis error: ${error.message}\n`),
    )
    const redisStore = new RedisStore({
      client: redis,
      prefix: job.prefix ?? 'tollbooth:',
      timeoutMs: job.storeTimeoutMs ?? 5000,
    })
    await redisStore.warmUp()
    store = redisStore
  } else {
    store = new MemoryStore()
  }

  let slowCalls = 0
  const slow = job.slowLimiter
  if (slow !== undefined) {
    const inner = store
    store = {
      kind: inner.kind,
      run: async (request) => {
        if (request.limiter === slow.name) {
          slowCalls++
          await sleep(slow.delayMs)
        }
        return inner.run(request)
      },
      consumeAll: (requests) => inner.consumeAll(requests),
      delete: (limiter, key) => inner.delete(limiter, key),
    }
  }

  // Counts what the protection's renewal timer sends; the store answers as it would.
  let renewals = 0
  const renewalWaiters: { count: number; answer: () => void }[] = []
  if (job.countRenewals === true) {
    const counted = store
    store = {
      kind: counted.kind,
      run: (request) => {
        if (request.limiter === 'ws-connections' && request.op === 'renew') {
          renewals++
          for (const waiter of renewalWaiters.splice(0)) {
            if (renewals >= waiter.count) waiter.answer()
            else renewalWaiters.push(waiter)
          }
        }
        return counted.run(request)
      },
      consumeAll: (requests) => counted.consumeAll(requests),
      delete: (limiter, key) => counted.delete(limiter, key),
    }
  }

  const delay = job.identifyDelayMs
  const options: ProtectWebSocketOptions = {
    ...job.protect,
    store,
    ...(delay === undefined
      ? {}
      : {
          identify: async () => {
            await sleep(delay)
            return 'slow-user'
          },
        }),
  }
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' })
  await new Promise<void>((resolve, reject) => {
    wss.once('listening', resolve)
    wss.once('error', reject)
  })
  const protection = protectWebSocketServer(wss, options)
  let connections = 0
  wss.on('connection', (ws) => {
    connections++
    ws.on('error', () => {})
  })
  const address = wss.address()
  if (address === null || typeof address === 'string') throw new Error('no TCP address')

  const lines = createInterface({ input: process.stdin })
  const stats = (): WsWorkerStats => ({
    connections,
    open: protection.openConnections,
    pending: protection.pendingUpgrades,
    slowCalls,
    renewals,
  })
  lines.on('line', (line) => {
    const [command, argument] = line.trim().split(' ')
    if (command === 'stats') void send(stats())
    if (command === 'renewals') {
      const answer = () => void send(stats())
      if (renewals >= Number(argument)) answer()
      else renewalWaiters.push({ count: Number(argument), answer })
    }
  })
  lines.on('close', () => {
    void protection.close().finally(() => {
      wss.close()
      redis?.disconnect()
      process.exit(0)
    })
  })
  await send({ ready: true, port: address.port })
}

runScript('ws worker', main)
