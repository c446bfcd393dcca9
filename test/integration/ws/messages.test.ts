/**
 * Per-message protection of a real `ws` server (src/ws/protect.ts, src/ws/messageGuard.ts): message rate with its
 * graduated close (1013, then 1008 for abuse), onDrop replies, the 1009 size cap, the outbound buffer cap against
 * clients that do not read (app sends and ping floods), the heartbeat, and graphql-ws (subscription cap, rekey).
 *
 * Every server listens on 127.0.0.1 port 0 and every client is a real one: a `ws` WebSocket, a graphql-ws client,
 * or, where a client must stop reading, a raw TCP socket that does the handshake and writes masked frames itself.
 */
import { once } from 'node:events'
import type { Socket } from 'node:net'
import { setTimeout as sleep, setImmediate as tick } from 'node:timers/promises'
import { GraphQLInt, GraphQLObjectType, GraphQLSchema, GraphQLString } from 'graphql'
import { type Client, createClient } from 'graphql-ws'
import { useServer } from 'graphql-ws/use/ws'
import { Redis } from 'ioredis'
import { afterEach, describe, expect, it } from 'vitest'
import { type ClientOptions, type RawData, type ServerOptions, WebSocket, WebSocketServer } from 'ws'
import { RedisStore } from '../../../src/core/stores/redisStore.js'
import {
  type ProtectWebSocketOptions,
  protectWebSocketServer,
  type WebSocketProtection,
} from '../../../src/ws/index.js'
import { clientFrame, type RawWebSocket, rawWebSocket, serverFrames } from '../../helpers/rawWebSocket.js'
import { startRedis } from '../../helpers/redisServer.js'
import { limiterClientOptions, whenReady } from '../../helpers/stores.js'

const HOST = '127.0.0.1'
const KiB = 1024
const MiB = 1024 * KiB

// ---------------------------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------------------------

const cleanups: (() => unknown)[] = []

/** ws 8.23's server options, with the two that @types/ws 8.18 does not know yet. */
type WsServerOptions = ServerOptions & { maxPendingAutoPongs?: number; closeTimeout?: number }

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

interface Served {
  readonly wss: WebSocketServer
  readonly protection: WebSocketProtection
  readonly port: number
  readonly url: string
  /** Server-side sockets, in the order of their 'connection' event. */
  readonly sockets: WebSocket[]
  /** What the app's own 'message' listener saw, with the time it saw it (performance.now()). */
  readonly messages: { data: RawData; at: number }[]
  /** 'error' events of server-side sockets (an app must listen for them: ws emits one e.g. before a 1009 close). */
  readonly errors: (Error & { code?: string })[]
  /** Resolves with the next server-side socket. */
  nextConnection(): Promise<WebSocket>
}

/**
 * A protected `ws` server whose app counts every message its own 'message' listener gets. `setup` runs before the
 * protection is installed (graphql-ws registers its listeners there, as an app would).
 */
async function serve(
  protect: ProtectWebSocketOptions,
  serverOptions: WsServerOptions = {},
  setup?: (wss: WebSocketServer, protection: () => WebSocketProtection) => void,
): Promise<Served> {
  const wss = new WebSocketServer({ ...serverOptions, port: 0, host: HOST })
  await new Promise((resolve) => wss.once('listening', resolve))
  let protection: WebSocketProtection | undefined
  setup?.(wss, () => protection as WebSocketProtection)
  protection = protectWebSocketServer(wss, protect)
  const port = (wss.address() as { port: number }).port
  const sockets: WebSocket[] = []
  const messages: Served['messages'] = []
  const errors: Served['errors'] = []
  const waiters: ((ws: WebSocket) => void)[] = []
  wss.on('connection', (ws) => {
    sockets.push(ws)
    ws.on('message', (data) => messages.push({ data, at: performance.now() }))
    ws.on('error', (error) => errors.push(error))
    waiters.shift()?.(ws)
  })
  const active = protection
  cleanups.push(async () => {
    await active.close()
    for (const ws of wss.clients) ws.terminate()
    await new Promise((resolve) => wss.close(resolve))
  })
  return {
    wss,
    protection: active,
    port,
    url: `ws://${HOST}:${port}`,
    sockets,
    messages,
    errors,
    nextConnection: () => new Promise((resolve) => waiters.push(resolve)),
  }
}

interface TestClient {
  readonly ws: WebSocket
  /** The close code and reason this client saw; registered before the socket opened, so never missed. */
  readonly closed: Promise<{ code: number; reason: string }>
  /** Text messages the client received. */
  readonly received: string[]
}

async function open(url: string, options?: ClientOptions, protocol?: string): Promise<TestClient> {
  const ws = protocol === undefined ? new WebSocket(url, options) : new WebSocket(url, protocol, options)
  ws.on('error', () => {}) // an abrupt end (1006) may come with an error; 'close' is what the tests read
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })),
  )
  const received: string[] = []
  ws.on('message', (data) => received.push(data.toString()))
  cleanups.push(() => ws.terminate())
  await new Promise<void>((resolve, reject) => {
    ws.once('open', resolve)
    ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)))
    ws.once('close', () => reject(new Error('closed before open')))
  })
  return { ws, closed, received }
}

