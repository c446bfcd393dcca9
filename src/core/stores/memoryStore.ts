import { algorithmSteps } from '../algorithms/index.js'
import type { Step } from '../algorithms/step.js'
import { type Clock, nowMicros } from '../clock.js'
import { checkOptionKeys, optionNames } from '../knownOptions.js'
import { positiveInteger, timerMs } from '../validate.js'
import type { Reply, Store, StoreRequest } from './store.js'

export interface MemoryStoreOptions {
  /**
   * Most keys held at once. Beyond it the least recently written key is evicted (which forgets that identity's
   * usage: size it above the number of identities active within your longest window).
   * @default 100000
   */
  maxKeys?: number
  /**
   * How often expired keys are swept, in milliseconds (expired keys are also dropped when read).
   * @default 10000
   */
  sweepIntervalMs?: number
  /** Clock in microseconds; for tests and simulations. @default wall clock */
  clock?: Clock
}

const OPTIONS = optionNames<MemoryStoreOptions>({ maxKeys: true, sweepIntervalMs: true, clock: true })

interface Entry {
  /** The state, or `NUMERIC` when it is a number (GCRA's TAT, a window's count): then it is in `numeric`. */
  state: unknown
  /**
   * A numeric state, in a field that only ever holds numbers: V8 rewrites such a field in place, where a field of
   * any type gets a newly allocated number on each write. That number, young and pointed to by a long-lived entry,
   * is work for the minor GCs until it is promoted: measurable per request inside a Yoga server, though a tight
   * loop of decisions shows no difference.
   */
  numeric: number
  expiresAt: number
  /** Written since eviction last passed it: gets a second chance instead of being evicted. */
  touched: boolean
}

const NUMERIC = Symbol('numeric state')

function readState(entry: Entry): unknown {
  return entry.state === NUMERIC ? entry.numeric : entry.state
}

function writeState(entry: Entry, state: unknown): void {
  if (typeof state === 'number') {
    entry.numeric = state
    entry.state = NUMERIC
  } else entry.state = state
}

/** How many recently written keys eviction may pass over before evicting one anyway (keeps eviction O(1)). */
const SECOND_CHANCES = 16

/**
 * A bounded in-process store. Decisions are synchronous underneath; nothing leaves the process.
 * Keys live in one Map per limiter (looking up the caller's own key string, without building a composite key, is
 * a quarter of the cost of a decision). Beyond `maxKeys` the limiter adding a key gives up one of its own.
 */
export class MemoryStore implements Store {
  readonly kind = 'memory'
  readonly maxKeys: number
  private readonly limiters = new Map<string, Map<string, Entry>>()
  private count = 0
  private readonly clock: Clock
  private readonly sweeper: NodeJS.Timeout

  constructor(options: MemoryStoreOptions = {}) {
    checkOptionKeys('MemoryStore', options, OPTIONS)
    this.maxKeys = positiveInteger('MemoryStore', 'maxKeys', options.maxKeys ?? 100_000)
    const sweepIntervalMs = timerMs('MemoryStore', 'sweepIntervalMs', options.sweepIntervalMs ?? 10_000)
    this.clock = options.clock ?? nowMicros
    this.sweeper = startSweeper(this, sweepIntervalMs)
  }

  run(request: StoreRequest): Promise<Reply> {
    return Promise.resolve(this.runNow(request))
  }

  /** The same as `run`, answered synchronously. */
  runNow(request: StoreRequest): Reply {
    const now = this.clock()
    const entries = this.entriesOf(request.limiter)
    const entry = entries.get(request.key)
    const step = this.step(request, entry, now)
    this.apply(entries, request.key, entry, step, now)
    return step.reply
  }

  consumeAll(requests: readonly StoreRequest[]): Promise<Reply[]> {
    return Promise.resolve(this.consumeAllNow(requests))
  }

  /** The same as `consumeAll`, answered synchronously. */
  consumeAllNow(requests: readonly StoreRequest[]): Reply[] {
    const now = this.clock()
    // The steps only compute; nothing is written unless every policy allows.
    const steps = requests.map((request) => {
      const entries = this.entriesOf(request.limiter)
      const entry = entries.get(request.key)
      return { entries, key: request.key, entry, step: this.step(request, entry, now) }
    })
    if (steps.every(({ step }) => step.reply[0] === 1)) {
      for (const { entries, key, entry, step } of steps) this.apply(entries, key, entry, step, now)
    }
    return steps.map(({ step }) => step.reply)
  }

