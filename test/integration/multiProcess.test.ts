import { randomUUID } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, inject, it } from 'vitest'
import { concurrencyLimit } from '../../src/core/limiters/concurrencyLimit.js'
import { RedisStore } from '../../src/core/stores/redisStore.js'
import { JsonLinesProcess } from '../helpers/childProcess.js'
import { createClusterClient, createRedisClient, whenReady } from '../helpers/stores.js'
import type { WorkerAlgorithm, WorkerJob, WorkerResult } from '../helpers/worker.js'

const WORKER = fileURLToPath(new URL('../helpers/worker.ts', import.meta.url))

/** A worker process (test/helpers/worker.ts) and the JSON lines it prints. */
class Worker extends JsonLinesProcess {
  constructor(job: WorkerJob) {
    super({ script: WORKER, jobVariable: 'TOLLBOOTH_WORKER_JOB', job, label: 'worker' })
  }

  async ready(): Promise<void> {
    expect(await this.next<{ ready?: boolean }>()).toEqual({ ready: true })
  }

  go(): void {
    this.child.stdin?.write('go\n')
  }
}

const workers: Worker[] = []

afterEach(async () => {
  const all = workers.splice(0)
  for (const worker of all) if (worker.failed) console.error(worker.describe())
  await Promise.all(all.map((worker) => worker.kill()))
})

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

type Mode = WorkerJob['mode']

const modes: Mode[] = ['redis', 'cluster']

/** Starts one worker per job, waits until all are connected, then lets them go together. */
async function runTogether(jobs: WorkerJob[]): Promise<{ workers: Worker[]; results: WorkerResult[] }> {
  const started = jobs.map((job) => new Worker(job))
  workers.push(...started)
  await Promise.all(started.map((worker) => worker.ready()))
  for (const worker of started) worker.go()
  const results = await Promise.all(started.map((worker) => worker.next<WorkerResult>()))
  return { workers: started, results }
}

const CAPACITY = 50
const PROCESSES = 3
const CALLS = 100

/** Each algorithm set up to admit exactly CAPACITY requests on one key while the test runs. */
const admissionCases: { algorithm: WorkerAlgorithm; options: Record<string, unknown> }[] = [
  { algorithm: 'tokenBucket', options: { capacity: CAPACITY, refillPerSecond: 0.001, denyCache: false } },
  { algorithm: 'fixedWindow', options: { limit: CAPACITY, windowMs: 60_000, denyCache: false } },
  { algorithm: 'slidingWindow', options: { limit: CAPACITY, windowMs: 60_000, denyCache: false } },
  { algorithm: 'leakyBucket', options: { ratePerSecond: 0.001, maxQueue: CAPACITY - 1, denyCache: false } },
  { algorithm: 'concurrency', options: { max: CAPACITY, leaseMs: 60_000 } },
]