async function waitFor(what: string, condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = performance.now() + timeoutMs
  while (!condition()) {
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await sleep(5)
  }
}

function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  return Promise.race([
    promise,
    sleep(ms).then(() => {
      throw new Error(`${what}: nothing within ${ms} ms`)
    }),
  ])
}

/**
 * A raw TCP WebSocket client (test/helpers/rawWebSocket.ts): does the handshake, then stops reading (paused, so the
 * kernel buffers fill and TCP flow control holds the server back, as with a peer that never reads), and writes
 * whatever frames it is given. Destroyed after the test.
 */
async function rawClient(port: number): Promise<RawWebSocket> {
  const client = await rawWebSocket(port, HOST)
  cleanups.push(() => client.socket.destroy())
  client.socket.pause() // from here on, nothing is read
  return client
}

const PING_PAYLOAD = 125 // the largest control frame payload
const PONG_FRAME_BYTES = 2 + PING_PAYLOAD // a server frame is not masked

/**
 * Writes pings as fast as the connection takes them (waiting for 'drain', never queueing more than one chunk in
 * our own process), until the server ends the connection or `maxBytes` or `maxMs` is reached. Yields to the event
 * loop between writes: the server under test runs in this same process.
 */
async function pingFlood(client: RawWebSocket, maxBytes: number, maxMs: number): Promise<number> {
  const ping = clientFrame({ opcode: 0x9, payload: Buffer.alloc(PING_PAYLOAD, 0x70) })
  const chunk = Buffer.concat(Array.from({ length: 512 }, () => ping))
  const { socket } = client
  const deadline = performance.now() + maxMs
  let sent = 0
  while (sent < maxBytes && performance.now() < deadline && !socket.destroyed) {
    const flushed = socket.write(chunk)
    sent += chunk.length
    if (flushed) {
      await tick()
      continue
    }
    await new Promise<void>((resolve) => {
      const done = () => {
        socket.off('drain', done)
        socket.off('close', done)
        clearTimeout(timer)
        resolve()
      }
      const timer = setTimeout(done, 200)
      socket.once('drain', done)
      socket.once('close', done)
    })
  }
  return sent
}

/** Samples a server-side socket's bufferedAmount after ws has handled each chunk it read (our 'data' listener
 * runs after ws' own), while the connection is open. */
function watchBufferedAmount(ws: WebSocket): { max: number } {
  const watch = { max: 0 }
  const sample = () => {
    if (ws.readyState === WebSocket.OPEN) watch.max = Math.max(watch.max, ws.bufferedAmount)
  }
  ;(ws as unknown as { _socket: Socket })._socket.on('data', sample)
  ws.on('ping', sample)
  return watch
}

// ---------------------------------------------------------------------------------------------------------------
// 1, 2. Message rate, graduated close, onDrop
// ---------------------------------------------------------------------------------------------------------------

