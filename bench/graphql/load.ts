/**
 * bench:graphql's load generator, in a process of its own (started by `LoadProcess`, bench/loadProcess.ts): one
 * autocannon run per job, the warm-up then the measured phase, every response of the measured phase checked.
 */
import { createRequire } from 'node:module'
import { announceMeasuredPhase, serveLoadJobs } from '../loadProcess.js'
import { IDENTITY_HEADER } from './schema.js'
import { WORKLOADS, type WorkloadName } from './workloads.js'

export interface LoadJob {
  url: string
  workload: WorkloadName
  warmupSeconds: number
  measureSeconds: number
}

export interface LoadResult {
  requests: number
  seconds: number
  perSecond: number
  p50: number
  p99: number
  non2xx: number
  /** Socket errors and timeouts, as autocannon counts them. */
  errors: number
  timeouts: number
  /** 2xx responses whose body holds `errors` or no `data`. */
  graphqlErrors: number
  sampleError: string | undefined
  statusCodes: Record<string, number>
  /** Response bytes per request (headers and body, as autocannon counts them). */
  bytesPerRequest: number
  /** CPU time of the load generator over the measured phase, as a fraction of one core. */
  clientCpu: number
}

/** The part of autocannon 8's API used here (the package ships no types). */
interface AutocannonRequest {
  method: string
  path?: string
  headers: Record<string, string>
  body: string
  onResponse?: (status: number, body: string) => void
}
interface AutocannonResult {
  duration: number
  requests: { total: number; average: number }
  latency: { p50: number; p99: number }
  throughput: { total: number }
  errors: number
  timeouts: number
  non2xx: number
  statusCodeStats: Record<string, { count: number }>
}
type Autocannon = (options: {
  url: string
  connections: number
  duration: number
  sampleInt: number
  requests: AutocannonRequest[]
}) => Promise<AutocannonResult>

/**
 * autocannon's sampling interval, in ms. It also ends a run only at a sample: with its default of a second, a run
 * of `duration` seconds lasts up to a second longer (a sixth of the time of a run of short phases).
 */
const SAMPLE_MS = 100

async function runLoad(job: LoadJob): Promise<LoadResult> {
  const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon
  const workload = WORKLOADS[job.workload]
  let checking = false
  let graphqlErrors = 0
  let sampleError: string | undefined
  const onResponse = (status: number, body: string) => {
    if (!checking || status < 200 || status > 299) return
    if (body.includes('"errors"') || !body.includes('"data"')) {
      graphqlErrors++
      sampleError ??= body.slice(0, 300)
    }
  }
  const requests: AutocannonRequest[] = Array.from({ length: workload.identities }, (_, i) => ({
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/graphql-response+json',
      [IDENTITY_HEADER]: `user-${i}`,
    },
    body: JSON.stringify(workload.requestBody(i)),
    onResponse,
  }))
  const options = { url: job.url, connections: workload.connections, sampleInt: SAMPLE_MS, requests }
  await autocannon({ ...options, duration: job.warmupSeconds })
  announceMeasuredPhase()
  checking = true
  const cpuStart = process.cpuUsage()
  const result = await autocannon({ ...options, duration: job.measureSeconds })
  const cpu = process.cpuUsage(cpuStart)
  const statusCodes: Record<string, number> = {}
  for (const [code, { count }] of Object.entries(result.statusCodeStats)) statusCodes[code] = count
  return {
    requests: result.requests.total,
    seconds: result.duration,
    perSecond: result.requests.total / result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    graphqlErrors,
    sampleError,
    statusCodes,
    bytesPerRequest: result.throughput.total / Math.max(1, result.requests.total),
    clientCpu: (cpu.user + cpu.system) / 1e6 / result.duration,
  }
}

await serveLoadJobs(runLoad)
