import type { ServerResponse } from 'node:http'
import { sleep } from '../core/sleep.js'

/**
 * Waits `delayMs` before a request goes on (`proceed`), unless its client hangs up meanwhile: then the request never
 * goes on. The timer is kept alive: a request waits on it (under fastify.inject no socket holds the process).
 */
export function proceedAfterDelay(res: ServerResponse, delayMs: number, proceed: () => void): void {
  if (delayMs <= 0) {
    proceed()
    return
  }
  const hangUp = new AbortController()
  const onClose = () => hangUp.abort()
  res.once('close', onClose)
  sleep(delayMs, hangUp.signal, { keepAlive: true }).then(
    () => {
      res.off('close', onClose)
      proceed()
    },
    () => {},
  )
}
