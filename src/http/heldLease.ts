import type { ServerResponse } from 'node:http'
import type { ConcurrencyLimiter, Lease } from '../core/limiters/concurrencyLimit.js'
import { timerDelay } from '../core/validate.js'
import { validIdentity } from './rateLimit.js'

/**
 * Keeps `lease` alive, renewing it every `leaseMs / 3` (an unref'd timer), until `stop()`; a lease lost with every
 * slot taken by others is not renewed again (that would only take a slot back from them). Returns `stop`.
 */
export function renewWhileHeld(lease: Lease, leaseMs: number): () => void {
  const renewal = setInterval(
    () => {
      void lease.renew().then((kept) => {
        if (!kept) clearInterval(renewal)
      })
    },
    timerDelay(leaseMs / 3),
  )
  renewal.unref()
  return () => clearInterval(renewal)
}

/**
 * Holds `lease` for as long as `res` runs, renewing it meanwhile, and releases it exactly once: on 'finish' (the
 * response handed to the socket) or 'close' (after it, or alone when the client aborts or the socket fails: Node
 * destroys the socket on a socket error, which closes the response).
 */
export function holdForResponse(lease: Lease, leaseMs: number, res: ServerResponse): void {
  const stopRenewing = renewWhileHeld(lease, leaseMs)
  let held = true
  const release = () => {
    if (!held) return
    held = false
    stopRenewing()
    res.off('finish', release)
    res.off('close', release)
    void lease.release()
  }
  res.once('finish', release)
  res.once('close', release)
}

/**
 * Acquires a lease of `limiter` for the identity `key` (may be async) of the request answered by `res`, and holds
 * an admitted one for as long as the response runs. Resolves with the lease (refused ones hold nothing), or with
 * undefined when the client left while it was being acquired (a lease granted meanwhile is released at once).
 * Rejects with what `key` rejects with, or with an invalid identity's error.
 */
export async function leaseForResponse(
  limiter: ConcurrencyLimiter,
  owner: string,
  key: string | Promise<string>,
  res: ServerResponse,
): Promise<Lease | undefined> {
  // Listening before the first await: the response may close while the identity or the lease is awaited.
  let closedEarly = false
  const onEarlyClose = () => {
    closedEarly = true
  }
  res.once('close', onEarlyClose)
  try {
    const lease = await limiter.acquire(validIdentity(owner, await key))
    if (!lease.allowed) return lease
    if (closedEarly) {
      void lease.release()
      return undefined
    }
    holdForResponse(lease, limiter.leaseMs, res)
    return lease
  } finally {
    res.off('close', onEarlyClose)
  }
}
