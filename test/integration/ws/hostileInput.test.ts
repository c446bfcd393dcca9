/**
 * Hostile input against a protected `ws` server (src/ws/protect.ts): frames and upgrade requests that no real
 * client sends, written byte by byte on raw TCP sockets (test/helpers/rawWebSocket.ts), each while a well-behaved
 * `ws` client is connected to the same server.
 *
 * For every attack: the hostile connection ends with the right close code, read from the close frame the server
 * wrote on the raw socket (the server-side 'close' event would say 1006: the raw client never sends a close frame
 * of its own); the server-side socket's 'error' says which of ws' checks fired; the well-behaved client still gets
 * its echo; the hostile connection's slot is given back (`openConnections`, and the lease itself in the store); and
 * the heap (`heapUsed`, and `external` for Buffers) does not grow by more than MEMORY_BOUND during the attack.
 *
 * Servers listen on 127.0.0.1, port 0, with default tollbooth options (maxMessageBytes 64 KiB, which the protection
 * applies as ws' maxPayload); the store is passed explicitly (a MemoryStore, the default) only to read leases.
 * Timings and memory deltas are printed once, after the file (`[ws hostile]` lines).
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { deflateRawSync, constants as zlibConstants } from 'node:zlib'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { type ServerOptions, WebSocket, WebSocketServer } from 'ws'
import { concurrencyLimit } from '../../../src/core/limiters/concurrencyLimit.js'
import { MemoryStore } from '../../../src/core/stores/memoryStore.js'
import {
  type ProtectWebSocketOptions,
  protectWebSocketServer,
  type WebSocketProtection,
} from '../../../src/ws/index.js'
import {
  clientFrame,
  closeFrameOf,
  type RawConnection,
  type RawWebSocket,
  rawConnect,
  rawWebSocket,
  serverFrames,
  upgradeRequestLines,
} from '../../helpers/rawWebSocket.js'

const HOST = '127.0.0.1'
/** The default identity of every client here: the client IP. */
const IDENTITY = '127.0.0.1'
const KiB = 1024
const MiB = 1024 * KiB
const GiB = 1024 * MiB
/** tollbooth's default maxMessageBytes, applied as ws' maxPayload. */
const MAX_MESSAGE_BYTES = 64 * KiB
/** tollbooth's default maxConnectionsPerIdentity. */
const MAX_CONNECTIONS_PER_IDENTITY = 10
/** How much the heap may grow during one attack. */
const MEMORY_BOUND = 50 * MiB
/** How long any one step (a close, a release, an echo) may take before the test calls it hung. */
const STEP_TIMEOUT_MS = 3_000

// ---------------------------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------------------------

const cleanups: (() => unknown)[] = []

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) {
    try {
      await cleanup()
    } catch (error) {
      console.error('cleanup failed:', error)
    }
  }
})

/** One line per attack: what it did, for the summary printed after the file. */
const report: string[] = []
afterAll(() => {
  if (report.length > 0) console.info(`[ws hostile]\n${report.join('\n')}`)
})

interface ServerSocket {
  readonly ws: WebSocket
  /** ws' 'error' events on this socket: which check fired (`code` is ws' WS_ERR_*). */
  readonly errors: { code: string | undefined; message: string }[]
  /** The code of the server-side 'close' event, once closed. */
  closeCode: number | undefined
}

interface Served {
  readonly wss: WebSocketServer
  readonly protection: WebSocketProtection
  readonly port: number
  readonly url: string
  /** Every server-side socket, in the order of its 'connection' event. */
  readonly sockets: ServerSocket[]
  /** Free connection slots of IDENTITY, read from the protection's store. */
  freeSlots(): Promise<number>
}

