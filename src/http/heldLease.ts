import type { ServerResponse } from 'node:http'
import type { Lease } from '../core/limiters/concurrencyLimit.js'

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
    Math.max(1, Math.floor(leaseMs / 3)),
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
