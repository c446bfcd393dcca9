/**
 * Decisions per second of tollbooth's token bucket against rate-limiter-flexible (RLF), on memory and on Redis.
 *
 *   npm run bench:core
 *
 * Workload, the same for every contender:
 * - 256 async workers, each looping `await consume(key)`: 256 calls in flight at all times;
 * - 10,000 distinct keys, taken round-robin from one shared counter;
 * - an equivalent limit: tollbooth token bucket of capacity 100 refilled at 100/s, RLF fixed window of 100 points
 *   per 1 s. Both let a key through at 100/s sustained and start denying once it gets more than 100 calls/s
 *   (the fixed window also lets up to 200 through around a window boundary). At Redis speed every key sees a few
 *   calls per second, so both allow everything; at memory speed a key sees about 100 calls/s, so the faster
 *   contender denies some: the table shows the allowed ratio next to the rate;
 * - each run: WARMUP_MS of the same load (JIT, keys, script cache), then MEASURE_MS measured;
 * - ROUNDS rounds, the order of each pair swapped every round; the table shows the median round.
 *
 * Latency is the time of one `consume` call (performance.now() before and after), queueing behind the 255 other
 * in-flight calls included. A denial is a decision: tollbooth answers `allowed: false`, RLF rejects with a
 * RateLimiterRes. Anything else (an RLF error, a tollbooth decision of its fail policy, e.g. fail-open after a store
 * timeout) counts as an error, and is left out of decisions/s and of the allowed ratio.
 *
 * Redis: a private redis-server started by `startRedis()` (never the shared one on :6379), stopped at the end.
 * Each Redis contender gets its own ioredis client with the same options, `redisClientOptions` below.
 *
 * Redis CPU per decision: redis-server's own CPU time (`INFO cpu`, `used_cpu_user` + `used_cpu_sys`) read before and
 * after each measured phase, over the decisions of that phase; on the cluster, summed over the masters (the replicas
 * do the same replication work for both libraries). It is what a shared Redis pays for each decision. Decisions per
 * script call (`INFO commandstats`: EVALSHA, EVAL and FCALL calls over the same phase) is printed beside it: Redis
 * pays a fixed price per call, so a client that batches more decisions into one call costs Redis less per decision,
 * and a slower client, whose batches are smaller, more.
 *
 * tollbooth is imported by its own name (`dist/`, the published build; the script builds first), not from the
 * TypeScript sources, which tsx would compile with `__name()` wrappers around every closure.
 */
import { cpus } from 'node:os'
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis'
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible'
import { type Decision, MemoryStore, type RateLimiter, RedisStore, tokenBucket } from 'tollbooth'
import { startRedis, startRedisCluster } from '../test/helpers/redisServer.js'
import { LatencyHistogram } from './latency.js'
import { count, fmt, loadAverage, median } from './report.js'

const CONCURRENCY = 256
const KEY_COUNT = 10_000
const CAPACITY = 100 // tollbooth: tokens; RLF: points per window
const PER_SECOND = 100 // tollbooth: refill per second; RLF: a window of 1 s
const WARMUP_MS = 1_000
const MEASURE_MS = 3_000
const ROUNDS = 3
const TARGETS: Record<Backend, number | undefined> = {
  memory: 1.5,
  redis: 1.3,
  cluster: 1.3,
  unlimited: undefined,
}
/** µs of redis-server CPU per tollbooth decision on one Redis; on every backend, less than RLF's. */
const REDIS_CPU_TARGET_US = 5
const BACKENDS = ['memory', 'unlimited', 'redis', 'cluster'] as const
/** `-- --only cluster` (or memory, unlimited, redis) runs one pair. */
const ONLY = process.argv.includes('--only') ? process.argv[process.argv.indexOf('--only') + 1] : undefined
const RUN_BACKENDS = BACKENDS.filter((backend) => ONLY === undefined || backend === ONLY)
const UNREACHABLE = 1e12

const keys = Array.from({ length: KEY_COUNT }, (_, i) => `user:${i}`)

/**
 * ioredis defaults, plus what RLF's docs recommend for its Redis client (`enableOfflineQueue: false`: fail fast
 * instead of queueing while disconnected). `lazyConnect` only lets us await the connection before the first call.
 */
