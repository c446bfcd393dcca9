import type { Socket } from 'socket.io'
import { SOCKET_IO_DISCONNECT_EVENT, type SocketIoRefusalCode } from '../client/socketIoRefusals.js'
import { gcraStep } from '../core/algorithms/gcra.js'
import { nowMicros } from '../core/clock.js'
import type { SharedBudget } from '../ws/sharedBudget.js'
import type { EventCost, ResolvedNamespaceLimits, ResolvedSocketIoOptions } from './options.js'
import { refusal } from './refusals.js'

/** One second, in µs: the window over which refusals are counted. */
const WINDOW_US = 1_000_000

/** An event packet as socket.io decoded it: `data` is `[event, ...args]`, `id` set when an acknowledgement is asked. */
export interface EventPacket {
  readonly data: readonly unknown[]
  readonly id?: number
}

/** What the guard answers an acknowledgement with, when it refuses the event. */
type Acknowledge = (response: unknown) => void

/**
 * Limits the events of one socket before any handler sees them (before `onAny` listeners and `socket.use`
 * middlewares, which socket.io runs in that order): each
 * event costs its `eventCost` in points, spent from the socket's own bucket (in-process) and, when configured, from
 * the identity's budget shared across sockets and instances. A refused event is not delivered; one sent with an
 * acknowledgement gets `{ error: { code, message, retryAfter } }` back. After `dropsBeforeDisconnect` refusals
 * within a second the socket is disconnected from its namespace (`RATE_LIMITED`), or, when it was sending at
 * `abuseFactor` times its rate, loses its whole connection (`ABUSE`); either way it is told first, with the
 * `tollbooth:disconnect` event.
 */
export class EventGuard {
  private tat: number | undefined
  private windowStart = 0
  private receivedPoints = 0
  private refused = 0
  private stopped = false
  /** A µs unit of the socket's bucket: one point's refill time. */
  private readonly emission: number
  /** The GCRA step's args, `[emission, burst, cost]` in µs: the cost is set per event, the array kept. */
  private readonly rateArgs: number[]
  /** The dearest event that can ever pass (points). */
  private readonly maxCost: number

  constructor(
    private readonly socket: Socket,
    private readonly limits: ResolvedNamespaceLimits,
    private readonly budget: SharedBudget | undefined,
    private readonly identity: string,
    private readonly onDrop: ResolvedSocketIoOptions['onDrop'],
    /** The acknowledgement socket.io would give the event of this packet id. */
    private readonly acknowledge: (id: number) => Acknowledge,
  ) {
    this.emission = Math.max(1, Math.round(1_000_000 / limits.eventsPerSecond))
    this.rateArgs = [this.emission, limits.eventBurst * this.emission, 0]
    this.maxCost =
      limits.identityEvents === false
        ? limits.eventBurst
        : Math.min(limits.eventBurst, limits.identityEvents.capacity)
  }

  /**
   * Decides one incoming event: `deliver` hands it to socket.io (its `onAny` listeners, middlewares and handlers);
   * a refused one is answered here through `acknowledge`, and the app sees nothing of it.
   */
  admit(packet: EventPacket, deliver: () => void): void {
    if (this.stopped) return
    const event = String(packet.data[0])
    const ack = packet.id ?? undefined
    const cost = eventCostOf(this.limits.eventCost, event, packet.data)
    if (cost === undefined) {
      this.refuse(event, ack, 'EVENT_REFUSED', 'This event could not be priced', undefined, 1)
      return
    }
    if (cost > this.maxCost) {
      this.refuse(
        event,
        ack,
        'EVENT_TOO_COSTLY',
        `This event costs ${cost}, more than the budget holds`,
        undefined,
        cost,
      )
      return
    }
    const now = nowMicros()
    this.count(now, cost)
    this.rateArgs[2] = cost * this.emission
    const step = gcraStep(this.tat, now, 'consume', this.rateArgs)
    if (step.reply[0] === 0) {
      this.refuse(event, ack, 'RATE_LIMITED', 'Too many events', step.reply[3], 0)
      return
    }
    if (step.next !== undefined && step.next !== 'delete') this.tat = step.next.state
    const { budget } = this
    if (budget === undefined) {
      deliver()
      return
    }
    const { identity } = this
    const taken = budget.take(identity, cost)
    if (taken === 'token') deliver()
    else if (taken === 'none') this.refuseShared(event, ack, identity)
    else {
      void budget.takeWhenDrawn(identity, cost).then((ok) => {
        if (this.stopped || !this.socket.connected) return
        if (ok) deliver()
        else this.refuseShared(event, ack, identity)
      })
    }
  }

