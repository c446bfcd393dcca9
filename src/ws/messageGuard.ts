import type { WebSocket } from 'ws'
import { gcraStep } from '../core/algorithms/gcra.js'
import { nowMicros } from '../core/clock.js'
import { timerDelay } from '../core/validate.js'
import { CloseCodes, CloseReasons } from './closeCodes.js'
import type { InflateGate, ReadingState } from './inflateGate.js'
import type { ResolvedWebSocketOptions } from './options.js'

/** One second, in µs: the window over which drops are counted. */
const WINDOW_US = 1_000_000
/** How long a connection being closed has to complete the close handshake before it is terminated. */
const CLOSE_GRACE_MS = 1000

/**
 * Terminates `socket` unless it completes its close handshake within CLOSE_GRACE_MS: a client that never answers
 * the close frame would otherwise keep its slot for ws' closing timeout (30 s). A socket the guard closes is not
 * read meanwhile.
 */
export function terminateAfterGrace(socket: WebSocket): void {
  setTimeout(() => socket.terminate(), CLOSE_GRACE_MS).unref()
}

/**
 * Limits what one connection may send, in-process (no store round trip per message): messages and pings spend from
 * a local token bucket; over quota a message is dropped (and, with permessage-deflate, nothing more is inflated until
 * the next token is due); after `dropsBeforeClose` drops within a second the connection is closed, with 1013 (try
 * again later) or, when it was sending at `abuseFactor` × the allowed rate, 1008 (policy violation), and is not read
 * again. Also caps graphql-ws subscriptions per connection.
 */
export class MessageGuard implements ReadingState {
  private tat: number | undefined
  private windowStart = 0
  private received = 0
  private dropped = 0
  private closing = false
  private pauseTimer: NodeJS.Timeout | undefined
  private readonly subscriptions = new Set<string>()
  /** The connection's permessage-deflate gate, when it negotiated compression. */
  inflation: InflateGate | undefined
  /** The GCRA step's args, `[emission, burst, cost of one message]` in µs: fixed per connection. */
  private readonly rateArgs: readonly number[]

  constructor(
    private readonly socket: WebSocket,
    private readonly options: ResolvedWebSocketOptions,
  ) {
    const emission = Math.max(1, Math.round(1_000_000 / options.messagesPerSecond))
    this.rateArgs = [emission, options.messageBurst * emission, emission]
  }

  /** Spends from the connection's own bucket for an incoming message or ping; false: drop it. */
  admitRate(): boolean {
    if (this.closing) return false
    const now = nowMicros()
    if (now - this.windowStart >= WINDOW_US) {
      this.windowStart = now
      this.received = 0
      this.dropped = 0
    }
    this.received++
    const step = gcraStep(this.tat, now, 'consume', this.rateArgs)
    if (step.reply[0] === 0) {
      this.drop(step.reply[3])
      return false
    }
    if (step.next !== undefined && step.next !== 'delete') this.tat = step.next.state
    return true
  }

  /** Whether a message that passed the rate limits may reach the app (the graphql-ws subscription cap). */
  admitMessage(data: unknown): boolean {
    if (this.closing) return false
    return this.options.maxSubscriptionsPerConnection === 0 || this.admitOperation(data)
  }

  /** Sees what the server sends: graphql-ws `complete` and `error` end a subscription. */
  observeOutgoing(data: unknown): void {
    if (this.options.maxSubscriptionsPerConnection === 0 || this.subscriptions.size === 0) return
    const message = parseOperation(data)
    if (message !== undefined && (message.type === 'complete' || message.type === 'error')) {
      this.subscriptions.delete(message.id)
    }
  }

  get stopped(): boolean {
    return this.closing
  }

  get paused(): boolean {
    return this.pauseTimer !== undefined
  }

  /** Marks the connection as closing: no more messages are admitted or inflated. */
  stop(): void {
    this.closing = true
    if (this.pauseTimer !== undefined) clearTimeout(this.pauseTimer)
    this.pauseTimer = undefined
    this.inflation?.stop()
  }

  /** Counts a dropped message; enough of them within a second close the connection (1013, or 1008 for abuse). */
  drop(retryAfterMs: number): void {
    if (this.closing) return
    const now = nowMicros()
    this.dropped++
    if (this.dropped < this.options.dropsBeforeClose) {
      this.options.onDrop?.(this.socket, { retryAfterMs })
      this.pauseReading(retryAfterMs)
      return
    }
    // The rate seen in this window, judged over at least 100 ms: a few messages close together are not a rate. A
    // burst large enough to be closed (messageBurst + dropsBeforeClose at once) is judged by it all the same: at that
    // moment it cannot be told from the start of a flood.
    const seconds = Math.max(now - this.windowStart, 100_000) / 1_000_000
    const abusive = this.received / seconds >= this.options.abuseFactor * this.options.messagesPerSecond
    // Read no more: what the client still sends (a flood, or inflations of one) costs nothing from here.
    this.stop()
    this.socket.pause()
    if (abusive) this.socket.close(CloseCodes.POLICY_VIOLATION, CloseReasons.ABUSE)
    else this.socket.close(CloseCodes.TRY_AGAIN_LATER, CloseReasons.RATE_LIMITED)
    terminateAfterGrace(this.socket)
  }

  /**
   * With permessage-deflate, inflates nothing more for `ms`, until the connection's next token is due: ws' receiver
   * waits on the held frame, so what the client sends meanwhile waits in the kernel (TCP holds it back) rather than
   * being inflated to be dropped. Plain frames cost little to read and drop, and are read on.
   */
  private pauseReading(ms: number): void {
    if (this.inflation === undefined || ms <= 0 || this.closing || this.pauseTimer !== undefined) return
    // A token due past what a timer honours (a slow budget) wakes early and pauses again, rather than every 1 ms.
    this.pauseTimer = setTimeout(() => {
      this.pauseTimer = undefined
      if (!this.closing) this.inflation?.wake()
    }, timerDelay(ms))
    this.pauseTimer.unref()
  }

  private admitOperation(data: unknown): boolean {
    const message = parseOperation(data)
    if (message === undefined) return true
    if (message.type === 'complete') {
      this.subscriptions.delete(message.id)
      return true
    }
    // An id already running is graphql-ws' to refuse (4409); it must not count twice nor be refused here (the
    // error we would send for it would read as the end of the running one).
    if (message.type !== 'subscribe' || this.subscriptions.has(message.id)) return true
    if (this.subscriptions.size < this.options.maxSubscriptionsPerConnection) {
      this.subscriptions.add(message.id)
      return true
    }
    // The graphql-ws way to refuse one operation and keep the connection.
    this.socket.send(
      JSON.stringify({
        type: 'error',
        id: message.id,
        payload: [{ message: 'Too many subscriptions', extensions: { code: 'TOO_MANY_SUBSCRIPTIONS' } }],
      }),
    )
    return false
  }
}

/** A graphql-ws message with an id, or undefined for anything else. */
function parseOperation(data: unknown): { type: string; id: string } | undefined {
  // Parsed whole (no substring shortcut: `"typ\u0065"` is the same key to JSON.parse and to graphql-ws).
  const text = typeof data === 'string' ? data : Buffer.isBuffer(data) ? data.toString('utf8') : undefined
  if (text === undefined) return undefined
  try {
    const message = JSON.parse(text) as { type?: unknown; id?: unknown }
    if (typeof message.type === 'string' && typeof message.id === 'string')
      return { type: message.type, id: message.id }
  } catch {
    // Not JSON: not ours to judge.
  }
  return undefined
}
