import { MAX_TIMER_MS } from './validate.js'

/**
 * Resolves after `ms` (long delays chained); rejects with the signal's reason when aborted. The timer is unref'd
 * (a limiter's wait must not keep a process alive) unless `keepAlive`: a client's wait between two attempts is the
 * work its caller awaits. Uses no Node API but `unref` where there is one, so browsers can run it too.
 */
export function sleep(ms: number, signal?: AbortSignal, { keepAlive = false } = {}): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason)
      return
    }
    let timer: ReturnType<typeof setTimeout> | undefined
    const onAbort = () => {
      clearTimeout(timer)
      reject(signal?.reason)
    }
    const wait = (left: number) => {
      timer = setTimeout(
        () => {
          if (left > MAX_TIMER_MS) return wait(left - MAX_TIMER_MS)
          signal?.removeEventListener('abort', onAbort)
          resolve()
        },
        Math.min(left, MAX_TIMER_MS),
      )
      if (!keepAlive) (timer as { unref?: () => void }).unref?.()
    }
    signal?.addEventListener('abort', onAbort, { once: true })
    wait(Math.max(0, ms))
  })
}
