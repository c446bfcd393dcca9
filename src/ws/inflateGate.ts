import type { Duplex } from 'node:stream'
import type { WebSocket } from 'ws'
import { nowMicros } from '../core/clock.js'
import { timerDelay } from '../core/validate.js'

/** What the connection's guard says of reading, asked before each inflation. */
export interface ReadingState {
  /** The connection is being closed: nothing more is read or inflated. */
  readonly stopped: boolean
  /** The connection is over its message rate: reading waits until it is not. */
  readonly paused: boolean
}

type Inflated = (error: Error | null, data?: Buffer) => void

/** ws' per-connection permessage-deflate extension, as its receiver calls it (one call per data frame). */
interface Deflate {
  decompress(data: Buffer, fin: boolean, callback: Inflated): void
}

interface HeldFrame {
  readonly data: Buffer
  readonly fin: boolean
  readonly callback: Inflated
}

/** The error that ends ws' receiver when a connection stops being read; it reaches no listener of the app. */
export class ReadingStopped extends Error {
  readonly code = 'TOLLBOOTH_WS_READING_STOPPED'

  constructor() {
    super('tollbooth/ws: the connection is being closed; nothing more is read')
    this.name = 'ReadingStopped'
  }
}

/**
 * Meters what permessage-deflate inflates on one connection, before it inflates: a frame of 84 bytes can inflate to
 * 64 KiB, so what the message rate sees after inflation has already cost the server. Each frame reserves
 * `maxMessageBytes` (the most ws lets it inflate to) from a budget of `bytesPerSecond` (a second's worth at once)
 * and gets back what it did not use. A frame the budget cannot hold, or that comes while the connection is over its
 * message rate, waits, and ws' receiver with it: nothing more is read off the socket meanwhile (ws stops reading
 * while a frame inflates). Once the connection is being closed, a frame is not inflated and the receiver ends.
 *
 * It wraps ws' per-connection extension (`_extensions['permessage-deflate']`, the one ws' receiver calls): ws has no
 * public hook before inflation. Without that extension (no deflate negotiated, or a ws that keeps it elsewhere),
 * nothing is inflated through it and the gate does nothing.
 */
export class InflateGate {
  private tokens: number
  private refilledAt = nowMicros()
  private held: HeldFrame | undefined
  private timer: NodeJS.Timeout | undefined
  private readonly capacity: number

  private constructor(
    private readonly deflate: Deflate,
    private readonly inflate: Deflate['decompress'],
    private readonly reading: ReadingState,
    private readonly maxMessageBytes: number,
    private readonly bytesPerSecond: number,
  ) {
    this.capacity = Math.max(bytesPerSecond, maxMessageBytes)
    this.tokens = this.capacity
  }

  /** The gate of `socket`, or undefined when it negotiated no permessage-deflate. */
  static install(
    socket: WebSocket,
    raw: Duplex,
    reading: ReadingState,
    maxMessageBytes: number,
    bytesPerSecond: number,
  ): InflateGate | undefined {
    const extensions = (socket as unknown as { _extensions?: Record<string, Deflate | undefined> })
      ._extensions
    const deflate = extensions?.['permessage-deflate']
    if (deflate === undefined || typeof deflate.decompress !== 'function') return undefined
    const gate = new InflateGate(deflate, deflate.decompress, reading, maxMessageBytes, bytesPerSecond)
    deflate.decompress = (data, fin, callback) => gate.offer({ data, fin, callback })
    // ws waits for its receiver to finish before it emits 'close': a frame held when the socket goes must end it.
    raw.once('close', () => gate.stop())
    return gate
  }

  /** Inflates frames held while the connection was over its rate, now that it is not. */
  wake(): void {
    const held = this.held
    if (held === undefined || this.timer !== undefined) return
    this.held = undefined
    this.offer(held)
  }

  /** Ends the receiver on a held frame; later frames are refused as they come. */
  stop(): void {
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
    const held = this.held
    this.held = undefined
    held?.callback(new ReadingStopped())
  }

  private offer(frame: HeldFrame): void {
    if (this.reading.stopped) {
      frame.callback(new ReadingStopped())
      return
    }
    if (this.reading.paused) {
      this.held = frame
      return
    }
    const waitMs = this.reserve()
    if (waitMs > 0) {
      this.held = frame
      // Waking early (a wait past what a timer honours) reserves again and waits the rest.
      this.timer = setTimeout(() => {
        this.timer = undefined
        this.wake()
      }, timerDelay(waitMs))
      this.timer.unref()
      return
    }
    this.inflate.call(this.deflate, frame.data, frame.fin, (error, data) => {
      // What ws refused past maxPayload was inflated all the same: nothing comes back then.
      if (error === null)
        this.tokens = Math.min(this.capacity, this.tokens + this.maxMessageBytes - (data?.length ?? 0))
      frame.callback(error, data)
    })
  }

  /** Takes `maxMessageBytes` from the budget; 0 when taken, else the milliseconds until it could be. */
  private reserve(): number {
    const now = nowMicros()
    this.tokens = Math.min(this.capacity, this.tokens + ((now - this.refilledAt) / 1e6) * this.bytesPerSecond)
    this.refilledAt = now
    if (this.tokens >= this.maxMessageBytes) {
      this.tokens -= this.maxMessageBytes
      return 0
    }
    return Math.max(1, Math.ceil(((this.maxMessageBytes - this.tokens) / this.bytesPerSecond) * 1000))
  }
}
