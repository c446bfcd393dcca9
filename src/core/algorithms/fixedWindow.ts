import { invalidArgument } from '../errors.js'
import { reply, type Step, toMs } from './step.js'

/**
 * Fixed window counter. Windows are aligned on the epoch (`floor(now / window)`), so every instance agrees on where a
 * window starts. State: `[windowIndex, count]`; the key expires when its window ends.
 *
 * args: `[windowUs, limit, amount]` (amount: the cost to consume or refund; 1 for peek).
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
  const count = state !== undefined && state[0] === index ? state[1] : 0
  switch (op) {
    case 'consume': {
      const next = count + amount
      if (next > limit) return { reply: reply(false, Math.floor(limit - count), untilEnd, untilEnd, 0) }
      return {
        reply: reply(true, Math.floor(limit - next), untilEnd, 0, 0),
        next: { state: [index, next], ttlMs: toMs(untilEnd) },
      }
    }
    case 'peek':
      return { reply: countReply(count, limit, untilEnd) }
    case 'refund': {
      if (count === 0) return { reply: countReply(0, limit, untilEnd) }
      const next = Math.max(0, count - amount)
      if (next === 0) return { reply: countReply(0, limit, untilEnd), next: 'delete' }
      return {
        reply: countReply(next, limit, untilEnd),
        next: { state: [index, next], ttlMs: toMs(untilEnd) },
      }
    }
    default:
      throw invalidArgument('fixedWindow', 'op', "'consume', 'peek' or 'refund'", op)
  }
}

function countReply(count: number, limit: number, untilEnd: number) {
  const allowed = count + 1 <= limit
  return reply(allowed, Math.floor(limit - count), count > 0 ? untilEnd : 0, allowed ? 0 : untilEnd, 0)
}
