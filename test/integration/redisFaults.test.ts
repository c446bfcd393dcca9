/**
 * Fault tests of the Redis store: a PRIVATE redis-server (never the shared one on 6379, never the globalSetup one)
 * is stopped, restarted, paused with SIGSTOP and resumed while limiters run a concurrent load against it. Every fail
 * policy is checked with the client settings test/helpers/stores.ts records as the README's recommendation (offline
 * queue off: commands on a dropped connection fail at once) and with plain ioredis defaults (offline queue on, 20
 * retries per request), since the store's deadline must hold whatever the client does on its own.
 */
import { once } from 'node:events'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis, type RedisOptions } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Decision, DecisionSource } from '../../src/core/decision.js'
import { ErrorCodes } from '../../src/core/errors.js'
import type { FailPolicy } from '../../src/core/failPolicy.js'
import { concurrencyLimit } from '../../src/core/limiters/concurrencyLimit.js'
import { tokenBucket } from '../../src/core/limiters/tokenBucket.js'
import type { RateLimiter } from '../../src/core/rateLimiter.js'
import { RedisStore } from '../../src/core/stores/redisStore.js'
import { type RedisProcess, startRedis } from '../helpers/redisServer.js'
import { limiterClientOptions } from '../helpers/stores.js'

const TIMEOUT_MS = 50
const FAILURE_THRESHOLD = 3
const COOLDOWN_MS = 300
/**
 * Worst latency allowed for one decision. The store's deadline is a `setTimeout(timeoutMs)`, and Node fires timers
 * late when the event loop is busy: here 20 workers plus the side checks keep it busy, ioredis handles reconnects
 * and (after SIGCONT or a restart) a backlog of stale replies, the helper spawns redis-server, and GC and vitest's
 * IPC run too. 100 ms absorbs that jitter, while a decision that waited for the client's own machinery (ioredis'
 * reconnect backoff of 50 ms to 5 s per retry, up to 20 retries, or a TCP connection that never answers under
 * SIGSTOP) would blow well past it.
 */
const LATENCY_BOUND_MS = TIMEOUT_MS + 100
/** After the fault is repaired, how long decisions may take to come back from the store (on top of the cooldown). */
const RECOVERY_BOUND_MS = COOLDOWN_MS + 3_000
const WORKERS = 20
const LOAD_KEYS = ['k1', 'k2', 'k3', 'k4']
const HEALTHY_MS = 150
const STOP_OUTAGE_MS = 600
const PAUSE_OUTAGE_MS = 900
const FAIL_CLOSED_RETRY_AFTER_MS = 1000 // the limiters' default failClosedRetryAfterMs
const LOAD_CAPACITY = 100_000 // so the load itself is never denied: every decision is an allowance

const policies: FailPolicy[] = ['open', 'closed', 'local']
const outageSource: Record<FailPolicy, DecisionSource> = {
  open: 'fail-open',
  closed: 'fail-closed',
  local: 'local',
}

type Fault = 'stop' | 'pause'

interface ClientConfig {
  readonly id: string
  readonly name: string
  readonly options: RedisOptions | undefined
  readonly faults: readonly Fault[]
}

const clientConfigs: ClientConfig[] = [
  {
    id: 'recommended',
    name: 'limiterClientOptions of test/helpers/stores.ts',
    options: limiterClientOptions,
    faults: ['stop', 'pause'],
  },
  // Offline queue on, 20 retries: calls on a dropped connection wait in ioredis until the deadline answers them.
  { id: 'defaults', name: 'ioredis defaults', options: undefined, faults: ['stop', 'pause'] },
]

let redis: RedisProcess
/** Whether the private server is stopped (not running at all), so cleanup knows to restart it. */
let redisStopped = false
const unhandled: unknown[] = []
const onUnhandledRejection = (reason: unknown) => {
  unhandled.push(reason)
}
const report: string[] = []
const fileStarted = performance.now()

beforeAll(async () => {
  process.on('unhandledRejection', onUnhandledRejection)
  redis = await startRedis()
  expect(redis.port).not.toBe(6379)
})

afterAll(async () => {
  await redis?.stop()
  // Late rejections (clients disconnected with commands still queued) would show up by now.
  await sleep(50)
  process.off('unhandledRejection', onUnhandledRejection)
  console.log(`redisFaults: ${((performance.now() - fileStarted) / 1000).toFixed(1)} s\n${report.join('\n')}`)
  expect(unhandled).toEqual([])
})

