/** Small formatting and statistics helpers the benchmarks' reports share. */
import { loadavg } from 'node:os'

export function median(values: number[]): number {
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
