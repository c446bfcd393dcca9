/** Latencies in 1 µs buckets up to 1 s (slower calls land in the last bucket): constant cost per sample. */
export class LatencyHistogram {
  private readonly buckets = new Uint32Array(1_000_001)
  private count = 0

  add(ms: number): void {
    const micros = Math.min(Math.round(ms * 1000), this.buckets.length - 1)
    this.buckets[micros] = (this.buckets[micros] as number) + 1
    this.count++
  }

  /** The smallest latency (ms) at or below which `p` percent of the samples fall. */
  percentile(p: number): number {
    const rank = Math.ceil((p / 100) * this.count)
    let seen = 0
    for (let micros = 0; micros < this.buckets.length; micros++) {
      seen += this.buckets[micros] as number
      if (seen >= rank) return micros / 1000
    }
    return Number.NaN
  }
}
