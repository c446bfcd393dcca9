import type { Socket } from 'socket.io'
import { gcraStep } from '../core/algorithms/gcra.js'
import { nowMicros } from '../core/clock.js'

/** An engine.io connection, as socket.io holds it. */
export type EngineConnection = Socket['conn']

/** Socket.IO packet types that carry binary attachments (socket.io-parser: BINARY_EVENT, BINARY_ACK). */
const BINARY_EVENT = '5'
const BINARY_ACK = '6'

/**
 * Guards what one engine.io connection hands socket.io's decoder, before anything is decoded:
 * - **packet size, attachments included**: engine.io caps each message at `maxHttpBufferSize`, but a binary packet
 *   is a header and up to 10 attachments, each a message of its own. The header is held until its attachments have
 *   come; the whole packet passes only within `maxPacketBytes`. Each attachment counts as a packet for the rate.
 * - **packets per second** of every kind and namespace (events, acknowledgements, connects): a local token bucket
 *   of one second's worth; a connection over it is closed. It is the backstop against floods, below the per-event
 *   limits of each namespace.
 * A connection that breaks either is closed (the client sees `transport close`) and nothing more it sent is read.
 */
export class PacketGate {
  private tat: number | undefined
  private readonly rateArgs: readonly number[]
  /** A binary packet being gathered: its header, the attachments so far, how many are missing, its size. */
  private held: { parts: unknown[]; missing: number; bytes: number } | undefined
  private closed = false

  constructor(
    private readonly conn: EngineConnection,
    private readonly maxPacketBytes: number,
    packetsPerSecond: number,
  ) {
    const emission = Math.max(1, Math.round(1_000_000 / packetsPerSecond))
    this.rateArgs = [emission, Math.ceil(packetsPerSecond) * emission, emission]
  }

  /** Interposes on the connection's `emit`: socket.io's decoder listens to its `data` events. */
  install(): void {
    const { conn } = this
    const emit = conn.emit
    const gate = this
    conn.emit = function guardedEmit(this: EngineConnection, event: string, ...args: unknown[]): boolean {
      if (event !== 'data') return emit.call(this, event, ...args)
      for (const data of gate.admit(args[0])) emit.call(this, 'data', data)
      return true
    } as typeof conn.emit
  }

  /** What may reach the decoder now for one incoming message: nothing, the message, or a whole binary packet. */
  private admit(data: unknown): readonly unknown[] {
    if (this.closed) return NOTHING
    if (this.held !== undefined && typeof data !== 'string') return this.attach(data)
    // A text message while attachments are awaited: socket.io's decoder throws and closes; let it, alone.
    if (this.held !== undefined) this.held = undefined
    if (!this.admitRate()) return NOTHING
    if (typeof data !== 'string') return [data]
    const bytes = data.length * 3 <= this.maxPacketBytes ? data.length : Buffer.byteLength(data)
    if (bytes > this.maxPacketBytes) return this.close()
    const attachments = attachmentCount(data)
    if (attachments === 0) return [data]
    this.held = { parts: [data], missing: attachments, bytes }
    return NOTHING
  }

  private attach(data: unknown): readonly unknown[] {
    const held = this.held as NonNullable<PacketGate['held']>
    // Each attachment is a message of its own: it counts against the rate, and weighs at least a message's framing.
    if (!this.admitRate()) return NOTHING
    held.bytes += Math.max(byteLength(data), ATTACHMENT_OVERHEAD_BYTES)
    if (held.bytes > this.maxPacketBytes) return this.close()
    held.parts.push(data)
    held.missing--
    if (held.missing > 0) return NOTHING
    this.held = undefined
    return held.parts
  }

  private admitRate(): boolean {
    const step = gcraStep(this.tat, nowMicros(), 'consume', this.rateArgs)
    if (step.reply[0] === 0) {
      this.close()
      return false
    }
    if (step.next !== undefined && step.next !== 'delete') this.tat = step.next.state
    return true
  }

  private close(): readonly unknown[] {
    this.closed = true
    this.held = undefined
    this.conn.close()
    return NOTHING
  }
}

const NOTHING: readonly unknown[] = []

/** socket.io-parser's limit of attachments per packet (its `maxAttachments`). */
const MAX_ATTACHMENTS = 10
/** What an attachment weighs at the least in the size check: an empty one still costs a message to receive. */
const ATTACHMENT_OVERHEAD_BYTES = 16

/**
 * The attachment count of a binary packet's header (`51-["upload",{"_placeholder":true,"num":0}]`), 0 for any
 * other packet. Read exactly as socket.io-parser reads it (every character up to the first `-`, as a number:
 * `010` and `10.0` are 10 to it), so that no count it accepts escapes the size check; one it refuses is left to
 * it, and it closes the connection.
 */
function attachmentCount(data: string): number {
  if (data[0] !== BINARY_EVENT && data[0] !== BINARY_ACK) return 0
  const dash = data.indexOf('-', 1)
  if (dash === -1) return 0
  const count = Number(data.slice(1, dash))
  // More than socket.io-parser takes: it refuses the header (and the connection) at once, so nothing is held.
  return Number.isInteger(count) && count > 0 && count <= MAX_ATTACHMENTS ? count : 0
}

function byteLength(data: unknown): number {
  if (Buffer.isBuffer(data) || data instanceof ArrayBuffer || ArrayBuffer.isView(data)) {
    return (data as { byteLength: number }).byteLength
  }
  return 0
}