interface Sample {
  readonly key: string
  readonly start: number
  readonly end: number
  readonly decision?: Decision
  readonly error?: unknown
}

interface Load {
  readonly samples: Sample[]
  stop(): Promise<void>
}

/** `WORKERS` loops consuming on a few keys until stopped; every call's start, end and outcome is recorded. */
function startLoad(limiter: RateLimiter): Load {
  const samples: Sample[] = []
  let running = true
  const loop = async (key: string) => {
    while (running) {
      const start = performance.now()
      try {
        const decision = await limiter.consume(key)
        samples.push({ key, start, end: performance.now(), decision })
      } catch (error) {
        samples.push({ key, start, end: performance.now(), error })
      }
      // A real (if short) wait: calls refused by an open breaker settle in microtasks, and a loop of those alone
      // would starve the timers (the deadline's included).
      await sleep(2)
    }
  }
  const workers = Array.from({ length: WORKERS }, (_, i) => loop(LOAD_KEYS[i % LOAD_KEYS.length] as string))
  return {
    samples,
    stop: async () => {
      running = false
      await Promise.all(workers)
    },
  }
}

/** Awaits `call`, recording its latency into `latencies`. */
async function timed<T>(latencies: number[], call: () => Promise<T>): Promise<T> {
  const start = performance.now()
  try {
    return await call()
  } finally {
    latencies.push(performance.now() - start)
  }
}

async function waitFor(what: string, boundMs: number, condition: () => boolean): Promise<number> {
  const start = performance.now()
  while (!condition()) {
    if (performance.now() - start > boundMs) throw new Error(`${what}: not within ${boundMs} ms`)
    await sleep(5)
  }
  return performance.now() - start
}

function createClient(options: RedisOptions | undefined, errors: Error[]): Redis {
  const client = options === undefined ? new Redis(redis.url) : new Redis(redis.url, options)
  // Only an observer (otherwise ioredis prints every refused reconnect); it changes no client behaviour.
  client.on('error', (error: Error) => errors.push(error))
  return client
}

/** Waits for the connection (without an offline queue, a command sent before it fails at once). */
async function ready(client: Redis): Promise<void> {
  if (client.status !== 'ready') await once(client, 'ready')
  expect(await client.ping()).toBe('PONG')
}

const max = (values: number[]) => values.reduce((a, b) => Math.max(a, b), 0)
const fmt = (ms: number) => `${ms.toFixed(1)} ms`

