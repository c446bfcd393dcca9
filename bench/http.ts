/**
 * Requests per second of Express and Fastify servers, plain and rate-limited, tollbooth beside its peers, in one run.
 *
 *   npm run bench:http
 *
 * Contenders, each one server in a process of its own (this file again, with `--serve <key>`), all alive for the
 * whole run, all answering `GET /` with the same small JSON body:
 * - plain Express 5, and a second plain Express: an A/A control, whose ratio to the first shows how far this run can
 *   read one server against itself, i.e. what a ratio of this run is good to;
 * - Express + tollbooth `rateLimit` (fixedWindow on a MemoryStore) and Express + express-rate-limit (its memory
 *   store, `standardHeaders: 'draft-8'`, the draft tollbooth follows, and no legacy headers);
 * - plain Fastify 5, Fastify + `tollbooth/fastify` (fixedWindow on a MemoryStore) and Fastify + @fastify/rate-limit
 *   (its memory store, default headers);
 * - on Redis: Express + tollbooth and Fastify + tollbooth on a RedisStore, Express + express-rate-limit on its Redis
 *   store (rate-limit-redis, over ioredis), Fastify + @fastify/rate-limit on ioredis.
 * Every limiter is a fixed window of LIMIT requests per WINDOW_MS (what both peers implement), far beyond what the
 * load can spend: nothing is refused, what is measured is the overhead. The identity is the `x-bench-user` header,
 * spread over USERS values, read by each limiter's key function (`identify`, `keyGenerator`).
 *
 * Load: autocannon with CONNECTIONS connections (no pipelining), each cycling through USERS prebuilt requests;
 * WARMUP_S of the same load (not counted), then MEASURE_S measured, in a separate process (bench/loadProcess.ts).
 * With 2 CPUs, the server, the load and redis-server share the machine. ROUNDS rounds, each running the contenders
 * in the order of `roundOrder` (a balanced Latin square); the table shows medians, the verdicts paired ratios (each
 * round's rate over the reference's in the same round). Every response is checked: anything but a 200 is counted.
 * A server's CPU time over the measured phase is read from its own process.
 *
 * Redis: a private redis-server started by `startRedis()` (never the shared one on :6379), stopped at the end.
 *
 * tollbooth is imported by its own name (`dist/`, the published build; the script builds first).
 */
import type { Server } from 'node:http'
import { createRequire } from 'node:module'
import type { AddressInfo } from 'node:net'
import { cpus } from 'node:os'
import { createInterface } from 'node:readline'
import fastifyRateLimit from '@fastify/rate-limit'
import express from 'express'
import { rateLimit as expressRateLimit } from 'express-rate-limit'
import Fastify from 'fastify'
import { Redis, type RedisOptions } from 'ioredis'
import { RedisStore as RateLimitRedisStore, type RedisReply } from 'rate-limit-redis'
import { fixedWindow, RedisStore, type Store } from 'tollbooth'
import { tollboothRateLimit } from 'tollbooth/fastify'
import { rateLimit } from 'tollbooth/http'
import { startRedis } from '../test/helpers/redisServer.js'
import { announceMeasuredPhase, LoadProcess, serveLoadJobs } from './loadProcess.js'
import { fmt, loadAverage, median, pct, verdict } from './report.js'
import { ScriptProcess } from './scriptProcess.js'

const CONNECTIONS = 50
const WARMUP_S = 1
const MEASURE_S = 3
/** Many short rounds rather than a few long ones: the machine's load drifts, and each round is paired. */
const ROUNDS = 6
const USERS = 1000
const LIMIT = 1_000_000_000
const WINDOW_MS = 60_000
const IDENTITY_HEADER = 'x-bench-user'
const BODY = { hello: 'world' }

const KEYS = [
  'expressPlain',
  'expressPlainAgain',
  'expressTollbooth',
  'expressRateLimit',
  'fastifyPlain',
  'fastifyTollbooth',
  'fastifyRateLimit',
  'expressTollboothRedis',
  'expressRateLimitRedis',
  'fastifyTollboothRedis',
  'fastifyRateLimitRedis',
] as const
type Key = (typeof KEYS)[number]

