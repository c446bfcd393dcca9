import net from 'node:net'

/** One HTTP/1.1 response read off a raw socket. */
export interface RawResponse {
  readonly status: number
  /** Header names lowercased. */
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
}

/**
 * A client writing exactly the bytes a test gives it (a head without a body, a chunked body that lies, a body cut
 * in pieces sent at chosen moments), for what fetch and node:http would not send.
 */
export class RawHttpClient {
  readonly socket: net.Socket
  /** The first complete response; rejects if the connection ends before one arrived. */
  readonly response: Promise<RawResponse>
  /** Resolves when the server has closed the connection (or it was reset). */
  readonly closed: Promise<void>
  private received = Buffer.alloc(0)

  private constructor(socket: net.Socket) {
    this.socket = socket
    let resolveResponse: (response: RawResponse) => void = () => {}
    let rejectResponse: (error: Error) => void = () => {}
    this.response = new Promise((resolve, reject) => {
      resolveResponse = resolve
      rejectResponse = reject
    })
    // A reset after the response is how a server may end a connection it stopped reading; not a test failure.
    this.response.catch(() => {})
    this.closed = new Promise((resolve) => socket.once('close', () => resolve()))
    socket.on('error', () => {})
    socket.on('data', (data: Buffer) => {
      this.received = Buffer.concat([this.received, data])
      const parsed = parseResponse(this.received)
      if (parsed !== undefined) resolveResponse(parsed)
    })
    socket.once('close', () => rejectResponse(new Error('connection closed before a complete response')))
  }

  static async connect(port: number): Promise<RawHttpClient> {
    const socket = net.connect(port, '127.0.0.1')
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve)
      socket.once('error', reject)
    })
    return new RawHttpClient(socket)
  }

  /** Writes `data` and resolves once it was handed to the kernel. */
  write(data: string | Buffer): Promise<void> {
    return new Promise((resolve, reject) => {
      this.socket.write(data, (error) => (error ? reject(error) : resolve()))
    })
  }

  destroy(): void {
    this.socket.destroy()
  }
}

/** The head of a request with the given extra header lines. */
export function requestHead(method: string, path: string, headers: Record<string, string | number>): string {
  const lines = [`${method} ${path} HTTP/1.1`, 'Host: 127.0.0.1']
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`)
  return `${lines.join('\r\n')}\r\n\r\n`
}

/** One chunk of a chunked body (`size` bytes of `fill`); `lastChunk()` ends the body. */
export function chunk(size: number, fill = 'a'): string {
  return `${size.toString(16)}\r\n${fill.repeat(size)}\r\n`
}

export function lastChunk(): string {
  return '0\r\n\r\n'
}

function parseResponse(data: Buffer): RawResponse | undefined {
  const headEnd = data.indexOf('\r\n\r\n')
  if (headEnd === -1) return undefined
  const [statusLine = '', ...lines] = data.subarray(0, headEnd).toString('latin1').split('\r\n')
  const status = Number(statusLine.split(' ')[1])
  // Interim answers (100 Continue) are not the response.
  if (status >= 100 && status < 200) return parseResponse(data.subarray(headEnd + 4))
  const headers: Record<string, string> = {}
  for (const line of lines) {
    const colon = line.indexOf(':')
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
  }
  const length = Number(headers['content-length'] ?? 0)
  const body = data.subarray(headEnd + 4)
  if (body.length < length) return undefined
  return { status, headers, body: body.subarray(0, length).toString('utf8') }
}

/**
 * Clients that hang up while the route works: each request on a connection of its own, one after another, and
 * each connection destroyed as soon as the route has its request. The route calls `routeHas(res)` (node's response,
 * or Fastify's `reply.raw`) and answers once it resolves, when nobody reads the answer any more.
 */
export class HangUpTraffic {
  /** Requests that reached the route. */
  reached = 0
  private onReach: (left: Promise<void>) => void = () => {}

  /**
   * Resolves once the client of `res` is gone and what the 'close' listeners registered before the route's (a
   * guard's) started on it has run: on a memory store that settles within the microtasks before setImmediate.
   */
  routeHas(res: { once(event: 'close', listener: () => void): unknown }): Promise<void> {
    this.reached++
    const left = new Promise<void>((resolve) => res.once('close', () => setImmediate(resolve)))
    this.onReach(left)
    return left
  }

  /** Sends `attempts` `GET path` and resolves to the statuses of those answered before reaching the route. */
  async send(port: number, path: string, attempts: number): Promise<number[]> {
    const answered: number[] = []
    for (let i = 0; i < attempts; i++) {
      const client = await RawHttpClient.connect(port)
      const reached = new Promise<{ left: Promise<void> }>((resolve) => {
        this.onReach = (left) => resolve({ left })
      })
      await client.write(requestHead('GET', path, {}))
      const first = await Promise.race([reached, client.response.then(({ status }) => status)])
      client.destroy()
      await client.closed
      if (typeof first === 'number') answered.push(first)
      else await first.left
    }
    return answered
  }
}