async function runScenario(policy: FailPolicy, config: ClientConfig, fault: Fault) {
  const clientErrors: Error[] = []
  const client = createClient(config.options, clientErrors)
  /** `t` on the test's clock (performance.now), `wall` on the breaker's own (Date.now). */
  /** `openUntil`: on an opening, the end of the cooldown on the breaker's own clock (Date.now). */
  const breakerEvents: { t: number; wall: number; change: string; openUntil?: number }[] = []
  const storeErrors: { t: number; code: string | undefined; op: string }[] = []
  const sideLatencies: number[] = []
  /** Each successful store call: when it was made, and when its answer was read. */
  const storeAnswers: { made: number; read: number }[] = []
  const store = new RedisStore({
    client,
    prefix: `faults-${config.id}-${policy}-${fault}:`,
    timeoutMs: TIMEOUT_MS,
    breaker: { failureThreshold: FAILURE_THRESHOLD, cooldownMs: COOLDOWN_MS },
    hooks: {
      onBreakerChange: ({ node, from, to }) => {
        const wall = Date.now()
        const openUntil = to === 'open' ? wall + store.breaker.of(node).remainingCooldownMs(wall) : undefined
        breakerEvents.push({ t: performance.now(), wall, change: `${from}->${to}`, openUntil })
      },
      onStoreError: ({ op, error }) => storeErrors.push({ t: performance.now(), code: error.code, op }),
      // When the successful call was made (its reply may be read later, e.g. one already sent when SIGSTOP hit).
      onStoreLatency: ({ durationMs }) => {
        const read = performance.now()
        storeAnswers.push({ made: read - durationMs, read })
      },
    },
  })
  const failPolicy = policy
  const load = tokenBucket({
    name: 'load',
    store,
    failPolicy,
    capacity: LOAD_CAPACITY,
    refillPerSecond: LOAD_CAPACITY,
  })
  // 1 token per 10 s: nothing refills during the test, so counts are exact.
  const small = tokenBucket({ name: 'small', store, failPolicy, capacity: 5, refillPerSecond: 0.1 })
  const leases = concurrencyLimit({ name: 'leases', store, failPolicy, max: 2, leaseMs: 10_000 })

  let running: Load | undefined
  try {
    await ready(client)
    const held = await leases.acquire('held')
    expect(held).toMatchObject({ allowed: true, source: 'store' })
    expect(held.leaseId).toEqual(expect.any(String))

    running = startLoad(load)
    await sleep(HEALTHY_MS)

    // ---- the fault ----
    const faultAt = performance.now()
    if (fault === 'stop') {
      redisStopped = true
      await redis.stop() // SIGTERM; resolves once the process has exited
    } else {
      redis.pause() // SIGSTOP: the TCP connection stays up, nothing answers
    }
    const outageStart = performance.now()
    await waitFor('breaker opens', 1_000, () => store.breaker.state !== 'closed')

    // ---- side checks during the outage (the breaker is open: decisions come from the fail policy) ----
    const smallKey = `fresh-${policy}`
    const smallDecisions: Decision[] = []
    for (let i = 0; i < 7; i++) smallDecisions.push(await timed(sideLatencies, () => small.consume(smallKey)))
    if (policy === 'open') {
      expect(smallDecisions).toEqual(Array(7).fill(failOpen(5)))
    } else if (policy === 'closed') {
      expect(smallDecisions).toEqual(Array(7).fill(failClosed(5)))
    } else {
      // The in-process twin enforces the same policy: exactly the capacity, then denials.
      expect(smallDecisions.map((d) => [d.allowed, d.remaining, d.source])).toEqual([
        [true, 4, 'local'],
        [true, 3, 'local'],
        [true, 2, 'local'],
        [true, 1, 'local'],
        [true, 0, 'local'],
        [false, 0, 'local'],
        [false, 0, 'local'],
      ])
      for (const denied of smallDecisions.slice(5)) {
        expect(denied.retryAfterMs).toBeGreaterThan(0)
        expect(denied.retryAfterMs).toBeLessThanOrEqual(10_000)
      }
    }

    // A lease taken from Redis before the outage: renew keeps it (an outage must not end connections), release
    // resolves (the lease expires by itself).
    expect(await timed(sideLatencies, () => held.renew())).toBe(true)
    expect(await timed(sideLatencies, () => held.release())).toBeUndefined()

    const first = await timed(sideLatencies, () => leases.acquire('c'))
    if (policy === 'open') {
      expect(first).toMatchObject({ ...failOpen(2), leaseId: expect.any(String) })
      expect(await timed(sideLatencies, () => first.release())).toBeUndefined()
    } else if (policy === 'closed') {
      expect(first).toMatchObject({ ...failClosed(2), leaseId: undefined })
      expect(await timed(sideLatencies, () => first.release())).toBeUndefined()
    } else {
      const second = await timed(sideLatencies, () => leases.acquire('c'))
      const third = await timed(sideLatencies, () => leases.acquire('c'))
      expect([first, second, third].map((l) => [l.allowed, l.source])).toEqual([
        [true, 'local'],
        [true, 'local'],
        [false, 'local'],
      ])
      expect(first.leaseId).toEqual(expect.any(String))
      expect(third.leaseId).toBeUndefined()
      expect(await timed(sideLatencies, () => first.release())).toBeUndefined()
      const fourth = await timed(sideLatencies, () => leases.acquire('c'))
      expect(fourth).toMatchObject({ allowed: true, source: 'local' })
      await timed(sideLatencies, () => Promise.all([second.release(), fourth.release()]))
    }

    const outageMs = fault === 'stop' ? STOP_OUTAGE_MS : PAUSE_OUTAGE_MS
    await sleep(Math.max(0, outageMs - (performance.now() - outageStart)))
    if (fault === 'pause') {
      // The breaker must have probed the paused server twice in vain (cooldown + deadline each, ~350 ms): on a busy
      // machine the timers run late, so wait for the probes rather than for a fixed time.
      await waitFor(
        'two probes fail',
        10_000,
        () => breakerEvents.filter((e) => e.change === 'half-open->open').length >= 2,
      )
    }

    // ---- the repair ----
    const outageEnd = performance.now()
    if (fault === 'stop') {
      await redis.restart()
      redisStopped = false
    } else {
      redis.resume()
    }
    const repairedAt = performance.now()
    let recovered: Sample | undefined
    await waitFor('decisions come back from the store', RECOVERY_BOUND_MS, () => {
      recovered = running?.samples.find((s) => s.start >= repairedAt && s.decision?.source === 'store')
      return recovered !== undefined && store.breaker.state === 'closed'
    })
    // From the later of the first store answer and the breaker's closing on.
    const closedAt = max(breakerEvents.filter((e) => e.change === 'half-open->closed').map((e) => e.t))
    const recoveredAt = Math.max((recovered as Sample).end, closedAt)
    await sleep(100)
    await running.stop()
    const samples = running.samples
    running = undefined

    // ---- assertions on the whole run ----
    const errors = samples.filter((s) => s.error !== undefined).map((s) => s.error)
    expect(errors).toEqual([]) // nothing rejects
    const latencies = samples.map((s) => s.end - s.start)
    const worst = max(latencies)
    expect(worst).toBeLessThanOrEqual(LATENCY_BOUND_MS)
    expect(max(sideLatencies)).toBeLessThanOrEqual(LATENCY_BOUND_MS)

    const sources = (list: Sample[]) => [...new Set(list.map((s) => s.decision?.source))]
    const healthy = samples.filter((s) => s.end <= faultAt)
    const fromStore = healthy.filter((s) => s.decision?.source === 'store')
    expect(fromStore.length).toBeGreaterThan(50)
    // With Redis up, the fail policy answers only a call that missed its deadline (the event loop of a busy machine
    // can hold a reply past 50 ms): each such answer comes after a timeout the store reported (one per call, which
    // may hold the decisions of every worker).
    const missedDeadlines = storeErrors.filter((e) => e.t <= faultAt && e.code === ErrorCodes.STORE_TIMEOUT)
    const unexplained = healthy.filter(
      (s) => s.decision?.source !== 'store' && !missedDeadlines.some((e) => e.t <= s.end),
    )
    expect(unexplained.map((s) => s.decision?.source)).toEqual([])

    const outage = samples.filter((s) => s.start >= outageStart && s.end <= outageEnd)
    expect(outage.length).toBeGreaterThan(500)
    const expected: Partial<Decision> =
      policy === 'open'
        ? failOpen(LOAD_CAPACITY)
        : policy === 'closed'
          ? failClosed(LOAD_CAPACITY)
          : { allowed: true, limit: LOAD_CAPACITY, retryAfterMs: 0, delayMs: 0, source: 'local' }
    const mismatched = outage.filter((s) => !matches(s.decision, expected))
    expect(mismatched.map((s) => s.decision)).toEqual([])
    expect(sources(outage)).toEqual([outageSource[policy]])

    const after = samples.filter((s) => s.start >= recoveredAt)
    expect(after.length).toBeGreaterThan(50)
    expect(after.filter((s) => s.decision?.source === 'store').length).toBeGreaterThan(50)
    // Back on the store; as in the healthy part, the fail policy answers only a call that missed its deadline.
    const lateReplies = storeErrors.filter((e) => e.t >= recoveredAt && e.code === ErrorCodes.STORE_TIMEOUT)
    const unexplainedAfter = after.filter(
      (s) => s.decision?.source !== 'store' && !lateReplies.some((e) => e.t <= s.end),
    )
    expect(unexplainedAfter.map((s) => s.decision?.source)).toEqual([])

    // ---- the breaker: opened once, probed once per cooldown, closed after the repair ----
    const changes = breakerEvents.map((e) => e.change)
    expect(changes.join(',')).toMatch(
      /^closed->open(,open->half-open,half-open->open)*,open->half-open,half-open->closed$/,
    )
    expect(breakerEvents.every((e) => e.t >= faultAt)).toBe(true)
    expect(store.breaker.state).toBe('closed')
    const opened = (breakerEvents[0] as { t: number }).t
    // Each open period lasts the cooldown, on the breaker's own clock (Date.now; a virtual machine's wall clock and
    // its monotonic one can drift apart by tens of milliseconds under load): it opened until at least a cooldown
    // after the hook heard of it, and was probed no sooner. (The hook's own clock reading comes a moment after the
    // breaker's, by as long as a pause of the process lasts: the cooldown is not measured between two hook calls.)
    for (let i = 0; i + 1 < breakerEvents.length; i++) {
      const event = breakerEvents[i] as { wall: number; change: string; openUntil?: number }
      if (event.change.endsWith('->open')) {
        const openUntil = event.openUntil as number
        expect(openUntil).toBeGreaterThan(event.wall - COOLDOWN_MS)
        expect(openUntil).toBeLessThanOrEqual(event.wall + COOLDOWN_MS)
        const next = breakerEvents[i + 1] as { wall: number; change: string }
        expect(next.change).toBe('open->half-open')
        expect(next.wall).toBeGreaterThanOrEqual(openUntil)
      }
    }
    // The failures that opened the breaker: the hook reports each error right after the breaker counted it, so the
    // one that opened it comes just after the change, the ones before it just before.
    expect(storeErrors.filter((e) => e.t < opened).length).toBeGreaterThanOrEqual(FAILURE_THRESHOLD - 1)
    // Then the calls still in flight when it opened (at most one per worker, the opening call included) all end by
    // their deadline, long before the first probe.
    const burstEnd = opened + LATENCY_BOUND_MS
    expect(breakerEvents.filter((e) => e.t > opened && e.t <= burstEnd)).toEqual([])
    const burst = storeErrors.filter((e) => e.t >= opened && e.t <= burstEnd)
    expect(burst.length).toBeGreaterThanOrEqual(1)
    expect(burst.length).toBeLessThanOrEqual(WORKERS)
    // While open, the store is not called: after the burst, every store error before the repair is a probe's, and
    // each probe's failure re-opens the breaker.
    const inWindow = <T extends { t: number }>(list: T[]) =>
      list.filter((e) => e.t > burstEnd && e.t < outageEnd)
    const probeFailures = inWindow(breakerEvents).filter((e) => e.change === 'half-open->open')
    const laterErrors = inWindow(storeErrors)
    expect(laterErrors.length).toBe(probeFailures.length)
    // ... and none of the store calls made during the outage was answered before the repair (nothing answers; a
    // call made just before the repair may be answered after it, within its deadline).
    expect(storeAnswers.filter((a) => a.made > outageStart && a.read < outageEnd)).toEqual([])
    if (fault === 'pause') {
      expect(probeFailures.length).toBeGreaterThanOrEqual(2) // 900 ms of outage: cooldown + deadline is ~350 ms
      // Under SIGSTOP nothing errors: every failure is the deadline passing.
      const outageErrors = storeErrors.filter((e) => e.t < outageEnd)
      expect(outageErrors.filter((e) => e.code !== ErrorCodes.STORE_TIMEOUT)).toEqual([])
      expect(clientErrors).toEqual([])
    } else {
      expect(probeFailures.length).toBeGreaterThanOrEqual(1)
    }

    const recoveryMs = recoveredAt - repairedAt
    expect(recoveryMs).toBeLessThanOrEqual(RECOVERY_BOUND_MS)
    report.push(
      `  ${config.name} | ${policy} | ${fault}: ${samples.length} decisions (${outage.length} in outage), ` +
        `worst latency ${fmt(worst)} (outage ${fmt(max(outage.map((s) => s.end - s.start)))}, ` +
        `side calls ${fmt(max(sideLatencies))}), ${storeErrors.length} store errors, ` +
        `${probeFailures.length} failed probes, back on the store ${fmt(recoveryMs)} after the repair`,
    )
  } finally {
    await running?.stop()
    // Whatever failed above, leave the server running for the next test.
    redis.resume()
    if (redisStopped) {
      await redis.restart()
      redisStopped = false
    }
    client.disconnect()
  }
}

