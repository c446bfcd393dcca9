/** Small formatting and statistics helpers the benchmarks' reports share. */
import { loadavg } from 'node:os'

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] as number
}

/** A whole number with thousands separators, or `?`. */
export function fmt(value: number | undefined): string {
  return value === undefined ? '?' : Math.round(value).toLocaleString('en-US')
}

export function pct(fraction: number): string {
  return `${Math.round(fraction * 100)}%`
}

/** 1, 5 and 15 minute load averages: other processes on the machine skew the numbers. */
export function loadAverage(): string {
  return loadavg()
    .map((load) => load.toFixed(2))
    .join(' ')
}

export function count(counts: Map<string, number>, what: string): void {
  counts.set(what, (counts.get(what) ?? 0) + 1)
}

/** How one contender compares with the plain server, over rounds run side by side (round i against round i). */
export interface VersusPlain {
  /** Median over rounds of each round's rate over the plain server's in the same round. */
  paired: number
  /** Median rate over the plain server's median rate. */
  ofMedians: number
  /** The plain server's median CPU time per unit of work over this one's: what a CPU-bound server would get. */
  cpu: number
}

export function versusPlain<Round extends { perSecond: number }>(
  rounds: readonly Round[],
  plainRounds: readonly Round[],
  cpuPerUnit: (round: Round) => number,
): VersusPlain {
  return {
    paired: median(rounds.map((r, i) => r.perSecond / (plainRounds[i]?.perSecond ?? Number.NaN))),
    ofMedians: median(rounds.map((r) => r.perSecond)) / median(plainRounds.map((r) => r.perSecond)),
    cpu: median(plainRounds.map(cpuPerUnit)) / median(rounds.map(cpuPerUnit)),
  }
}

/** `met`, or `NOT met (n% short)`. */
export function verdict(ratio: number, target: number): string {
  return ratio >= target ? 'met' : `NOT met (${(((target - ratio) / target) * 100).toFixed(0)}% short)`
}
