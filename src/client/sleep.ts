import { sleep as wait } from '../core/sleep.js'

/** How a client waits between attempts: resolves after `ms`, rejects with the signal's reason when aborted. */
export type Sleep = (ms: number, signal?: AbortSignal) => Promise<void>

/**
 * The default `Sleep`, for browsers and Node alike. Its timer is deliberately kept alive (not unref'd): the wait
 * between two attempts is the work a caller is awaiting, and a Node script whose only pending work is a retry must
 * not exit in the middle of it. An AbortSignal is how a caller stops waiting.
 */
export const sleep: Sleep = (ms, signal) => wait(ms, signal, { keepAlive: true })
