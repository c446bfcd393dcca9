/** Longest delay `setTimeout` honours; beyond it Node fires after 1 ms (the overflow rate-limiter-flexible #71 hit). */
const MAX_TIMER_MS = 2 ** 31 - 1

/** Resolves after `ms` (unref'd timer, long delays chained); rejects with the signal's reason when aborted. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason)
    let timer: NodeJS.Timeout
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
      timer.unref()
    }
    signal?.addEventListener('abort', onAbort, { once: true })
    wait(Math.max(0, ms))
  })
}
