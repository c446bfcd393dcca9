import { invalidArgument } from '../errors.js'
import { reply, type Step, toMs } from './step.js'

/**
 * Fixed window counter. Windows are aligned on the epoch (`floor(now / window)`), so every instance agrees on where a
 * window starts. State: `[windowIndex, count]`; the key expires when its window ends.
 *
 * `debit` takes its amount whatever is left, into debt if need be: the count may reach twice the limit (a budget
 * owes at most its limit), and what it holds above the limit is carried into the next window, so a debt made late
 * in a window is not forgiven when the window turns. Its `allowed` says whether the whole amount was taken.
 *
 * args: `[windowUs, limit, amount]` (amount: the cost to consume, debit or refund; 1 for peek).
 */
export type WindowCountState = readonly [number, number]

export function fixedWindowStep(
  state: WindowCountState | undefined,
  now: number,
  op: string,
  args: readonly number[],
): Step<WindowCountState> {
  const window = args[0] as number
  const limit = args[1] as number
  const amount = args[2] as number
  const index = Math.floor(now / window)
  const untilEnd = (index + 1) * window - now
  const count = countNow(state, index, limit)
  switch (op) {
    case 'consume': {
      const next = count + amount
      if (next > limit) {
        const retry = retryAfter(count, amount, limit, window, untilEnd)
        return {
          reply: reply(false, Math.floor(limit - count), lifetime(count, limit, window, untilEnd), retry, 0),
        }
      }
      return {
        reply: reply(true, Math.floor(limit - next), untilEnd, 0, 0),
        next: { state: [index, next], ttlMs: toMs(untilEnd) },
      }
    }
    case 'debit': {
      const next = Math.min(count + amount, 2 * limit)
      const lasts = lifetime(next, limit, window, untilEnd)
      const retry = next + 1 <= limit ? 0 : retryAfter(next, 1, limit, window, untilEnd)
      return {
        // allowed: the whole amount was taken.
        reply: reply(count + amount <= 2 * limit, Math.floor(limit - next), lasts, retry, 0),
        next: { state: [index, next], ttlMs: toMs(lasts) },
      }
    }
    case 'peek':
      return { reply: countReply(count, limit, window, untilEnd) }
    case 'refund': {
      if (count === 0) return { reply: countReply(0, limit, window, untilEnd) }
      const next = Math.max(0, count - amount)
      if (next === 0) return { reply: countReply(0, limit, window, untilEnd), next: 'delete' }
      return {
        reply: countReply(next, limit, window, untilEnd),
        next: { state: [index, next], ttlMs: toMs(lifetime(next, limit, window, untilEnd)) },
      }
    }
    default:
      throw invalidArgument('fixedWindow', 'op', "'consume', 'debit', 'peek' or 'refund'", op)
  }
}

/** The count of the current window: its own, or what the previous window held above the limit (a debt). */
function countNow(state: WindowCountState | undefined, index: number, limit: number): number {
  if (state === undefined) return 0
  if (state[0] === index) return state[1]
  if (state[0] === index - 1 && state[1] > limit) return state[1] - limit
  return 0
}

/** Microseconds until a count is gone: the window's end, or the next one's for a count above the limit. */
function lifetime(count: number, limit: number, window: number, untilEnd: number): number {
  return count > limit ? untilEnd + window : untilEnd
}

/** Microseconds until `amount` fits: the next window, or the one after when the debt carried over leaves no room. */
function retryAfter(count: number, amount: number, limit: number, window: number, untilEnd: number): number {
  return Math.max(0, count - limit) + amount > limit ? untilEnd + window : untilEnd
}

function countReply(count: number, limit: number, window: number, untilEnd: number) {
  const allowed = count + 1 <= limit
  return reply(
    allowed,
    Math.floor(limit - count),
    count > 0 ? lifetime(count, limit, window, untilEnd) : 0,
    allowed ? 0 : retryAfter(count, 1, limit, window, untilEnd),
    0,
  )
}
