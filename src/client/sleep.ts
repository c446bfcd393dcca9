/** Longest delay `setTimeout` honours in browsers and Node; beyond it they fire at once. */
const MAX_TIMER_MS = 2 ** 31 - 1

/** How a client waits between attempts: resolves after `ms`, rejects with the signal's reason when aborted. */
export type Sleep = (ms: number, signal?: AbortSignal) => Promise<void>

/**
 * The default `Sleep`, for browsers and Node alike. Its timer is deliberately not unref'd: the wait between two
 * attempts is the work a caller is awaiting, and a Node script whose only pending work is a retry must not exit in
 * the middle of it. An AbortSignal is how a caller stops waiting.
 */
export const sleep: Sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
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
    }
    signal?.addEventListener('abort', onAbort, { once: true })
    wait(Math.max(0, ms))
  })