const redisClientOptions = (port: number): RedisOptions => ({
  host: '127.0.0.1',
  port,
  enableOfflineQueue: false,
  lazyConnect: true,
})

/**
 * What the README recommends for a Cluster (RLF's docs recommend `enableOfflineQueue: false` too), the same for
 * both libraries' clients.
 */
const clusterClientOptions: ClusterOptions = {
  redisOptions: { maxRetriesPerRequest: 1, connectTimeout: 1000 },
  enableOfflineQueue: false,
}

/**
 * `unlimited`: memory again, with a quota no key reaches, so neither library denies (denials cost them differently).
 * `cluster`: a Redis Cluster of 3 masters with a replica each, started here.
 */
type Backend = (typeof BACKENDS)[number]

interface Contender {
  readonly name: string
  readonly backend: Backend
  readonly library: 'tollbooth' | 'RLF'
  /** One worker: loops over `run` until its deadline. */
  worker(run: Run): Promise<void>
}

/** Shared state of one timed phase: the key counter, the deadline and what was measured. */
class Run {
  readonly latency = new LatencyHistogram()
  calls = 0
  allowed = 0
  errors = 0
  private next = 0

  constructor(readonly deadline: number) {}

  nextKey(): string {
    const key = keys[this.next] as string
    this.next = (this.next + 1) % KEY_COUNT
    return key
  }

  record(ms: number, outcome: 'allowed' | 'denied' | 'error'): void {
    this.latency.add(ms)
    this.calls++
    if (outcome === 'allowed') this.allowed++
    else if (outcome === 'error') this.errors++
  }
}

interface Result {
  readonly perSecond: number
  /** µs of redis-server CPU per decision; NaN on memory. */
  readonly redisCpuUs: number
  /** Decisions per script call Redis ran; NaN on memory. */
  readonly perScriptCall: number
  readonly p50: number
  readonly p99: number
  readonly allowedRatio: number
  readonly errors: number
}

// Workers check the deadline themselves: with a memory store every `await` resolves in a microtask, so a timer
// would never get to fire while they run.
function tollboothContender(name: string, backend: Backend, limiter: RateLimiter): Contender {
  return {
    name,
    backend,
    library: 'tollbooth',
    async worker(run) {
      for (;;) {
        const key = run.nextKey()
        const start = performance.now()
        const decision = await limiter.consume(key)
        const end = performance.now()
        run.record(
          end - start,
          answeredByFailPolicy(decision) ? 'error' : decision.allowed ? 'allowed' : 'denied',
        )
        if (end >= run.deadline) return
      }
    },
  }
}

/** The store failed and the fail policy answered: 'store' and 'cache' (the deny cache) are real decisions. */
function answeredByFailPolicy(decision: Decision): boolean {
  return decision.source !== 'store' && decision.source !== 'cache'
}

function rlfContender(
  name: string,
  backend: Backend,
  limiter: RateLimiterMemory | RateLimiterRedis,
): Contender {
  return {
    name,
    backend,
    library: 'RLF',
    async worker(run) {
      for (;;) {
        const key = run.nextKey()
        const start = performance.now()
        let outcome: 'allowed' | 'denied' | 'error' = 'allowed'
        try {
          await limiter.consume(key)
        } catch (rejection) {
          outcome = rejection instanceof RateLimiterRes ? 'denied' : 'error'
        }
        const end = performance.now()
        run.record(end - start, outcome)
        if (end >= run.deadline) return
      }
    },
  }
}

type Phase = Omit<Result, 'redisCpuUs' | 'perScriptCall'> & { readonly decisions: number }

async function phase(contender: Contender, durationMs: number): Promise<Phase> {
  const start = performance.now()
  const run = new Run(start + durationMs)
  await Promise.all(Array.from({ length: CONCURRENCY }, () => contender.worker(run)))
  const elapsedSeconds = (performance.now() - start) / 1000
  return {
    // Only store-answered decisions count: a fail-open answer is fast but is no decision of the store.
    perSecond: (run.calls - run.errors) / elapsedSeconds,
    decisions: run.calls - run.errors,
    p50: run.latency.percentile(50),
    p99: run.latency.percentile(99),
    allowedRatio: run.allowed / (run.calls - run.errors),
    errors: run.errors,
  }
}