const NAMES: Record<Key, string> = {
  expressPlain: 'plain Express',
  expressPlainAgain: 'plain Express again (A/A)',
  expressTollbooth: 'Express + tollbooth, memory',
  expressRateLimit: 'Express + express-rate-limit, memory',
  fastifyPlain: 'plain Fastify',
  fastifyTollbooth: 'Fastify + tollbooth, memory',
  fastifyRateLimit: 'Fastify + @fastify/rate-limit, memory',
  expressTollboothRedis: 'Express + tollbooth, Redis',
  expressRateLimitRedis: 'Express + express-rate-limit, Redis',
  fastifyTollboothRedis: 'Fastify + tollbooth, Redis',
  fastifyRateLimitRedis: 'Fastify + @fastify/rate-limit, Redis',
}

/** What is read against what: `this` over `versus`, paired per round, with the target if it has one. */
const COMPARISONS: { this: Key; versus: Key; target?: number }[] = [
  { this: 'expressPlainAgain', versus: 'expressPlain' },
  { this: 'expressTollbooth', versus: 'expressRateLimit', target: 1.0 },
  { this: 'expressTollbooth', versus: 'expressPlain', target: 0.95 },
  { this: 'expressRateLimit', versus: 'expressPlain' },
  { this: 'fastifyTollbooth', versus: 'fastifyRateLimit', target: 1.0 },
  { this: 'fastifyTollbooth', versus: 'fastifyPlain' },
  { this: 'fastifyRateLimit', versus: 'fastifyPlain' },
  { this: 'expressTollboothRedis', versus: 'expressRateLimitRedis', target: 1.0 },
  { this: 'fastifyTollboothRedis', versus: 'fastifyRateLimitRedis', target: 1.0 },
  { this: 'expressTollboothRedis', versus: 'expressPlain' },
  { this: 'fastifyTollboothRedis', versus: 'fastifyPlain' },
  { this: 'fastifyRateLimitRedis', versus: 'fastifyPlain' },
]

/** The same client options for every Redis contender (what docs/core.md recommends). */
const redisOptions = (port: number): RedisOptions => ({
  host: '127.0.0.1',
  port,
  enableOfflineQueue: false,
  maxRetriesPerRequest: 1,
  connectTimeout: 1000,
  lazyConnect: true,
})

const identityOf = (headers: Record<string, string | string[] | undefined>): string => {
  const value = headers[IDENTITY_HEADER]
  return typeof value === 'string' ? value : 'anonymous'
}

// ---------------------------------------------------------------------------------------------------------------
// A server (child process: `--serve <key> <redis port>`)
// ---------------------------------------------------------------------------------------------------------------