describe('message rate per connection (messagesPerSecond 10, messageBurst 10, dropsBeforeClose 5)', () => {
  const limits = { messagesPerSecond: 10, messageBurst: 10, dropsBeforeClose: 5, heartbeatMs: 0 }

  /**
   * GCRA from the first message: by the time t (s) after it, at most burst + rate · t messages may have passed.
   * Checked for every admitted message, on the app listener's own clock (1 ms slack for the two clocks).
   */
  function expectWithinBucket(messages: Served['messages']): void {
    const first = messages[0]?.at ?? 0
    messages.forEach(({ at }, i) => {
      const allowed = limits.messageBurst + Math.floor(((at - first + 1) / 1000) * limits.messagesPerSecond)
      expect(i + 1, `message ${i + 1} at +${(at - first).toFixed(1)} ms`).toBeLessThanOrEqual(allowed)
    })
  }

  it('delivers a burst of exactly messageBurst messages, drops nothing and keeps the connection', async () => {
    const drops: number[] = []
    const server = await serve({ ...limits, onDrop: (_ws, info) => drops.push(info.retryAfterMs) })
    const client = await open(server.url)
    for (let i = 0; i < 10; i++) client.ws.send(`m${i}`)
    await waitFor('10 messages at the app', () => server.messages.length >= 10)
    await sleep(150)
    expect(server.messages.map((m) => m.data.toString())).toEqual(
      Array.from({ length: 10 }, (_, i) => `m${i}`),
    )
    expect(drops).toEqual([])
    expect(client.ws.readyState).toBe(WebSocket.OPEN)
    expect(server.protection.openConnections).toBe(1)
  })

  it('drops over the rate, then closes a client that keeps on with 1013 "rate limited"', async () => {
    const drops: number[] = []
    const server = await serve({ ...limits, onDrop: (_ws, info) => drops.push(info.retryAfterMs) })
    const client = await open(server.url)
    // 30/s: 3× the rate, well under abuse (10×). The bucket of 10 runs dry after ~0.5 s, then 20 drops/s.
    let sent = 0
    const started = performance.now()
    const timer = setInterval(() => {
      if (client.ws.readyState !== WebSocket.OPEN || performance.now() - started > 3_000) return
      client.ws.send(`m${sent++}`)
    }, 1000 / 30)
    cleanups.push(() => clearInterval(timer))
    const closed = await within(client.closed, 5_000, 'close of the too-fast client')
    clearInterval(timer)

    expect(closed).toEqual({ code: 1013, reason: 'rate limited' })
    const delivered = server.messages.length
    expect(delivered).toBeGreaterThanOrEqual(10)
    expect(delivered).toBeLessThan(sent)
    // onDrop for every drop but the one that closes (dropsBeforeClose 5): at least 4.
    expect(drops.length).toBeGreaterThanOrEqual(limits.dropsBeforeClose - 1)
    expect(delivered + drops.length + 1).toBeLessThanOrEqual(sent)
    expectWithinBucket(server.messages)
    await waitFor('the slot to be released', () => server.protection.openConnections === 0)
  })

  it('closes a flood (2,000 messages at once) with 1008 "message rate abuse" after exactly 10 delivered', async () => {
    const drops: number[] = []
    const server = await serve({ ...limits, onDrop: (_ws, info) => drops.push(info.retryAfterMs) })
    const client = await open(server.url)
    for (let i = 0; i < 2_000; i++) client.ws.send(`m${i}`)
    const closed = await within(client.closed, 5_000, 'close of the flooding client')

    expect(closed).toEqual({ code: 1008, reason: 'message rate abuse' })
    // The 10 of the burst, in order; then drops 11–14 reach onDrop and the 15th closes: nothing after.
    expect(server.messages.map((m) => m.data.toString())).toEqual(
      Array.from({ length: 10 }, (_, i) => `m${i}`),
    )
    expect(drops).toHaveLength(limits.dropsBeforeClose - 1)
    expectWithinBucket(server.messages)
    await waitFor('the slot to be released', () => server.protection.openConnections === 0)
  })

  it('lets onDrop answer the client (an error reply with retryAfterMs)', async () => {
    const server = await serve({
      ...limits,
      onDrop: (ws, { retryAfterMs }) => ws.send(JSON.stringify({ error: 'rate limited', retryAfterMs })),
    })
    const client = await open(server.url)
    for (let i = 0; i < 12; i++) client.ws.send(`m${i}`)
    await waitFor('two replies', () => client.received.length >= 2)
    await sleep(100)

    expect(server.messages).toHaveLength(10)
    const replies = client.received.map((text) => JSON.parse(text) as { error: string; retryAfterMs: number })
    expect(replies).toHaveLength(2)
    for (const reply of replies) {
      expect(reply.error).toBe('rate limited')
      // The bucket is empty: the next token comes after one emission interval (100 ms), less the time spent.
      expect(reply.retryAfterMs).toBeGreaterThan(0)
      expect(reply.retryAfterMs).toBeLessThanOrEqual(100)
    }
    expect(client.ws.readyState).toBe(WebSocket.OPEN) // 2 drops < dropsBeforeClose
  })
})

// ---------------------------------------------------------------------------------------------------------------
// 3. Message size
// ---------------------------------------------------------------------------------------------------------------

describe('message size (maxMessageBytes)', () => {
  it('passes a message of exactly maxMessageBytes and closes a larger one with 1009 before the app sees it', async () => {
    const server = await serve({ maxMessageBytes: 1024, heartbeatMs: 0 })
    expect(server.wss.options.maxPayload).toBe(1024)
    const client = await open(server.url)
    client.ws.send(Buffer.alloc(1024, 0x61))
    await waitFor('the 1 KiB message', () => server.messages.length === 1)
    client.ws.send(Buffer.alloc(2 * 1024, 0x62))
    const closed = await within(client.closed, 5_000, 'close after the 2 KiB message')

    expect(closed.code).toBe(1009)
    expect(server.messages).toHaveLength(1)
    expect((server.messages[0]?.data as Buffer | undefined)?.length).toBe(1024)
    expect(server.errors.map((e) => e.code)).toEqual(['WS_ERR_UNSUPPORTED_MESSAGE_LENGTH'])
    await waitFor('the slot to be released', () => server.protection.openConnections === 0)
  })

  it("keeps the app's own smaller maxPayload", async () => {
    const server = await serve({ maxMessageBytes: 1024, heartbeatMs: 0 }, { maxPayload: 512 })
    expect(server.wss.options.maxPayload).toBe(512)
    const client = await open(server.url)
    client.ws.send(Buffer.alloc(512, 0x61))
    await waitFor('the 512 B message', () => server.messages.length === 1)
    client.ws.send(Buffer.alloc(1024, 0x62)) // within maxMessageBytes, over the app's maxPayload
    const closed = await within(client.closed, 5_000, 'close after the 1 KiB message')

    expect(closed.code).toBe(1009)
    expect(server.messages).toHaveLength(1)
  })
})

