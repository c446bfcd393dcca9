/**
 * A reshard under load, as an operator runs it: `redis-cli --cluster reshard` moves 1,500 slots from one master to
 * another while 3,000 identities decide as fast as they can. Redirections say where a slot is, nothing of a node's
 * health: no breaker moves, no decision is answered by the fail policy (fail-open here, so that any would show as
 * an admission), and every identity's budget is charged exactly once per decision, whether its slot moved or not;
 * with one limiter per decision, and with `allOf` (two budgets of one identity in one script).
 */
import calculateSlot from 'cluster-key-slot'
import { Cluster, type Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Decision } from '../../src/core/decision.js'
import { allOf } from '../../src/core/limiters/allOf.js'
import { tokenBucket } from '../../src/core/limiters/tokenBucket.js'
import { RedisStore } from '../../src/core/stores/redisStore.js'
import { type RedisClusterProcess, startRedisCluster } from '../helpers/redisServer.js'
import { limiterClientOptions } from '../helpers/stores.js'

const IDENTITIES = 3_000
/** More than the rounds a move can last: every decision is an allowance, so a wrong one shows. */
const CAPACITY = 10_000
const SLOTS_MOVED = 1_500

describe('a Redis Cluster resharded under load', () => {
  let cluster: RedisClusterProcess
  let client: Cluster
  let store: RedisStore
  const breakerChanges: string[] = []

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3 })
    const { enableOfflineQueue, ...redisOptions } = limiterClientOptions
    client = new Cluster(cluster.startupNodes, { redisOptions, enableOfflineQueue })
    // A deadline no busy machine misses: a decision the fail policy answers here is one a redirection caused.
    store = new RedisStore({
      client,
      prefix: 'reshard:',
      timeoutMs: 10_000,
      hooks: { onBreakerChange: ({ node, from, to }) => breakerChanges.push(`${node}:${from}->${to}`) },
    })
    await store.warmUp()
  })
  /** The master serving each slot, by port, as the cluster itself says. */
  async function slotOwners(): Promise<number[]> {
    const ranges = (await (client.nodes('master')[0] as Redis).call('CLUSTER', 'SLOTS')) as [
      number,
      number,
      [string, number],
    ][]
    const owners: number[] = []
    for (const [first, last, [, port]] of ranges)
      for (let slot = first; slot <= last; slot++) owners[slot] = port
    return owners
  }

  afterAll(async () => {
    client?.disconnect()
    await cluster?.stop()
  })

  /**
   * `count` identities deciding as fast as they can (`decide`), round after round, while `SLOTS_MOVED` slots move
   * from one master to another; then the checks: every decision the store's and allowed, each charged once.
   */
  async function reshardUnderLoad(
    count: number,
    decide: (identity: string) => Promise<Decision>,
    keyOf: (identity: string) => string,
  ): Promise<void> {
    const identities = Array.from({ length: count }, (_, i) => `id-${i}`)
    const admitted = new Map(identities.map((identity) => [identity, 0]))
    const remaining = new Map<string, number>()
    const bySource = new Map<string, number>()
    const round = async () => {
      const decisions = await Promise.all(identities.map((identity) => decide(identity)))
      decisions.forEach((decision, i) => {
        bySource.set(decision.source, (bySource.get(decision.source) ?? 0) + 1)
        const identity = identities[i] as string
        if (decision.allowed) admitted.set(identity, (admitted.get(identity) ?? 0) + 1)
        remaining.set(identity, decision.remaining)
      })
    }
    const slotOf = (identity: string) => calculateSlot(keyOf(identity))
    const ownersBefore = await slotOwners()

    await round()
    const [from, to] = await cluster.masters()
    if (from === undefined || to === undefined) throw new Error('the cluster has fewer than 2 masters')
    let moving = true
    const move = cluster.moveSlots(from, to, SLOTS_MOVED).finally(() => {
      moving = false
    })
    let rounds = 1
    let roundsWhileMoving = 0
    while (moving) {
      const during = moving
      await round()
      rounds++
      if (during && moving) roundsWhileMoving++
    }
    await move

    const ownersAfter = await slotOwners()
    const moved = identities.filter(
      (identity) => ownersAfter[slotOf(identity)] !== ownersBefore[slotOf(identity)],
    )

    expect(roundsWhileMoving).toBeGreaterThanOrEqual(2)
    expect(moved.length).toBeGreaterThan(count / 30)
    expect(Object.fromEntries(bySource)).toEqual({ store: rounds * count })
    expect(breakerChanges).toEqual([])
    // Every identity, moved or not: each of its decisions allowed, and the store's count charged once for each.
    const tally = (values: Iterable<number>) => {
      const counts = new Map<number, number>()
      for (const n of values) counts.set(n, (counts.get(n) ?? 0) + 1)
      return Object.fromEntries(counts)
    }
    expect(tally(admitted.values())).toEqual({ [rounds]: count })
    expect(tally(remaining.values())).toEqual({ [CAPACITY - rounds]: count })
  }

  // A token back every 500 s: none within the test, so `remaining` counts the decisions exactly.
  const bucket = (name: string) =>
    tokenBucket({
      name,
      store,
      capacity: CAPACITY,
      refillPerSecond: 0.002,
      failPolicy: 'open',
      denyCache: false,
    })

  it('3,000 identities through a move of 1,500 slots: every decision applied once, by the store; no breaker moves', async () => {
    const limiter = bucket('r')
    await reshardUnderLoad(
      IDENTITIES,
      (identity) => limiter.consume(identity),
      (identity) => store.keyOf('r', identity),
    )
  }, 240_000)

  it('1,000 identities deciding two budgets at once (allOf) through a move of 1,500 slots: the same', async () => {
    // Both keys of an identity share its slot; while the slot moves they may sit on two masters for a moment.
    const both = allOf([bucket('a1'), bucket('a2')], { failPolicy: 'open' })
    await reshardUnderLoad(
      1_000,
      (identity) => both.consume(identity),
      (identity) => store.keyOf('a1', identity),
    )
  }, 240_000)
})