/** Starts one contender, prints `{ "url" }`, then answers each `cpu` line on stdin with its CPU time (µs). */
async function serve(key: Key, redisPort: number): Promise<void> {
  let client: Redis | undefined
  const redis = async (): Promise<Redis> => {
    client = new Redis(redisOptions(redisPort))
    await client.connect()
    return client
  }
  const tollboothStore = async (): Promise<Store> => {
    const store = new RedisStore({ client: await redis(), prefix: `bench-http-${key}:` })
    await store.warmUp()
    return store
  }
  const limiter = (store?: Store) => fixedWindow({ name: 'bench', limit: LIMIT, windowMs: WINDOW_MS, store })
  const identify = (req: { headers: Record<string, string | string[] | undefined> }) =>
    identityOf(req.headers)

  let url: string
  if (key.startsWith('express')) {
    const app = express()
    if (key === 'expressTollbooth') app.use(rateLimit({ limiter: limiter(), identify }))
    if (key === 'expressTollboothRedis')
      app.use(rateLimit({ limiter: limiter(await tollboothStore()), identify }))
    if (key === 'expressRateLimit' || key === 'expressRateLimitRedis') {
      const client = key === 'expressRateLimitRedis' ? await redis() : undefined
      app.use(
        expressRateLimit({
          windowMs: WINDOW_MS,
          limit: LIMIT,
          standardHeaders: 'draft-8',
          legacyHeaders: false,
          keyGenerator: (req) => identityOf(req.headers),
          ...(client === undefined
            ? {}
            : {
                store: new RateLimitRedisStore({
                  prefix: 'bench-http-erl:',
                  sendCommand: (command: string, ...args: string[]) =>
                    client.call(command, ...args) as Promise<RedisReply>,
                }),
              }),
        }),
      )
    }
    app.get('/', (_req, res) => {
      res.json(BODY)
    })
    const server = await new Promise<Server>((resolve) => {
      const listening = app.listen(0, '127.0.0.1', () => resolve(listening))
    })
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`
  } else {
    const app = Fastify({ logger: false })
    if (key === 'fastifyTollbooth') await app.register(tollboothRateLimit, { limiter: limiter(), identify })
    if (key === 'fastifyTollboothRedis') {
      await app.register(tollboothRateLimit, { limiter: limiter(await tollboothStore()), identify })
    }
    if (key === 'fastifyRateLimit' || key === 'fastifyRateLimitRedis') {
      await app.register(fastifyRateLimit, {
        max: LIMIT,
        timeWindow: WINDOW_MS,
        keyGenerator: (req) => identityOf(req.headers),
        ...(key === 'fastifyRateLimitRedis' ? { redis: await redis(), nameSpace: 'bench-http-frl:' } : {}),
      })
    }
    app.get('/', async () => BODY)
    url = `${await app.listen({ port: 0, host: '127.0.0.1' })}/`
  }

  process.stdout.write(`${JSON.stringify({ url })}\n`)
  for await (const line of createInterface({ input: process.stdin })) {
    if (line !== 'cpu') continue
    const cpu = process.cpuUsage()
    process.stdout.write(`${JSON.stringify({ cpuMicros: cpu.user + cpu.system })}\n`)
  }
  client?.disconnect()
  process.exit(0)
}

/** The bench's side of a server process. */
class ServerProcess {
  private readonly script: ScriptProcess

  constructor(
    readonly key: Key,
    redisPort: number,
  ) {
    this.script = new ScriptProcess(`server ${key}`, import.meta.url, ['--serve', key, String(redisPort)])
  }

  async url(): Promise<string> {
    return (JSON.parse(await this.script.next()) as { url: string }).url
  }

  async cpuMicros(): Promise<number> {
    this.script.send('cpu')
    return (JSON.parse(await this.script.next()) as { cpuMicros: number }).cpuMicros
  }

  async stop(): Promise<void> {
    await this.script.stop(5_000)
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The load generator (child process: `--load`)
// ---------------------------------------------------------------------------------------------------------------

interface LoadJob {
  url: string
  connections: number
  warmupSeconds: number
  measureSeconds: number
  users: number
}

interface LoadResult {
  requests: number
  seconds: number
  perSecond: number
  p50: number
  p99: number
  /** Anything but a 200: non-2xx, other 2xx, socket errors and timeouts. */
  problems: number
  statusCodes: Record<string, number>
  /** CPU time of the load generator over the measured phase, as a fraction of one core. */
  clientCpu: number
}

/** The part of autocannon 8's API used here (the package ships no types). */
interface AutocannonResult {
  duration: number
  requests: { total: number }
  latency: { p50: number; p99: number }
  errors: number
  timeouts: number
  statusCodeStats: Record<string, { count: number }>
}
type Autocannon = (options: {
  url: string
  connections: number
  duration: number
  requests: { method: string; headers: Record<string, string> }[]
}) => Promise<AutocannonResult>

async function runLoad(job: LoadJob): Promise<LoadResult> {
  const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon
  const requests = Array.from({ length: job.users }, (_, i) => ({
    method: 'GET',
    headers: { [IDENTITY_HEADER]: `user-${i}` },
  }))
  const options = { url: job.url, connections: job.connections, requests }
  await autocannon({ ...options, duration: job.warmupSeconds })
  announceMeasuredPhase()
  const cpuStart = process.cpuUsage()
  const result = await autocannon({ ...options, duration: job.measureSeconds })
  const cpu = process.cpuUsage(cpuStart)
  const statusCodes: Record<string, number> = {}
  for (const [code, { count }] of Object.entries(result.statusCodeStats)) statusCodes[code] = count
  const ok = statusCodes['200'] ?? 0
  return {
    requests: result.requests.total,
    seconds: result.duration,
    perSecond: ok / result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    problems: result.requests.total - ok + result.errors + result.timeouts,
    statusCodes,
    clientCpu: (cpu.user + cpu.system) / 1e6 / result.duration,
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The run (main process)
// ---------------------------------------------------------------------------------------------------------------

interface Round extends LoadResult {
  serverCpu: number
  serverMicrosPerRequest: number
}

/** One request to each server: a 200 with the body, and which rate-limit fields it answers with. */
async function check(key: Key, url: string): Promise<string> {
  const response = await fetch(url, { headers: { [IDENTITY_HEADER]: 'check' } })
  const body = await response.text()
  if (response.status !== 200 || body !== JSON.stringify(BODY)) {
    throw new Error(`${NAMES[key]}: answered ${response.status} ${body.slice(0, 200)}`)
  }
  const fields = [...response.headers.keys()].filter((name) => name.includes('ratelimit'))
  return fields.length === 0 ? 'no rate-limit fields' : fields.join(', ')
}

/**
 * The order of the servers in a round: the rows of Williams' balanced Latin square (n rounds, 2n when n is odd), so
 * that over a full set of rounds each server runs right after each other one equally often.
 */
function roundOrder(round: number, n: number): number[] {
  const first = [0]
  for (let low = 1, high = n - 1, i = 1; i < n; i++) first.push(i % 2 === 1 ? low++ : high--)
  const rows = n % 2 === 0 ? n : 2 * n
  const row = round % rows
  const order = first.map((position) => (position + row) % n)
  return row < n ? order : order.reverse()
}

function report(results: ReadonlyMap<Key, Round[]>, started: number): void {
  console.log()
  console.log(
    [
      'server'.padEnd(38),
      'req/s'.padStart(7),
      'min–max of rounds'.padStart(18),
      'p50 ms'.padStart(7),
      'p99 ms'.padStart(7),
      'µs CPU/req'.padStart(11),
      'CPU srv/load'.padStart(13),
      'responses'.padStart(10),
      'not 200'.padStart(8),
    ].join(' '),
  )
  const of = (key: Key) => results.get(key) ?? []
  let problems = 0
  for (const key of KEYS) {
    const rounds = of(key)
    const rates = rounds.map((r) => r.perSecond).sort((a, b) => a - b)
    const notOk = rounds.reduce((total, r) => total + r.problems, 0)
    problems += notOk
    console.log(
      [
        NAMES[key].padEnd(38),
        fmt(median(rates)).padStart(7),
        `${fmt(rates[0])}–${fmt(rates.at(-1))}`.padStart(18),
        median(rounds.map((r) => r.p50))
          .toFixed(1)
          .padStart(7),
        median(rounds.map((r) => r.p99))
          .toFixed(1)
          .padStart(7),
        median(rounds.map((r) => r.serverMicrosPerRequest))
          .toFixed(0)
          .padStart(11),
        `${pct(median(rounds.map((r) => r.serverCpu)))}/${pct(median(rounds.map((r) => r.clientCpu)))}`.padStart(
          13,
        ),
        fmt(rounds.reduce((total, r) => total + r.requests, 0)).padStart(10),
        String(notOk).padStart(8),
      ].join(' '),
    )
  }
  console.log(
    problems === 0
      ? '\nall responses: 200 (nothing refused)'
      : `\n${problems} responses were NOT 200 (see the table): the rates above are not comparable`,
  )

  // Paired ratios: each round's rate over the reference's in the same round, median over rounds (drift of the
  // machine's load between rounds cancels out); and the ratio of server CPU per request.
  console.log()
  for (const comparison of COMPARISONS) {
    const mine = of(comparison.this)
    const theirs = of(comparison.versus)
    const paired = median(mine.map((r, i) => r.perSecond / (theirs[i]?.perSecond ?? Number.NaN)))
    const cpu =
      median(theirs.map((r) => r.serverMicrosPerRequest)) / median(mine.map((r) => r.serverMicrosPerRequest))
    const label = `${NAMES[comparison.this]} / ${NAMES[comparison.versus]}`
    const target =
      comparison.this === 'expressPlainAgain'
        ? '(A/A control: one server read against its twin)'
        : comparison.target === undefined
          ? '(reference, no target)'
          : `target ≥ ${comparison.target.toFixed(2)}×   ${verdict(paired, comparison.target)}`
    console.log(`${label.padEnd(78)} ${paired.toFixed(2)}× req/s (paired)   ${target}`)
    console.log(`${''.padEnd(78)} ${cpu.toFixed(2)}× server CPU per request (theirs/mine)`)
  }
  console.log(
    `load average after: ${loadAverage()}; total ${((performance.now() - started) / 1000).toFixed(0)} s`,
  )
}

async function main(): Promise<void> {
  const started = performance.now()
  const redis = await startRedis()
  const servers = KEYS.map((key) => new ServerProcess(key, redis.port))
  const load = new LoadProcess<LoadJob, LoadResult>(import.meta.url)
  try {
    const urls = await Promise.all(servers.map((server) => server.url()))
    console.log(
      `Node ${process.version}, ${cpus().length} CPUs (${cpus()[0]?.model ?? '?'}), ` +
        `load average before: ${loadAverage()}`,
    )
    console.log(
      `autocannon: ${CONNECTIONS} connections, no pipelining, ${USERS} identities in ${IDENTITY_HEADER}; ` +
        `${WARMUP_S} s warm-up + ${MEASURE_S} s measured, ${ROUNDS} rounds in a balanced order, medians shown`,
    )
    console.log(
      `every limiter: a fixed window of ${fmt(LIMIT)} requests per ${WINDOW_MS / 1000} s per identity (nothing ` +
        `refused); each server in its own process, the load generator in another (pid ${load.pid})`,
    )
    for (const [i, server] of servers.entries()) {
      console.log(`  check ${NAMES[server.key]}: 200, ${await check(server.key, urls[i] as string)}`)
    }
    console.log()

    const results = new Map<Key, Round[]>(KEYS.map((key) => [key, []]))
    const job = { connections: CONNECTIONS, warmupSeconds: WARMUP_S, measureSeconds: MEASURE_S, users: USERS }
    for (let round = 0; round < ROUNDS; round++) {
      for (const i of roundOrder(round, servers.length)) {
        const server = servers[i] as ServerProcess
        let cpuBefore: Promise<number> | undefined
        const measured = await load.run({ ...job, url: urls[i] as string }, () => {
          cpuBefore = server.cpuMicros()
        })
        const cpuMicros = (await server.cpuMicros()) - ((await cpuBefore) ?? 0)
        const result: Round = {
          ...measured,
          serverCpu: cpuMicros / 1e6 / measured.seconds,
          serverMicrosPerRequest: cpuMicros / measured.requests,
        }
        results.get(server.key)?.push(result)
        console.log(
          `round ${round + 1}  ${NAMES[server.key].padEnd(38)} ${fmt(result.perSecond).padStart(7)} req/s` +
            `   p50 ${result.p50.toFixed(1)} ms  p99 ${result.p99.toFixed(1)} ms` +
            `   server ${result.serverMicrosPerRequest.toFixed(0)} µs CPU/req` +
            (result.problems === 0 ? '' : `   NOT 200: ${result.problems}`),
        )
      }
    }
    report(results, started)
  } finally {
    await load.stop()
    await Promise.all(servers.map((server) => server.stop()))
    await redis.stop()
  }
}

const serveAt = process.argv.indexOf('--serve')
if (serveAt !== -1) {
  const key = process.argv[serveAt + 1] as Key
  if (!KEYS.includes(key)) throw new Error(`--serve: unknown server ${key}`)
  await serve(key, Number(process.argv[serveAt + 2]))
} else if (process.argv.includes('--load')) {
  await serveLoadJobs(runLoad)
} else {
  await main()
}