function failOpen(limit: number): Decision {
  return {
    allowed: true,
    limit,
    remaining: limit,
    resetMs: 0,
    retryAfterMs: 0,
    delayMs: 0,
    neverAllowed: false,
    source: 'fail-open',
  }
}

function failClosed(limit: number): Decision {
  return {
    allowed: false,
    limit,
    remaining: 0,
    resetMs: FAIL_CLOSED_RETRY_AFTER_MS,
    retryAfterMs: FAIL_CLOSED_RETRY_AFTER_MS,
    delayMs: 0,
    neverAllowed: false,
    source: 'fail-closed',
  }
}

function matches(decision: Decision | undefined, expected: Partial<Decision>): boolean {
  if (decision === undefined) return false
  return Object.entries(expected).every(([field, value]) => decision[field as keyof Decision] === value)
}

const faultTitles: Record<Fault, string> = {
  stop: 'redis stopped (SIGTERM) under load, then restarted',
  pause: 'redis paused (SIGSTOP) under load, then resumed (SIGCONT)',
}

for (const config of clientConfigs) {
  describe(`RedisStore faults, client with ${config.name}`, () => {
    for (const policy of policies) {
      describe(`failPolicy '${policy}'`, () => {
        for (const fault of config.faults) {
          it(faultTitles[fault], async () => {
            await runScenario(policy, config, fault)
          })
        }
      })
    }
  })
}

