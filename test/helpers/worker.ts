/**
 * A limiter client in a process of its own, for the multi-process tests (test/integration/multiProcess.test.ts).
 *
 * Run it as `node --import <absolute URL of tsx's loader> test/helpers/worker.ts [job JSON]`; the job comes from the
 * first argument or, without one, from the TOLLBOOTH_WORKER_JOB environment variable. (Not through the tsx CLI:
 * `tsx file.ts` runs the script in a grandchild node process, so a SIGKILL of the spawned pid would leave the real
 * worker running.)
 *
 * Protocol, one JSON line each on stdout:
 * 1. `{"ready":true}` once connected to Redis;
 * 2. after a line `go` on stdin, `calls` consumes (or acquires) are fired all at once and `{allowed, denied, sources,
 *    remaining, firedAt, doneAt}` is printed (see WorkerResult).
 * Then the worker exits; in `hold` mode it stays alive holding its leases (never releasing or renewing them) until
 * it is killed or its stdin closes.
 */
import { createInterface } from 'node:readline'
import { Cluster, Redis } from 'ioredis'
import {
  concurrencyLimit,
  type Decision,
  fixedWindow,
  leakyBucket,
  RedisStore,
  slidingWindow,
  tokenBucket,
} from '../../src/index.js'
import { runScript, send } from './childScript.js'

export type WorkerAlgorithm = 'tokenBucket' | 'fixedWindow' | 'slidingWindow' | 'leakyBucket' | 'concurrency'

export interface WorkerJob {
  mode: 'redis' | 'cluster'
  /** Redis URL, for `mode: 'redis'`. */
  url?: string
  /** Cluster startup nodes, for `mode: 'cluster'`. */
  nodes?: { host: string; port: number }[]
  /** RedisStore key prefix. */
  prefix: string
  algorithm: WorkerAlgorithm
  /** Options of the limiter factory, without `store` (the worker adds its own) and with a `name`. */
  limiterOptions: Record<string, unknown>
  key: string
  calls: number
  /** Concurrency only: after reporting, keep the leases and stay alive until killed. */
  hold?: boolean
}

export interface WorkerResult {
  allowed: number
  denied: number
  /** How many decisions came from each source ('store', 'fail-closed', ...). */
  sources: Record<string, number>
  /** `remaining` of every allowed decision, in completion order. */
  remaining: number[]
  /** Wall-clock ms when the calls were fired and when the last one answered: shows the processes overlapped. */
  firedAt: number
  doneAt: number
}

/** The worker's Redis client settings: those of test/helpers/stores.ts (which needs vitest, so cannot be used here). */
const clientOptions = { enableOfflineQueue: true, maxRetriesPerRequest: 1, lazyConnect: false }

function readJob(): WorkerJob {
  const raw = process.argv[2] ?? process.env.TOLLBOOTH_WORKER_JOB
  if (raw === undefined) throw new Error('no job: pass it as the first argument or in TOLLBOOTH_WORKER_JOB')
  const job = JSON.parse(raw) as WorkerJob
  if (job.mode === 'redis' && typeof job.url !== 'string') throw new Error('mode redis needs a url')
  if (job.mode === 'cluster' && !Array.isArray(job.nodes)) throw new Error('mode cluster needs nodes')
  if (job.hold && job.algorithm !== 'concurrency') throw new Error('hold needs the concurrency algorithm')
  return job
}

function createClient(job: WorkerJob): Redis | Cluster {
  const client =
    job.mode === 'redis'
      ? new Redis(job.url as string, clientOptions)
      : new Cluster(job.nodes ?? [], { redisOptions: clientOptions })
  client.on('error', (error: Error) =>
    process.stderr.write(`worker ${process.pid}: redis error: ${error.message}\n`),
  )
  return client
}

/** One call of the job's algorithm: consume or acquire. */
function createCall(job: WorkerJob, store: RedisStore): () => Promise<Decision> {
  // `failPolicy: 'closed'` last, so that a store failure can only deny, never admit.
  const options = { ...job.limiterOptions, store, failPolicy: 'closed' } as never
  switch (job.algorithm) {
    case 'tokenBucket':
      return bound(tokenBucket(options), job.key)
    case 'fixedWindow':
      return bound(fixedWindow(options), job.key)
    case 'slidingWindow':
      return bound(slidingWindow(options), job.key)
    case 'leakyBucket':
      return bound(leakyBucket(options), job.key)
    case 'concurrency': {
      const limiter = concurrencyLimit(options)
      return () => limiter.acquire(job.key)
    }
    default:
      throw new Error(`unknown algorithm ${String(job.algorithm)}`)
  }
}

function bound(limiter: { consume(key: string): Promise<Decision> }, key: string): () => Promise<Decision> {
  return () => limiter.consume(key)
}

/** Resolves on the first stdin line equal to `go`; rejects if stdin ends before. */
function waitForGo(): Promise<void> {
  const lines = createInterface({ input: process.stdin })
  return new Promise((resolve, reject) => {
    const onClose = () => reject(new Error('stdin closed before "go"'))
    lines.on('close', onClose)
    lines.on('line', (line) => {
      if (line.trim() !== 'go') return
      lines.off('close', onClose)
      lines.close()
      resolve()
    })
  })
}

async function main(): Promise<void> {
  const job = readJob()
  const client = createClient(job)
  // A deadline far above any reply time under load, so that no decision falls to the fail policy.
  const store = new RedisStore({ client, prefix: job.prefix, timeoutMs: 5000 })
  const call = createCall(job, store)
  await client.ping()
  const go = waitForGo()
  await send({ ready: true })
  await go

  const firedAt = Date.now()
  const decisions = await Promise.all(Array.from({ length: job.calls }, () => call()))
  const result: WorkerResult = {
    allowed: 0,
    denied: 0,
    sources: {},
    remaining: [],
    firedAt,
    doneAt: Date.now(),
  }
  for (const decision of decisions) {
    if (decision.allowed) {
      result.allowed++
      result.remaining.push(decision.remaining)
    } else {
      result.denied++
    }
    result.sources[decision.source] = (result.sources[decision.source] ?? 0) + 1
  }
  await send(result)

  if (job.hold) {
    // Hold the leases (the decisions stay referenced) until killed; leave quietly if the parent goes away.
    const keepAlive = setInterval(() => decisions.length, 60_000)
    process.stdin.once('close', () => {
      clearInterval(keepAlive)
      process.exit(0)
    })
    process.stdin.resume()
    return
  }
  client.disconnect()
  process.exit(0)
}

runScript('worker', main)
