/**
 * One circuit breaker per cluster node: a master that stops answering (SIGSTOP) opens its own breaker only. Keys on
 * the other masters keep their answers from the store, keys on the stopped one get the fail policy at once, and the
 * breaker's half-open probe goes to the stopped master, so it closes only once that master answers again.
 */
import calculateSlot from 'cluster-key-slot'
import { Cluster } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { BreakerChangeEvent } from '../../src/core/hooks.js'
import { tokenBucket } from '../../src/core/limiters/tokenBucket.js'
import { RedisStore } from '../../src/core/stores/redisStore.js'
import { type RedisClusterProcess, type RedisProcess, startRedisCluster } from '../helpers/redisServer.js'
import { limiterClientOptions } from '../helpers/stores.js'

const LIMITER = 'per-node'
/** Long enough that no decision of a busy machine misses it, except those sent to the stopped master. */
const TIMEOUT_MS = 1000
const FAILURE_THRESHOLD = 2

describe('a Redis Cluster whose one master stops answering', () => {
  let cluster: RedisClusterProcess
  let client: Cluster

  beforeAll(async () => {
    // A node timeout far longer than the test: the cluster never marks the stopped master as failed, so only the
    // client sees it stop.
    cluster = await startRedisCluster({ masters: 3, nodeTimeoutMs: 120_000 })
    const { enableOfflineQueue, ...redisOptions } = limiterClientOptions
    client = new Cluster(cluster.startupNodes, { redisOptions, enableOfflineQueue })
  })
  afterAll(async () => {
    client?.disconnect()
    await cluster?.stop()
  })

  it('opens the breaker of that master only; its probe goes to that master', async () => {
    const events: BreakerChangeEvent[] = []
    const store = new RedisStore({
      client,
      prefix: 'per-node:',
      timeoutMs: TIMEOUT_MS,
      breaker: { failureThreshold: FAILURE_THRESHOLD, cooldownMs: 200 },
      hooks: { onBreakerChange: (event) => events.push(event) },
    })
    await store.warmUp()
    const limiter = tokenBucket({
      name: LIMITER,
      store,
      capacity: 1_000_000,
      refillPerSecond: 1,
      failPolicy: 'closed',
      denyCache: false,
    })

    // Ten identities on each master, by the client's slot map.
    const byMaster = new Map<string, string[]>()
    for (let i = 0; [...byMaster.values()].filter((ids) => ids.length >= 10).length < 3; i++) {
      const owner = client.slots[calculateSlot(store.keyOf(LIMITER, `user-${i}`))]?.[0] as string
      const ids = byMaster.get(owner) ?? []
      byMaster.set(owner, ids)
      if (ids.length < 10) ids.push(`user-${i}`)
    }
    const [stoppedAddress, ...healthyAddresses] = [...byMaster.keys()] as [string, ...string[]]
    const stopped = cluster.nodes.find(
      (node) => `${node.host}:${node.port}` === stoppedAddress,
    ) as RedisProcess
    const onStopped = byMaster.get(stoppedAddress) as string[]
    const onHealthy = healthyAddresses.flatMap((address) => byMaster.get(address) as string[])

    stopped.pause()
    try {
      // Decisions for the stopped master miss their deadline until its breaker opens.
      while (store.breaker.of(stoppedAddress).state === 'closed') {
        const decision = await limiter.consume(onStopped[0] as string)
        expect(decision.source).toBe('fail-closed')
      }
      const healthy = await Promise.all(onHealthy.map((id) => limiter.consume(id)))
      expect(healthy.map((d) => `${d.source}:${d.allowed}`)).toEqual(onHealthy.map(() => 'store:true'))
      const failing = await Promise.all(onStopped.map((id) => limiter.consume(id)))
      expect(failing.map((d) => d.source)).toEqual(onStopped.map(() => 'fail-closed'))
      expect(healthyAddresses.map((address) => store.breaker.of(address).state)).toEqual(['closed', 'closed'])
      expect(store.breaker.state).not.toBe('closed')
    } finally {
      stopped.resume()
    }

    // The probe goes to the stopped master: its breaker closes once that master answers, and only then.
    let decision = await limiter.consume(onStopped[0] as string)
    while (decision.source !== 'store') {
      await new Promise((resolve) => setTimeout(resolve, 50))
      decision = await limiter.consume(onStopped[0] as string)
    }
    expect(store.breaker.state).toBe('closed')
    const transitions = events.map((event) => `${event.node}:${event.to}`)
    expect(new Set(events.map((event) => event.node))).toEqual(new Set([stoppedAddress]))
    expect(transitions[0]).toBe(`${stoppedAddress}:open`)
    expect(transitions.at(-1)).toBe(`${stoppedAddress}:closed`)
  })
})