/** What the backend's redis-servers have done so far; absent on memory. */
type RedisUsage = (() => Promise<RedisWork>) | undefined

interface RedisWork {
  /** `used_cpu_user` + `used_cpu_sys`, in seconds. */
  readonly cpuSeconds: number
  /** Script calls (EVALSHA, EVAL, FCALL) answered. */
  readonly scriptCalls: number
}

async function measure(contender: Contender, redisUsage: RedisUsage): Promise<Result> {
  await phase(contender, WARMUP_MS)
  const before = await redisUsage?.()
  const { decisions, ...result } = await phase(contender, MEASURE_MS)
  const after = await redisUsage?.()
  if (before === undefined || after === undefined) {
    return { ...result, redisCpuUs: Number.NaN, perScriptCall: Number.NaN }
  }
  return {
    ...result,
    redisCpuUs: ((after.cpuSeconds - before.cpuSeconds) * 1e6) / decisions,
    perScriptCall: decisions / (after.scriptCalls - before.scriptCalls),
  }
}

async function redisWork(client: Redis): Promise<RedisWork> {
  const [cpu, stats] = await Promise.all([client.info('cpu'), client.info('commandstats')])
  const field = (name: string) => Number(new RegExp(`^${name}:(\\S+)`, 'm').exec(cpu)?.[1] ?? Number.NaN)
  const calls = (command: string) =>
    Number(new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(stats)?.[1] ?? 0)
  return {
    cpuSeconds: field('used_cpu_user') + field('used_cpu_sys'),
    scriptCalls: calls('evalsha') + calls('eval') + calls('fcall'),
  }
}

function summed(works: readonly RedisWork[]): RedisWork {
  return {
    cpuSeconds: works.reduce((sum, w) => sum + w.cpuSeconds, 0),
    scriptCalls: works.reduce((sum, w) => sum + w.scriptCalls, 0),
  }
}

