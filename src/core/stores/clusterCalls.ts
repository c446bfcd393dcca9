// Types only: ioredis is an optional peer.

import calculateSlot from 'cluster-key-slot'
import type { Cluster } from 'ioredis'

/**
 * The requests of one turn as script calls for a Redis Cluster, grouped by the node the client's slot map says
 * holds each key: the calls of one node, up to `maxBatch` requests each, travel in one pipeline. A key whose slot
 * has no known owner yet gets a group of its own (ioredis routes the call, or refuses it).
 */
export function callsByNode<T extends { readonly key: string }>(
  cluster: Cluster,
  queued: readonly T[],
  maxBatch: number,
): T[][][] {
  const byNode = new Map<string, T[]>()
  for (const item of queued) {
    const slot = calculateSlot(item.key)
    const node = cluster.slots[slot]?.[0] ?? `slot ${slot}`
    const group = byNode.get(node)
    if (group === undefined) byNode.set(node, [item])
    else group.push(item)
  }
  const calls: T[][][] = []
  for (const group of byNode.values()) {
    const ofNode: T[][] = []
    for (let start = 0; start < group.length; start += maxBatch)
      ofNode.push(group.slice(start, start + maxBatch))
    calls.push(ofNode)
  }
  return calls
}

/** The node batch script's reply for a request whose key the node does not hold (see `nodeBatchLua`). */
export const NOT_ON_THIS_NODE = -1

/** Errors a node answers for a call that belongs elsewhere: the requests are sent again, on their own. */
export function isRedirection(error: Error): boolean {
  return /^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN) /.test(error.message)
}