describe.each(modes)('several processes on the %s store', (mode) => {
  const target = (): Pick<WorkerJob, 'mode' | 'url' | 'nodes'> =>
    mode === 'redis' ? { mode, url: inject('redisUrl') } : { mode, nodes: inject('redisClusterNodes') }

  it.each(admissionCases)(
    '$algorithm: 3 processes × 100 parallel calls on one key admit exactly the limit',
    async ({ algorithm, options }) => {
      const job: WorkerJob = {
        ...target(),
        prefix: `mp-${randomUUID()}:`,
        algorithm,
        limiterOptions: { name: 'multi', ...options },
        key: 'shared',
        calls: CALLS,
      }
      const { results } = await runTogether(Array.from({ length: PROCESSES }, () => job))

      const allowed = results.reduce((sum, result) => sum + result.allowed, 0)
      const denied = results.reduce((sum, result) => sum + result.denied, 0)
      expect({ allowed, denied }).toEqual({ allowed: CAPACITY, denied: PROCESSES * CALLS - CAPACITY })
      for (const result of results) expect(result.sources).toEqual({ store: CALLS })
      // (Whether the processes' calls overlapped in time is not asserted: in trials the overlap was 2-47 ms, which is
      // too thin to require on a loaded machine. `firedAt`/`doneAt` are in the results for debugging.)
      // Every admission saw a different state: the remainders are 49, 48, ..., 0, each once.
      const remaining = results.flatMap((result) => result.remaining).sort((a, b) => a - b)
      expect(remaining).toEqual(Array.from({ length: CAPACITY }, (_, i) => i))
    },
  )

  it('leases of a SIGKILLed holder expire after leaseMs and the slots come back', async () => {
    const max = 3
    const leaseMs = 1500
    const prefix = `mp-${randomUUID()}:`
    const name = 'held'
    const key = 'victim'
    const job: WorkerJob = {
      ...target(),
      prefix,
      algorithm: 'concurrency',
      limiterOptions: { name, max, leaseMs },
      key,
      calls: max,
      hold: true,
    }
    const client = mode === 'redis' ? createRedisClient() : createClusterClient()
    try {
      const store = new RedisStore({ client, prefix, timeoutMs: 5000 })
      const limiter = concurrencyLimit({ name, store, max, leaseMs, failPolicy: 'closed' })
      await whenReady(client)

      const {
        workers: [holder],
        results: [held],
      } = await runTogether([job])
      expect(held).toMatchObject({ allowed: max, denied: 0, sources: { store: max } })
      const before = await limiter.acquire(key)
      expect(before).toMatchObject({ allowed: false, remaining: 0, source: 'store' })

      // Hold a while before dying, so that the leases run out by their expiry, not leaseMs after the kill.
      await sleep(leaseMs / 3)
      expect(holder?.alive).toBe(true)
      const killedAt = performance.now()
      await holder?.kill()
      expect(holder?.child.signalCode).toBe('SIGKILL')
      const probeStarted = performance.now()
      const afterKill = await limiter.acquire(key)
      expect(afterKill).toMatchObject({ allowed: false, source: 'store' })
      // When the earliest dead lease expires, counted from the kill (a lower bound: the probe ran after it started).
      const remainingAtKill = afterKill.retryAfterMs + (probeStarted - killedAt)
      expect(remainingAtKill).toBeLessThanOrEqual(leaseMs - leaseMs / 3)

      let recovered: Awaited<ReturnType<typeof limiter.acquire>> | undefined
      let recoveryMs = Number.NaN
      while (performance.now() - killedAt <= leaseMs + 500) {
        const attempt = await limiter.acquire(key)
        expect(attempt.source).toBe('store')
        if (attempt.allowed) {
          recovered = attempt
          recoveryMs = performance.now() - killedAt
          break
        }
        await sleep(50)
      }
      expect(recovered, 'no acquire allowed within leaseMs + 500 ms of the kill').toBeDefined()
      expect(recoveryMs).toBeGreaterThanOrEqual(remainingAtKill - 25)
      expect(recoveryMs).toBeLessThanOrEqual(leaseMs + 500)
      // The slot came back when the dead lease expired (polling every 50 ms), not a full leaseMs after the kill.
      expect(recoveryMs).toBeLessThanOrEqual(remainingAtKill + 400)

      // Once every dead lease is gone, exactly `max` acquires succeed again.
      await recovered?.release()
      const deadline = performance.now() + 500
      while ((await limiter.peek(key)).remaining < max && performance.now() < deadline) await sleep(20)
      expect((await limiter.peek(key)).remaining).toBe(max)
      const again = await Promise.all(Array.from({ length: max + 2 }, () => limiter.acquire(key)))
      expect(again.filter((lease) => lease.allowed)).toHaveLength(max)
      expect(again.every((lease) => lease.source === 'store')).toBe(true)
      await Promise.all(again.map((lease) => lease.release()))
    } finally {
      client.disconnect()
    }
  })
})