/** A protected echo server: the app sends every message back as it came. */
async function serve(
  serverOptions: ServerOptions = {},
  protect: ProtectWebSocketOptions = {},
): Promise<Served> {
  const wss = new WebSocketServer({ ...serverOptions, port: 0, host: HOST })
  await new Promise((resolve) => wss.once('listening', resolve))
  const store = new MemoryStore()
  const protection = protectWebSocketServer(wss, { store, ...protect })
  const sockets: ServerSocket[] = []
  wss.on('connection', (ws) => {
    const socket: ServerSocket = { ws, errors: [], closeCode: undefined }
    sockets.push(socket)
    ws.on('error', (error: Error & { code?: string }) =>
      socket.errors.push({ code: error.code, message: error.message }),
    )
    ws.on('close', (code) => {
      socket.closeCode = code
    })
    ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }))
  })
  cleanups.push(async () => {
    await protection.close()
    for (const ws of wss.clients) ws.terminate()
    await new Promise((resolve) => wss.close(resolve))
    store.close()
  })
  const port = (wss.address() as { port: number }).port
  const peek = concurrencyLimit({
    name: 'ws-connections', // the limiter name protectWebSocketServer gives its connection leases
    store,
    max: MAX_CONNECTIONS_PER_IDENTITY,
    leaseMs: 30_000,
  })
  return {
    wss,
    protection,
    port,
    url: `ws://${HOST}:${port}`,
    sockets,
    freeSlots: async () => (await peek.peek(IDENTITY)).remaining,
  }
}

interface GoodClient {
  readonly ws: WebSocket
  /** Sends a fresh text message and resolves once the server echoed it back. */
  echo(): Promise<string>
}

/** A well-behaved `ws` client (it offers permessage-deflate, as `ws` does by default). */
async function goodClient(url: string): Promise<GoodClient> {
  const ws = new WebSocket(url)
  ws.on('error', () => {})
  cleanups.push(() => ws.terminate())
  await new Promise<void>((resolve, reject) => {
    ws.once('open', resolve)
    ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)))
    ws.once('close', () => reject(new Error('closed before open')))
  })
  let n = 0
  return {
    ws,
    echo: () => {
      const text = `still here ${++n}`
      const back = new Promise<string>((resolve) => {
        const onMessage = (data: WebSocket.RawData) => {
          if (data.toString() !== text) return
          ws.off('message', onMessage)
          resolve(text)
        }
        ws.on('message', onMessage)
      })
      ws.send(text)
      return within(back, STEP_TIMEOUT_MS, `echo of "${text}"`)
    },
  }
}

/** A raw hostile client; it is destroyed after the test. */
async function hostile(
  served: Served,
  options: Parameters<typeof rawWebSocket>[2] = {},
): Promise<RawWebSocket> {
  const raw = await rawWebSocket(served.port, HOST, options)
  cleanups.push(() => raw.socket.destroy())
  return raw
}

async function waitFor(what: string, condition: () => boolean, timeoutMs = STEP_TIMEOUT_MS): Promise<number> {
  const deadline = performance.now() + timeoutMs
  while (!condition()) {
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await sleep(1)
  }
  return performance.now()
}

