/** How the simulation writes rates, times and durations. */

/** `1.667` for 100/60: three decimals at most, no trailing zeros. */
export function formatRate(value: number): string {
  return String(Number(value.toFixed(3)))
}

/** `61 s`, `11.9 s`: a time since the start of the simulation, in seconds. */
export function formatTime(ms: number): string {
  return `${formatRate(ms / 1000)} s`
}

/** A duration as people write it: `500 ms`, `1.5 s`, `60 s`, `5 min`, `2 h`. */
export function formatMs(ms: number): string {
  if (ms < 1000) return `${formatRate(ms)} ms`
  if (ms < 120_000 || ms % 60_000 !== 0) return `${formatRate(ms / 1000)} s`
  if (ms < 7_200_000 || ms % 3_600_000 !== 0) return `${formatRate(ms / 60_000)} min`
  return `${formatRate(ms / 3_600_000)} h`
}
