import { Cluster, Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import {
  allOf,
  CircuitBreaker,
  concurrencyLimit,
  fixedWindow,
  leakyBucket,
  MemoryStore,
  RedisStore,
  slidingWindow,
  tokenBucket,
} from '../../../src/index.js'

const INVALID_OPTION = 'TOLLBOOTH_ERR_INVALID_OPTION'
const INVALID_ARGUMENT = 'TOLLBOOTH_ERR_INVALID_ARGUMENT'

/** Runs `fn`, expecting a TollboothError with `code` whose message names `option`. */
function expectError(fn: () => unknown, code: string, option: string) {
  try {
    fn()
  } catch (error) {
    expect((error as { code?: string }).code).toBe(code)
    expect((error as Error).message).toContain(`"${option}"`)
    return
  }
  throw new Error(`expected ${code} naming "${option}"`)
}

async function expectRejection(promise: Promise<unknown>, code: string, argument: string) {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect((error as { code?: string } | undefined)?.code).toBe(code)
  expect((error as Error).message).toContain(`"${argument}"`)
}

describe('invalid options throw at construction, naming the option, with a stable code', () => {
  it.each([
    ['capacity', { capacity: -1, refillPerSecond: 1 }],
    ['capacity', { capacity: 1.5, refillPerSecond: 1 }],
    ['capacity', { capacity: Number.NaN, refillPerSecond: 1 }],
    ['refillPerSecond', { capacity: 10, refillPerSecond: 0 }],
    ['refillPerSecond', { capacity: 10, refillPerSecond: Number.POSITIVE_INFINITY }],
    ['refillPerSecond', { capacity: 10, refillPerSecond: 5_000_000 }],
    // Kept in whole microseconds per unit, these would silently become 1,000,000 and 142,857 per second.
    ['refillPerSecond', { capacity: 10, refillPerSecond: 1_500_000 }],
    ['refillPerSecond', { capacity: 10, refillPerSecond: 150_000 }],
    ['name', { name: '', capacity: 10, refillPerSecond: 1 }],
    ['name', { name: 'a{b}', capacity: 10, refillPerSecond: 1 }],
    // The policy's name in the RateLimit fields, which hold printable ASCII only.
    ['name', { name: 'téléchargements', capacity: 10, refillPerSecond: 1 }],
    ['name', { name: 'tab\there', capacity: 10, refillPerSecond: 1 }],
    ['failPolicy', { capacity: 10, refillPerSecond: 1, failPolicy: 'maybe' }],
    ['store', { capacity: 10, refillPerSecond: 1, store: {} }],
    ['store', { capacity: 10, refillPerSecond: 1, store: null }],
    [
      'denyCache.maxKeys',
      { capacity: 10, refillPerSecond: 1, denyCache: { maxKeys: 0 }, store: fakeRemote() },
    ],
  ])('tokenBucket %s', (option, options) => {
    expectError(() => tokenBucket({ name: 'n', ...options } as never), INVALID_OPTION, option)
  })

  it.each([
    ['limit', { limit: 0, windowMs: 1000 }],
    ['windowMs', { limit: 10, windowMs: 0 }],
    ['windowMs', { limit: 10, windowMs: 10.5 }],
  ])('windows %s', (option, options) => {
    expectError(() => fixedWindow({ name: 'n', ...options }), INVALID_OPTION, option)
    expectError(() => slidingWindow({ name: 'n', ...options }), INVALID_OPTION, option)
  })

  it('a rate kept within 1 % is accepted, and says what it would have become otherwise', () => {
    expect(tokenBucket({ name: 'n', capacity: 10, refillPerSecond: 100_000 }).maxCost).toBe(10)
    expect(tokenBucket({ name: 'n', capacity: 10, refillPerSecond: 1_000_000 }).maxCost).toBe(10)
    expect(() => tokenBucket({ name: 'n', capacity: 10, refillPerSecond: 150_000 })).toThrow(
      'tokenBucket: "refillPerSecond" must be a rate kept within 1 % in whole microseconds per unit (150000 would be 142857; count in larger units), got 150000',
    )
  })

  it('leakyBucket, concurrencyLimit, stores', () => {
    expectError(
      () => leakyBucket({ name: 'n', ratePerSecond: -1, maxQueue: 1 }),
      INVALID_OPTION,
      'ratePerSecond',
    )
    expectError(() => leakyBucket({ name: 'n', ratePerSecond: 1, maxQueue: -1 }), INVALID_OPTION, 'maxQueue')
    expectError(() => concurrencyLimit({ name: 'n', max: 0, leaseMs: 1000 }), INVALID_OPTION, 'max')
    expectError(() => concurrencyLimit({ name: 'n', max: 1, leaseMs: 0 }), INVALID_OPTION, 'leaseMs')
    expectError(() => new MemoryStore({ maxKeys: 0 }), INVALID_OPTION, 'maxKeys')
    expectError(() => new RedisStore({ client: {} as never }), INVALID_OPTION, 'client')
    const client = new Redis({ lazyConnect: true })
    expectError(() => new RedisStore({ client, prefix: 'a{' }), INVALID_OPTION, 'prefix')
    expectError(() => new RedisStore({ client, timeoutMs: -5 }), INVALID_OPTION, 'timeoutMs')
    expectError(
      () => new RedisStore({ client, breaker: { cooldownMs: 0 } }),
      INVALID_OPTION,
      'breaker.cooldownMs',
    )
    client.disconnect()
  })

  it('an option that becomes a timer is at most 2^31 - 1 ms: past it Node would fire the timer every 1 ms', async () => {
    const MAX = 2 ** 31 - 1
    for (const leaseMs of [2 ** 31, 2 ** 33, 1e12]) {
      expectError(() => concurrencyLimit({ name: 'n', max: 1, leaseMs }), INVALID_OPTION, 'leaseMs')
    }
    expectError(() => new MemoryStore({ sweepIntervalMs: 2 ** 31 }), INVALID_OPTION, 'sweepIntervalMs')
    const client = new Redis({ lazyConnect: true })
    expectError(() => new RedisStore({ client, timeoutMs: 2 ** 31 }), INVALID_OPTION, 'timeoutMs')
    const store = new RedisStore({ client, timeoutMs: MAX })
    await expectRejection(store.warmUp({ timeoutMs: 2 ** 31 }), INVALID_OPTION, 'timeoutMs')
    client.disconnect()
    // The longest a timer honours is accepted.
    expect(concurrencyLimit({ name: 'n', max: 1, leaseMs: MAX }).leaseMs).toBe(MAX)
    expect(() => new MemoryStore({ sweepIntervalMs: MAX })).not.toThrow()
  })

  it('RedisStore given the client itself instead of { client } says how to pass it', () => {
    // Never connected: lazyConnect, and a refused store sends nothing.
    const client = new Redis({ lazyConnect: true })
    const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true })
    try {
      const messages = [client, cluster].map((given) => {
        try {
          new RedisStore(given as never)
        } catch (error) {
          return `${(error as { code?: string }).code}: ${(error as Error).message}`
        }
        return 'no error'
      })
      const expected = `${INVALID_OPTION}: RedisStore: "client" must be given inside the options, as new RedisStore({ client }), got the client itself`
      expect(messages).toEqual([expected, expected])
      expect([client.status, cluster.status]).toEqual(['wait', 'wait'])
    } finally {
      client.disconnect()
      cluster.disconnect()
    }
  })
})

