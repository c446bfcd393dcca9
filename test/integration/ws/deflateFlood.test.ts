/**
 * A permessage-deflate flood against a real `ws` server with `perMessageDeflate: true` under protectWebSocketServer:
 * a raw TCP client negotiates deflate and writes text frames of 85 bytes that each inflate to 65,535 bytes. What is
 * counted is what the server really inflated (ws' own per-connection inflater, counted from outside), not what
 * reached the app: the point of the flood is the work done before the message rate sees a message.
 *
 * The CPU this costs is measured by `npm run bench:ws-deflate` (docs/benchmarks.md), not here; these tests bound the
 * number of inflations, which a busy machine does not move.
 */
import { deflateRawSync, constants as zlibConstants } from 'node:zlib'
import { afterEach, describe, expect, it } from 'vitest'
import { type WebSocket, WebSocketServer } from 'ws'
import {
  type ProtectWebSocketOptions,
  protectWebSocketServer,
  type WebSocketProtection,
} from '../../../src/ws/index.js'
import {
  clientFrame,
  closeFrameOf,
  type RawWebSocket,
  rawWebSocket,
  serverFrames,
} from '../../helpers/rawWebSocket.js'

const HOST = '127.0.0.1'
const INFLATED = 65_535

const cleanups: (() => unknown)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** A text frame, RSV1 set, whose payload inflates to 65,535 bytes of 'a' (a sync flush, its trailer left out). */
function bombFrame(): Buffer {
  const deflated = deflateRawSync(Buffer.alloc(INFLATED, 0x61), { finishFlush: zlibConstants.Z_SYNC_FLUSH })
  return clientFrame({ opcode: 0x1, rsv: 0x40, payload: deflated.subarray(0, -4) })
}

interface Served {
  readonly port: number
  readonly protection: WebSocketProtection
  /** Inflations ws really ran, over every connection (counted on its inflater, under the protection's gate). */
  inflations: number
  delivered: number
  drops: number
  /** Resolves once `count` inflations have run. */
  waitForInflations(count: number): Promise<void>
}

async function serve(options: ProtectWebSocketOptions): Promise<Served> {
  const wss = new WebSocketServer({ port: 0, host: HOST, perMessageDeflate: true })
  await new Promise((resolve) => wss.once('listening', resolve))
  const waiters: (() => void)[] = []
  const protection = protectWebSocketServer(wss, {
    heartbeatMs: 0,
    onDrop: () => {
      served.drops++
    },
    ...options,
  })
  const served: Served = {
    port: (wss.address() as { port: number }).port,
    protection,
    inflations: 0,
    delivered: 0,
    drops: 0,
    async waitForInflations(count) {
      while (served.inflations < count) await new Promise<void>((resolve) => waiters.push(resolve))
    },
  }
  wss.on('connection', (ws: WebSocket) => {
    ws.on('message', () => {
      served.delivered++
    })
    ws.on('error', () => {})
    // ws' inflater of this connection: every message it inflates goes through `_decompress` once.
    const deflate = (ws as unknown as { _extensions: Record<string, Record<string, unknown>> })._extensions[
      'permessage-deflate'
    ] as { _decompress: (...args: unknown[]) => void }
    const inflate = deflate._decompress
    deflate._decompress = function counted(this: unknown, ...args: unknown[]) {
      served.inflations++
      for (const wake of waiters.splice(0)) wake()
      return inflate.apply(this, args)
    }
  })
  cleanups.push(async () => {
    await protection.close()
    for (const ws of wss.clients) ws.terminate()
    await new Promise((resolve) => wss.close(resolve))
  })
  return served
}

async function deflateClient(port: number): Promise<RawWebSocket> {
  const client = await rawWebSocket(port, HOST, {
    extraHeaders: ['Sec-WebSocket-Extensions: permessage-deflate'],
  })
  cleanups.push(() => client.socket.destroy())
  expect(client.head.toLowerCase()).toContain('sec-websocket-extensions: permessage-deflate')
  return client
}