function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: nothing within ${ms} ms`)), ms)
    }),
  ]).finally(() => clearTimeout(timer))
}

/**
 * Samples `heapUsed` and `external` (where Buffers live) every 2 ms from the call until `stop()`, which gives the
 * largest growth over the values at the call (the server runs in this process; no forced GC, so this is an upper
 * bound of what the attack kept, and a transient peak between two samples can be missed).
 */
function watchMemory() {
  const base = process.memoryUsage()
  const peak = { heapUsed: base.heapUsed, external: base.external }
  const sample = () => {
    const now = process.memoryUsage()
    peak.heapUsed = Math.max(peak.heapUsed, now.heapUsed)
    peak.external = Math.max(peak.external, now.external)
  }
  const timer = setInterval(sample, 2)
  return {
    stop() {
      clearInterval(timer)
      sample()
      return { heapUsed: peak.heapUsed - base.heapUsed, external: peak.external - base.external }
    },
  }
}

const mb = (bytes: number) => `${(bytes / MiB).toFixed(1)} MB`

function expectMemoryFlat(growth: { heapUsed: number; external: number }): void {
  expect(growth.heapUsed, `heapUsed growth during the attack: ${mb(growth.heapUsed)}`).toBeLessThan(
    MEMORY_BOUND,
  )
  expect(growth.external, `external growth during the attack: ${mb(growth.external)}`).toBeLessThan(
    MEMORY_BOUND,
  )
}

/**
 * The common run of a frame-level attack: the good client and the hostile one are both open (two slots), the
 * hostile one writes `attack`; then the hostile connection must get a close frame with `code`, the slot must come
 * back, the good client must still get its echo and memory must stay flat. Returns what the server-side socket's
 * 'error' said, for the caller to check which of ws' checks fired.
 */
async function frameAttack(
  name: string,
  served: Served,
  raw: RawWebSocket,
  attack: Buffer,
  code: number,
): Promise<ServerSocket> {
  const good = await goodClient(served.url)
  await waitFor('both connections admitted', () => served.protection.openConnections === 2)
  expect(await served.freeSlots()).toBe(MAX_CONNECTIONS_PER_IDENTITY - 2)
  // The raw client connected first: its server-side socket is the first one.
  const target = served.sockets[0] as ServerSocket

  const memory = watchMemory()
  const started = performance.now()
  raw.socket.write(attack)
  const closedAt = await waitFor(`a close frame on the hostile connection (${name})`, () => {
    return closeFrameOf(serverFrames(raw.frameBytes())) !== undefined
  })
  const releasedAt = await waitFor(
    `the hostile connection's slot (${name})`,
    () => served.protection.openConnections === 1,
  )
  const growth = memory.stop()

  const close = closeFrameOf(serverFrames(raw.frameBytes()))
  expect(close?.code, `close frame sent for ${name}: ${JSON.stringify(close)}`).toBe(code)
  expect(served.protection.openConnections).toBe(1)
  expect(served.protection.pendingUpgrades).toBe(0)
  expect(await served.freeSlots(), 'leases held after the attack (only the good client)').toBe(
    MAX_CONNECTIONS_PER_IDENTITY - 1,
  )
  expect(await good.echo()).toMatch(/still here/)
  expect(good.ws.readyState).toBe(WebSocket.OPEN)
  expectMemoryFlat(growth)

  report.push(
    `${name}: close ${close?.code} after ${(closedAt - started).toFixed(1)} ms, slot back after ` +
      `${(releasedAt - started).toFixed(1)} ms, server error ${target.errors[0]?.code} ` +
      `("${target.errors[0]?.message}"), server 'close' ${target.closeCode}, heapUsed +${mb(growth.heapUsed)}, ` +
      `external +${mb(growth.external)}`,
  )
  return target
}

// ---------------------------------------------------------------------------------------------------------------
// 1. A frame header announcing 1 GiB
// ---------------------------------------------------------------------------------------------------------------

