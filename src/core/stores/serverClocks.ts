/**
 * Deadlines in each Redis server's own time. A decision whose store call missed its deadline has been answered by
 * the fail policy; if the call still reached Redis later (an ioredis retry after a failover, a command queued while a
 * node's connection opened, the socket of a server that was paused), applying it would spend a budget for a request
 * that was refused, or count a locally admitted one twice. So every script call carries its deadline in the server's
 * clock, and the script changes nothing past it.
 *
 * The conversion needs the offset between this process's clock and the server's. Every reply carries the server's
 * time `s` at the script's start; received at `r` by our clock, `s − r` is a lower bound of the offset (the script ran
 * before the reply arrived). A lower bound can only make the server's deadline earlier than ours, never later: a call
 * is never applied after its deadline, and one that runs within a round trip of it may be refused a little early.
 */

/** A lower bound this old is replaced by the next sample, even a looser one: clocks drift. */
const SAMPLE_LIFETIME_MS = 10_000
/** Node addresses churn with failovers and restarts: past this many, the samples are learnt again. */
const MAX_NODES = 256

/** The scripts' reply for a call that reached Redis past its deadline (followed by the server's time). */
export const PAST_DEADLINE = -2

/** This process's wall clock in µs, monotonic between samples. */
function nowUs(): number {
  return (performance.timeOrigin + performance.now()) * 1000
}

export class ServerClocks {
  private readonly offsets = new Map<string, { lowUs: number; sampledAt: number }>()

  /**
   * The server's time (µs) matching our deadline `deadline` (a `performance.now()` instant). For a node not heard
   * from yet (a cold store, a master promoted by a failover), the earliest offset known of another node, else our
   * own clock: servers and clients keep their clocks in step (NTP) within far less than a deadline, and a call with
   * a deadline a little off is better than one with none, which a paused Redis would apply whenever it woke up. A
   * deadline that turns out early is answered PAST_DEADLINE with the server's time, which is then learnt.
   */
  notAfter(node: string, deadline: number): number {
    const lowUs = this.offsets.get(node)?.lowUs ?? this.earliestOffsetUs()
    return Math.floor((performance.timeOrigin + deadline) * 1000 + lowUs)
  }

  /** The smallest offset known (the earliest deadline it gives), 0 when no server was heard from. */
  private earliestOffsetUs(): number {
    let earliest: number | undefined
    for (const { lowUs } of this.offsets.values())
      if (earliest === undefined || lowUs < earliest) earliest = lowUs
    return earliest ?? 0
  }

  /** Records the server time `serverUs` of a reply from `node` received just now. */
  observe(node: string, serverUs: number): void {
    const lowUs = serverUs - nowUs()
    const now = performance.now()
    const known = this.offsets.get(node)
    if (known !== undefined && known.lowUs >= lowUs && now - known.sampledAt < SAMPLE_LIFETIME_MS) return
    if (known === undefined && this.offsets.size >= MAX_NODES) this.offsets.clear()
    this.offsets.set(node, { lowUs, sampledAt: now })
  }
}
