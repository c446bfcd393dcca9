/**
 * Once a second, what each instance reports: decisions by source and the decision time histogram (from its
 * /metrics, as deltas since the last sample), its CPU and resident memory (from /proc), the WebSocket sockets
 * each identity holds and the messages sent so far (from the load's clients), and the whole machine's CPU.
 */
import { readFileSync } from 'node:fs'
import type { Instance } from './instances.js'
import type { Load, WebSocketTraffic } from './load.js'

export interface Sample {
  readonly at: number
  /** Decisions of this second by source, summed over the instances and limiters. */
  readonly bySource: Record<string, number>
  /** p99 of this second's decision times in ms (upper bound of the histogram bucket), or undefined without any. */
  readonly p99Ms: number | undefined
  /** This second's decision times: cumulative counts per bucket upper bound (s), over instances and limiters. */
  readonly buckets: ReadonlyMap<number, number>
  /** Per instance: CPU seconds used so far and resident memory (MB). */
  readonly instances: Record<string, { cpuSeconds: number; rssMb: number }>
  /** The most sockets any one identity held, per kind. */
  readonly maxSockets: Record<string, number>
  /** WebSocket messages the clients had sent (and pongs they had had) up to this sample. */
  readonly traffic: Readonly<WebSocketTraffic>
  /** The machine's CPU time so far, busy and in all, in clock ticks summed over its cores (/proc/stat). */
  readonly machine: { readonly busy: number; readonly total: number }
}

interface Scraped {
  bySource: Map<string, number>
  /** Cumulative count per upper bound (s), over all limiters and sources. */
  buckets: Map<number, number>
}

export class Sampler {
  readonly samples: Sample[] = []
  private readonly previous = new Map<string, Scraped>()
  private readonly timer: NodeJS.Timeout
  private busy = false

  constructor(
    private readonly instances: () => readonly Instance[],
    private readonly load: Load,
  ) {
    this.timer = setInterval(() => void this.sample(), 1000)
  }

  private async sample(): Promise<void> {
    if (this.busy) return
    this.busy = true
    try {
      const bySource: Record<string, number> = {}
      const buckets = new Map<number, number>()
      const usage: Sample['instances'] = {}
      for (const instance of this.instances()) {
        if (!instance.alive) continue
        const now = await scrape(instance.url)
        const taken = instance.usage()
        if (taken !== undefined) usage[instance.name] = taken
        if (now === undefined) continue
        const before = this.previous.get(instance.name)
        this.previous.set(instance.name, now)
        if (before === undefined) continue
        for (const [source, count] of now.bySource) {
          bySource[source] = (bySource[source] ?? 0) + count - (before.bySource.get(source) ?? 0)
        }
        for (const [le, count] of now.buckets) {
          buckets.set(le, (buckets.get(le) ?? 0) + count - (before.buckets.get(le) ?? 0))
        }
      }
      const maxSockets: Record<string, number> = {}
      for (const [id, count] of this.load.openSockets()) {
        const kind = id.split(' ')[0] as string
        maxSockets[kind] = Math.max(maxSockets[kind] ?? 0, count)
      }
      this.samples.push({
        at: Date.now(),
        bySource,
        p99Ms: percentileOf(buckets, 99),
        buckets,
        instances: usage,
        maxSockets,
        traffic: { ...this.load.traffic },
        machine: machineCpu(),
      })
    } finally {
      this.busy = false
    }
  }

  stop(): void {
    clearInterval(this.timer)
  }
}

/** The `cpu` line of /proc/stat: idle and iowait are the time not busy. */
function machineCpu(): { busy: number; total: number } {
  const fields = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '')
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number)
  const total = fields.reduce((sum, n) => sum + n, 0)
  const idle = (fields[3] ?? 0) + (fields[4] ?? 0)
  return { busy: total - idle, total }
}

async function scrape(url: string): Promise<Scraped | undefined> {
  try {
    const response = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(2000) })
    const text = await response.text()
    const scraped: Scraped = { bySource: new Map(), buckets: new Map() }
    for (const line of text.split('\n')) {
      const decided = /^tollbooth_decisions_total\{.*source="([^"]+)".*\} (\d+)/.exec(line)
      if (decided !== null) {
        const source = decided[1] as string
        scraped.bySource.set(source, (scraped.bySource.get(source) ?? 0) + Number(decided[2]))
        continue
      }
      const bucket = /^tollbooth_decision_duration_seconds_bucket\{.*le="([^"]+)".*\} (\d+)/.exec(line)
      if (bucket !== null) {
        const le = bucket[1] === '+Inf' ? Number.POSITIVE_INFINITY : Number(bucket[1])
        scraped.buckets.set(le, (scraped.buckets.get(le) ?? 0) + Number(bucket[2]))
      }
    }
    return scraped
  } catch {
    return undefined
  }
}

/** A percentile from cumulative bucket counts: the upper bound (ms) of the bucket it falls in. */
export function percentileOf(buckets: ReadonlyMap<number, number>, p: number): number | undefined {
  const bounds = [...buckets.keys()].sort((a, b) => a - b)
  const total = buckets.get(Number.POSITIVE_INFINITY) ?? 0
  if (total <= 0) return undefined
  for (const le of bounds) {
    if ((buckets.get(le) ?? 0) >= (p / 100) * total) return le === Number.POSITIVE_INFINITY ? 1000 : le * 1000
  }
  return undefined
}
