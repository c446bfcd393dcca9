import { describe, expect, it } from 'vitest'
import type { Decision } from '../../src/core/decision.js'
import { concurrencyLimit } from '../../src/core/limiters/concurrencyLimit.js'
import { fixedWindow } from '../../src/core/limiters/fixedWindow.js'
import { leakyBucket } from '../../src/core/limiters/leakyBucket.js'
import { slidingWindow } from '../../src/core/limiters/slidingWindow.js'
import { tokenBucket } from '../../src/core/limiters/tokenBucket.js'
import type { Store } from '../../src/core/stores/store.js'
import { useContractStore } from '../helpers/contract.js'
import { storeKinds } from '../helpers/stores.js'

const LIMIT = 50
const CALLS = 500
const KEY = 'shared'

/** One call per algorithm, each set up to admit exactly LIMIT requests on one key (the virtual clock stands still). */
const cases: { algorithm: string; make(name: string, store: Store): () => Promise<Decision> }[] = [
  {
    algorithm: 'tokenBucket',
    make: (name, store) => {
      const limiter = tokenBucket({ name, store, capacity: LIMIT, refillPerSecond: 1, denyCache: false })
      return () => limiter.consume(KEY)
    },
  },
  {
    algorithm: 'fixedWindow',
    make: (name, store) => {
      const limiter = fixedWindow({ name, store, limit: LIMIT, windowMs: 60_000, denyCache: false })
      return () => limiter.consume(KEY)
    },
  },
  {
    algorithm: 'slidingWindow',
    make: (name, store) => {
      const limiter = slidingWindow({ name, store, limit: LIMIT, windowMs: 60_000, denyCache: false })
      return () => limiter.consume(KEY)
    },
  },
  {
    algorithm: 'leakyBucket',
    make: (name, store) => {
      const limiter = leakyBucket({ name, store, ratePerSecond: 1, maxQueue: LIMIT - 1, denyCache: false })
      return () => limiter.consume(KEY)
    },
  },
  {
    algorithm: 'concurrencyLimit',
    make: (name, store) => {
      const limiter = concurrencyLimit({ name, store, max: LIMIT, leaseMs: 60_000 })
      return () => limiter.acquire(KEY)
    },
  },
]

describe.each(storeKinds)('concurrent admission on the %s store', (kind) => {
  const ctx = useContractStore(kind)

  it.each(cases)(
    `$algorithm: ${CALLS} parallel calls on one key admit exactly ${LIMIT}`,
    async ({ make }) => {
      const call = make(ctx.name, ctx.fixture.store)
      const decisions = await Promise.all(Array.from({ length: CALLS }, () => call()))

      const allowed = decisions.filter((decision) => decision.allowed)
      expect(allowed).toHaveLength(LIMIT)
      expect(decisions.filter((decision) => decision.source !== 'store')).toEqual([])
      // Every admission saw a different state: the remainders are 49, 48, ..., 0, each once.
      const remaining = allowed.map((decision) => decision.remaining).sort((a, b) => a - b)
      expect(remaining).toEqual(Array.from({ length: LIMIT }, (_, i) => i))
      // And the budget stays spent.
      expect((await call()).allowed).toBe(false)
    },
  )
})
