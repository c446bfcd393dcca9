/**
 * The numbers that tell the algorithms apart, from a replay's outcomes, and their text rendering.
 *
 * Totals alone hide the interesting differences, so the summary also measures: the most admitted in any span of
 * one window length (where a fixed window's double spend at a boundary shows, and a token bucket's burst on top of
 * its refill), the longest run of consecutive refusals (how long a client is locked out) and when refusals start.
 */

import { formatMs, formatTime } from './format.js'
import type { Pattern } from './patterns.js'
import { ALGORITHM_LABELS, type AlgorithmId, type AlgorithmRun, type Policy } from './replay.js'

export interface RefusalStreak {
  /** Consecutive refused requests, in arrival order. */
  readonly requests: number
  readonly fromMs: number
  readonly toMs: number
}

export interface AlgorithmSummary {
  readonly algorithm: AlgorithmId
  readonly label: string
  readonly config: string
  readonly admitted: number
  readonly refused: number
  /**
   * Most requests one key got through within any span of one window length, `[t, t + windowMs)`, counted when
   * they proceed: on arrival, or for the leaky bucket when they leave its queue.
   */
  readonly maxAdmittedInWindow: number
  readonly longestRefusalStreak: RefusalStreak | null
  readonly firstRefusalMs: number | null
  /** Leaky bucket: the longest wait of an admitted request before it leaves; 0 for the others. */
  readonly maxDelayMs: number
}

export interface PatternReport {
  readonly pattern: Pattern
  readonly policy: Policy
  readonly algorithms: readonly AlgorithmSummary[]
  /** Where the chart was written, if it was. */
  readonly chart?: string
}

export function summarize(run: AlgorithmRun, windowMs: number): AlgorithmSummary {
  let admitted = 0
  let maxDelayMs = 0
  let firstRefusalMs: number | null = null
  let longest: RefusalStreak | null = null
  // The current run of refusals: how many, since when (0 requests: none under way).
  let streakRequests = 0
  let streakFromMs = 0
  for (const outcome of run.outcomes) {
    if (outcome.allowed) {
      admitted++
      maxDelayMs = Math.max(maxDelayMs, outcome.delayMs)
      streakRequests = 0
      continue
    }
    firstRefusalMs ??= outcome.atMs
    if (streakRequests === 0) streakFromMs = outcome.atMs
    streakRequests++
    // Strictly longer: of equal streaks the first is reported.
    if (longest === null || streakRequests > longest.requests) {
      longest = { requests: streakRequests, fromMs: streakFromMs, toMs: outcome.atMs }
    }
  }
  return {
    algorithm: run.algorithm,
    label: ALGORITHM_LABELS[run.algorithm],
    config: run.config,
    admitted,
    refused: run.outcomes.length - admitted,
    maxAdmittedInWindow: maxPerKeyInSpan(run, windowMs),
    longestRefusalStreak: longest,
    firstRefusalMs,
    maxDelayMs,
  }
}

/**
 * The most one key got through within any window-length span: the number the limit promises to bound (several
 * clients together may rightly exceed it). Counted when a request proceeds: on arrival, or for a shaper when it
 * leaves the queue, which is what the protected service sees.
 */
function maxPerKeyInSpan(run: AlgorithmRun, windowMs: number): number {
  const proceedTimes = new Map<string, number[]>()
  for (const outcome of run.outcomes) {
    if (!outcome.allowed) continue
    let times = proceedTimes.get(outcome.key)
    if (times === undefined) {
      times = []
      proceedTimes.set(outcome.key, times)
    }
    times.push(outcome.atMs + outcome.delayMs)
  }
  let best = 0
  for (const times of proceedTimes.values()) {
    best = Math.max(
      best,
      maxInSpan(
        times.sort((a, b) => a - b),
        windowMs,
      ),
    )
  }
  return best
}

/** The most of the sorted `times` within any half-open span `[t, t + spanMs)` (two pointers, linear). */
export function maxInSpan(times: readonly number[], spanMs: number): number {
  let best = 0
  let first = 0
  for (let last = 0; last < times.length; last++) {
    while ((times[last] as number) - (times[first] as number) >= spanMs) first++
    best = Math.max(best, last - first + 1)
  }
  return best
}

export function formatStreak(streak: RefusalStreak | null): string {
  if (streak === null) return 'none'
  const span =
    streak.fromMs === streak.toMs
      ? `at ${formatTime(streak.fromMs)}`
      : `${formatTime(streak.fromMs)} to ${formatTime(streak.toMs)}`
  return `${streak.requests} (${span})`
}

/** The text summary of one pattern: what was sent, then one line per algorithm, then what stands out. */
export function formatSummary(report: PatternReport): string {
  const { pattern, policy, algorithms } = report
  const window = formatMs(policy.windowMs)
  const lines = [
    `${pattern.name}: ${pattern.description}`,
    `  ${pattern.requests.length} requests over ${formatMs(pattern.durationMs)}; every algorithm allows ${policy.limit} per ${window}`,
    '',
  ]
  const header = [
    'algorithm',
    'admitted',
    'refused',
    `most in any ${window}`,
    'first refusal',
    'longest refusal streak',
  ]
  const rows = algorithms.map((summary) => [
    summary.label,
    String(summary.admitted),
    String(summary.refused),
    String(summary.maxAdmittedInWindow),
    summary.firstRefusalMs === null ? 'none' : formatTime(summary.firstRefusalMs),
    formatStreak(summary.longestRefusalStreak),
  ])
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => (row[column] ?? '').length)),
  )
  // Names and the streak read left to right; numbers line up on the right.
  const leftAligned = new Set([0, 5])
  for (const row of [header, ...rows]) {
    const cells = row.map((cell, column) => {
      const width = widths[column] ?? 0
      return leftAligned.has(column) ? cell.padEnd(width) : cell.padStart(width)
    })
    lines.push(`  ${cells.join('  ')}`.trimEnd())
  }
  lines.push(
    `  (most in any ${window}: for one key, counted when requests proceed; leaky bucket: when they leave its queue)`,
    '',
  )
  for (const summary of algorithms) lines.push(`  ${summary.label}: ${summary.config}`)
  const notes = observations(report)
  if (notes.length > 0) lines.push('', ...notes.map((note) => `  ! ${note}`))
  if (report.chart !== undefined) lines.push('', `  chart: ${report.chart}`)
  return `${lines.join('\n')}\n`
}

/** What a reader should not miss: admissions beyond the limit within one window, and the shaper's waits. */
function observations({ policy, algorithms }: PatternReport): string[] {
  const notes: string[] = []
  for (const summary of algorithms) {
    if (summary.maxAdmittedInWindow > policy.limit) {
      const times = Number((summary.maxAdmittedInWindow / policy.limit).toFixed(2))
      notes.push(
        `${summary.label} let one key ${summary.maxAdmittedInWindow} requests through within one ${formatMs(policy.windowMs)} span: ${times}x the limit of ${policy.limit}`,
      )
    }
    if (summary.maxDelayMs > 0) {
      notes.push(
        `${summary.label} shapes: admitted requests waited up to ${formatMs(summary.maxDelayMs)} in its queue, to leave evenly spaced`,
      )
    }
  }
  return notes
}