describe('concurrency lease granted by failPolicy open', () => {
  it('renew() resolves true during the outage (documented: "a store outage should not end connections")', async () => {
    const client = createClient(limiterClientOptions, [])
    const store = new RedisStore({
      client,
      prefix: 'faults-renew:',
      timeoutMs: TIMEOUT_MS,
      breaker: { failureThreshold: FAILURE_THRESHOLD, cooldownMs: COOLDOWN_MS },
    })
    const leases = concurrencyLimit({ name: 'leases', store, failPolicy: 'open', max: 2, leaseMs: 10_000 })
    try {
      await ready(client)
      redis.pause()
      const lease = await leases.acquire('c') // times out: answered by the fail policy
      expect(lease).toMatchObject({ ...failOpen(2), leaseId: expect.any(String) })
      // Lease.renew(): "Resolves false when the lease is gone (expired or released), true when still held, and also
      // true when the store cannot be reached (a store outage should not end connections)". The store cannot be
      // reached and the lease was neither released nor expired: a holder that drops its connection on `false`
      // must not be told to drop it.
      expect(await lease.renew()).toBe(true)
      expect(await lease.release()).toBeUndefined()
    } finally {
      redis.resume()
      client.disconnect()
    }
  })
})

describe.each(['open', 'local'] as const)(
  'a lease granted by failPolicy %s once the store is back',
  (policy) => {
    /**
     * A store, a limiter of 2 leases per key, and a lease the fail policy granted while the breaker was open: the
     * store never saw it (an acquire that merely timed out would still run once a paused Redis resumes).
     */
    async function grantedInOutage(prefix: string) {
      const client = createClient(limiterClientOptions, [])
      const cooldownMs = 2000
      const store = new RedisStore({
        client,
        prefix,
        timeoutMs: TIMEOUT_MS,
        breaker: { failureThreshold: FAILURE_THRESHOLD, cooldownMs },
      })
      const leases = concurrencyLimit({ name: 'leases', store, failPolicy: policy, max: 2, leaseMs: 10_000 })
      await ready(client)
      redis.pause()
      let lease: Awaited<ReturnType<typeof leases.acquire>>
      try {
        while (store.breaker.state !== 'open') await leases.peek('other')
        lease = await leases.acquire('c')
      } finally {
        redis.resume()
      }
      expect(lease).toMatchObject({ allowed: true, source: outageSource[policy] })
      // Wait for the store to answer again (the breaker cools down first).
      while ((await leases.peek('c')).source !== 'store') await sleep(cooldownMs / 10)
      return { client, leases, lease }
    }

    it('is recorded in the store at its next renewal', async () => {
      const { client, leases, lease } = await grantedInOutage(`faults-record-${policy}:`)
      try {
        expect(await leases.peek('c')).toMatchObject({ remaining: 2, source: 'store' })
        expect(await lease.renew()).toBe(true)
        expect(await leases.peek('c')).toMatchObject({ remaining: 1, source: 'store' })
        const others = [await leases.acquire('c'), await leases.acquire('c')]
        expect(others.map((other) => other.allowed)).toEqual([true, false])
        await lease.release()
        expect(await leases.peek('c')).toMatchObject({ remaining: 1, source: 'store' })
      } finally {
        client.disconnect()
      }
    })

    it('is lost at its next renewal when the store has no free slot', async () => {
      const { client, leases, lease } = await grantedInOutage(`faults-full-${policy}:`)
      try {
        const others = [await leases.acquire('c'), await leases.acquire('c')]
        expect(others.map((other) => other.allowed)).toEqual([true, true])
        expect(await lease.renew()).toBe(false)
        expect(await leases.peek('c')).toMatchObject({ remaining: 0, source: 'store' })
      } finally {
        client.disconnect()
      }
    })
  },
)

it('no unhandled rejection during the file', async () => {
  await sleep(50)
  expect(unhandled).toEqual([])
})
