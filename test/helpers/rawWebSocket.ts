/**
 * A raw TCP client that speaks just enough WebSocket to send what a real client never would: it writes the upgrade
 * request itself, then frames built byte by byte (any RSV bits, opcode, mask or announced length), and parses the
 * server's (unmasked) frames, e.g. to read the close code the server sent.
 *
 * Nothing here registers cleanups: callers own the sockets (`socket.destroy()`).
 */
import { randomBytes } from 'node:crypto'
import { connect as netConnect, type Socket } from 'node:net'

export interface RawConnection {
  readonly socket: Socket
  /** Everything received so far (the HTTP response head included). */
  readonly received: () => Buffer
  /** Resolves when the TCP connection is fully closed (by either side), with the time it closed (performance.now()). */
  readonly gone: Promise<number>
  /** Whether the server ended its side (sent FIN) or the connection is gone. */
  readonly ended: () => boolean
}

/**
 * Opens a TCP connection that records everything it receives. With `allowHalfOpen`, the client does not end its own
 * side when the server ends its side (a peer that never completes a close).
 */
export async function rawConnect(
  port: number,
  host: string,
  { allowHalfOpen = false }: { allowHalfOpen?: boolean } = {},
): Promise<RawConnection> {
  const socket = netConnect({ port, host, allowHalfOpen })
  socket.on('error', () => {}) // EPIPE / ECONNRESET once the server ends the connection: expected
  const chunks: Buffer[] = []
  let ended = false
  socket.on('data', (chunk: Buffer) => chunks.push(chunk))
  socket.on('end', () => {
    ended = true
  })
  const gone = new Promise<number>((resolve) =>
    socket.once('close', () => {
      ended = true
      resolve(performance.now())
    }),
  )
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve)
    socket.once('error', reject)
  })
  return { socket, received: () => Buffer.concat(chunks), gone, ended: () => ended || socket.destroyed }
}

/** The lines of a WebSocket upgrade request, without the blank line that ends the head. */
export function upgradeRequestLines(host: string, port: number, extraHeaders: string[] = []): string[] {
  return [
    'GET / HTTP/1.1',
    `Host: ${host}:${port}`,
    'Upgrade: websocket',
    'Connection: Upgrade',
    `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`,
    'Sec-WebSocket-Version: 13',
    ...extraHeaders,
  ]
}

/** Where the HTTP response head ends in `data` (just after its blank line), or -1 while it is incomplete. */
export function responseHeadEnd(data: Buffer): number {
  const at = data.indexOf('\r\n\r\n')
  return at === -1 ? -1 : at + 4
}

export interface RawWebSocket extends RawConnection {
  /** The server's 101 response head. */
  readonly head: string
  /** What the server sent after the 101: its frames, undecoded. */
  readonly frameBytes: () => Buffer
}

/**
 * Connects, does the WebSocket handshake (with `extraHeaders`, e.g. a `Sec-WebSocket-Extensions` offer) and resolves
 * once the 101 is in; rejects on any other answer.
 */
export async function rawWebSocket(
  port: number,
  host: string,
  options: { extraHeaders?: string[]; allowHalfOpen?: boolean } = {},
): Promise<RawWebSocket> {
  const connection = await rawConnect(port, host, options)
  connection.socket.write(`${upgradeRequestLines(host, port, options.extraHeaders).join('\r\n')}\r\n\r\n`)
  const headEnd = await new Promise<number>((resolve, reject) => {
    const check = () => {
      const end = responseHeadEnd(connection.received())
      if (end === -1) return
      connection.socket.off('data', check)
      connection.socket.off('close', closed)
      resolve(end)
    }
    const closed = () => reject(new Error('connection closed during the handshake'))
    connection.socket.on('data', check)
    connection.socket.once('close', closed)
  })
  const head = connection.received().subarray(0, headEnd).toString('latin1')
  if (!head.startsWith('HTTP/1.1 101')) {
    connection.socket.destroy()
    throw new Error(`handshake refused: ${head.split('\r\n')[0]}`)
  }
  return { ...connection, head, frameBytes: () => connection.received().subarray(headEnd) }
}

export interface ClientFrameSpec {
  /** Opcode (0 continuation, 1 text, 2 binary, 8 close, 9 ping, 10 pong, or anything else). */
  readonly opcode: number
  readonly payload?: Buffer
  /** FIN bit. @default true */
  readonly fin?: boolean
  /** RSV1..RSV3 as the bits 0x40, 0x20, 0x10 of the first byte. @default 0 */
  readonly rsv?: number
  /** Mask the payload, as RFC 6455 requires of a client. @default true */
  readonly masked?: boolean
  /**
   * The payload length the header announces, when it is not the payload's own (e.g. a header announcing 1 GiB
   * followed by nothing). Its encoding (7, 16 or 64 bits) follows from it, as for a real length.
   */
  readonly announcedLength?: number
}

/** One client-to-server frame, byte for byte as specified (nothing is checked: hostile frames are the point). */
export function clientFrame({
  opcode,
  payload = Buffer.alloc(0),
  fin = true,
  rsv = 0,
  masked = true,
  announcedLength = payload.length,
}: ClientFrameSpec): Buffer {
  let lengthBytes: Buffer
  if (announcedLength < 126) {
    lengthBytes = Buffer.from([announcedLength])
  } else if (announcedLength <= 0xffff) {
    lengthBytes = Buffer.alloc(3)
    lengthBytes[0] = 126
    lengthBytes.writeUInt16BE(announcedLength, 1)
  } else {
    lengthBytes = Buffer.alloc(9)
    lengthBytes[0] = 127
    lengthBytes.writeBigUInt64BE(BigInt(announcedLength), 1)
  }
  lengthBytes[0] = (lengthBytes[0] as number) | (masked ? 0x80 : 0)
  const first = Buffer.from([(fin ? 0x80 : 0) | (rsv & 0x70) | (opcode & 0x0f)])
  if (!masked) return Buffer.concat([first, lengthBytes, payload])
  const mask = randomBytes(4)
  const body = Buffer.alloc(payload.length)
  for (let i = 0; i < payload.length; i++) body[i] = (payload[i] as number) ^ (mask[i % 4] as number)
  return Buffer.concat([first, lengthBytes, mask, body])
}

export interface ServerFrame {
  readonly fin: boolean
  readonly opcode: number
  readonly payload: Buffer
}

/** Splits what a server sent (unmasked frames) into complete frames; an incomplete last frame is left out. */
export function serverFrames(data: Buffer): ServerFrame[] {
  const frames: ServerFrame[] = []
  let at = 0
  while (at + 2 <= data.length) {
    const first = data[at] as number
    let length = (data[at + 1] as number) & 0x7f
    let start = at + 2
    if (length === 126) {
      if (start + 2 > data.length) break
      length = data.readUInt16BE(start)
      start += 2
    } else if (length === 127) {
      if (start + 8 > data.length) break
      length = Number(data.readBigUInt64BE(start))
      start += 8
    }
    if (start + length > data.length) break
    frames.push({
      fin: (first & 0x80) !== 0,
      opcode: first & 0x0f,
      payload: data.subarray(start, start + length),
    })
    at = start + length
  }
  return frames
}

/** The server's close frame among `frames`, decoded; `undefined` if it sent none (yet). */
export function closeFrameOf(frames: ServerFrame[]): { code: number; reason: string } | undefined {
  const close = frames.find((frame) => frame.opcode === 0x8)
  if (close === undefined) return undefined
  if (close.payload.length < 2) return { code: 1005, reason: '' }
  return { code: close.payload.readUInt16BE(0), reason: close.payload.subarray(2).toString('utf8') }
}