async function main(): Promise<void> {
  const [redis, cluster] = await Promise.all([
    startRedis(),
    startRedisCluster({ masters: 3, replicas: 1, nodeTimeoutMs: 1000 }),
  ])
  const clients: (Redis | Cluster)[] = []
  const memoryStore = new MemoryStore()
  const storeErrors = new Map<string, number>()
  try {
    const connect = async () => {
      const client = new Redis(redisClientOptions(redis.port))
      clients.push(client)
      await client.connect()
      return client
    }
    const tollboothClient = await connect()
    const rlfClient = await connect()
    const connectCluster = async () => {
      const client = new Cluster(cluster.startupNodes, clusterClientOptions)
      clients.push(client)
      await new Promise<void>((resolve, reject) => {
        client.once('ready', resolve)
        client.once('error', reject)
      })
      return client
    }
    const tollboothCluster = await connectCluster()
    const rlfCluster = await connectCluster()
    const clusterStore = new RedisStore({
      client: tollboothCluster,
      hooks: {
        onStoreError: ({ error }) => count(storeErrors, `cluster: ${error.code ?? error.message}`),
        onBreakerChange: ({ to }) => count(storeErrors, `cluster: breaker → ${to}`),
      },
    })
    await clusterStore.warmUp()
    const cpuClients = await Promise.all(
      [redis.port, ...(await cluster.masters()).map((master) => master.port)].map(async (port) => {
        const client = new Redis(redisClientOptions(port))
        clients.push(client)
        await client.connect()
        return client
      }),
    )
    const [standaloneCpu, ...masterCpus] = cpuClients as [Redis, ...Redis[]]
    const redisUsage: Record<Backend, RedisUsage> = {
      memory: undefined,
      unlimited: undefined,
      redis: () => redisWork(standaloneCpu),
      cluster: async () => summed(await Promise.all(masterCpus.map(redisWork))),
    }
    const redisVersion = /redis_version:(\S+)/.exec(await tollboothClient.info('server'))?.[1] ?? '?'

    const contenders: Contender[] = [
      tollboothContender(
        'tollbooth tokenBucket / MemoryStore',
        'memory',
        tokenBucket({ name: 'bench', capacity: CAPACITY, refillPerSecond: PER_SECOND, store: memoryStore }),
      ),
      rlfContender(
        'RLF RateLimiterMemory',
        'memory',
        new RateLimiterMemory({ keyPrefix: 'bench', points: CAPACITY, duration: CAPACITY / PER_SECOND }),
      ),
      tollboothContender(
        'tollbooth tokenBucket / Memory, no denial',
        'unlimited',
        tokenBucket({ name: 'unlimited', capacity: UNREACHABLE, refillPerSecond: 1e6, store: memoryStore }),
      ),
      rlfContender(
        'RLF RateLimiterMemory, no denial',
        'unlimited',
        new RateLimiterMemory({ keyPrefix: 'unlimited', points: UNREACHABLE, duration: 1 }),
      ),
      tollboothContender(
        'tollbooth tokenBucket / RedisStore',
        'redis',
        tokenBucket({
          name: 'bench',
          capacity: CAPACITY,
          refillPerSecond: PER_SECOND,
          store: new RedisStore({
            client: tollboothClient,
            // The default deadline (50 ms): store errors, if any, are counted and printed below the table.
            hooks: {
              onStoreError: ({ error }) => count(storeErrors, error.code ?? error.message),
              onBreakerChange: ({ to }) => count(storeErrors, `breaker → ${to}`),
            },
          }),
        }),
      ),
      rlfContender(
        'RLF RateLimiterRedis',
        'redis',
        new RateLimiterRedis({
          storeClient: rlfClient,
          useRedisPackage: false,
          keyPrefix: 'bench',
          points: CAPACITY,
          duration: CAPACITY / PER_SECOND,
        }),
      ),
      tollboothContender(
        'tollbooth tokenBucket / RedisStore, cluster',
        'cluster',
        tokenBucket({ name: 'bench', capacity: CAPACITY, refillPerSecond: PER_SECOND, store: clusterStore }),
      ),
      rlfContender(
        'RLF RateLimiterRedis, cluster',
        'cluster',
        new RateLimiterRedis({
          storeClient: rlfCluster,
          useRedisPackage: false,
          keyPrefix: 'bench',
          points: CAPACITY,
          duration: CAPACITY / PER_SECOND,
        }),
      ),
    ]

    console.log(
      `Node ${process.version}, ${cpus().length} CPUs (${cpus()[0]?.model ?? '?'}), redis-server ${redisVersion}`,
    )
    console.log(
      `${CONCURRENCY} in flight, ${KEY_COUNT} keys round-robin, capacity ${CAPACITY} + ${PER_SECOND}/s ` +
        `vs ${CAPACITY} points per ${CAPACITY / PER_SECOND} s; ` +
        `${WARMUP_MS / 1000} s warm-up + ${MEASURE_MS / 1000} s measured, ${ROUNDS} rounds, median shown`,
    )
    console.log(`load average before: ${loadAverage()}`)
    console.log(`ioredis options (both clients): ${JSON.stringify(redisClientOptions(redis.port))}`)
    console.log(
      `cluster: 3 masters + 3 replicas, ioredis Cluster options (both clients): ${JSON.stringify(clusterClientOptions)}\n`,
    )

    const results = new Map<Contender, Result[]>(contenders.map((c) => [c, []]))
    for (let round = 1; round <= ROUNDS; round++) {
      for (const backend of RUN_BACKENDS) {
        const pair = contenders.filter((c) => c.backend === backend)
        if (round % 2 === 0) pair.reverse()
        for (const contender of pair) {
          const result = await measure(contender, redisUsage[contender.backend])
          results.get(contender)?.push(result)
          console.log(
            `round ${round}  ${contender.name.padEnd(44)} ${Math.round(result.perSecond).toLocaleString('en-US').padStart(10)}/s`,
          )
        }
      }
    }

    const summary = new Map(
      contenders
        .filter((c) => RUN_BACKENDS.includes(c.backend))
        .map((c) => {
          const rounds = results.get(c) ?? []
          const byRate = [...rounds].sort((a, b) => a.perSecond - b.perSecond)
          return [
            c,
            {
              perSecond: median(rounds.map((r) => r.perSecond)),
              p50: median(rounds.map((r) => r.p50)),
              p99: median(rounds.map((r) => r.p99)),
              redisCpuUs: median(rounds.map((r) => r.redisCpuUs)),
              perScriptCall: median(rounds.map((r) => r.perScriptCall)),
              allowedRatio: median(rounds.map((r) => r.allowedRatio)),
              errors: rounds.reduce((sum, r) => sum + r.errors, 0),
              spread: `${fmt(byRate[0]?.perSecond)}–${fmt(byRate.at(-1)?.perSecond)}`,
            },
          ] as const
        }),
    )

    console.log()
    console.log(
      [
        'name'.padEnd(44),
        'decisions/s'.padStart(12),
        'min–max of rounds'.padStart(22),
        'p50 ms'.padStart(8),
        'p99 ms'.padStart(8),
        'allowed'.padStart(8),
        'errors'.padStart(7),
        'Redis CPU µs/decision'.padStart(22),
        'decisions/script call'.padStart(22),
      ].join(' '),
    )
    for (const [c, s] of summary) {
      console.log(
        [
          c.name.padEnd(44),
          fmt(s.perSecond).padStart(12),
          s.spread.padStart(22),
          s.p50.toFixed(3).padStart(8),
          s.p99.toFixed(3).padStart(8),
          `${(s.allowedRatio * 100).toFixed(1)}%`.padStart(8),
          String(s.errors).padStart(7),
          (Number.isNaN(s.redisCpuUs) ? '–' : s.redisCpuUs.toFixed(2)).padStart(22),
          (Number.isNaN(s.perScriptCall) ? '–' : s.perScriptCall.toFixed(1)).padStart(22),
        ].join(' '),
      )
    }
    console.log()
    for (const backend of RUN_BACKENDS) {
      const rate = (library: Contender['library']) =>
        [...summary].find(([c]) => c.backend === backend && c.library === library)?.[1].perSecond ??
        Number.NaN
      const ratio = rate('tollbooth') / rate('RLF')
      const target = TARGETS[backend]
      const verdict =
        target === undefined
          ? 'no target: the same memory stores with every decision an allowance'
          : ratio >= target
            ? `target ≥ ${target.toFixed(1)}×   met`
            : `target ≥ ${target.toFixed(1)}×   NOT met (${(((target - ratio) / target) * 100).toFixed(0)}% short)`
      console.log(`tollbooth/RLF ${backend.padEnd(9)} ${ratio.toFixed(2)}×   ${verdict}`)
    }
    console.log()
    for (const backend of RUN_BACKENDS) {
      if (redisUsage[backend] === undefined) continue
      const cpuOf = (library: Contender['library']) =>
        [...summary].find(([c]) => c.backend === backend && c.library === library)?.[1].redisCpuUs ??
        Number.NaN
      const tollbooth = cpuOf('tollbooth')
      const rlf = cpuOf('RLF')
      // The target is for one Redis; a cluster's masters also feed their replicas, for both libraries alike.
      const verdicts = [tollbooth < rlf ? 'below RLF: met' : 'below RLF: NOT met']
      if (backend === 'redis') {
        verdicts.push(
          tollbooth <= REDIS_CPU_TARGET_US
            ? `≤ ${REDIS_CPU_TARGET_US} µs at ${fmt(KEY_COUNT)} keys: met`
            : `≤ ${REDIS_CPU_TARGET_US} µs at ${fmt(KEY_COUNT)} keys: NOT met (${(((tollbooth - REDIS_CPU_TARGET_US) / REDIS_CPU_TARGET_US) * 100).toFixed(0)}% over)`,
        )
      }
      console.log(
        `Redis CPU per decision ${backend.padEnd(9)} tollbooth ${tollbooth.toFixed(2)} µs, RLF ${rlf.toFixed(2)} µs   ` +
          `target ${verdicts.join(', ')}`,
      )
    }
    console.log(`\nload average after: ${loadAverage()}`)
    if (storeErrors.size > 0)
      console.log('tollbooth RedisStore errors and breaker changes:', Object.fromEntries(storeErrors))
  } finally {
    await Promise.all(clients.map((client) => client.quit().catch(() => client.disconnect())))
    memoryStore.close()
    await Promise.all([redis.stop(), cluster.stop()])
  }
}

await main()