describe('hostile frames', () => {
  it('1. a header announcing a 1 GiB payload (64-bit length) is closed 1009 before any payload is read', async () => {
    const served = await serve()
    const raw = await hostile(served)
    // FIN + binary, MASK + 127, the 8-byte length 2^30, the 4-byte mask key, and no payload at all.
    const header = clientFrame({ opcode: 0x2, announcedLength: GiB })
    expect(header.length).toBe(2 + 8 + 4)

    const target = await frameAttack('1 GiB frame header', served, raw, header, 1009)

    // ws judged the announced length (receiver.js haveLength, against the maxPayload the protection set).
    expect(target.errors.map((e) => e.code)).toEqual(['WS_ERR_UNSUPPORTED_MESSAGE_LENGTH'])
    expect(served.wss.options.maxPayload).toBe(MAX_MESSAGE_BYTES)
  })

  // -------------------------------------------------------------------------------------------------------------
  // 2. Fragment flood
  // -------------------------------------------------------------------------------------------------------------

  it('2. a flood of tiny fragments of a never-finished text message is closed 1008 by ws maxFragments', async () => {
    const served = await serve()
    const raw = await hostile(served)
    // One text frame without FIN, then continuation frames without FIN, 1 payload byte each: 20,000 fragments,
    // 20,000 bytes of payload in all. ws 8.23 counts fragments (maxFragments, default 16,384) in getData, and the
    // message's bytes against maxPayload (64 KiB) in haveLength: fragment 16,385 trips the count at 16,385 bytes,
    // long before the size (1009) could. The message never completes, so the protection's message rate limit sees
    // nothing: only ws' fragment cap stands between this and an unbounded list of fragments.
    const fragments = 20_000
    const attack = Buffer.concat([
      clientFrame({ opcode: 0x1, fin: false, payload: Buffer.from('a') }),
      ...Array.from({ length: fragments - 1 }, () =>
        clientFrame({ opcode: 0x0, fin: false, payload: Buffer.from('a') }),
      ),
    ])
    expect(fragments).toBeGreaterThan(16 * KiB)
    expect(fragments).toBeLessThan(MAX_MESSAGE_BYTES)

    const target = await frameAttack(`${fragments} 1-byte fragments`, served, raw, attack, 1008)

    expect(target.errors).toEqual([
      { code: 'WS_ERR_TOO_MANY_BUFFERED_PARTS', message: 'Too many message fragments' },
    ])
  })

  // -------------------------------------------------------------------------------------------------------------
  // 3. Compression bomb
  // -------------------------------------------------------------------------------------------------------------

  describe('3. compression bomb (server perMessageDeflate: true)', () => {
    /** 60 MiB of zeros, deflated: more than MEMORY_BOUND once inflated, yet under 64 KiB on the wire. */
    const INFLATED_BYTES = 60 * MiB
    let bomb: Buffer

    beforeAll(() => {
      // A sync flush ends the data with an empty stored block, 00 00 ff ff, which permessage-deflate leaves out
      // (RFC 7692 7.2.1) and the receiver appends back.
      const deflated = deflateRawSync(Buffer.alloc(INFLATED_BYTES), {
        level: 9,
        finishFlush: zlibConstants.Z_SYNC_FLUSH,
      })
      expect([...deflated.subarray(-4)]).toEqual([0x00, 0x00, 0xff, 0xff])
      bomb = deflated.subarray(0, -4)
    })

    it('a small deflated text frame inflating to 60 MiB is closed 1009 while inflating, memory flat', async () => {
      const served = await serve({ perMessageDeflate: true })
      const raw = await hostile(served, { extraHeaders: ['Sec-WebSocket-Extensions: permessage-deflate'] })
      expect(raw.head.toLowerCase()).toContain('sec-websocket-extensions: permessage-deflate')
      // The frame itself is under the cap: only its inflated size can trip it.
      expect(bomb.length).toBeLessThan(MAX_MESSAGE_BYTES)
      const frame = clientFrame({ opcode: 0x1, rsv: 0x40, payload: bomb })

      const target = await frameAttack(
        `compression bomb (${bomb.length} B → ${INFLATED_BYTES / MiB} MiB)`,
        served,
        raw,
        frame,
        1009,
      )

      // permessage-deflate.js inflateOnData: the inflated total passed maxPayload (the 64 KiB the protection set).
      expect(target.errors.map((e) => e.code)).toEqual(['WS_ERR_UNSUPPORTED_MESSAGE_LENGTH'])
    })
  })

  // -------------------------------------------------------------------------------------------------------------
  // 4. Malformed frames
  // -------------------------------------------------------------------------------------------------------------

  const hi = Buffer.from('hi')
  it.each([
    {
      name: 'RSV2 set without an extension',
      frame: () => clientFrame({ opcode: 0x1, rsv: 0x20, payload: hi }),
      error: 'WS_ERR_UNEXPECTED_RSV_2_3',
    },
    {
      name: 'unknown opcode 0x3',
      frame: () => clientFrame({ opcode: 0x3, payload: hi }),
      error: 'WS_ERR_INVALID_OPCODE',
    },
    {
      name: 'ping with a 126-byte payload',
      frame: () => clientFrame({ opcode: 0x9, payload: Buffer.alloc(126, 0x70) }),
      error: 'WS_ERR_INVALID_CONTROL_PAYLOAD_LENGTH',
    },
    {
      name: 'unmasked client frame',
      frame: () => clientFrame({ opcode: 0x1, payload: hi, masked: false }),
      error: 'WS_ERR_EXPECTED_MASK',
    },
  ])('4. malformed frame: $name → 1002', async ({ name, frame, error }) => {
    const served = await serve()
    const raw = await hostile(served)

    const target = await frameAttack(name, served, raw, frame(), 1002)

    expect(target.errors.map((e) => e.code)).toEqual([error])
  })

  // -------------------------------------------------------------------------------------------------------------
  // 5. Invalid UTF-8
  // -------------------------------------------------------------------------------------------------------------

  it('5. a text frame that is not UTF-8 (C3 28) is closed 1007', async () => {
    const served = await serve()
    const raw = await hostile(served)
    const frame = clientFrame({ opcode: 0x1, payload: Buffer.from([0xc3, 0x28]) })

    const target = await frameAttack('invalid UTF-8 (C3 28)', served, raw, frame, 1007)

    expect(target.errors.map((e) => e.code)).toEqual(['WS_ERR_INVALID_UTF8'])
  })

  // -------------------------------------------------------------------------------------------------------------
  // 8. The same, from a client that never completes the close
  // -------------------------------------------------------------------------------------------------------------

  it('8. a hostile client that never completes the close (half-open) does not keep its slot for 30 s', async () => {
    // The raw clients above end their side when the server ends its own (net's default), which completes the
    // close at once. A hostile one keeps its side open (allowHalfOpen): after its 1009, ws waits for it until its
    // closeTimeout (30 s) and only then destroys the socket, and the slot is counted all that while. For the closes
    // tollbooth sends itself (1013/1008), MessageGuard terminates a client that does not answer after 1 s
    // (CLOSE_GRACE_MS); the 1009 it relies on ws for should not hold a slot 30 times longer.
    const graceMs = 1_000 // MessageGuard's CLOSE_GRACE_MS
    const served = await serve()
    const raw = await hostile(served, { allowHalfOpen: true })
    const good = await goodClient(served.url)
    await waitFor('both connections admitted', () => served.protection.openConnections === 2)

    const started = performance.now()
    raw.socket.write(clientFrame({ opcode: 0x2, announcedLength: GiB }))
    const closedAt = await waitFor('the 1009 close frame', () => {
      return closeFrameOf(serverFrames(raw.frameBytes())) !== undefined
    })
    expect(closeFrameOf(serverFrames(raw.frameBytes()))?.code).toBe(1009)
    report.push(
      `half-open client after its 1009: close frame after ${(closedAt - started).toFixed(1)} ms; waiting for ` +
        `its slot (up to ${(2.5 * graceMs).toFixed(0)} ms)`,
    )

    await waitFor(
      `the slot of a half-open client closed 1009 (ws closeTimeout is 30 s; tollbooth's own grace is ${graceMs} ms)`,
      () => served.protection.openConnections === 1,
      2.5 * graceMs,
    )
    report.push(`half-open client: slot back after ${(performance.now() - started).toFixed(0)} ms`)
    expect(await served.freeSlots()).toBe(MAX_CONNECTIONS_PER_IDENTITY - 1)
    expect(await good.echo()).toMatch(/still here/)
  })
})

