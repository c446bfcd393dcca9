import { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import {
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
    ['name', { name: '', capacity: 10, refillPerSecond: 1 }],
    ['name', { name: 'a{b}', capacity: 10, refillPerSecond: 1 }],
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