/** Runs `fn`, expecting TOLLBOOTH_ERR_INVALID_OPTION with exactly `message`. */
function expectUnknown(fn: () => unknown, message: string) {
  let thrown: unknown
  try {
    fn()
  } catch (error) {
    thrown = error
  }
  expect((thrown as { code?: string } | undefined)?.code).toBe(INVALID_OPTION)
  expect((thrown as Error).message).toBe(message)
}

describe('unknown option keys throw at construction, naming the key and the closest known one', () => {
  it('tokenBucket: a misspelt failPolicy in options built in a variable (a literal would not compile)', () => {
    const options = { name: 'login', capacity: 5, refillPerSecond: 0.1, failpolicy: 'closed' }
    expectUnknown(
      () => tokenBucket(options),
      'tokenBucket: unknown option "failpolicy" (did you mean "failPolicy"?)',
    )
  })

  it('every limiter knows its own keys and the common ones', () => {
    const windowOptions = { name: 'w', limit: 10, windowMs: 1000, windowMS: 500 }
    expectUnknown(
      () => fixedWindow(windowOptions),
      'fixedWindow: unknown option "windowMS" (did you mean "windowMs"?)',
    )
    expectUnknown(
      () => slidingWindow(windowOptions),
      'slidingWindow: unknown option "windowMS" (did you mean "windowMs"?)',
    )
    const leaky = { name: 'l', ratePerSecond: 1, maxQueue: 1, maxQeue: 5 }
    expectUnknown(
      () => leakyBucket(leaky),
      'leakyBucket: unknown option "maxQeue" (did you mean "maxQueue"?)',
    )
    // concurrencyLimit has no deny cache: a key of the rate limiters is unknown to it.
    const leases = { name: 'c', max: 1, leaseMs: 1000, denyCache: false }
    expectUnknown(
      () => concurrencyLimit(leases),
      'concurrencyLimit: unknown option "denyCache" (known options: name, store, failPolicy, ' +
        'failClosedRetryAfterMs, localMaxKeys, hooks, max, leaseMs)',
    )
    const local = { name: 't', capacity: 1, refillPerSecond: 1, localMaxkeys: 10 }
    expectUnknown(
      () => tokenBucket(local),
      'tokenBucket: unknown option "localMaxkeys" (did you mean "localMaxKeys"?)',
    )
  })

  it('hooks: a misspelt hook would never be called, so it is refused (limiters, allOf, RedisStore, the plugins)', () => {
    const onDecision = () => {}
    // `as never`: what JavaScript would pass (TypeScript refuses hooks with no key in common with the type).
    const limiterOptions = {
      name: 'h',
      capacity: 1,
      refillPerSecond: 1,
      hooks: { ondecision: onDecision },
    } as never
    expectUnknown(
      () => tokenBucket(limiterOptions),
      'tokenBucket: unknown option "hooks.ondecision" (did you mean "onDecision"?)',
    )
    const limiter = tokenBucket({ name: 'h2', capacity: 1, refillPerSecond: 1 })
    const combined = { hooks: { onDecisions: onDecision } } as never
    expectUnknown(
      () => allOf([limiter], combined),
      'allOf: unknown option "hooks.onDecisions" (did you mean "onDecision"?)',
    )
    const client = new Redis({ lazyConnect: true })
    try {
      const storeOptions = { client, hooks: { onStoreErrors: () => {} } } as never
      expectUnknown(
        () => new RedisStore(storeOptions),
        'RedisStore: unknown option "hooks.onStoreErrors" (did you mean "onStoreError"?)',
      )
    } finally {
      client.disconnect()
    }
    const notAFunction = {
      name: 'h3',
      capacity: 1,
      refillPerSecond: 1,
      hooks: { onDecision: 'log' },
    } as never
    expectError(() => tokenBucket(notAFunction), INVALID_OPTION, 'hooks.onDecision')
  })

  it('the object form of denyCache, whatever the store', () => {
    // `as never`: what JavaScript would pass (TypeScript refuses an object with no key in common with the type).
    const options = { name: 'd', capacity: 1, refillPerSecond: 1, denyCache: { maxkeys: 5 } } as never
    expectUnknown(
      () => tokenBucket(options),
      'tokenBucket: unknown option "denyCache.maxkeys" (did you mean "maxKeys"?)',
    )
    expectUnknown(
      () => tokenBucket({ ...(options as object), store: fakeRemote() } as never),
      'tokenBucket: unknown option "denyCache.maxkeys" (did you mean "maxKeys"?)',
    )
  })

  it('known keys may hold undefined; an unknown one may not', () => {
    expect(() =>
      tokenBucket({ name: 'u', capacity: 1, refillPerSecond: 1, store: undefined, hooks: undefined }),
    ).not.toThrow()
    const options = { name: 'u', capacity: 1, refillPerSecond: 1, stor: undefined }
    expectUnknown(() => tokenBucket(options), 'tokenBucket: unknown option "stor" (did you mean "store"?)')
  })

  it('MemoryStore', () => {
    const options = { maxkeys: 10 } as never
    expectUnknown(
      () => new MemoryStore(options),
      'MemoryStore: unknown option "maxkeys" (did you mean "maxKeys"?)',
    )
  })

  it('RedisStore and its breaker, before any command is sent', () => {
    // Never connected: lazyConnect, and nothing is sent when the options are refused.
    const client = new Redis({ lazyConnect: true })
    try {
      const options = { client, timeout: 20 }
      expectUnknown(
        () => new RedisStore(options),
        'RedisStore: unknown option "timeout" (did you mean "timeoutMs"?)',
      )
      const breaker = { client, breaker: { failureThreshold: 3, cooldown: 500 } }
      expectUnknown(
        () => new RedisStore(breaker),
        'RedisStore: unknown option "breaker.cooldown" (did you mean "cooldownMs"?)',
      )
      expect(client.status).toBe('wait')
    } finally {
      client.disconnect()
    }
    const options = { failurethreshold: 2 } as never
    expectUnknown(
      () => new CircuitBreaker('test', options, () => {}),
      'test: unknown option "breaker.failurethreshold" (did you mean "failureThreshold"?)',
    )
  })
})

describe('invalid arguments reject at call time', () => {
  const limiter = tokenBucket({ name: 'args', capacity: 10, refillPerSecond: 1 })

  it.each([
    ['cost', 'k', 0],
    ['cost', 'k', -1],
    ['cost', 'k', Number.NaN],
    ['cost', 'k', Number.POSITIVE_INFINITY],
    ['key', '', 1],
    ['key', 'x'.repeat(1025), 1],
    ['key', 42, 1],
  ])('%s: %j', async (argument, key, cost) => {
    await expectRejection(limiter.consume(key as string, cost), INVALID_ARGUMENT, argument)
  })

  it('refund amount and lease keys', async () => {
    await expectRejection(limiter.refund('k', 0), INVALID_ARGUMENT, 'amount')
    await expectRejection(
      concurrencyLimit({ name: 'c', max: 1, leaseMs: 10 }).acquire(''),
      INVALID_ARGUMENT,
      'key',
    )
  })
})

/** A store that claims to be remote (so the deny cache applies) but is never called. */
function fakeRemote() {
  return {
    kind: 'remote' as const,
    run: () => Promise.reject(new Error('unused')),
    delete: () => Promise.resolve(),
  }
}
