/**
 * Decisions while a slot moves between masters (MIGRATING on its owner, IMPORTING on the other, its keys moved one
 * by one): a key is only ever decided where it lives. A node batch is sent on its node's own connection, so that an
 * ASK for the whole call (its first key already gone) comes back to the store instead of ioredis replaying the call,
 * under ASKING, on the importing node, where a key still on the migrating one would read as empty; and a request
 * whose key leaves or is deleted in the middle of a call is sent again on its own.
 */
import calculateSlot from 'cluster-key-slot'
import { Cluster, Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { allOf } from '../../src/core/limiters/allOf.js'
import { concurrencyLimit } from '../../src/core/limiters/concurrencyLimit.js'
import { fixedWindow } from '../../src/core/limiters/fixedWindow.js'
import { tokenBucket } from '../../src/core/limiters/tokenBucket.js'
import { RedisStore } from '../../src/core/stores/redisStore.js'
import { type RedisClusterProcess, startRedisCluster } from '../helpers/redisServer.js'
import { limiterClientOptions } from '../helpers/stores.js'

describe('a Redis Cluster moving a slot', () => {
  let cluster: RedisClusterProcess
  let client: Cluster
  let store: RedisStore
  const admin = new Map<number, Redis>()
  const stable: { slot: number; nodes: Redis[] }[] = []

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3 })
    const { enableOfflineQueue, ...redisOptions } = limiterClientOptions
    client = new Cluster(cluster.startupNodes, { redisOptions, enableOfflineQueue })
    store = new RedisStore({ client, prefix: 'migrate:', timeoutMs: 2000 })
    await store.warmUp()
    for (const node of cluster.nodes) admin.set(node.port, new Redis({ host: node.host, port: node.port }))
  })
  afterEach(async () => {
    // Put the slot back to a plain state, wherever its keys are.
    for (const { slot, nodes } of stable.splice(0)) {
      await Promise.all(nodes.map((node) => node.call('CLUSTER', 'SETSLOT', slot, 'STABLE')))
    }
  })
  afterAll(async () => {
    for (const connection of admin.values()) connection.disconnect()
    client?.disconnect()
    await cluster?.stop()
  })

  /** Starts moving `slot` from its owner to another master; returns both admin connections. */
  async function startMoving(slot: number): Promise<{ source: Redis; target: Redis }> {
    const ranges = (await (admin.values().next().value as Redis).call('CLUSTER', 'SLOTS')) as [
      number,
      number,
      [string, number, string],
    ][]
    const owner = ranges.find(([from, to]) => slot >= from && slot <= to)?.[2] as [string, number, string]
    const source = admin.get(owner[1]) as Redis
    const target = [...admin].find(([port]) => port !== owner[1])?.[1] as Redis
    const targetId = String(await target.call('CLUSTER', 'MYID'))
    await target.call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', owner[2])
    await source.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', targetId)
    stable.push({ slot, nodes: [source, target] })
    return { source, target }
  }

  /** An identity other than `identity` whose key for `limiter` is in the same slot. */
  function neighbour(limiter: string, identity: string): string {
    const slot = calculateSlot(store.keyOf(limiter, identity))
    for (let n = 0; ; n++) {
      if (calculateSlot(store.keyOf(limiter, `other-${n}`)) === slot) return `other-${n}`
    }
  }

  it('an exhausted identity still on the migrating master is refused, whatever else its call holds', async () => {
    const limiter = tokenBucket({
      name: 'ask',
      store,
      capacity: 3,
      refillPerSecond: 1 / 86_400,
      denyCache: false,
    })
    const spent = await Promise.all([1, 2, 3, 4].map(() => limiter.consume('victim')))
    expect(spent.map((d) => `${d.source}:${d.allowed}`)).toEqual([
      'store:true',
      'store:true',
      'store:true',
      'store:false',
    ])
    const newcomer = neighbour('ask', 'victim')
    const key = store.keyOf('ask', 'victim')
    const { source, target } = await startMoving(calculateSlot(key))

    // One turn: the newcomer first (its key is on neither master: the call's first key), then the victim.
    const [first, victim] = await Promise.all([limiter.consume(newcomer), limiter.consume('victim')])
    expect(`${first.source}:${first.allowed}`).toBe('store:true')
    expect(`${victim.source}:${victim.allowed}:${victim.remaining}`).toBe('store:false:0')
    // The victim's key never appeared on the importing master: it moves without conflict.
    const { host, port } = target.options as { host: string; port: number }
    expect(await source.call('MIGRATE', host, port, '', 0, 5000, 'KEYS', key)).toBe('OK')
    expect(`${(await limiter.consume('victim')).allowed}`).toBe('false')
  })

  it('a key deleted by an earlier request of the same call is sent again on its own; the others stand', async () => {
    const counter = fixedWindow({ name: 'count', store, limit: 100, windowMs: 3_600_000, denyCache: false })
    const leases = concurrencyLimit({ name: 'leases', store, max: 2, leaseMs: 3_600_000 })
    const lease = await leases.acquire('holder')
    expect(lease.allowed).toBe(true)
    const leaseSlot = calculateSlot(store.keyOf('leases', 'holder'))
    // An identity whose counter is on the same master, in another slot: its decision shares the call.
    const owner = client.slots[leaseSlot]?.[0]
    let other = ''
    for (let n = 0; other === ''; n++) {
      const slot = calculateSlot(store.keyOf('count', `x-${n}`))
      if (slot !== leaseSlot && client.slots[slot]?.[0] === owner) other = `x-${n}`
    }
    expect((await counter.consume(other)).remaining).toBe(99)
    await startMoving(leaseSlot)

    // One turn: the counter, the release (the lease key is deleted: it held one lease), a new acquire of that key.
    const [counted, , again] = await Promise.all([
      counter.consume(other),
      lease.release(),
      leases.acquire('holder'),
    ])
    expect(`${counted.source}:${counted.remaining}`).toBe('store:98')
    expect(`${again.source}:${again.allowed}`).toBe('store:true')
    expect((await counter.peek(other)).remaining).toBe(98)
  })

  it('allOf on an identity whose keys are split by the move is retried on the node the slot map names, counted on no breaker', async () => {
    // One failure would open a breaker: a redirection counted as one would show.
    const strict = new RedisStore({
      client,
      prefix: 'migrate:',
      timeoutMs: 300,
      breaker: { failureThreshold: 1 },
    })
    const perSecond = tokenBucket({ name: 'all-s', store: strict, capacity: 50, refillPerSecond: 1 / 86_400 })
    const perDay = tokenBucket({ name: 'all-d', store: strict, capacity: 40, refillPerSecond: 1 / 86_400 })
    const both = allOf([perSecond, perDay], { failPolicy: 'open' })
    for (let i = 0; i < 3; i++) expect((await both.consume('mover')).source).toBe('store')
    const keys = [strict.keyOf('all-s', 'mover'), strict.keyOf('all-d', 'mover')] as const
    const { source, target } = await startMoving(calculateSlot(keys[0] as string))
    const { host, port } = target.options as { host: string; port: number }
    // Half moved: one key on each master. The migrating master answers TRYAGAIN (it lacks a key), and so would
    // the importing one: no node can run the call until the move of this identity ends.
    expect(await source.call('MIGRATE', host, port, '', 0, 5000, 'KEYS', keys[0])).toBe('OK')
    const stuck = await both.consume('mover')
    expect(stuck.source).toBe('fail-open')
    expect(strict.breaker.state).toBe('closed')
    // The move of the identity ends while its next decision is being retried: that decision is the store's, and
    // every decision the store made was charged once (3 before, this one; the one answered by the policy: none).
    const [moved, decided] = await Promise.all([
      source.call('MIGRATE', host, port, '', 0, 5000, 'KEYS', keys[1]),
      both.consume('mover'),
    ])
    expect(moved).toBe('OK')
    expect(`${decided.source}:${decided.allowed}`).toBe('store:true')
    expect(decided.decisions.map((d) => d.remaining)).toEqual([46, 36])
    // Now the whole identity is on the importing master: the migrating one answers ASK, followed under ASKING.
    const after = await both.consume('mover')
    expect(`${after.source}:${after.decisions.map((d) => d.remaining).join(',')}`).toBe('store:45,35')
    expect(strict.breaker.state).toBe('closed')
  })
})