  delete(limiter: string, key: string): Promise<void> {
    if (this.limiters.get(limiter)?.delete(key)) this.count--
    return Promise.resolve()
  }

  /** Keys held now, expired or not yet swept included. */
  get size(): number {
    return this.count
  }

  /** Each live key with its remaining time to live in milliseconds; for inspection and tests. */
  snapshot(): { limiter: string; key: string; ttlMs: number }[] {
    const now = this.clock()
    const result: { limiter: string; key: string; ttlMs: number }[] = []
    for (const [limiter, entries] of this.limiters) {
      for (const [key, entry] of entries) {
        if (entry.expiresAt > now) result.push({ limiter, key, ttlMs: (entry.expiresAt - now) / 1000 })
      }
    }
    return result
  }

  /**
   * Stops the sweeper. The store still answers afterwards. Optional: a store that is no longer referenced is
   * garbage-collected and its sweeper stops by itself.
   */
  close(): void {
    clearInterval(this.sweeper)
  }

  private step(request: StoreRequest, entry: Entry | undefined, now: number): Step<unknown> {
    // An expired entry reads as no state; it is overwritten or swept later.
    const state = entry !== undefined && entry.expiresAt > now ? readState(entry) : undefined
    return algorithmSteps[request.algorithm](state, now, request.op, request.args)
  }

  private entriesOf(limiter: string): Map<string, Entry> {
    let entries = this.limiters.get(limiter)
    if (entries === undefined) {
      entries = new Map()
      this.limiters.set(limiter, entries)
    }
    return entries
  }

  private apply(
    entries: Map<string, Entry>,
    key: string,
    entry: Entry | undefined,
    step: Step<unknown>,
    now: number,
  ): void {
    const next = step.next
    if (next === 'delete') {
      if (entries.delete(key)) this.count--
    } else if (next === undefined) {
      return
    } else if (entry !== undefined) {
      // Updated in place (cheaper than re-inserting); the flag stands in for "recently used" at eviction.
      writeState(entry, next.state)
      entry.expiresAt = now + next.ttlMs * 1000
      entry.touched = true
    } else {
      const created: Entry = {
        state: undefined,
        numeric: 0,
        expiresAt: now + next.ttlMs * 1000,
        touched: false,
      }
      writeState(created, next.state)
      entries.set(key, created)
      if (++this.count > this.maxKeys) this.evict(entries.size > 1 ? entries : this.largest())
    }
  }

  /** @internal Drops expired keys; run by the sweeper. */
  sweep(): void {
    const now = this.clock()
    for (const entries of this.limiters.values()) {
      for (const [key, entry] of entries) {
        if (entry.expiresAt <= now) {
          entries.delete(key)
          this.count--
        }
      }
    }
  }

  private largest(): Map<string, Entry> {
    let largest: Map<string, Entry> | undefined
    for (const entries of this.limiters.values())
      if (largest === undefined || entries.size > largest.size) largest = entries
    return largest as Map<string, Entry>
  }

  /**
   * Evicts one key, oldest first, but a key written since it was last passed over goes to the back of the line
   * instead (the "second chance" approximation of least-recently-used), at most SECOND_CHANCES times per eviction.
   */
  private evict(entries: Map<string, Entry>): void {
    let chances = SECOND_CHANCES
    for (const [key, entry] of entries) {
      if (entry.touched && chances-- > 0) {
        entry.touched = false
        entries.delete(key)
        entries.set(key, entry)
        continue
      }
      entries.delete(key)
      this.count--
      return
    }
  }
}

/**
 * The sweeper holds the store only weakly: a timer holding it strongly would keep every store ever created alive
 * (limiters made per request or per plan, each with its own default store, would leak).
 */
function startSweeper(store: MemoryStore, intervalMs: number): NodeJS.Timeout {
  const ref = new WeakRef(store)
  const timer = setInterval(() => {
    const alive = ref.deref()
    if (alive === undefined) clearInterval(timer)
    else alive.sweep()
  }, intervalMs)
  timer.unref()
  return timer
}
