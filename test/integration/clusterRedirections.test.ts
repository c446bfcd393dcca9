/**
 * A slot that moved between masters without the client knowing (its slot map stale, as during a reshard): the
 * requests a node sends back travel again together, to their new node, once the slot map is fresh, not each on
 * its own; and the redirections, which say where a slot is and nothing of a node's health, never touch a breaker.
 * Store calls are counted by `onStoreLatency`, one per call answered.
 */
import calculateSlot from 'cluster-key-slot'
import { Cluster, Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { tokenBucket } from '../../src/core/limiters/tokenBucket.js'
import { RedisStore } from '../../src/core/stores/redisStore.js'
import { type RedisClusterProcess, startRedisCluster } from '../helpers/redisServer.js'
import { limiterClientOptions } from '../helpers/stores.js'

describe('requests a Redis Cluster node sends back, batched to the node that now holds their slot', () => {
  let cluster: RedisClusterProcess
  let client: Cluster
  let store: RedisStore
  const admin = new Map<string, Redis>()
  let calls = 0
  const breakerChanges: string[] = []

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3 })
    const { enableOfflineQueue, ...redisOptions } = limiterClientOptions
    // No periodic refresh: the slot map changes only when the store asks.
    client = new Cluster(cluster.startupNodes, { redisOptions, enableOfflineQueue, slotsRefreshInterval: 0 })
    store = new RedisStore({
      client,
      prefix: 'redirect:',
      timeoutMs: 2000,
      hooks: {
        onStoreLatency: () => void calls++,
        onBreakerChange: ({ node, from, to }) => breakerChanges.push(`${node}:${from}->${to}`),
      },
    })
    await store.warmUp()
    for (const { host, port } of cluster.startupNodes) admin.set(`${host}:${port}`, new Redis({ host, port }))
  })
  afterAll(async () => {
    for (const connection of admin.values()) connection.disconnect()
    client?.disconnect()
    await cluster?.stop()
  })

  /** Moves `slot` and its keys from its owner to `to`, telling every master but not the client. */
  async function moveSlot(slot: number, from: string, to: string): Promise<void> {
    const source = admin.get(from) as Redis
    const target = admin.get(to) as Redis
    const sourceId = String(await source.call('CLUSTER', 'MYID'))
    const targetId = String(await target.call('CLUSTER', 'MYID'))
    await target.call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', sourceId)
    await source.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', targetId)
    const keys = (await source.call('CLUSTER', 'GETKEYSINSLOT', slot, 1000)) as string[]
    const { host, port } = target.options as { host: string; port: number }
    if (keys.length > 0) await source.call('MIGRATE', host, port, '', 0, 5000, 'KEYS', ...keys)
    for (const node of admin.values()) await node.call('CLUSTER', 'SETSLOT', slot, 'NODE', targetId)
  }

  it('20 identities of a moved slot: 2 store calls a turn, not 21; every count exact; no breaker moves', async () => {
    const limiter = tokenBucket({
      name: 'b',
      store,
      capacity: 10,
      refillPerSecond: 1 / 86_400,
      denyCache: false,
    })
    const slotOf = (identity: string) => calculateSlot(store.keyOf('b', identity))
    const moving = slotOf('m-0')
    const movers = ['m-0']
    for (let n = 1; movers.length < 20; n++) if (slotOf(`m-${n}`) === moving) movers.push(`m-${n}`)
    const owner = client.slots[moving]?.[0] as string
    // An identity on the same master, in a slot that stays: first in the turn, its key is the call's routing key.
    let stayer = ''
    for (let n = 0; stayer === ''; n++) {
      const slot = slotOf(`s-${n}`)
      if (slot !== moving && client.slots[slot]?.[0] === owner) stayer = `s-${n}`
    }
    const others = [...admin.keys()].filter((address) => address !== owner)
    const turn = async (identities: string[]) => {
      calls = 0
      const decisions = await Promise.all(identities.map((identity) => limiter.consume(identity)))
      return { calls, decisions: decisions.map((d) => `${d.source}:${d.allowed}:${d.remaining}`) }
    }
    const each = (identities: string[], remaining: number) => identities.map(() => `store:true:${remaining}`)

    expect(await turn([stayer, ...movers])).toEqual({ calls: 1, decisions: each([stayer, ...movers], 9) })

    // The slot moves: the stayer's call reaches its master, which answers the movers "not here".
    await moveSlot(moving, owner, others[0] as string)
    expect(await turn([stayer, ...movers])).toEqual({ calls: 2, decisions: each([stayer, ...movers], 8) })

    // It moves again: now the whole call is MOVED (its routing key is a mover's).
    await moveSlot(moving, others[0] as string, others[1] as string)
    expect(await turn(movers)).toEqual({ calls: 2, decisions: each(movers, 7) })

    // Where the slot is now, in one call, with every count kept through both moves.
    expect(await turn(movers)).toEqual({ calls: 1, decisions: each(movers, 6) })
    expect(breakerChanges).toEqual([])
  })

  it('a slot half-migrated: its 20 identities decided where their keys are, in 4 store calls, not 21', async () => {
    const limiter = tokenBucket({
      name: 'a',
      store,
      capacity: 10,
      refillPerSecond: 1 / 86_400,
      denyCache: false,
    })
    const slotOf = (identity: string) => calculateSlot(store.keyOf('a', identity))
    const slot = slotOf('h-0')
    const identities = ['h-0']
    for (let n = 1; identities.length < 20; n++) if (slotOf(`h-${n}`) === slot) identities.push(`h-${n}`)
    const owner = client.slots[slot]?.[0] as string
    const importer = [...admin.keys()].find((address) => address !== owner) as string
    const turn = async () => {
      calls = 0
      const decisions = await Promise.all(identities.map((identity) => limiter.consume(identity)))
      return { calls, decisions: decisions.map((d) => `${d.source}:${d.allowed}:${d.remaining}`) }
    }
    const each = (remaining: number) => identities.map(() => `store:true:${remaining}`)
    expect(await turn()).toEqual({ calls: 1, decisions: each(9) })

    // The slot starts moving; the keys of the even identities (the first of the turn among them) have moved.
    const source = admin.get(owner) as Redis
    const target = admin.get(importer) as Redis
    await target.call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', String(await source.call('CLUSTER', 'MYID')))
    await source.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', String(await target.call('CLUSTER', 'MYID')))
    const moved = identities.filter((_, i) => i % 2 === 0).map((identity) => store.keyOf('a', identity))
    const { host, port } = target.options as { host: string; port: number }
    expect(await source.call('MIGRATE', host, port, '', 0, 5000, 'KEYS', ...moved)).toBe('OK')

    // The call ASKed as a whole (its first key moved); each key asked on its own where it is, in one pipeline per
    // node: the call, the owner's pipeline, the importer's for the first key, the importer's for the others.
    expect(await turn()).toEqual({ calls: 4, decisions: each(8) })
    await source.call(
      'MIGRATE',
      host,
      port,
      '',
      0,
      5000,
      'KEYS',
      ...identities.filter((_, i) => i % 2 === 1).map((identity) => store.keyOf('a', identity)),
    )
    const targetId = String(await target.call('CLUSTER', 'MYID'))
    for (const node of admin.values()) await node.call('CLUSTER', 'SETSLOT', slot, 'NODE', targetId)
    // Every count kept through the move.
    const after = await turn()
    expect(after.decisions).toEqual(each(7))
    expect(breakerChanges).toEqual([])
  })
})
