/**
 * Echo events per second of a Socket.IO server, plain and protected by tollbooth/socket.io, side by side in one run.
 *
 *   npm run bench:socketio
 *
 * Contenders, each its own Socket.IO server on 127.0.0.1 (port 0) in this process, all alive for the whole run:
 * - plain:  a Socket.IO echo server (`socket.on('echo', data => socket.emit('echo', data))`), nothing else;
 * - memory: the same server under `protectSocketIo` on the default MemoryStore, limits set so high that nothing is
 *           refused (eventsPerSecond 1e6): the cost of the per-event path itself (cost, socket bucket, packet gate);
 * - redis:  the same, with a RedisStore for the connection leases (acquired at connect, renewed every leaseMs / 3,
 *           released at close). Event limits stay local: no event touches Redis;
 * - shared: as redis, plus `identityEvents`, the per-identity event budget shared through Redis (drawn in batches).
 *           Every client comes from 127.0.0.1, so all of them spend one identity's budget.
 *
 * Load: CLIENTS socket.io-client sockets on the WebSocket transport, each keeping WINDOW events of PAYLOAD_BYTES in
 * flight (a new one for every echo);
 * WARMUP_MS, then MEASURE_MS measured; echoes counted by the clients. The clients run in a separate process (this
 * file again, with `--load`, in a plain `node --import <tsx loader>`), so this process only serves; with 2 CPUs,
 * the server and the load share the machine with redis-server. ROUNDS rounds, the order reversed every other round;
 * the table shows medians. Round-trip latency is from a message's send to its echo, queueing included.
 *
 * Redis: a private redis-server started by `startRedis()` (never the shared one on :6379), stopped at the end.
 *
 * tollbooth is imported by its own name (`dist/`, the published build; the script builds first), not from the
 * TypeScript sources, which tsx would compile with `__name()` wrappers around every closure.
 */

import { createServer, type Server as HttpServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { cpus } from 'node:os'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis, type RedisOptions } from 'ioredis'
import { Server } from 'socket.io'
import { type Socket as ClientSocket, io as connectSocket } from 'socket.io-client'
import { RedisStore } from 'tollbooth'
import { type ProtectSocketIoOptions, protectSocketIo, type SocketIoProtection } from 'tollbooth/socket.io'
import { startRedis } from '../test/helpers/redisServer.js'
import { type EchoLoadResult, printEchoSummary, runEchoRounds } from './echoRounds.js'
import { LatencyHistogram } from './latency.js'
import { announceMeasuredPhase, LoadProcess, serveLoadJobs } from './loadProcess.js'
import { count, loadAverage } from './report.js'

const CLIENTS = 50
const WINDOW = 32
const PAYLOAD_BYTES = 64
const WARMUP_MS = 500
const MEASURE_MS = 1_500
const ROUNDS = 5
/** Short enough that the measured phase includes lease renewals (every leaseMs / 3). */
const LEASE_MS = 3_000
/**
 * identityEvents: a budget never reached (refillPerSecond 1e6), with the default batch (refillPerSecond / 10 =
 * 100,000 points a draw). A smaller batch draws more often, and events that find the local points spent wait for
 * the draw in flight.
 */
const SHARED_BUDGET = { capacity: 1e9, refillPerSecond: 1e6 }

/** Limits high enough that nothing is dropped or refused: what is measured is the cost of the checks. */
const permissive: ProtectSocketIoOptions = {
  eventsPerSecond: 1e6,
  eventBurst: 1e6,
  packetsPerSecond: 1e7,
  maxConnectionsPerIdentity: 10_000,
  handshakesPerIp: false,
  leaseMs: LEASE_MS,
}

type Key = 'plain' | 'memory' | 'redis' | 'shared'
const TARGETS: Record<Key, { ratio: number; label: string } | undefined> = {
  plain: undefined,
  memory: { ratio: 0.9, label: 'MemoryStore' },
  redis: { ratio: 0.85, label: 'RedisStore' },
  shared: { ratio: 0.85, label: 'RedisStore' },
}

