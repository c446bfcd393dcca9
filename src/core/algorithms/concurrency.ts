import { invalidArgument } from '../errors.js'
import { reply, type Step, toMs } from './step.js'

/**
 * Concurrency leases (Stripe's design): per key, a set of lease ids, each with an expiry. Expired leases are dropped
 * before counting, so a holder that died without releasing frees its slot when its lease runs out. In Redis this is
 * a sorted set scored by expiry; here a Map from lease id to expiry (µs).
 *
 * args: `[leaseUs, max, leaseId]`. Ops: `acquire`, `release`, `renew`, `peek`. `renew` extends a live lease, and takes
 * a free slot again for one that is gone (expired, or forgotten by a store that lost its data, or never recorded
 * because the fail policy granted it): a live holder keeps its slot while there is room, and loses it when not.
 */
export type LeaseState = Map<string, number>

export function concurrencyStep(
  leases: LeaseState | undefined,
  now: number,
  op: string,
  args: readonly (number | string)[],
): Step<LeaseState> {
  const leaseUs = args[0] as number
  const max = args[1] as number
  const leaseId = String(args[2])
  const live = new Map<string, number>()
  if (leases !== undefined) for (const [id, expiry] of leases) if (expiry > now) live.set(id, expiry)
  switch (op) {
    case 'acquire': {
      if (live.size >= max) return withState(live, now, leasesReply(false, live, max, now))
      live.set(leaseId, now + leaseUs)
      return withState(live, now, leasesReply(true, live, max, now))
    }
    case 'release': {
      const released = live.delete(leaseId)
      return withState(live, now, leasesReply(released, live, max, now))
    }
    case 'renew': {
      const held = live.has(leaseId) || live.size < max
      if (held) live.set(leaseId, now + leaseUs)
      return withState(live, now, leasesReply(held, live, max, now))
    }
    case 'peek':
      return withState(live, now, leasesReply(live.size < max, live, max, now))
    default:
      throw invalidArgument('concurrency', 'op', "'acquire', 'release', 'renew' or 'peek'", op)
  }
}

/** The key lives as long as its longest lease; an empty set is deleted. */
function withState(live: LeaseState, now: number, result: Step<LeaseState>['reply']): Step<LeaseState> {
  if (live.size === 0) return { reply: result, next: 'delete' }
  return { reply: result, next: { state: live, ttlMs: toMs(latest(live) - now) } }
}

/**
 * `allowed` means: acquired (acquire), released (release), still held (renew), a slot is free (peek).
 * resetMs: until every lease has expired. retryAfterMs (denied acquire only): until the earliest lease expires.
 */
function leasesReply(ok: boolean, live: LeaseState, max: number, now: number) {
  const retry = !ok && live.size >= max ? earliest(live) - now : 0
  return reply(ok, max - live.size, live.size > 0 ? latest(live) - now : 0, retry, 0)
}

function latest(live: LeaseState): number {
  let result = Number.NEGATIVE_INFINITY
  for (const expiry of live.values()) if (expiry > result) result = expiry
  return result
}

function earliest(live: LeaseState): number {
  let result = Number.POSITIVE_INFINITY
  for (const expiry of live.values()) if (expiry < result) result = expiry
  return result
}
