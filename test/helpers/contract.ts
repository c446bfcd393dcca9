import { randomUUID } from 'node:crypto'
import { afterEach, beforeEach, expect } from 'vitest'
import { createStore, type StoreFixture, type StoreKind } from './stores.js'

/** A virtual clock in microseconds, starting on a minute boundary so window positions are exact. */
export class VirtualClock {
  readonly start: number
  private current: number

  constructor() {
    // A future minute boundary, so real time never catches up with it during a test (Redis TTLs run on real time).
    this.start = (Math.ceil(Date.now() / 60_000) + 1) * 60_000 * 1000
    this.current = this.start
  }

  readonly now = (): number => this.current

  /** Moves to `ms` after the start. */
  at(ms: number): void {
    this.current = this.start + ms * 1000
  }

  advance(ms: number): void {
    this.current += ms * 1000
  }
}

/**
 * Sets up a store of `kind` on a virtual clock before each test and, after each test, checks that every key the
 * store holds has a TTL. `ctx.checkTtls()` runs the same check mid-test.
 */
export function useContractStore(kind: StoreKind) {
  const ctx = {} as {
    fixture: StoreFixture
    clock: VirtualClock
    /** A limiter name unique to the test. */
    name: string
    checkTtls(): Promise<void>
  }
  beforeEach(async () => {
    ctx.clock = new VirtualClock()
    ctx.fixture = await createStore(kind, ctx.clock.now)
    ctx.name = `c-${randomUUID().slice(0, 8)}`
    ctx.checkTtls = async () => {
      const ttls = await ctx.fixture.ttls()
      expect(ttls.filter((ttl) => !(ttl > 0))).toEqual([])
    }
  })
  afterEach(async () => {
    await ctx.checkTtls()
    await ctx.fixture.close()
  })
  return ctx
}

/** Runs `count` calls of `fn` and returns how many answered allowed. */
export async function countAllowed(count: number, fn: () => Promise<{ allowed: boolean }>): Promise<number> {
  let allowed = 0
  for (let i = 0; i < count; i++) if ((await fn()).allowed) allowed++
  return allowed
}