// ---------------------------------------------------------------------------------------------------------------
// 4. Clients that do not read: the outbound buffer cap
// ---------------------------------------------------------------------------------------------------------------

describe('clients that do not read (maxBufferedBytes)', () => {
  it('terminates a non-reading client the app keeps sending to, with bufferedAmount bounded', async () => {
    const maxBufferedBytes = 64 * KiB
    const frame = 16 * KiB
    const server = await serve({ maxBufferedBytes, heartbeatMs: 0 })
    const connection = server.nextConnection()
    const client = await rawClient(server.port)
    const ws = await connection
    const serverClosed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)))

    // Loopback TCP buffers absorb several MiB of a non-reader's data before ws queues anything (about 4 MiB here),
    // so the app sends up to 32 MiB, 16 KiB a message, yielding between messages as a real app's sends would.
    const chunk = Buffer.alloc(frame, 0x61)
    let accepted = 0
    let maxBuffered = 0
    let sendErrors = 0
    while (ws.readyState === WebSocket.OPEN && accepted < 32 * MiB) {
      ws.send(chunk, (error) => {
        if (error) sendErrors++
      })
      if (ws.readyState === WebSocket.OPEN) maxBuffered = Math.max(maxBuffered, ws.bufferedAmount)
      accepted += frame
      if (accepted % (256 * KiB) === 0) await tick()
    }

    expect(ws.readyState, `still open after ${accepted} bytes`).not.toBe(WebSocket.OPEN)
    expect(accepted).toBeLessThan(32 * MiB)
    // The cap is checked after each send: it may be passed by at most the one message that crossed it.
    expect(maxBuffered).toBeGreaterThan(0)
    expect(maxBuffered).toBeLessThanOrEqual(maxBufferedBytes + frame + 4)
    expect(await within(serverClosed, 5_000, 'server-side close')).toBe(1006) // terminate(): no close frame
    await waitFor('the slot to be released', () => server.protection.openConnections === 0)
    // The client, once it reads again, finds the connection ended.
    client.socket.resume()
    await within(client.gone, 5_000, 'end of the raw client')
    // The app hears of it: the sends still queued when the connection was ended report an error.
    expect(sendErrors).toBeGreaterThan(0)
  })

  it('with ws defaults, a ping burst is ended by ws itself (maxPendingAutoPongs 60); the slot is released', async () => {
    // ws 8.23 terminates a peer with more than 60 auto-pongs not yet written: 512 pings in one TCP read do that,
    // before the kernel buffers even fill. Not our code, but the protection must still release the slot.
    const server = await serve({ messagesPerSecond: 1e6, messageBurst: 1e6, heartbeatMs: 0 })
    const connection = server.nextConnection()
    const client = await rawClient(server.port)
    const ws = await connection
    const watch = watchBufferedAmount(ws)
    const serverClosed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)))

    const sent = await pingFlood(client, 64 * MiB, 10_000)

    expect(await within(serverClosed, 5_000, 'server-side close')).toBe(1006)
    await within(client.gone, 5_000, 'end of the raw client')
    expect(sent).toBeLessThan(1 * MiB)
    expect(watch.max).toBeLessThanOrEqual(60 * PONG_FRAME_BYTES)
    await waitFor('the slot to be released', () => server.protection.openConnections === 0)
  })

  it('ends a ping flood with our cap alone (ws maxPendingAutoPongs off): bufferedAmount ≤ cap + one pong, memory flat', async () => {
    const maxBufferedBytes = 16 * KiB
    const server = await serve(
      { maxBufferedBytes, messagesPerSecond: 1e6, messageBurst: 1e6, heartbeatMs: 0 },
      { maxPendingAutoPongs: 0 },
    )
    const connection = server.nextConnection()
    const client = await rawClient(server.port)
    const ws = await connection
    const watch = watchBufferedAmount(ws)
    const serverClosed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)))
    const before = process.memoryUsage()

    const sent = await pingFlood(client, 64 * MiB, 10_000)

    const after = process.memoryUsage()
    expect(await within(serverClosed, 5_000, 'server-side close')).toBe(1006)
    await within(client.gone, 5_000, 'end of the raw client')
    expect(sent).toBeLessThan(64 * MiB)
    expect(watch.max).toBeGreaterThan(0) // the kernel buffers did fill: the cap is what ended it
    expect(watch.max).toBeLessThanOrEqual(maxBufferedBytes + PONG_FRAME_BYTES)
    // Both ends live in this process; neither queues more than a chunk, so memory does not follow the flood.
    expect(after.heapUsed - before.heapUsed, `heapUsed ${before.heapUsed} → ${after.heapUsed}`).toBeLessThan(
      32 * MiB,
    )
    expect(after.rss - before.rss, `rss ${before.rss} → ${after.rss}`).toBeLessThan(64 * MiB)
    await waitFor('the slot to be released', () => server.protection.openConnections === 0)
  })

  it('control: without the protection (and ws maxPendingAutoPongs off) the same flood piles up pongs', async () => {
    const wss = new WebSocketServer({ port: 0, host: HOST, maxPendingAutoPongs: 0 } as WsServerOptions)
    await new Promise((resolve) => wss.once('listening', resolve))
    cleanups.push(async () => {
      for (const ws of wss.clients) ws.terminate()
      await new Promise((resolve) => wss.close(resolve))
    })
    const connection = new Promise<WebSocket>((resolve) => wss.once('connection', resolve))
    const client = await rawClient((wss.address() as { port: number }).port)
    const watch = watchBufferedAmount(await connection)

    await pingFlood(client, 12 * MiB, 10_000)

    // Nothing ends it: the queued pongs grow far past what the protected server allowed.
    expect(watch.max).toBeGreaterThan(1 * MiB)
  })

  it('closes a ping flood under ordinary message limits with 1008 and sends no pong after; ws closeTimeout ends it', async () => {
    // Pings count as messages (default burst 50, 20 drops before close). ws' own pong cap is off, to see ours.
    const closeTimeout = 1_000
    const server = await serve(
      { messagesPerSecond: 50, heartbeatMs: 0 },
      { maxPendingAutoPongs: 0, closeTimeout },
    )
    const connection = server.nextConnection()
    const client = await rawClient(server.port)
    const ws = await connection
    const pings: number[] = []
    ws.on('ping', () => pings.push(1))
    const serverClosed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)))

    // 200 pings in one write, then nothing: the server reads them all, so its later end is a FIN, not a reset,
    // and what it sent stays readable.
    const ping = clientFrame({ opcode: 0x9, payload: Buffer.alloc(PING_PAYLOAD, 0x70) })
    const startedAt = performance.now()
    client.socket.write(Buffer.concat(Array.from({ length: 200 }, () => ping)))
    await waitFor('the 50 pings of the burst at the app', () => pings.length >= 50)

    // The non-reader never answers the close frame: ws waits closeTimeout, then destroys the socket.
    expect(await within(serverClosed, closeTimeout + 2_000, 'server-side close')).toBe(1006)
    const heldMs = performance.now() - startedAt
    expect(heldMs).toBeGreaterThanOrEqual(closeTimeout - 50)
    expect(pings).toHaveLength(50) // the burst; every later ping was dropped before the app
    await waitFor('the slot to be released', () => server.protection.openConnections === 0)

    // What the client finds once it reads: a pong per ping up to the closing one (50 admitted + 20 dropped),
    // then the 1008 close frame, then the end of the connection.
    const received: Buffer[] = []
    client.socket.on('data', (chunk: Buffer) => received.push(chunk))
    client.socket.resume()
    await within(client.gone, 5_000, 'end of the raw client')
    const frames = serverFrames(Buffer.concat(received))
    const pongs = frames.filter((f) => f.opcode === 0xa)
    const closes = frames.filter((f) => f.opcode === 0x8)
    expect(pongs).toHaveLength(70)
    expect(closes).toHaveLength(1)
    expect(closes[0]?.payload.readUInt16BE(0)).toBe(1008)
    expect(closes[0]?.payload.subarray(2).toString()).toBe('message rate abuse')
    expect(frames.at(-1)?.opcode).toBe(0x8) // nothing after the close frame
  })
})

