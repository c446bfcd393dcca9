import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Decision } from '../../src/core/decision.js'
import type { FailPolicy } from '../../src/core/failPolicy.js'
import { allOf } from '../../src/core/limiters/allOf.js'
import { fixedWindow } from '../../src/core/limiters/fixedWindow.js'
import { leakyBucket } from '../../src/core/limiters/leakyBucket.js'
import { slidingWindow } from '../../src/core/limiters/slidingWindow.js'
import { tokenBucket } from '../../src/core/limiters/tokenBucket.js'
import type { RateLimiter } from '../../src/core/rateLimiter.js'
import { rateLimitHeaders } from '../../src/core/rateLimitHeaders.js'
import { RedisStore } from '../../src/core/stores/redisStore.js'
import type { Store } from '../../src/core/stores/store.js'
import { useContractStore } from '../helpers/contract.js'
import { type RedisProcess, startRedis } from '../helpers/redisServer.js'
import { limiterClientOptions, storeKinds, whenReady } from '../helpers/stores.js'

/**
 * Each rate limiter with the largest cost it can ever admit, and when one more unit fits once that cost is spent at
 * the start of a minute (ms, and the Retry-After header), worked out by hand from its parameters.
 */
function limiters(name: string, store: Store, failPolicy: FailPolicy = 'open') {
  const common = { store, failPolicy, denyCache: false } as const
  return [
    {
      maxCost: 10,
      retryAfter: [1000, '1'],
      limiter: tokenBucket({ name: `${name}-tb`, capacity: 10, refillPerSecond: 1, ...common }),
    },
    {
      maxCost: 6,
      retryAfter: [60_000, '60'],
      limiter: fixedWindow({ name: `${name}-fw`, limit: 6, windowMs: 60_000, ...common }),
    },
    // The previous window's 7 weigh 7 × (1 − x / 60 s): 6 or less from x = 8571.4 ms into the next window.
    {
      maxCost: 7,
      retryAfter: [68_572, '69'],
      limiter: slidingWindow({ name: `${name}-sw`, limit: 7, windowMs: 60_000, ...common }),
    },
    // The request in service plus a queue of 3; the next turn frees after one interval of 200 ms.
    {
      maxCost: 4,
      retryAfter: [200, '1'],
      limiter: leakyBucket({ name: `${name}-lb`, ratePerSecond: 5, maxQueue: 3, ...common }),
    },
  ] satisfies { maxCost: number; retryAfter: [number, string]; limiter: RateLimiter }[]
}

const forever = { allowed: false, neverAllowed: true, retryAfterMs: 0, delayMs: 0 }

describe.each(storeKinds)('a cost above what a policy can ever admit, on the %s store', (kind) => {
  const ctx = useContractStore(kind)

  it('is refused with neverAllowed and no Retry-After, spending nothing; the largest admissible cost passes', async () => {
    for (const { maxCost, limiter, retryAfter } of limiters(ctx.name, ctx.fixture.store)) {
      expect(limiter.maxCost).toBe(maxCost)
      const refused = await limiter.consume('k', maxCost + 1)
      expect(refused, limiter.algorithm).toMatchObject({ ...forever, source: 'store' })
      expect(rateLimitHeaders(refused, limiter.policy)['Retry-After'], limiter.algorithm).toBeUndefined()
      // Nothing was spent: the largest cost still fits whole.
      const largest = await limiter.consume('k', maxCost)
      expect(largest, limiter.algorithm).toMatchObject({ allowed: true, neverAllowed: false })
      // Now spent: an ordinary denial, which waiting cures.
      const spent = await limiter.consume('k', 1)
      expect(spent.allowed, limiter.algorithm).toBe(false)
      expect(spent.neverAllowed, limiter.algorithm).toBe(false)
      expect(
        [spent.retryAfterMs, rateLimitHeaders(spent, limiter.policy)['Retry-After']],
        limiter.algorithm,
      ).toEqual(retryAfter)
    }
  })

  it('allOf: one policy that can never admit the cost refuses the combination, governing its numbers', async () => {
    const store = ctx.fixture.store
    const small = tokenBucket({ name: `${ctx.name}-small`, store, capacity: 5, refillPerSecond: 1 })
    const large = tokenBucket({ name: `${ctx.name}-large`, store, capacity: 50, refillPerSecond: 1 })
    const both = allOf([large, small])
    expect(both.maxCost).toBe(5)
    const refused = await both.consume('k', 6)
    expect(refused).toMatchObject({ ...forever, limit: 5 })
    expect(refused.decisions.map((decision) => decision.neverAllowed)).toEqual([false, true])
    expect((await large.peek('k')).remaining).toBe(50)
    expect((await both.consume('k', 5)).allowed).toBe(true)
  })
})

describe('a cost above what a policy can ever admit, while the store is down', () => {
  let redis: RedisProcess
  let client: Redis
  let store: RedisStore

  beforeAll(async () => {
    redis = await startRedis()
    client = new Redis(redis.url, limiterClientOptions)
    client.on('error', () => {}) // the server is stopped below: refused reconnections are expected
    await whenReady(client)
    store = new RedisStore({ client, timeoutMs: 200, breaker: { failureThreshold: 1000 } })
    await redis.stop()
  })
  afterAll(() => {
    client.disconnect()
  })

  it.each(['open', 'closed', 'local'] as const)(
    'is refused with neverAllowed under failPolicy %s',
    async (policy) => {
      for (const { maxCost, limiter } of limiters(`down-${policy}`, store, policy)) {
        const refused: Decision = await limiter.consume('k', maxCost + 1)
        expect(refused, `${limiter.algorithm} ${policy}`).toMatchObject(forever)
        expect(refused.source).not.toBe('store')
        // The fail policy still answers what it can admit.
        const fits = await limiter.consume('k', 1)
        expect(fits.allowed, `${limiter.algorithm} ${policy}`).toBe(policy !== 'closed')
        expect(fits.neverAllowed).toBe(false)
      }
    },
  )
})
