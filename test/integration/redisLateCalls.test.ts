/**
 * A call that reaches Redis past its deadline changes nothing. Its decisions were answered by the fail policy; the
 * call itself may still be executed later (here: commands waiting in the socket of a paused server, executed when it
 * resumes). Each script carries its deadline in the server's clock and refuses to run past it.
 */
import { Cluster, Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { concurrencyLimit } from '../../src/core/limiters/concurrencyLimit.js'
import { fixedWindow } from '../../src/core/limiters/fixedWindow.js'
import { RedisStore } from '../../src/core/stores/redisStore.js'
import {
  type RedisClusterProcess,
  type RedisProcess,
  startRedis,
  startRedisCluster,
} from '../helpers/redisServer.js'
import { limiterClientOptions, whenReady } from '../helpers/stores.js'

const IDENTITIES = 40
const ids = Array.from({ length: IDENTITIES }, (_, i) => `user-${i}`)

/**
 * Spends from every identity's budget while `servers` are paused (each decision answered by the fail policy at its
 * deadline), resumes them, and returns what the store holds for each identity afterwards.
 */
async function spendWhilePaused(
  store: RedisStore,
  servers: readonly RedisProcess[],
  name: string,
  { cold = false }: { cold?: boolean } = {},
) {
  const counter = fixedWindow({
    name,
    store,
    limit: 5,
    windowMs: 3_600_000,
    failPolicy: 'closed',
    denyCache: false,
  })
  const leases = concurrencyLimit({
    name: `${name}-leases`,
    store,
    max: 1,
    leaseMs: 3_600_000,
    failPolicy: 'closed',
  })
  if (!cold) {
    // Known identities first: the store learns the server's clock from these replies.
    const before = await Promise.all(ids.map((id) => counter.peek(id)))
    expect(before.map((d) => `${d.source}:${d.remaining}`)).toEqual(ids.map(() => 'store:5'))
  }
  for (const server of servers) server.pause()
  try {
    const answered = await Promise.all([
      ...ids.map((id) => counter.consume(id)),
      ...ids.map((id) => leases.acquire(id)),
    ])
    expect(new Set(answered.map((d) => `${d.source}:${d.allowed}`))).toEqual(new Set(['fail-closed:false']))
  } finally {
    for (const server of servers) server.resume()
  }
  // The paused server now runs the calls that were waiting in its socket: past their deadlines, they change
  // nothing. A decision asked after them on the same connection is answered after them.
  const counts = await Promise.all(ids.map((id) => counter.peek(id)))
  const slots = await Promise.all(ids.map((id) => leases.peek(id)))
  return {
    counts: counts.map((d) => `${d.source}:${d.remaining}`),
    slots: slots.map((d) => `${d.source}:${d.remaining}`),
  }
}

describe('a standalone Redis paused with calls in flight', () => {
  let redis: RedisProcess
  beforeAll(async () => {
    redis = await startRedis()
  })
  afterAll(async () => {
    await redis?.stop()
  })

  it('refused decisions are not applied when it resumes', async () => {
    const client = new Redis(redis.url, limiterClientOptions)
    try {
      const store = new RedisStore({ client, prefix: 'late:', breaker: { failureThreshold: 1000 } })
      await store.warmUp()
      const { counts, slots } = await spendWhilePaused(store, [redis], 'late')
      expect(counts).toEqual(ids.map(() => 'store:5'))
      expect(slots).toEqual(ids.map(() => 'store:1'))
    } finally {
      client.disconnect()
    }
  })
})

describe('a standalone Redis paused before the store ever heard from it', () => {
  let redis: RedisProcess
  beforeAll(async () => {
    redis = await startRedis()
  })
  afterAll(async () => {
    await redis?.stop()
  })

  it("the first decisions carry a deadline in this process's clock: refused ones are not applied when it resumes", async () => {
    const client = new Redis(redis.url, limiterClientOptions)
    try {
      await whenReady(client)
      // No warmUp and no decision before the pause: the store knows nothing of the server's clock.
      const store = new RedisStore({
        client,
        prefix: 'cold:',
        timeoutMs: 100,
        breaker: { failureThreshold: 1000 },
      })
      const { counts, slots } = await spendWhilePaused(store, [redis], 'cold', { cold: true })
      expect(counts).toEqual(ids.map(() => 'store:5'))
      expect(slots).toEqual(ids.map(() => 'store:1'))
    } finally {
      client.disconnect()
    }
  })
})

/** Holds the event loop for `ms`, as a stalled process does: no timer runs, no socket is read meanwhile. */
function stallFor(ms: number): void {
  const until = performance.now() + ms
  while (performance.now() < until) {
    // busy: this process does nothing else meanwhile
  }
}

describe('a call whose late reply is read before its deadline timer runs (the event loop stalled)', () => {
  let redis: RedisProcess
  beforeAll(async () => {
    redis = await startRedis()
  })
  afterAll(async () => {
    await redis?.stop()
  })

  it('its fail-policy answer is reported to onStoreError as a timeout, and the call changed nothing', async () => {
    const client = new Redis(redis.url, limiterClientOptions)
    const errors: { code: string | undefined; message: string }[] = []
    try {
      const store = new RedisStore({
        client,
        prefix: 'late-read:',
        timeoutMs: 50,
        breaker: { failureThreshold: 1000 },
        hooks: { onStoreError: ({ error }) => errors.push({ code: error.code, message: error.message }) },
      })
      await store.warmUp()
      const counter = fixedWindow({
        name: 'late-read',
        store,
        limit: 5,
        windowMs: 3_600_000,
        failPolicy: 'closed',
        denyCache: false,
      })
      // A known identity first: the store learns the server's clock from the reply.
      expect((await counter.peek('a')).remaining).toBe(5)
      redis.pause()
      const answered = counter.consume('a')
      // The call is sent at the end of this turn; then this process stalls past its deadline while Redis sleeps, and
      // Redis, woken, refuses the script (past its deadline) before the process reads anything again.
      await new Promise((resolve) => setImmediate(resolve))
      stallFor(80)
      redis.resume()
      stallFor(300)
      expect(await answered).toMatchObject({ allowed: false, source: 'fail-closed' })
      // One report of the one failed call, whichever of the reply and the timer this process saw first.
      expect(errors.map((e) => e.code)).toEqual(['TOLLBOOTH_ERR_STORE_TIMEOUT'])
      expect(await counter.peek('a')).toMatchObject({ source: 'store', remaining: 5 })
    } finally {
      client.disconnect()
    }
  })
})

describe('a Redis Cluster master paused with calls in flight', () => {
  let cluster: RedisClusterProcess
  beforeAll(async () => {
    // The cluster must not fail the master over during the test: a long node timeout.
    cluster = await startRedisCluster({ masters: 3, nodeTimeoutMs: 120_000 })
  })
  afterAll(async () => {
    await cluster?.stop()
  })

  it('refused decisions are not applied when it resumes', async () => {
    const { enableOfflineQueue, ...redisOptions } = limiterClientOptions
    const client = new Cluster(cluster.startupNodes, { redisOptions, enableOfflineQueue })
    try {
      const store = new RedisStore({ client, prefix: 'late:', breaker: { failureThreshold: 1000 } })
      await store.warmUp()
      // Every master paused: all the identities' calls wait in some master's socket.
      const result = await spendWhilePaused(store, await cluster.masters(), 'late')
      expect(result.counts).toEqual(ids.map(() => 'store:5'))
      expect(result.slots).toEqual(ids.map(() => 'store:1'))
    } finally {
      client.disconnect()
    }
  })
})