// ---------------------------------------------------------------------------------------------------------------
// The load generator (child process)
// ---------------------------------------------------------------------------------------------------------------

interface LoadJob {
  url: string
  clients: number
  window: number
  payloadBytes: number
  warmupMs: number
  measureMs: number
}

type LoadResult = EchoLoadResult

function connectClient(url: string): Promise<ClientSocket> {
  return new Promise((resolve, reject) => {
    const socket = connectSocket(url, { transports: ['websocket'], reconnection: false, forceNew: true })
    socket.once('connect', () => resolve(socket))
    socket.once('connect_error', reject)
  })
}

async function runLoad(job: LoadJob): Promise<LoadResult> {
  const payload = Buffer.alloc(job.payloadBytes, 0x61)
  const latency = new LatencyHistogram()
  let measuring = false
  let stopping = false
  let echoes = 0
  let unexpectedCloses = 0
  let wrongEchoes = 0
  const sockets = await Promise.all(Array.from({ length: job.clients }, () => connectClient(job.url)))
  for (const socket of sockets) {
    // One socket echoes in order: the send times of the events in flight, oldest first.
    const sentAt: number[] = []
    socket.on('echo', (data: Buffer) => {
      const now = performance.now()
      const sent = sentAt.shift() ?? now
      if (data.length !== job.payloadBytes) wrongEchoes++
      if (measuring) {
        echoes++
        latency.add(now - sent)
      }
      if (stopping) return
      sentAt.push(now)
      socket.emit('echo', payload)
    })
    socket.on('disconnect', () => {
      if (!stopping) unexpectedCloses++
    })
    for (let i = 0; i < job.window; i++) {
      sentAt.push(performance.now())
      socket.emit('echo', payload)
    }
  }
  await sleep(job.warmupMs)
  // Tells the server process to read its CPU clock now (it reads it again when the result comes).
  announceMeasuredPhase()
  measuring = true
  const start = performance.now()
  const cpuStart = process.cpuUsage()
  await sleep(job.measureMs)
  measuring = false
  const seconds = (performance.now() - start) / 1000
  const cpu = process.cpuUsage(cpuStart)
  stopping = true
  for (const socket of sockets) socket.close()
  return {
    echoes,
    seconds,
    perSecond: echoes / seconds,
    clientCpu: (cpu.user + cpu.system) / 1e6 / seconds,
    p50: latency.percentile(50),
    p99: latency.percentile(99),
    unexpectedCloses,
    wrongEchoes,
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The servers (this process)
// ---------------------------------------------------------------------------------------------------------------

interface Contender {
  readonly key: Key
  readonly name: string
  readonly url: string
  readonly io: Server
  readonly http: HttpServer
  readonly protection: SocketIoProtection | undefined
  /** Events the protection refused (onDrop) and sockets the server disconnected, over the whole run. */
  readonly counters: { drops: number; closedByServer: number }
}

async function echoServer(key: Key, name: string, protect?: ProtectSocketIoOptions): Promise<Contender> {
  const http = createServer()
  const io = new Server(http)
  const counters = { drops: 0, closedByServer: 0 }
  const protection =
    protect === undefined
      ? undefined
      : protectSocketIo(io, {
          ...protect,
          onDrop: () => {
            counters.drops++
          },
        })
  io.on('connection', (socket) => {
    socket.on('echo', (data: Buffer) => socket.emit('echo', data))
    // The load generator closes its sockets itself; any other reason was the server's or the network's doing.
    socket.on('disconnect', (reason) => {
      if (reason !== 'client namespace disconnect' && reason !== 'transport close') counters.closedByServer++
    })
  })
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  const port = (http.address() as AddressInfo).port
  return { key, name, url: `http://127.0.0.1:${port}`, io, http, protection, counters }
}

async function main(): Promise<void> {
  const redis = await startRedis()
  const redisOptions: RedisOptions = {
    host: '127.0.0.1',
    port: redis.port,
    enableOfflineQueue: false,
    lazyConnect: true,
  }
  const client = new Redis(redisOptions)
  const contenders: Contender[] = []
  const load = new LoadProcess<LoadJob, LoadResult>(import.meta.url)
  const storeErrors = new Map<string, number>()
  const redisStore = (prefix: string) =>
    new RedisStore({
      client,
      prefix,
      hooks: {
        onStoreError: ({ error }) => count(storeErrors, `${prefix} ${error.code ?? error.message}`),
        onBreakerChange: ({ to }) => count(storeErrors, `${prefix} breaker → ${to}`),
      },
    })
  try {
    await client.connect()
    const redisVersion = /redis_version:(\S+)/.exec(await client.info('server'))?.[1] ?? '?'
    contenders.push(
      await echoServer('plain', 'plain Socket.IO echo'),
      await echoServer('memory', 'tollbooth, MemoryStore', permissive),
      await echoServer('redis', 'tollbooth, RedisStore leases', {
        ...permissive,
        store: redisStore('bench-sio-c:'),
      }),
      await echoServer('shared', 'tollbooth, RedisStore + identityEvents', {
        ...permissive,
        store: redisStore('bench-sio-d:'),
        identityEvents: SHARED_BUDGET,
        // A shortfall of points shows as drops in the table rather than as disconnected sockets.
        dropsBeforeDisconnect: 1e9,
      }),
    )

    console.log(
      `Node ${process.version}, ${cpus().length} CPUs (${cpus()[0]?.model ?? '?'}), redis-server ${redisVersion}, ` +
        `load average before: ${loadAverage()}`,
    )
    console.log(
      `${CLIENTS} socket.io-client sockets (WebSocket transport) × ${WINDOW} events in flight, ${PAYLOAD_BYTES} B binary payloads, echo; ` +
        `${WARMUP_MS / 1000} s warm-up + ${MEASURE_MS / 1000} s measured, ${ROUNDS} rounds (order reversed every ` +
        'other round), medians shown; CPU is process CPU time over the measured phase (100% = one core)',
    )
    console.log(
      `clients in a separate process (pid ${load.pid}); servers and their stores in this one (pid ${process.pid})`,
    )
    console.log(
      `protected servers: eventsPerSecond 1e6, eventBurst 1e6, packetsPerSecond 1e7, maxConnectionsPerIdentity 10000, ` +
        `handshakesPerIp off, leaseMs ${LEASE_MS} (renewed every ${LEASE_MS / 3} ms), other options default`,
    )
    console.log(
      '  redis:  connection leases in Redis; the event limits are per socket, in process: no event touches Redis',
    )
    console.log(
      `  shared: as redis + identityEvents ${JSON.stringify(SHARED_BUDGET)} (batch: default, 100,000): one ` +
        'budget for the identity 127.0.0.1 (all clients), drawn from Redis a batch at a time\n',
    )

    const job: Omit<LoadJob, 'url'> = {
      clients: CLIENTS,
      window: WINDOW,
      payloadBytes: PAYLOAD_BYTES,
      warmupMs: WARMUP_MS,
      measureMs: MEASURE_MS,
    }
    const results = await runEchoRounds(
      contenders,
      ROUNDS,
      (url) => load.run({ ...job, url }),
      'ev/s',
      // Let the closes and lease releases of a run settle before the next.
      () => sleep(100),
    )
    printEchoSummary(contenders, results, TARGETS, 'ev/s', 'event')
    console.log(`\nload average after: ${loadAverage()}`)
    if (storeErrors.size > 0)
      console.log('RedisStore errors and breaker changes:', Object.fromEntries(storeErrors))
  } finally {
    await load.stop()
    for (const contender of contenders) {
      await contender.protection?.close()
      await new Promise<void>((resolve) => contender.io.close(() => resolve()))
    }
    await client.quit().catch(() => client.disconnect())
    await redis.stop()
  }
}

if (process.argv.includes('--load')) await serveLoadJobs(runLoad)
else await main()
