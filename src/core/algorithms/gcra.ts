import { invalidArgument } from '../errors.js'
import { reply, type Step, toMs } from './step.js'

/**
 * GCRA (generic cell rate algorithm), the token bucket with one stored value per key: the theoretical arrival time
 * (TAT) in microseconds. Token bucket and leaky bucket both run it; the leaky bucket reads `delayMs` from it.
 *
 * args: `[emissionUs, burstUs, amountUs]` — time to refill one unit, capacity × emission, and for consume, debit and
 * refund the time the request's cost adds or gives back (cost × emission). All integers, computed once by the
 * limiter, so the arithmetic here and in Lua is exact.
 *
 * `debit` takes its amount whatever is left, into debt if need be: the TAT may run up to one burst past a full
 * bucket's (a budget owes at most its capacity), and consumes are refused until the debt is paid back. Its
 * `allowed` says whether the whole amount was taken.
 */
export type GcraState = number

export function gcraStep(
  tat: GcraState | undefined,
  now: number,
  op: string,
  args: readonly number[],
): Step<GcraState> {
  const emission = args[0] as number
  const burst = args[1] as number
  const amount = args[2] as number
  const base = Math.max(tat ?? now, now)
  switch (op) {
    case 'consume': {
      const next = base + amount
      if (next - now > burst) {
        // Denied: nothing is written, so a denied request consumes nothing.
        return {
          reply: reply(
            false,
            Math.floor((burst - (base - now)) / emission),
            base - now,
            next - now - burst,
            0,
          ),
        }
      }
      return {
        reply: reply(true, Math.floor((burst - (next - now)) / emission), next - now, 0, base - now),
        next: { state: next, ttlMs: toMs(next - now) },
      }
    }
    case 'debit': {
      const wanted = base + amount
      const cap = now + 2 * burst
      const next = Math.min(wanted, cap)
      // allowed: the whole amount was taken (false once the key owes its whole capacity).
      return {
        reply: reply(
          wanted <= cap,
          Math.floor((burst - (next - now)) / emission),
          next - now,
          next + emission - now - burst,
          0,
        ),
        next: { state: next, ttlMs: toMs(next - now) },
      }
    }
    case 'peek':
      return { reply: peekReply(base, now, emission, burst) }
    case 'refund': {
      if (tat === undefined || tat <= now) return { reply: peekReply(now, now, emission, burst) }
      const next = tat - amount
      // A TAT at or before now is a full bucket: delete the key rather than store a credit beyond capacity.
      if (next <= now) return { reply: peekReply(now, now, emission, burst), next: 'delete' }
      return { reply: peekReply(next, now, emission, burst), next: { state: next, ttlMs: toMs(next - now) } }
    }
    default:
      throw invalidArgument('gcra', 'op', "'consume', 'debit', 'peek' or 'refund'", op)
  }
}

/** Whether one more unit would be allowed at `base`, without writing. */
function peekReply(base: number, now: number, emission: number, burst: number) {
  const wait = base + emission - now - burst
  return reply(wait <= 0, Math.floor((burst - (base - now)) / emission), base - now, wait, 0)
}
