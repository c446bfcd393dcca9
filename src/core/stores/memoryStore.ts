import { algorithmSteps } from '../algorithms/index.js'
import type { Step } from '../algorithms/step.js'
import { type Clock, nowMicros } from '../clock.js'
import { positiveInteger } from '../validate.js'
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

interface Entry {
  state: unknown
  expiresAt: number
}

/** A bounded in-process store. Decisions are synchronous underneath; nothing leaves the process. */
export class MemoryStore implements Store {
  readonly kind = 'memory'
  readonly maxKeys: number
  private readonly entries = new Map<string, Entry>()
  private readonly clock: Clock
  private readonly sweeper: NodeJS.Timeout

  constructor(options: MemoryStoreOptions = {}) {
    this.maxKeys = positiveInteger('MemoryStore', 'maxKeys', options.maxKeys ?? 100_000)
    const sweepIntervalMs = positiveInteger(
      'MemoryStore',
      'sweepIntervalMs',
      options.sweepIntervalMs ?? 10_000,
    )
    this.clock = options.clock ?? nowMicros
    this.sweeper = setInterval(() => this.sweep(), sweepIntervalMs)
    this.sweeper.unref()
  }

  run(request: StoreRequest): Promise<Reply> {
    return Promise.resolve(this.runNow(request))
  }

  /** The same as `run`, answered synchronously. */
  runNow(request: StoreRequest): Reply {
    const now = this.clock()
    const { id, step } = this.step(request, now)
    this.apply(id, step, now)
    return step.reply
  }

  consumeAll(requests: readonly StoreRequest[]): Promise<Reply[]> {
    return Promise.resolve(this.consumeAllNow(requests))
  }

  /** The same as `consumeAll`, answered synchronously. */
  consumeAllNow(requests: readonly StoreRequest[]): Reply[] {
    const now = this.clock()
    // The steps only compute; nothing is written unless every policy allows.
    const steps = requests.map((request) => this.step(request, now))
    if (steps.every(({ step }) => step.reply[0] === 1))
      for (const { id, step } of steps) this.apply(id, step, now)
    return steps.map(({ step }) => step.reply)
  }

  delete(limiter: string, key: string): Promise<void> {
    this.entries.delete(entryKey(limiter, key))
    return Promise.resolve()
  }

  /** Keys held now, expired or not yet swept included. */
  get size(): number {
    return this.entries.size
  }

  /** Each live key with its remaining time to live in milliseconds; for inspection and tests. */
  snapshot(): { limiter: string; key: string; ttlMs: number }[] {
    const now = this.clock()
    const result: { limiter: string; key: string; ttlMs: number }[] = []
    for (const [id, entry] of this.entries) {
      if (entry.expiresAt <= now) continue
      const split = id.indexOf('\u0000')
      result.push({
        limiter: id.slice(0, split),
        key: id.slice(split + 1),
        ttlMs: (entry.expiresAt - now) / 1000,
      })
    }
    return result
  }

  /** Stops the sweeper. The store still answers afterwards; call it when throwing the store away early. */
  close(): void {
    clearInterval(this.sweeper)
  }

  private step(request: StoreRequest, now: number): { id: string; step: Step<unknown> } {
    const id = entryKey(request.limiter, request.key)
    const entry = this.entries.get(id)
    const state = entry !== undefined && entry.expiresAt > now ? entry.state : undefined
    if (entry !== undefined && state === undefined) this.entries.delete(id)
    return { id, step: algorithmSteps[request.algorithm](state, now, request.op, request.args) }
  }

  private apply(id: string, step: Step<unknown>, now: number): void {
    if (step.next === 'delete') {
      this.entries.delete(id)
    } else if (step.next !== undefined) {
      // Delete then set moves the key to the end of the Map's order, so eviction takes the least recently written.
      this.entries.delete(id)
      this.entries.set(id, { state: step.next.state, expiresAt: now + step.next.ttlMs * 1000 })
      if (this.entries.size > this.maxKeys) this.evictOldest()
    }
  }

  private sweep(): void {
    const now = this.clock()
    for (const [id, entry] of this.entries) if (entry.expiresAt <= now) this.entries.delete(id)
  }

  private evictOldest(): void {
    const oldest = this.entries.keys().next()
    if (!oldest.done) this.entries.delete(oldest.value)
  }
}

/** Limiter names cannot hold NUL, so this cannot collide. */
function entryKey(limiter: string, key: string): string {
  return `${limiter}\u0000${key}`
}
