import type { Clock } from '../core/clock.js'
import { DistinctCounter } from './distinctCounter.js'

export interface ActiveIdentitiesOptions {
  /** Length of a window, in milliseconds. */
  readonly windowMs: number
  /** Most limiters tracked; decisions of the limiters past it are not counted. */
  readonly maxLimiters: number
  /** Clock in microseconds. */
  readonly clock: Clock
}

/** One limiter: the window being counted, and the count of the window before it. */
interface LimiterWindows {
  window: number
  readonly current: DistinctCounter
  lastCount: number
}

/**
 * Distinct identities per limiter over fixed windows of `windowMs` (aligned on the clock, so instances of a
 * deployment close their windows together). A window is reported once it is complete: a count that only grows
 * while it is read would look like a ramp on every dashboard. Memory: at most `maxLimiters` counters of bounded
 * size (see DistinctCounter) and one number each for the last window.
 */
export class ActiveIdentities {
  private readonly limiters = new Map<string, LimiterWindows>()
  private readonly windowMicros: number
  private readonly maxLimiters: number
  private readonly clock: Clock

  constructor(options: ActiveIdentitiesOptions) {
    this.windowMicros = options.windowMs * 1000
    this.maxLimiters = options.maxLimiters
    this.clock = options.clock
  }

  /** Counts `identity` for `limiter` in the current window. */
  record(limiter: string, identity: string): void {
    const window = Math.floor(this.clock() / this.windowMicros)
    let entry = this.limiters.get(limiter)
    if (entry === undefined) {
      // Limiter names are the application's, but one built per tenant would add names without end.
      if (this.limiters.size >= this.maxLimiters) return
      entry = { window, current: new DistinctCounter(), lastCount: 0 }
      this.limiters.set(limiter, entry)
    } else if (entry.window !== window) {
      roll(entry, window)
    }
    entry.current.add(identity)
  }

  /** Every tracked limiter with the distinct identities of its last complete window (0 when it saw none). */
  *lastWindowCounts(): Generator<[limiter: string, count: number]> {
    const window = Math.floor(this.clock() / this.windowMicros)
    for (const [limiter, entry] of this.limiters) {
      if (entry.window !== window) roll(entry, window)
      yield [limiter, entry.lastCount]
    }
  }

  /** Limiters tracked now (at most `maxLimiters`). */
  get size(): number {
    return this.limiters.size
  }

  /** @internal The counter of the current window of `limiter`, for tests of the memory bound. */
  currentCounter(limiter: string): DistinctCounter | undefined {
    return this.limiters.get(limiter)?.current
  }
}

/** Moves `entry` to `window`: the window just closed becomes the last one, or 0 when whole windows were idle. */
function roll(entry: LimiterWindows, window: number): void {
  entry.lastCount = window === entry.window + 1 ? entry.current.count() : 0
  entry.current.clear()
  entry.window = window
}