// ---------------------------------------------------------------------------------------------------------------
// 5. Heartbeat
// ---------------------------------------------------------------------------------------------------------------

describe('heartbeat (heartbeatMs 200)', () => {
  it('terminates a client that never answers pings within about two intervals and releases its slot', async () => {
    const server = await serve({ heartbeatMs: 200 })
    const connection = server.nextConnection()
    const client = await open(server.url, { autoPong: false })
    const ws = await connection
    const openedAt = performance.now()
    const serverClosed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)))
    const pings: number[] = []
    client.ws.on('ping', () => pings.push(performance.now() - openedAt))

    expect(await within(serverClosed, 2_000, 'termination of the silent client')).toBe(1006)
    const elapsed = performance.now() - openedAt
    // The timer is server-wide: one tick marks it and pings, the next terminates it.
    expect(elapsed).toBeGreaterThan(150)
    expect(elapsed).toBeLessThan(2 * 200 + 150)
    expect(pings.length).toBeGreaterThanOrEqual(1)
    expect((await within(client.closed, 2_000, 'client-side close')).code).toBe(1006)
    await waitFor('the slot to be released', () => server.protection.openConnections === 0)
  })

  it('keeps a client that answers pings connected across several intervals', async () => {
    const server = await serve({ heartbeatMs: 200 })
    const client = await open(server.url)
    let pings = 0
    client.ws.on('ping', () => pings++)
    await sleep(1_100)
    expect(pings).toBeGreaterThanOrEqual(4)
    expect(client.ws.readyState).toBe(WebSocket.OPEN)
    expect(server.protection.openConnections).toBe(1)
  })
})

// ---------------------------------------------------------------------------------------------------------------
// 6, 7. graphql-ws
// ---------------------------------------------------------------------------------------------------------------

/** Subscriptions running on the server right now (their generators), and the most there ever were at once. */
interface Running {
  now: number
  max: number
}