  /** Stops admitting: the socket is being disconnected. */
  stop(): void {
    this.stopped = true
  }

  private refuseShared(event: string, ack: number | undefined, identity: string): void {
    const budget = this.budget as SharedBudget
    this.refuse(
      event,
      ack,
      'RATE_LIMITED',
      'Too many events for this identity',
      budget.retryAfterMs(identity),
      0,
    )
  }

  /** Counts points received in the current one-second window (the abuse judgement's rate). */
  private count(now: number, points: number): void {
    if (now - this.windowStart >= WINDOW_US) {
      this.windowStart = now
      this.receivedPoints = 0
      this.refused = 0
    }
    this.receivedPoints += points
  }

  private refuse(
    event: string,
    ack: number | undefined,
    code: SocketIoRefusalCode,
    message: string,
    retryAfterMs: number | undefined,
    uncountedPoints: number,
  ): void {
    if (this.stopped) return
    const now = nowMicros()
    if (uncountedPoints > 0) this.count(now, uncountedPoints)
    this.refused++
    if (ack !== undefined) this.acknowledge(ack)({ error: refusal(code, message, retryAfterMs) })
    try {
      ignoreRejection(this.onDrop?.(this.socket, { event, code, retryAfterMs: retryAfterMs ?? 0 }))
    } catch {
      // A broken counting callback must not break the socket's handling.
    }
    if (this.refused >= this.limits.dropsBeforeDisconnect) this.disconnect(now, retryAfterMs)
  }

  /** Graduated: over quota for a second leaves the namespace; at `abuseFactor` times the rate, the connection. */
  private disconnect(now: number, retryAfterMs: number | undefined): void {
    this.stopped = true
    // The rate of this window, judged over at least 100 ms: a few events close together are not a rate.
    const seconds = Math.max(now - this.windowStart, 100_000) / 1_000_000
    const abusive = this.receivedPoints / seconds >= this.limits.abuseFactor * this.limits.eventsPerSecond
    if (abusive) {
      this.socket.emit(SOCKET_IO_DISCONNECT_EVENT, refusal('ABUSE', 'Event rate abuse'))
      this.socket.disconnect(true)
      return
    }
    this.socket.emit(
      SOCKET_IO_DISCONNECT_EVENT,
      refusal('RATE_LIMITED', 'Too many events', Math.max(retryAfterMs ?? 0, 1000)),
    )
    this.socket.disconnect()
  }
}

/** The points an event costs, or `undefined` when its cost function failed or gave no valid cost. */
function eventCostOf(
  cost: EventCost | undefined,
  event: string,
  data: readonly unknown[],
): number | undefined {
  if (cost === undefined) return 1
  if (typeof cost !== 'function') return cost[event] ?? 1
  try {
    const points: unknown = cost(event, data.slice(1))
    // A cost is known at once or not at all: an async function's promise is no price (and must not reject unheard).
    ignoreRejection(points)
    // At least 1, as in a map: an event priced 0 would pass every budget.
    return typeof points === 'number' && Number.isFinite(points) && points >= 0
      ? Math.max(1, Math.ceil(points))
      : undefined
  } catch {
    return undefined
  }
}

/** A callback's result, if it is a promise, may reject: that rejection is nobody's to handle, so it is dropped. */
function ignoreRejection(value: unknown): void {
  if (typeof (value as { then?: unknown } | null)?.then === 'function') {
    ;(value as PromiseLike<unknown>).then(undefined, () => undefined)
  }
}