// ---------------------------------------------------------------------------------------------------------------
// 6, 7. Hostile upgrade requests
// ---------------------------------------------------------------------------------------------------------------

describe('hostile upgrade requests', () => {
  /** Samples the protection's counters on every tick until stopped: the most each ever was. */
  function watchCounters(protection: WebSocketProtection) {
    const max = { openConnections: 0, pendingUpgrades: 0 }
    const sample = () => {
      max.openConnections = Math.max(max.openConnections, protection.openConnections)
      max.pendingUpgrades = Math.max(max.pendingUpgrades, protection.pendingUpgrades)
    }
    const timer = setInterval(sample, 1)
    return {
      stop() {
        clearInterval(timer)
        sample()
        return max
      },
    }
  }

  async function headerFlood(name: string, served: Served, head: string): Promise<void> {
    const good = await goodClient(served.url)
    await waitFor('the good client admitted', () => served.protection.openConnections === 1)
    const memory = watchMemory()
    const counters = watchCounters(served.protection)
    const started = performance.now()

    const raw: RawConnection = await rawConnect(served.port, HOST)
    cleanups.push(() => raw.socket.destroy())
    raw.socket.write(head)
    const goneAt = await within(raw.gone, STEP_TIMEOUT_MS, `the end of the connection (${name})`)

    const growth = memory.stop()
    const max = counters.stop()
    const answer = raw.received().toString('latin1').split('\r\n')[0] ?? ''
    // Node's HTTP parser refuses the head (HPE_HEADER_OVERFLOW, past its 16 KiB maxHeaderSize) with 431, or the
    // connection is reset before the 431 can be read (the client was still writing): never a 101.
    expect(answer === '' || answer.startsWith('HTTP/1.1 431'), `answer: "${answer}"`).toBe(true)
    expect(served.sockets.length, "'connection' events: only the good client's").toBe(1)
    expect(max, 'the most the protection ever counted during the flood').toEqual({
      openConnections: 1,
      pendingUpgrades: 0,
    })
    expect(served.protection.openConnections).toBe(1)
    expect(served.protection.pendingUpgrades).toBe(0)
    expect(await served.freeSlots(), 'leases held (only the good client)').toBe(
      MAX_CONNECTIONS_PER_IDENTITY - 1,
    )
    expect(await good.echo()).toMatch(/still here/)
    expectMemoryFlat(growth)
    report.push(
      `${name} (${(head.length / KiB).toFixed(0)} KiB head): answer "${answer || '(none, connection reset)'}", ` +
        `connection gone after ${(goneAt - started).toFixed(1)} ms, heapUsed +${mb(growth.heapUsed)}, ` +
        `external +${mb(growth.external)}`,
    )
  }

  it('6a. one 100 KiB header: refused by Node’s HTTP parser, no connection event, no lease', async () => {
    const served = await serve()
    const head = `${upgradeRequestLines(HOST, served.port, [`X-Filler: ${'a'.repeat(100 * KiB)}`]).join('\r\n')}\r\n\r\n`
    await headerFlood('one 100 KiB header', served, head)
  })

  it('6b. 20,000 headers: refused by Node’s HTTP parser, no connection event, no lease', async () => {
    const served = await serve()
    const headers = Array.from({ length: 20_000 }, (_, i) => `X-H${i}: ${i}`)
    const head = `${upgradeRequestLines(HOST, served.port, headers).join('\r\n')}\r\n\r\n`
    await headerFlood('20,000 headers', served, head)
  })

  it('7. slowloris: upgrade requests that stall in their headers hold no slot and no handshake token', async () => {
    const served = await serve()
    const good = await goodClient(served.url)
    await waitFor('the good client admitted', () => served.protection.openConnections === 1)
    const memory = watchMemory()
    const counters = watchCounters(served.protection)

    // More stalled requests than maxConnectionsPerIdentity (10) and than the handshake bucket (20), all from the
    // same IP: had any of them taken a slot or a token, the last client below would be refused.
    const stalled: RawConnection[] = []
    for (let i = 0; i < 25; i++) {
      const raw = await rawConnect(served.port, HOST)
      cleanups.push(() => raw.socket.destroy())
      // The request line and a few headers, never the blank line that ends the head.
      raw.socket.write(`${upgradeRequestLines(HOST, served.port).slice(0, 4).join('\r\n')}\r\n`)
      stalled.push(raw)
    }
    // Trickle a header every 100 ms, the slowloris way, for 600 ms.
    for (let i = 0; i < 6; i++) {
      await sleep(100)
      for (const raw of stalled) raw.socket.write(`X-Trickle-${i}: ${i}\r\n`)
    }

    const max = counters.stop()
    const growth = memory.stop()
    expect(
      stalled.filter((raw) => raw.ended()).length,
      'stalled requests the server ended (it should still be waiting)',
    ).toBe(0)
    expect(max, 'the most the protection ever counted while they stalled').toEqual({
      openConnections: 1,
      pendingUpgrades: 0,
    })
    expect(served.sockets.length).toBe(1)
    expect(await served.freeSlots()).toBe(MAX_CONNECTIONS_PER_IDENTITY - 1)
    expect(await good.echo()).toMatch(/still here/)
    // Still room for a new client from the same IP (a slot and a handshake token).
    const another = await goodClient(served.url)
    expect(await another.echo()).toMatch(/still here/)
    expect(served.protection.openConnections).toBe(2)
    expectMemoryFlat(growth)
    report.push(
      `slowloris (25 stalled upgrade requests, 700 ms): max openConnections ${max.openConnections}, max ` +
        `pendingUpgrades ${max.pendingUpgrades}, 0 ended by the server, a new client still admitted, heapUsed ` +
        `+${mb(growth.heapUsed)}, external +${mb(growth.external)}`,
    )
  })
})
