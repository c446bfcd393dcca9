import calculateSlot from 'cluster-key-slot'
import type { RedisClusterClient } from './redisClient.js'

/**
 * The requests of one turn as script calls for a Redis Cluster, grouped by the node the client's slot map says
 * holds each key (`host:port`): the calls of one node, up to `maxBatch` requests each, travel in one pipeline. Keys
 * whose slot has no known owner yet are grouped under `unknown`.
 */
export function callsByNode<T extends { readonly key: string }>(
  cluster: RedisClusterClient,
  queued: readonly T[],
  maxBatch: number,
): { node: string; calls: T[][] }[] {
  const byNode = new Map<string, T[]>()
  for (const item of queued) {
    const node = cluster.slots[calculateSlot(item.key)]?.[0] ?? UNKNOWN_NODE
    const group = byNode.get(node)
    if (group === undefined) byNode.set(node, [item])
    else group.push(item)
  }
  return [...byNode].map(([node, group]) => {
    const calls: T[][] = []
    for (let start = 0; start < group.length; start += maxBatch)
      calls.push(group.slice(start, start + maxBatch))
    return { node, calls }
  })
}

/** Where a key goes whose slot the client's map has no owner for yet. */
export const UNKNOWN_NODE = 'unknown'

/** The node batch script's reply for a request whose key the node does not hold (see `nodeBatchLua`). */
export const NOT_ON_THIS_NODE = -1

/**
 * Errors a node answers for a call that belongs elsewhere (or not yet anywhere): the requests are sent again, on
 * their own, for ioredis to route. READONLY: a master demoted by a failover, before the client's slot map knows.
 */
export function isRedirection(error: Error): boolean {
  return /^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN|READONLY) /.test(error.message)
}
