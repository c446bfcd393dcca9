/**
 * Echo messages per second of a `ws` server, plain and protected by tollbooth/ws, side by side in one run.
 *
 *   npm run bench:ws
 *
 * Contenders, each its own WebSocketServer on 127.0.0.1 (port 0) in this process, all alive for the whole run:
 * - plain:  a `ws` echo server (`ws.on('message', data => ws.send(data))`), nothing else;
 * - memory: the same server under `protectWebSocketServer` on the default MemoryStore, per-connection limits set so
 *           high that nothing is dropped (messagesPerSecond 1e6): the cost of the per-message path itself;
 * - redis:  the same, with a RedisStore for the connection leases and handshake budgets (acquired at connect,
 *           renewed every leaseMs / 3, released at close). Message limits stay local: no message touches Redis;
 * - shared: as redis, plus `identityMessages`, the per-identity message budget shared through Redis (drawn in
 *           batches). Every client comes from 127.0.0.1, so all of them spend one identity's budget.
 *
 * Load: CLIENTS connections, each keeping WINDOW messages of PAYLOAD_BYTES in flight (a new one for every echo);
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
import { cpus } from 'node:os'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis, type RedisOptions } from 'ioredis'
import { RedisStore } from 'tollbooth'
import { type ProtectWebSocketOptions, protectWebSocketServer, type WebSocketProtection } from 'tollbooth/ws'
import { WebSocket, WebSocketServer } from 'ws'
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
 * identityMessages: a budget never reached (refillPerSecond is at its maximum, 1e6), with the default batch
 * (refillPerSecond / 10 = 100,000 tokens a draw). A smaller batch draws more often, and messages that find the
 * local tokens spent wait for the draw in flight.
 */
const SHARED_BUDGET = { capacity: 1e9, refillPerSecond: 1e6 }

/** Limits high enough that nothing is dropped or refused: what is measured is the cost of the checks. */
const permissive: ProtectWebSocketOptions = {
  messagesPerSecond: 1e6,
  messageBurst: 1e6,
  maxConnectionsPerIdentity: 10_000,
  handshakesPerIp: false,
  leaseMs: LEASE_MS,
}

type Key = 'plain' | 'memory' | 'redis' | 'shared'
const TARGETS: Record<Key, { ratio: number; label: string } | undefined> = {
  plain: undefined,
  memory: { ratio: 0.9, label: 'local limits' },
  redis: { ratio: 0.75, label: 'shared Redis-backed limits' },
  shared: { ratio: 0.75, label: 'shared Redis-backed limits' },
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

function connectClient(url: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url)
    ws.once('open', () => resolve(ws))
    ws.once('error', reject)
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
  for (const ws of sockets) {
    // One connection echoes in order: the send times of the messages in flight, oldest first.
    const sentAt: number[] = []
    ws.on('message', (data: Buffer) => {
      const now = performance.now()
      const sent = sentAt.shift() ?? now
      if (data.length !== job.payloadBytes) wrongEchoes++
      if (measuring) {
        echoes++
        latency.add(now - sent)
      }
      if (stopping) return
      sentAt.push(now)
      ws.send(payload)
    })
    ws.on('close', () => {
      if (!stopping) unexpectedCloses++
    })
    ws.on('error', () => {})
    for (let i = 0; i < job.window; i++) {
      sentAt.push(performance.now())
      ws.send(payload)
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
  await Promise.all(
    sockets.map(
      (ws) =>
        new Promise<void>((resolve) => {
          if (ws.readyState === WebSocket.CLOSED) return resolve()
          const timer = setTimeout(() => ws.terminate(), 2_000)
          ws.once('close', () => {
            clearTimeout(timer)
            resolve()
          })
          ws.close()
        }),
    ),
  )
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
  readonly wss: WebSocketServer
  readonly protection: WebSocketProtection | undefined
  /** Messages the protection dropped (onDrop) and connections it closed, over the whole run. */
  readonly counters: { drops: number; closedByServer: number }
}

async function echoServer(key: Key, name: string, protect?: ProtectWebSocketOptions): Promise<Contender> {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' })
  await new Promise((resolve) => wss.once('listening', resolve))
  const counters = { drops: 0, closedByServer: 0 }
  const protection =
    protect === undefined
      ? undefined
      : protectWebSocketServer(wss, {
          ...protect,
          onDrop: () => {
            counters.drops++
          },
        })
  wss.on('connection', (ws) => {
    ws.on('error', () => {})
    ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }))
    // The load generator closes without a code (1005); anything else was the server's or the network's doing.
    ws.on('close', (code) => {
      if (code !== 1005 && code !== 1000) counters.closedByServer++
    })
  })
  const port = (wss.address() as { port: number }).port
  return { key, name, url: `ws://127.0.0.1:${port}`, wss, protection, counters }
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
      await echoServer('plain', 'plain ws echo'),
      await echoServer('memory', 'tollbooth, MemoryStore', permissive),
      await echoServer('redis', 'tollbooth, RedisStore leases', {
        ...permissive,
        store: redisStore('bench-ws-c:'),
      }),
      await echoServer('shared', 'tollbooth, RedisStore + identityMessages', {
        ...permissive,
        store: redisStore('bench-ws-d:'),
        identityMessages: SHARED_BUDGET,
        // A shortfall of tokens shows as drops in the table rather than as closed connections.
        dropsBeforeClose: 1e9,
      }),
    )

    console.log(
      `Node ${process.version}, ${cpus().length} CPUs (${cpus()[0]?.model ?? '?'}), redis-server ${redisVersion}, ` +
        `load average before: ${loadAverage()}`,
    )
    console.log(
      `${CLIENTS} clients × ${WINDOW} messages in flight, ${PAYLOAD_BYTES} B binary payloads, echo; ` +
        `${WARMUP_MS / 1000} s warm-up + ${MEASURE_MS / 1000} s measured, ${ROUNDS} rounds (order reversed every ` +
        'other round), medians shown; CPU is process CPU time over the measured phase (100% = one core)',
    )
    console.log(
      `clients in a separate process (pid ${load.pid}); servers and their stores in this one (pid ${process.pid})`,
    )
    console.log(
      `protected servers: messagesPerSecond 1e6, messageBurst 1e6, maxConnectionsPerIdentity 10000, ` +
        `handshakesPerIp off, leaseMs ${LEASE_MS} (renewed every ${LEASE_MS / 3} ms), other options default`,
    )
    console.log(
      '  redis:  connection leases and handshake budgets in Redis; the message limits are per connection, in ' +
        'process: no message touches Redis',
    )
    console.log(
      `  shared: as redis + identityMessages ${JSON.stringify(SHARED_BUDGET)} (batch: default, 100,000): one ` +
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
      'msg/s',
      // Let the closes and lease releases of a run settle before the next.
      () => sleep(100),
    )
    printEchoSummary(contenders, results, TARGETS, 'msg/s', 'message')
    console.log(`\nload average after: ${loadAverage()}`)
    if (storeErrors.size > 0)
      console.log('RedisStore errors and breaker changes:', Object.fromEntries(storeErrors))
  } finally {
    await load.stop()
    for (const contender of contenders) {
      await contender.protection?.close()
      for (const ws of contender.wss.clients) ws.terminate()
      await new Promise((resolve) => contender.wss.close(resolve))
    }
    await client.quit().catch(() => client.disconnect())
    await redis.stop()
  }
}

if (process.argv.includes('--load')) await serveLoadJobs(runLoad)
else await main()
