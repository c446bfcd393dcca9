import type { Reply } from '../stores/store.js'

/**
 * What one algorithm step decides for a key: the reply, and what happens to the stored state.
 * `next` absent: the state is left as it was (a denial writes nothing). `'delete'`: the key is removed.
 */
export interface Step<S> {
  readonly reply: Reply
  readonly next?: { readonly state: S; readonly ttlMs: number } | 'delete'
}

/** Microseconds to whole milliseconds, rounded up, never negative. The Lua twins use the same rounding. */
export function toMs(us: number): number {
  return us <= 0 ? 0 : Math.ceil(us / 1000)
}

export function reply(
  allowed: boolean,
  remaining: number,
  resetUs: number,
  retryUs: number,
  delayUs: number,
): Reply {
  return [allowed ? 1 : 0, Math.max(0, remaining), toMs(resetUs), toMs(retryUs), toMs(delayUs)]
}
