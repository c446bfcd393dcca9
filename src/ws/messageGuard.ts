import type { WebSocket } from 'ws'
import { gcraStep } from '../core/algorithms/gcra.js'
import { nowMicros } from '../core/clock.js'
import { CloseCodes, CloseReasons } from './closeCodes.js'
import type { ResolvedWebSocketOptions } from './options.js'

/** One second, in µs: the window over which drops are counted. */
const WINDOW_US = 1_000_000

/**
 * Limits what one connection may send, in-process (no store round trip per message): messages and pings spend from
 * a local token bucket; over quota a message is dropped; after `dropsBeforeClose` drops within a second the
 * connection is closed, with 1013 (try again later) or, when it was sending at `abuseFactor` × the allowed rate,
 * 1008 (policy violation). Also caps graphql-ws subscriptions per connection.
 */
export class MessageGuard {
  private tat: number | undefined
  private windowStart = 0
  private received = 0
  private dropped = 0
  private closing = false
  private readonly subscriptions = new Set<string>()
  private readonly emission: number
  private readonly burst: number

  /**
   * @param takeShared spends one message of the identity's shared budget, if there is one (`SharedBudget.take`).
   */
  constructor(
    private readonly socket: WebSocket,
    private readonly options: ResolvedWebSocketOptions,
    private readonly takeShared: (() => boolean) | undefined,
  ) {
    this.emission = Math.max(1, Math.round(1_000_000 / options.messagesPerSecond))
    this.burst = options.messageBurst * this.emission
  }

  /** Whether an incoming message (or ping) may reach the app's listeners. */
  admit(event: 'message' | 'ping', data: unknown): boolean {
    if (this.closing) return false
    const now = nowMicros()
    if (now - this.windowStart >= WINDOW_US) {
      this.windowStart = now
      this.received = 0
      this.dropped = 0
    }
    this.received++
    const step = gcraStep(this.tat, now, 'consume', [this.emission, this.burst, this.emission])
    if (step.reply[0] === 0) {
      this.onDrop(now, step.reply[3])
      return false
    }
    if (step.next !== undefined && step.next !== 'delete') this.tat = step.next.state
    if (event === 'message' && this.takeShared !== undefined && !this.takeShared()) {
      this.onDrop(now, 0)
      return false
    }
    if (event === 'message' && this.options.maxSubscriptionsPerConnection > 0)
      return this.admitOperation(data)
    return true
  }

  /** Sees what the server sends: graphql-ws `complete` and `error` end a subscription. */
  observeOutgoing(data: unknown): void {
    if (this.options.maxSubscriptionsPerConnection === 0 || this.subscriptions.size === 0) return
    const message = parseOperation(data)
    if (message !== undefined && (message.type === 'complete' || message.type === 'error')) {
      this.subscriptions.delete(message.id)
    }
  }

  /** Marks the connection as closing (no more messages are admitted). */
  stop(): void {
    this.closing = true
  }

  private onDrop(now: number, retryAfterMs: number): void {
    this.dropped++
    if (this.dropped < this.options.dropsBeforeClose) {
      this.options.onDrop?.(this.socket, { retryAfterMs })
      return
    }
    this.closing = true
    // The rate seen in this window, judged over at least 100 ms so that a short burst is not taken for abuse.
    const seconds = Math.max(now - this.windowStart, 100_000) / 1_000_000
    const abusive = this.received / seconds >= this.options.abuseFactor * this.options.messagesPerSecond
    if (abusive) this.socket.close(CloseCodes.POLICY_VIOLATION, CloseReasons.ABUSE)
    else this.socket.close(CloseCodes.TRY_AGAIN_LATER, CloseReasons.RATE_LIMITED)
  }

  private admitOperation(data: unknown): boolean {
    const message = parseOperation(data)
    if (message === undefined) return true
    if (message.type === 'complete') {
      this.subscriptions.delete(message.id)
      return true
    }
    if (message.type !== 'subscribe') return true
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
  const text = typeof data === 'string' ? data : Buffer.isBuffer(data) ? data.toString('utf8') : undefined
  if (text === undefined || !text.includes('"type"')) return undefined
  try {
    const message = JSON.parse(text) as { type?: unknown; id?: unknown }
    if (typeof message.type === 'string' && typeof message.id === 'string')
      return { type: message.type, id: message.id }
  } catch {
    // Not JSON: not ours to judge.
  }
  return undefined
}