function makeSchema(running: Running = { now: 0, max: 0 }) {
  return new GraphQLSchema({
    query: new GraphQLObjectType({
      name: 'Query',
      fields: { hello: { type: GraphQLString, resolve: () => 'world' } },
    }),
    subscription: new GraphQLObjectType({
      name: 'Subscription',
      fields: {
        count: {
          type: GraphQLInt,
          args: { to: { type: GraphQLInt } },
          async *subscribe(_source: unknown, args: { to?: number | null }) {
            running.now++
            running.max = Math.max(running.max, running.now)
            try {
              for (let i = 1; args.to == null || i <= args.to; i++) {
                yield { count: i }
                await sleep(20)
              }
            } finally {
              running.now--
            }
          },
        },
      },
    }),
  })
}

const schema = makeSchema()

interface Operation {
  readonly results: unknown[]
  /** The first result. */
  readonly first: Promise<unknown>
  /** Resolves with what the sink's error got, or `undefined` on completion. */
  readonly ended: Promise<unknown>
  readonly unsubscribe: () => void
}

function operation(client: Client, query: string): Operation {
  const results: unknown[] = []
  let onFirst: (value: unknown) => void = () => {}
  const first = new Promise<unknown>((resolve) => {
    onFirst = resolve
  })
  let unsubscribe: () => void = () => {}
  const ended = new Promise<unknown>((resolve) => {
    unsubscribe = client.subscribe(
      { query },
      {
        next: (result) => {
          results.push(result)
          if (results.length === 1) onFirst(result)
        },
        error: (error) => resolve(error),
        complete: () => resolve(undefined),
      },
    )
  })
  return { results, first, ended, unsubscribe }
}

interface GraphqlClient {
  readonly client: Client
  readonly closes: { code: number; reason: string }[]
}

/** A graphql-ws client that connects at once and stays connected while idle (`lazy: false`), never retrying. */
function graphqlClient(url: string, connectionParams?: Record<string, unknown>): GraphqlClient {
  const closes: GraphqlClient['closes'] = []
  const client = createClient({
    url,
    webSocketImpl: WebSocket,
    retryAttempts: 0,
    lazy: false,
    onNonLazyError: () => {}, // a refused connection is asserted through `closes` and the operation's error
    ...(connectionParams ? { connectionParams } : {}),
    on: {
      closed: (event) => {
        const { code, reason } = event as { code: number; reason: string }
        closes.push({ code, reason })
      },
    },
  })
  cleanups.push(() => client.dispose())
  return { client, closes }
}