/** Writes `count` bomb frames, as fast as the socket takes them, without waiting for anything from the server. */
function flood(client: RawWebSocket, count: number): void {
  const frame = bombFrame()
  client.socket.write(Buffer.concat(Array.from({ length: count }, () => frame)))
}

describe('a permessage-deflate flood (frames of 85 bytes inflating to 64 KiB each)', () => {
  it('inflates no more than inflatedBytesPerSecond allows: 4 frames at once, then 4 a second, whatever was sent', async () => {
    // The message rate is out of the way: only the inflation budget holds this flood back.
    const served = await serve({ messagesPerSecond: 10_000, inflatedBytesPerSecond: 4 * 65_536 })
    const client = await deflateClient(served.port)
    const started = performance.now()
    flood(client, 2_000)
    await served.waitForInflations(6)
    const seconds = (performance.now() - started) / 1000
    // Each frame reserves maxMessageBytes (64 KiB) and gets back the 1 byte it did not use.
    expect(served.inflations).toBeLessThanOrEqual(4 + Math.floor(4 * seconds) + 1)
    expect(served.delivered).toBeLessThanOrEqual(served.inflations)
    // The connection is held back, not closed: nothing was dropped.
    expect([served.drops, client.ended()]).toEqual([0, false])
  })

  it('a client that leaves while its frames wait unread is ended by the heartbeat, and its slot freed', async () => {
    // A socket held back is not read: that the peer left (its FIN or reset waits behind the unread frames) is found by
    // the heartbeat, whose missed pong terminates it. The frame waiting for the budget then ends ws' receiver, or ws
    // would wait for it forever before emitting 'close' (and the slot would stay held).
    const served = await serve({
      messagesPerSecond: 10_000,
      inflatedBytesPerSecond: 4 * 65_536,
      heartbeatMs: 1000,
    })
    const client = await deflateClient(served.port)
    flood(client, 2_000)
    await served.waitForInflations(4)
    client.socket.end()
    while (served.protection.openConnections > 0) await new Promise((resolve) => setTimeout(resolve, 5))
    expect(served.inflations).toBeLessThan(2_000)
  })

  it('once closed for the flood, inflates nothing more: no second of grace spent inflating', async () => {
    const limits = { messagesPerSecond: 10, messageBurst: 10, dropsBeforeClose: 5 }
    // The inflation budget out of the way: only the message rate holds this flood back.
    const served = await serve({ ...limits, inflatedBytesPerSecond: 1_000 * 65_536 })
    const client = await deflateClient(served.port)
    const started = performance.now()
    flood(client, 2_000)
    await client.gone
    const seconds = (performance.now() - started) / 1000
    const close = closeFrameOf(serverFrames(client.frameBytes()))
    expect(close?.code).toBe(1013)
    // The burst, then one message a token (a drop holds the inflater until the next token is due), until the fifth
    // drop closes the connection: every inflation gave the app a message or a drop, none ran after the close.
    expect(served.delivered).toBeGreaterThanOrEqual(limits.messageBurst)
    expect(served.delivered).toBeLessThanOrEqual(
      limits.messageBurst + Math.floor(limits.messagesPerSecond * seconds),
    )
    expect(served.drops).toBe(limits.dropsBeforeClose - 1)
    expect(served.inflations).toBe(served.delivered + served.drops + 1)
  })
})

describe('inflatedBytesPerSecond', () => {
  it('is refused below maxMessageBytes (a message must fit) or when not a positive integer, naming the option', () => {
    const wss = new WebSocketServer({ noServer: true })
    for (const [options, message] of [
      [{ inflatedBytesPerSecond: 1000 }, 'at least maxMessageBytes (65536)'],
      [{ maxMessageBytes: 1000, inflatedBytesPerSecond: 999 }, 'at least maxMessageBytes (1000)'],
      [{ inflatedBytesPerSecond: 0 }, 'a positive integer'],
    ] as const) {
      expect(() => protectWebSocketServer(wss, options)).toThrow(
        expect.objectContaining({
          code: 'TOLLBOOTH_ERR_INVALID_OPTION',
          message: expect.stringContaining(
            `protectWebSocketServer: "inflatedBytesPerSecond" must be ${message}`,
          ),
        }),
      )
    }
  })
})
