/**
 * Replays a pattern against the real limiters on a virtual clock.
 *
 * The simulation runs the library's own limiters on a `MemoryStore` (not a model of them), so a chart shows what
 * production would decide. Only the clock is fake: it jumps to each request's arrival time, so five minutes of
 * traffic replay in milliseconds and every run gives the same answer.
 */
import type { Clock } from '../../core/clock.js'
import { fixedWindow } from '../../core/limiters/fixedWindow.js'
import { leakyBucket } from '../../core/limiters/leakyBucket.js'
import { slidingWindow } from '../../core/limiters/slidingWindow.js'
import { tokenBucket } from '../../core/limiters/tokenBucket.js'
import type { RateLimiter } from '../../core/rateLimiter.js'
import { MemoryStore } from '../../core/stores/memoryStore.js'
import { formatMs, formatRate } from './format.js'
import type { Pattern } from './patterns.js'

/** `limit` requests per `windowMs`, the nominal rate all four algorithms are configured for. */
export interface Policy {
  readonly limit: number
  readonly windowMs: number
  /** Leaky bucket only: requests that may wait their turn. */
  readonly maxQueue: number
}

export const DEFAULT_LIMIT = 100
export const DEFAULT_WINDOW_MS = 60_000

/**
 * The leaky bucket's default queue: a tenth of the limit (10 at 100 per minute). A shaper's queue is a latency
 * budget, not a quota: the last request in a full queue waits `maxQueue / rate`, here a tenth of the window (6 s at
 * 100 per minute). A queue as long as the limit would admit exactly what the token bucket admits (both are GCRA
 * with the same burst) but keep the last caller waiting a whole window, which no interactive client tolerates.
 */
export function defaultMaxQueue(limit: number): number {
  return Math.max(1, Math.round(limit / 10))
}

export const ALGORITHMS = ['fixedWindow', 'slidingWindow', 'tokenBucket', 'leakyBucket'] as const
export type AlgorithmId = (typeof ALGORITHMS)[number]

export const ALGORITHM_LABELS: Readonly<Record<AlgorithmId, string>> = {
  fixedWindow: 'fixed window',
  slidingWindow: 'sliding window',
  tokenBucket: 'token bucket',
  leakyBucket: 'leaky bucket',
}

/** What happened to one request. */
export interface Outcome {
  readonly atMs: number
  readonly key: string
  readonly allowed: boolean
  /** Leaky bucket: how long the admitted request waits before it leaves; 0 for the other algorithms. */
  readonly delayMs: number
}

export interface AlgorithmRun {
  readonly algorithm: AlgorithmId
  /** How the algorithm was configured, in words (for the summary and the chart). */
  readonly config: string
  /** One per request of the pattern, in arrival order. */
  readonly outcomes: readonly Outcome[]
}

/**
 * Microseconds; starts on a window boundary. Windows are aligned on the epoch (see algorithms/fixedWindow.ts), so
 * the start is the first multiple of the window at or after a fixed date (2025-01-01 10:59:00 UTC, for 60 s
 * windows the boundary-burst requests land at 10:59:59 and 11:00:01). Fixed, so every run is identical.
 */
export class VirtualClock {
  readonly start: number
  private current: number

  constructor(windowMs: number) {
    const anchorMs = Date.UTC(2025, 0, 1, 10, 59, 0)
    this.start = Math.ceil(anchorMs / windowMs) * windowMs * 1000
    this.current = this.start
  }

  readonly now: Clock = () => this.current

  /** Moves to `ms` after the start; time only moves forward, as the algorithms assume. */
  at(ms: number): void {
    this.current = Math.max(this.current, this.start + Math.round(ms * 1000))
  }
}

/** The four limiters, each built when asked for, on its own store, all for the same nominal rate. */
function createLimiters(policy: Policy, clock: Clock, keys: number) {
  const { limit, windowMs, maxQueue } = policy
  const perSecond = limit / (windowMs / 1000)
  // Room for every key, so eviction never makes a limiter forget a client mid-simulation.
  const store = () => new MemoryStore({ clock, maxKeys: Math.max(1, keys) })
  // Per second reads best for API rates; a slow one (a few per day) reads best as the policy itself.
  const rate = perSecond >= 0.01 ? `${formatRate(perSecond)}/s` : `${limit} per ${formatMs(windowMs)}`
  const window = formatMs(windowMs)
  const limiters: Record<AlgorithmId, () => { limiter: RateLimiter; config: string }> = {
    fixedWindow: () => ({
      limiter: fixedWindow({ name: 'sim', store: store(), limit, windowMs }),
      config: `${limit} per ${window} window`,
    }),
    slidingWindow: () => ({
      limiter: slidingWindow({ name: 'sim', store: store(), limit, windowMs }),
      config: `${limit} per sliding ${window} (two-counter estimate)`,
    }),
    tokenBucket: () => ({
      limiter: tokenBucket({ name: 'sim', store: store(), capacity: limit, refillPerSecond: perSecond }),
      config: `capacity ${limit}, refill ${rate}`,
    }),
    leakyBucket: () => ({
      limiter: leakyBucket({ name: 'sim', store: store(), ratePerSecond: perSecond, maxQueue }),
      config: `${rate}, queue ${maxQueue} (wait up to ${formatMs(Math.round((maxQueue / perSecond) * 1000))})`,
    }),
  }
  return limiters
}

/**
 * Throws the limiters' own TOLLBOOTH_ERR_INVALID_OPTION if they cannot represent `policy` (a rate too high, a
 * queue too long for their microsecond arithmetic), so the command can refuse it before replaying anything.
 */
export function checkPolicy(policy: Policy): void {
  const limiters = createLimiters(policy, () => 0, 1)
  for (const create of Object.values(limiters)) (create().limiter.store as MemoryStore).close()
}

/** Runs every request of `pattern` through each algorithm, in arrival order. */
export async function replay(pattern: Pattern, policy: Policy): Promise<AlgorithmRun[]> {
  const keys = new Set(pattern.requests.map((request) => request.key)).size
  const runs: AlgorithmRun[] = []
  for (const algorithm of ALGORITHMS) {
    // A clock per algorithm: each replay starts from the beginning of the timeline.
    const clock = new VirtualClock(policy.windowMs)
    const { limiter, config } = createLimiters(policy, clock.now, keys)[algorithm]()
    const outcomes: Outcome[] = []
    try {
      for (const { atMs, key } of pattern.requests) {
        clock.at(atMs)
        // A memory store answers at once; awaiting in order keeps every decision at its own virtual instant.
        const decision = await limiter.consume(key)
        outcomes.push({ atMs, key, allowed: decision.allowed, delayMs: decision.delayMs })
      }
    } finally {
      ;(limiter.store as MemoryStore).close()
    }
    runs.push({ algorithm, config, outcomes })
  }
  return runs
}