describe('graphql-ws', () => {
  it('caps subscriptions per connection: the third gets TOO_MANY_SUBSCRIPTIONS, the connection stays', async () => {
    let subscribes = 0
    const server = await serve({ maxSubscriptionsPerConnection: 2, heartbeatMs: 0 }, {}, (wss) => {
      useServer(
        {
          schema,
          onSubscribe: () => {
            subscribes++
          },
        },
        wss,
      )
    })
    const { client, closes } = graphqlClient(server.url)

    const a = operation(client, 'subscription { count }')
    const b = operation(client, 'subscription { count }')
    await within(Promise.all([a.first, b.first]), 5_000, 'first results of two subscriptions')
    const c = operation(client, 'subscription { count }')
    const error = await within(c.ended, 5_000, 'answer to the third subscription')

    expect(Array.isArray(error)).toBe(true)
    const [first] = error as { message: string; extensions?: { code?: string } }[]
    expect(first?.extensions?.code).toBe('TOO_MANY_SUBSCRIPTIONS')
    expect(c.results).toEqual([])
    // 7: graphql-ws itself never saw the refused subscribe.
    expect(subscribes).toBe(2)
    // The connection stays, and so do the two subscriptions.
    const seen = a.results.length
    await waitFor('more results of the first subscription', () => a.results.length > seen + 2)
    expect(closes).toEqual([])
    expect(server.protection.openConnections).toBe(1)
    expect(server.wss.clients.size).toBe(1)

    // Completing one (client → server 'complete') frees its place.
    a.unsubscribe()
    const d = operation(client, 'subscription { count(to: 2) }')
    expect(await within(d.ended, 5_000, 'end of the fourth subscription')).toBeUndefined()
    expect(d.results).toEqual([{ data: { count: 1 } }, { data: { count: 2 } }])
    expect(subscribes).toBe(3)
    // That one completed on the server side (server → client 'complete'): its place is free again too.
    const hello = operation(client, '{ hello }')
    expect(await within(hello.ended, 5_000, 'end of the query')).toBeUndefined()
    expect(hello.results).toEqual([{ data: { hello: 'world' } }])
    expect(subscribes).toBe(4)
    expect(closes).toEqual([])
    b.unsubscribe()
  })

  it('rekey in onConnect moves the slot to the user: one connection per user, from one IP', async () => {
    let rejected = 0
    const server = await serve({ maxConnectionsPerIdentity: 1, heartbeatMs: 0 }, {}, (wss, protection) => {
      useServer(
        {
          schema,
          onConnect: async (ctx) => {
            const user = ctx.connectionParams?.user
            if (typeof user !== 'string') return false
            const lease = await protection().rekey(ctx.extra.socket, user)
            if (!lease.allowed) rejected++
            return lease.allowed
          },
        },
        wss,
      )
    })
    const hello = async (client: Client) => {
      const op = operation(client, '{ hello }')
      await within(op.ended, 5_000, 'hello')
      return op.results
    }

    // Both from 127.0.0.1, one IP slot: the second only gets in because rekey gave the first one's IP slot back.
    const alice = graphqlClient(server.url, { user: 'alice' })
    expect(await hello(alice.client)).toEqual([{ data: { hello: 'world' } }])
    const bob = graphqlClient(server.url, { user: 'bob' })
    expect(await hello(bob.client)).toEqual([{ data: { hello: 'world' } }])
    expect(new Set(server.sockets.map((ws) => server.protection.identityOf(ws)))).toEqual(
      new Set(['alice', 'bob']),
    )
    expect(server.protection.openConnections).toBe(2)

    // A second connection of alice: admitted on the (free) IP slot, refused by rekey → graphql-ws 4403.
    const alice2 = graphqlClient(server.url, { user: 'alice' })
    const refused = operation(alice2.client, '{ hello }')
    const error = await within(refused.ended, 5_000, 'refusal of the second alice')
    expect((error as { code?: number }).code).toBe(4403)
    expect(alice2.closes).toEqual([{ code: 4403, reason: 'Forbidden' }])
    expect(rejected).toBe(1)
    // Its IP slot is given back on close: another user still gets in.
    await waitFor('the refused connection to be gone', () => server.protection.openConnections === 2)
    const carol = graphqlClient(server.url, { user: 'carol' })
    expect(await hello(carol.client)).toEqual([{ data: { hello: 'world' } }])
    // alice and bob were never disturbed.
    expect(alice.closes).toEqual([])
    expect(bob.closes).toEqual([])
  })

  /**
   * A client speaking the graphql-transport-ws protocol by hand, to send what a well-behaved client would not.
   * Resolves once the connection is acknowledged.
   */
  async function protocolClient(url: string) {
    const client = await open(url, {}, 'graphql-transport-ws')
    const messages = () => client.received.map((text) => JSON.parse(text) as { type: string; id?: string })
    client.ws.send(JSON.stringify({ type: 'connection_init' }))
    await waitFor('connection_ack', () => messages().some((m) => m.type === 'connection_ack'))
    const subscribe = (id: string) =>
      client.ws.send(JSON.stringify({ type: 'subscribe', id, payload: { query: 'subscription { count }' } }))
    /** How many messages of this type and id arrived. */
    const count = (type: string | undefined, id: string) =>
      messages().filter((m) => (type === undefined || m.type === type) && m.id === id).length
    /** Resolves on the message that makes `count(type, id)` exceed `seen` (the server's answer to what was sent). */
    const answered = (what: string, type: string | undefined, id: string, seen: number) => {
      const arrived = new Promise<void>((resolve) => {
        const check = () => {
          if (count(type, id) <= seen) return
          client.ws.off('message', check)
          resolve()
        }
        client.ws.on('message', check)
        check()
      })
      return within(arrived, 5_000, what)
    }
    return { ...client, messages, subscribe, count, answered }
  }

  it('a subscribe that reuses an active id does not free a place under the cap', async () => {
    const running: Running = { now: 0, max: 0 }
    const server = await serve({ maxSubscriptionsPerConnection: 2, heartbeatMs: 0 }, {}, (wss) => {
      useServer({ schema: makeSchema(running) }, wss)
    })
    const client = await protocolClient(server.url)
    client.subscribe('a')
    client.subscribe('b')
    await waitFor('two running subscriptions', () => running.now === 2)

    // At the cap, a subscribe with the id of a running one, and a new id right behind it. The guard leaves the
    // reused id to graphql-ws, which closes the connection for it (4409); had the guard refused it with an `error`
    // of its own, that error would read as the end of the running one and free a place for the new id.
    client.subscribe('b')
    client.subscribe('c')
    expect(await within(client.closed, 5_000, 'the close for the reused id')).toEqual({
      code: 4409,
      reason: 'Subscriber for b already exists',
    })
    expect(client.count(undefined, 'c')).toBe(0)
    expect(running.max, `subscriptions running at once (cap 2); now ${running.now}`).toBe(2)
  })

  it('a subscribe whose "type" key is written with a JSON escape is still counted', async () => {
    const running: Running = { now: 0, max: 0 }
    const server = await serve({ maxSubscriptionsPerConnection: 2, heartbeatMs: 0 }, {}, (wss) => {
      useServer({ schema: makeSchema(running) }, wss)
    })
    const client = await protocolClient(server.url)
    client.subscribe('a')
    client.subscribe('b')
    await waitFor('two running subscriptions', () => running.now === 2)

    // Valid JSON, the same message to JSON.parse (and so to graphql-ws) as {"type":"subscribe",...}.
    for (const id of ['c', 'd', 'e']) {
      client.ws.send(`{"typ\\u0065":"subscribe","id":"${id}","payload":{"query":"subscription { count }"}}`)
    }
    for (const id of ['c', 'd', 'e']) await client.answered(`an answer for ${id}`, undefined, id, 0)

    expect(running.max, `subscriptions running at once (cap 2); now ${running.now}`).toBeLessThanOrEqual(2)
    const refused = client.messages().filter((m) => m.type === 'error')
    expect(refused.map((m) => m.id)).toEqual(['c', 'd', 'e'])
  })

  it('without rekey, the IP slot is the limit: a second client from the same IP is refused before the upgrade', async () => {
    const server = await serve({ maxConnectionsPerIdentity: 1, heartbeatMs: 0 }, {}, (wss) => {
      useServer({ schema }, wss)
    })
    // graphql-ws' subprotocol, so that graphql-ws keeps the first one open (until its 3 s init timeout).
    await open(server.url, {}, 'graphql-transport-ws')
    await expect(open(server.url, {}, 'graphql-transport-ws')).rejects.toThrow('upgrade refused: 429')
  })
})

// ---------------------------------------------------------------------------------------------------------------
// rekey to the identity a connection already has
// ---------------------------------------------------------------------------------------------------------------

describe('rekey', () => {
  it('rekey to the identity the connection already has keeps its one slot (maxConnectionsPerIdentity 1)', async () => {
    // E.g. `identify` took the user from a cookie, and graphql-ws onConnect rekeys to the user of connectionParams.
    const server = await serve({ identify: () => 'alice', maxConnectionsPerIdentity: 1, heartbeatMs: 0 })
    const connection = server.nextConnection()
    await open(server.url)
    const ws = await connection

    const lease = await server.protection.rekey(ws, 'alice')

    expect(lease.allowed, 'rekey of the only connection of alice to alice').toBe(true)
    expect(server.protection.identityOf(ws)).toBe('alice')
    await expect(open(server.url)).rejects.toThrow('upgrade refused: 429') // still one slot, held
  })

  it('a connection that closes while its rekey waits for the store: the new slot is given back', async () => {
    // A private Redis, paused (SIGSTOP) so that rekey's lease request waits while the client leaves.
    const redis = await startRedis()
    cleanups.push(() => redis.stop())
    const client = new Redis(redis.url, limiterClientOptions)
    client.on('error', () => {})
    cleanups.push(() => client.disconnect())
    await whenReady(client)
    const store = new RedisStore({ client, prefix: 'rekey:', timeoutMs: 10_000 })
    await store.warmUp()
    const server = await serve({ store, maxConnectionsPerIdentity: 1, heartbeatMs: 0 })
    const connection = server.nextConnection()
    const leaving = await open(server.url)
    const ws = await connection

    redis.pause()
    cleanups.push(() => redis.resume())
    const rekeyed = server.protection.rekey(ws, 'alice')
    const closed = once(ws, 'close')
    leaving.ws.close()
    await closed
    expect(server.protection.openConnections).toBe(0)
    redis.resume()
    // alice's slot was granted after the socket had gone; rekey gave it back before resolving.
    expect((await rekeyed).allowed).toBe(true)
    expect(server.protection.identityOf(ws)).toBeUndefined()

    // alice's only slot is free: another connection of hers is admitted to it.
    const next = server.nextConnection()
    await open(server.url)
    expect((await server.protection.rekey(await next, 'alice')).allowed).toBe(true)
  })
})

// ---------------------------------------------------------------------------------------------------------------
// identityMessages: a burst within the identity's capacity
// ---------------------------------------------------------------------------------------------------------------

describe('identityMessages', () => {
  it('delivers a burst that the identity budget holds (capacity 1000, default batch 10)', async () => {
    // Per-connection limits out of the way; the identity's shared bucket is full (1,000 tokens) when the burst comes.
    const drops: number[] = []
    const server = await serve({
      identityMessages: { capacity: 1_000, refillPerSecond: 100 },
      messagesPerSecond: 1e6,
      messageBurst: 1e6,
      heartbeatMs: 0,
      onDrop: (_ws, info) => {
        drops.push(info.retryAfterMs)
        decided()
      },
    })
    let decided = () => {}
    const all = new Promise<void>((resolve) => {
      decided = () => {
        if (server.messages.length + drops.length === 50) resolve()
      }
    })
    const connection = server.nextConnection()
    // The upgrade completes once the identity's first batch is drawn: the burst meets tokens at hand.
    const client = await open(server.url)
    ;(await connection).on('message', decided)
    for (let i = 0; i < 50; i++) client.ws.send(`m${i}`)
    await within(all, 5_000, 'each of the 50 messages delivered or dropped')

    expect(
      {
        delivered: server.messages.length,
        drops: drops.length,
        open: client.ws.readyState === WebSocket.OPEN,
      },
      '50 messages at once against a full budget of 1,000',
    ).toEqual({ delivered: 50, drops: 0, open: true })
  })
})
