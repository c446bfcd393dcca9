/**
 * Upgrade admission of `protectWebSocketServer`, end to end: real `ws` servers on 127.0.0.1 (port 0), real `ws`
 * clients and raw TCP/HTTP upgrade requests, MemoryStore and RedisStore (the globalSetup Redis, or a private one
 * that is paused), and child processes (test/helpers/wsServerWorker.ts) for several servers sharing Redis and for a
 * server that dies with SIGKILL. Nothing is mocked.
 */
import { randomBytes, randomUUID } from 'node:crypto'
import { once } from 'node:events'
import http, { type IncomingHttpHeaders } from 'node:http'
import net, { type AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest'
import { WebSocket, WebSocketServer } from 'ws'
import { ErrorCodes } from '../../../src/core/errors.js'
import { concurrencyLimit } from '../../../src/core/limiters/concurrencyLimit.js'
import { MemoryStore } from '../../../src/core/stores/memoryStore.js'
import { RedisStore } from '../../../src/core/stores/redisStore.js'
import type { Store } from '../../../src/core/stores/store.js'
import {
  CloseCodes,
  CloseReasons,
  type ProtectWebSocketOptions,
  protectWebSocketServer,
  type WebSocketProtection,
} from '../../../src/ws/index.js'
import { JsonLinesProcess } from '../../helpers/childProcess.js'
import { type RedisProcess, startRedis } from '../../helpers/redisServer.js'
import { createRedisClient, limiterClientOptions, whenReady } from '../../helpers/stores.js'
import type { WsWorkerJob, WsWorkerStats } from '../../helpers/wsServerWorker.js'

const HOST = '127.0.0.1'
/** The default identity of every client here: the client IP. */
const LOCAL_IDENTITY = '127.0.0.1'
/** The limiter name protectWebSocketServer gives its connection leases. */
const CONNECTIONS_LIMITER = 'ws-connections'
/** Longest any single upgrade may take before the test calls it hung. */
const CONNECT_TIMEOUT_MS = 5_000

const WORKER = fileURLToPath(new URL('../../helpers/wsServerWorker.ts', import.meta.url))

const noop = () => {}

// ---------------------------------------------------------------------------------------------------------------
// Cleanup: everything a test starts is registered here and torn down after it, whatever the outcome.
// ---------------------------------------------------------------------------------------------------------------

const cleanups: (() => Promise<void> | void)[] = []
const liveClients = new Set<WebSocket>()

afterEach(async () => {
  for (const ws of liveClients) ws.terminate()
  liveClients.clear()
  for (const cleanup of cleanups.splice(0).reverse()) {
    try {
      await cleanup()
    } catch (error) {
      console.error('cleanup failed:', error)
    }
  }
})

let redisClient: Redis

beforeAll(async () => {
  redisClient = createRedisClient()
  await whenReady(redisClient)
})

afterAll(() => {
  redisClient?.disconnect()
})

type StoreKind = 'memory' | 'redis'

/** A store of the given kind; Redis stores share the suite's client and get a key prefix of their own. */
function createStore(kind: StoreKind, prefix = `ws-upgrade-${randomUUID().slice(0, 8)}:`): Store {
  if (kind === 'redis') {
    // A generous deadline: these tests check admission, not deadlines (the outage test does that).
    return new RedisStore({ client: redisClient, prefix, timeoutMs: 2_000 })
  }
  const store = new MemoryStore()
  cleanups.push(() => store.close())
  return store
}

/** A limiter reading the protection's connection leases on the same store: `remaining` is `max` minus live leases. */
async function freeSlots(store: Store, identity: string, max: number): Promise<number> {
  const peek = concurrencyLimit({ name: CONNECTIONS_LIMITER, store, max, leaseMs: 30_000 })
  return (await peek.peek(identity)).remaining
}

// ---------------------------------------------------------------------------------------------------------------
// Servers
// ---------------------------------------------------------------------------------------------------------------

type ServerMode = 'port' | 'server' | 'noServer'

interface Harness {
  readonly wss: WebSocketServer
  readonly protection: WebSocketProtection
  readonly url: string
  readonly port: number
  /** Server-side sockets, in the order the 'connection' listener saw them. */
  readonly accepted: WebSocket[]
}

/** A ws server in the given mode on 127.0.0.1, port 0, protected with `options`. */
async function startServer(options: ProtectWebSocketOptions, mode: ServerMode = 'port'): Promise<Harness> {
  let wss: WebSocketServer
  let httpServer: http.Server | undefined
  if (mode === 'port') {
    wss = new WebSocketServer({ port: 0, host: HOST })
    await once(wss, 'listening')
  } else {
    httpServer = http.createServer((_req, res) => res.writeHead(426).end())
    if (mode === 'server') {
      wss = new WebSocketServer({ server: httpServer })
    } else {
      const noServer = new WebSocketServer({ noServer: true })
      wss = noServer
      // The app's own upgrade routing, as in ws' README: it calls wss.handleUpgrade itself.
      httpServer.on('upgrade', (req, socket, head) => {
        noServer.handleUpgrade(req, socket, head, (ws) => noServer.emit('connection', ws, req))
      })
    }
    httpServer.listen(0, HOST)
    await once(httpServer, 'listening')
  }
  const protection = protectWebSocketServer(wss, options)
  const accepted: WebSocket[] = []
  wss.on('connection', (ws) => {
    ws.on('error', noop)
    accepted.push(ws)
  })
  const address = (httpServer ?? wss).address() as AddressInfo
  cleanups.push(async () => {
    await protection.close()
    for (const ws of wss.clients) ws.terminate()
    await new Promise<void>((resolve) => wss.close(() => resolve()))
    if (httpServer !== undefined) {
      httpServer.closeAllConnections()
      await new Promise<void>((resolve) => httpServer.close(() => resolve()))
    }
  })
  return { wss, protection, url: `ws://${HOST}:${address.port}/`, port: address.port, accepted }
}

// ---------------------------------------------------------------------------------------------------------------
// Clients
// ---------------------------------------------------------------------------------------------------------------

type Outcome =
  | { kind: 'open'; ws: WebSocket; ms: number }
  | { kind: 'refused'; status: number; headers: IncomingHttpHeaders; body: string; ms: number }
  | { kind: 'failed'; error: Error; ms: number }

/**
 * One ws client upgrade: `open` after the 101, `refused` with the status of any other response (the client's
 * 'unexpected-response': ws only emits it for a response that is not a 101), `failed` when the connection ended
 * without a response. Never waits longer than CONNECT_TIMEOUT_MS.
 */
function connect(
  url: string,
  options: { headers?: Record<string, string>; track?: boolean } = {},
): Promise<Outcome> {
  const started = performance.now()
  const ws = new WebSocket(url, { headers: options.headers ?? {}, perMessageDeflate: false })
  if (options.track !== false) liveClients.add(ws)
  ws.on('error', noop)
  return new Promise<Outcome>((resolve, reject) => {
    const timer = setTimeout(() => {
      ws.terminate()
      reject(new Error(`upgrade to ${url} still undecided after ${CONNECT_TIMEOUT_MS} ms`))
    }, CONNECT_TIMEOUT_MS)
    const settle = (outcome: Outcome) => {
      clearTimeout(timer)
      resolve(outcome)
    }
    ws.once('open', () => settle({ kind: 'open', ws, ms: performance.now() - started }))
    ws.once('unexpected-response', (_req, res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        body += chunk
      })
      res.on('end', () => {
        settle({
          kind: 'refused',
          status: res.statusCode ?? 0,
          headers: res.headers,
          body,
          ms: performance.now() - started,
        })
        ws.terminate()
      })
      res.on('error', noop)
    })
    ws.once('close', () => {
      // Only reached first when neither a 101 nor another response arrived.
      settle({
        kind: 'failed',
        error: new Error('closed before any response'),
        ms: performance.now() - started,
      })
    })
  })
}

async function connectOpen(url: string, headers?: Record<string, string>): Promise<WebSocket> {
  const outcome = await connect(url, headers === undefined ? {} : { headers })
  if (outcome.kind !== 'open')
    throw new Error(`expected the upgrade to open, got ${describeOutcome(outcome)}`)
  return outcome.ws
}

async function connectRefused(url: string, headers?: Record<string, string>) {
  const outcome = await connect(url, headers === undefined ? {} : { headers })
  if (outcome.kind !== 'refused') throw new Error(`expected a refusal, got ${describeOutcome(outcome)}`)
  return outcome
}

function describeOutcome(outcome: Outcome): string {
  if (outcome.kind === 'refused') return `HTTP ${outcome.status} ${JSON.stringify(outcome.headers)}`
  if (outcome.kind === 'failed') return `failure: ${outcome.error.message}`
  return 'an open WebSocket'
}

/** Upgrade headers for a raw request (not through the ws client). */
function upgradeHeaders(): Record<string, string> {
  return {
    Connection: 'Upgrade',
    Upgrade: 'websocket',
    'Sec-WebSocket-Key': randomBytes(16).toString('base64'),
    'Sec-WebSocket-Version': '13',
  }
}

/** A raw TCP connection (no ws client) that has sent a complete upgrade request. */
async function sendRawUpgrade(port: number): Promise<net.Socket> {
  const socket = net.connect(port, HOST)
  cleanups.push(() => {
    socket.destroy()
  })
  socket.on('error', noop)
  await once(socket, 'connect')
  const headers = Object.entries(upgradeHeaders()).map(([name, value]) => `${name}: ${value}\r\n`)
  socket.write(`GET / HTTP/1.1\r\nHost: ${HOST}:${port}\r\n${headers.join('')}\r\n`)
  return socket
}

/** A raw upgrade request (not the ws client): resolves the response status, 101 included. */
function rawUpgradeStatus(port: number, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: HOST, port, path: '/', headers })
    req.on('upgrade', (res, socket) => {
      socket.destroy()
      resolve(res.statusCode ?? 0)
    })
    req.on('response', (res) => {
      res.resume()
      resolve(res.statusCode ?? 0)
    })
    req.on('error', reject)
    req.setTimeout(CONNECT_TIMEOUT_MS, () => req.destroy(new Error('no response to the raw upgrade')))
    req.end()
  })
}

/** Polls `condition` every 10 ms until it holds or `timeoutMs` passes; returns whether it held. */
async function eventually(condition: () => boolean | Promise<boolean>, timeoutMs = 2_000): Promise<boolean> {
  const deadline = performance.now() + timeoutMs
  for (;;) {
    if (await condition()) return true
    if (performance.now() > deadline) return false
    await sleep(10)
  }
}

/** The 429 a per-identity cap answers: Retry-After and the draft RateLimit headers of the connection policy. */
function expectConnectionCap429(
  outcome: { status: number; headers: IncomingHttpHeaders },
  max: number,
): void {
  expect(outcome.status).toBe(429)
  expect(Number(outcome.headers['retry-after'])).toBeGreaterThanOrEqual(1)
  expect(outcome.headers['ratelimit-policy']).toBe(
    `"${CONNECTIONS_LIMITER}";q=${max};qu="concurrent-requests"`,
  )
  expect(outcome.headers.ratelimit).toMatch(new RegExp(`^"${CONNECTIONS_LIMITER}";r=0;t=\\d+$`))
}

// ---------------------------------------------------------------------------------------------------------------
// Child-process servers (test/helpers/wsServerWorker.ts)
// ---------------------------------------------------------------------------------------------------------------

/** A ws server process (test/helpers/wsServerWorker.ts), killed after the test. */
class ServerProcess extends JsonLinesProcess {
  constructor(job: WsWorkerJob) {
    super({ script: WORKER, jobVariable: 'TOLLBOOTH_WS_WORKER_JOB', job, label: 'ws server process' })
    this.child.stdin?.on('error', noop)
    cleanups.push(() => this.kill())
  }

  /** Waits for the server to listen; resolves its ws URL. */
  async ready(): Promise<string> {
    const message = await this.next<{ ready?: boolean; port?: number }>()
    expect(message.ready, this.describe()).toBe(true)
    return `ws://${HOST}:${message.port}/`
  }

  async stats(): Promise<WsWorkerStats> {
    if (!this.alive) throw new Error(`not running: ${this.describe()}`)
    this.child.stdin?.write('stats\n')
    return this.next<WsWorkerStats>()
  }

  /** Asks for stats until `holds` says they show what the test waits for (each answer is a round trip). */
  async statsWhen(holds: (stats: WsWorkerStats) => boolean, what: string): Promise<WsWorkerStats> {
    const deadline = performance.now() + CONNECT_TIMEOUT_MS
    for (;;) {
      const stats = await this.stats()
      if (holds(stats)) return stats
      if (performance.now() > deadline) throw new Error(`${what}: not within ${CONNECT_TIMEOUT_MS} ms`)
    }
  }

  /** Resolves once the server's connection leases were renewed `count` times in all (`countRenewals`). */
  async renewals(count: number): Promise<WsWorkerStats> {
    if (!this.alive) throw new Error(`not running: ${this.describe()}`)
    this.child.stdin?.write(`renewals ${count}\n`)
    return this.next<WsWorkerStats>()
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------------------------

describe('per-identity cap before the 101', () => {
  it.each<StoreKind>(['memory', 'redis'])(
    '%s store: maxConnectionsPerIdentity 3 opens 3, the 4th gets 429 with RateLimit headers and no 101',
    async (kind) => {
      const store = kind === 'redis' ? createStore('redis') : undefined
      const server = await startServer({
        maxConnectionsPerIdentity: 3,
        ...(store === undefined ? {} : { store }),
      })
      for (let i = 0; i < 3; i++) await connectOpen(server.url)
      const refused = await connectRefused(server.url)
      expectConnectionCap429(refused, 3)
      // Concurrency leases of 30 s: the first frees up when one of them is released or expires.
      expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(30)
      expect(refused.body).toBe('Too Many Requests')
      expect(server.accepted).toHaveLength(3)
      expect(server.protection.openConnections).toBe(3)
      expect(server.protection.pendingUpgrades).toBe(0)
      for (const ws of server.accepted) expect(server.protection.identityOf(ws)).toBe(LOCAL_IDENTITY)
      if (store !== undefined) expect(await freeSlots(store, LOCAL_IDENTITY, 3)).toBe(0)
    },
  )

  it('the refusal is a complete HTTP response on the raw socket, with nothing before it', async () => {
    const server = await startServer({ maxConnectionsPerIdentity: 1 })
    await connectOpen(server.url)
    const socket = await sendRawUpgrade(server.port)
    let received = ''
    socket.setEncoding('utf8').on('data', (chunk: string) => {
      received += chunk
    })
    await once(socket, 'close')
    expect(received.startsWith('HTTP/1.1 429 Too Many Requests\r\n')).toBe(true)
    expect(received).not.toMatch(/^HTTP\/1\.1 101/m)
    expect(received.endsWith('\r\n\r\nToo Many Requests')).toBe(true)
    expect(server.accepted).toHaveLength(1)
  })

  it.each<ServerMode>(['port', 'server', 'noServer'])(
    'the cap holds with a WebSocketServer in %s mode',
    async (mode) => {
      const server = await startServer({ maxConnectionsPerIdentity: 2 }, mode)
      await connectOpen(server.url)
      await connectOpen(server.url)
      expectConnectionCap429(await connectRefused(server.url), 2)
      expect(server.accepted).toHaveLength(2)
      expect(server.protection.openConnections).toBe(2)

      // Closing one frees its slot for the next client.
      const closed = once(server.accepted[0] as WebSocket, 'close')
      server.accepted[0]?.close()
      await closed
      expect(await eventually(() => server.protection.openConnections === 1)).toBe(true)
      await connectOpen(server.url)
      expect(server.accepted).toHaveLength(3)
    },
  )

  it('an admitted upgrade that ws itself then rejects (bad Sec-WebSocket-Version, 400) gives its slot back', async () => {
    const store = createStore('memory')
    const server = await startServer({ store, maxConnectionsPerIdentity: 1, handshakesPerIp: false })
    expect(await rawUpgradeStatus(server.port, { ...upgradeHeaders(), 'Sec-WebSocket-Version': '12' })).toBe(
      400,
    )
    expect(await eventually(async () => (await freeSlots(store, LOCAL_IDENTITY, 1)) === 1)).toBe(true)
    expect(server.protection.pendingUpgrades).toBe(0)
    await connectOpen(server.url)
    expect(server.accepted).toHaveLength(1)
  })
})

describe('handshakes ws reads as version 13 however they spell it', () => {
  it.each(['013', '13.0', '0xd', ' 13', '8.0'])(
    "Sec-WebSocket-Version '%s' is admitted through the same caps: refused at the cap, never upgraded unguarded",
    async (version) => {
      const server = await startServer({ maxConnectionsPerIdentity: 1, handshakesPerIp: false })
      await connectOpen(server.url)
      expect(
        await rawUpgradeStatus(server.port, { ...upgradeHeaders(), 'Sec-WebSocket-Version': version }),
      ).toBe(429)
      expect(server.accepted).toHaveLength(1)
      expect(server.protection.openConnections).toBe(1)
    },
  )
})

describe('server-wide and handshake limits', () => {
  it('maxConnections 2: the third upgrade gets 503 with Retry-After', async () => {
    const server = await startServer({ maxConnections: 2, maxConnectionsPerIdentity: 100 })
    await connectOpen(server.url)
    await connectOpen(server.url)
    const refused = await connectRefused(server.url)
    expect(refused.status).toBe(503)
    expect(refused.headers['retry-after']).toBe('1')
    expect(server.accepted).toHaveLength(2)
  })

  it('handshakesPerIp capacity 5: 5 handshakes succeed, the 6th gets 429 from the handshake bucket', async () => {
    const server = await startServer({
      handshakesPerIp: { capacity: 5, refillPerSecond: 0.01 },
      maxConnectionsPerIdentity: 100,
    })
    for (let i = 0; i < 5; i++) {
      const ws = await connectOpen(server.url)
      const closed = once(ws, 'close')
      ws.close()
      await closed
    }
    const refused = await connectRefused(server.url)
    expect(refused.status).toBe(429)
    // One token per 100 s.
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1)
    expect(refused.headers['ratelimit-policy']).toMatch(/^"ws-handshakes";q=5/)
    expect(refused.headers.ratelimit).toMatch(/^"ws-handshakes";r=0;t=\d+$/)
    expect(server.accepted).toHaveLength(5)
  })
})

describe('identify', () => {
  it('a throwing identify refuses with 401; identities from identify get a cap each', async () => {
    const server = await startServer({
      maxConnectionsPerIdentity: 2,
      identify: (req) => {
        const user = req.headers['x-user']
        if (typeof user !== 'string') throw new Error('no credentials')
        return user
      },
    })
    const unauthorized = await connectRefused(server.url)
    expect(unauthorized.status).toBe(401)
    expect(unauthorized.headers['retry-after']).toBeUndefined()
    expect(unauthorized.headers.ratelimit).toBeUndefined()

    // Two users from one IP: each has a cap of its own.
    for (const user of ['alice', 'bob']) {
      await connectOpen(server.url, { 'x-user': user })
      await connectOpen(server.url, { 'x-user': user })
      expectConnectionCap429(await connectRefused(server.url, { 'x-user': user }), 2)
    }
    expect(server.accepted.map((ws) => server.protection.identityOf(ws))).toEqual([
      'alice',
      'alice',
      'bob',
      'bob',
    ])
    expect(server.protection.openConnections).toBe(4)
  })

  it('identify resolving an empty identity refuses with 401', async () => {
    const server = await startServer({ identify: async () => '' })
    expect((await connectRefused(server.url)).status).toBe(401)
    expect(server.accepted).toHaveLength(0)
  })
})

describe('a client that leaves while its admission is pending', () => {
  const IDENTIFY_DELAY_MS = 200
  const MAX = 2

  it.each<StoreKind>(['memory', 'redis'])(
    '%s store: no reservation outlives it (raw request destroyed, ws client terminated)',
    async (kind) => {
      const store = createStore(kind)
      let entered = 0
      const server = await startServer({
        store,
        maxConnectionsPerIdentity: MAX,
        handshakesPerIp: false,
        identify: async () => {
          entered++
          await sleep(IDENTIFY_DELAY_MS)
          return 'slow-user'
        },
      })

      // As many abandoned upgrades as the cap: a single leaked slot would show below.
      const raw = http.request({ host: HOST, port: server.port, path: '/', headers: upgradeHeaders() })
      let rawUpgraded = false
      raw.on('upgrade', (_res, socket) => {
        rawUpgraded = true
        socket.destroy()
      })
      raw.on('error', noop)
      raw.end()
      const client = new WebSocket(server.url)
      let clientOpened = false
      client.on('open', () => {
        clientOpened = true
      })
      client.on('error', noop)
      expect(await eventually(() => entered === 2)).toBe(true)
      expect(server.protection.pendingUpgrades).toBe(2)
      raw.destroy()
      client.terminate()

      expect(await eventually(() => server.protection.pendingUpgrades === 0)).toBe(true)
      expect(await eventually(async () => (await freeSlots(store, 'slow-user', MAX)) === MAX)).toBe(true)
      expect(server.accepted).toHaveLength(0)
      expect(server.protection.openConnections).toBe(0)
      expect({ rawUpgraded, clientOpened }).toEqual({ rawUpgraded: false, clientOpened: false })

      // Both slots are usable: MAX clients open, one more is refused.
      const opened = await Promise.all(Array.from({ length: MAX }, () => connect(server.url)))
      expect(opened.map((outcome) => outcome.kind)).toEqual(Array(MAX).fill('open'))
      expectConnectionCap429(await connectRefused(server.url), MAX)
      expect(server.accepted).toHaveLength(MAX)
    },
  )

  it('a TCP reset (RST) during the pending admission does not crash the server process', async () => {
    const server = new ServerProcess({
      protect: { maxConnectionsPerIdentity: MAX, handshakesPerIp: false },
      identifyDelayMs: 300,
    })
    const url = await server.ready()
    const socket = await sendRawUpgrade(Number(new URL(url).port))
    const admitting = await server.statsWhen((stats) => stats.pending > 0, 'the upgrade to be pending')
    expect(admitting.pending).toBe(1)
    socket.resetAndDestroy()

    // The admission finishes after the identify delay, and finds the client gone.
    const settled = await server.statsWhen((stats) => stats.pending === 0, 'the admission to finish')
    expect(settled).toEqual({ connections: 0, open: 0, pending: 0, slowCalls: 0, renewals: 0 })
    const ws = await connectOpen(url)
    expect(ws.readyState).toBe(WebSocket.OPEN)
    expect(server.alive, server.describe()).toBe(true)
  })

  it('identityMessages: a TCP reset while the first message tokens are drawn leaves no lease behind', async () => {
    // The identity's first tokens are drawn after the lease is taken and before the 101; the store answers that
    // draw 300 ms late (a slow round trip) so the client can leave inside that window.
    const server = new ServerProcess({
      protect: {
        maxConnectionsPerIdentity: 1,
        handshakesPerIp: false,
        identityMessages: { capacity: 100, refillPerSecond: 10 },
      },
      slowLimiter: { name: 'ws-identity-messages', delayMs: 300 },
    })
    const url = await server.ready()
    const socket = await sendRawUpgrade(Number(new URL(url).port))
    const drawing = await server.statsWhen((stats) => stats.slowCalls > 0, 'the first draw to start')
    expect(drawing.slowCalls).toBe(1)
    socket.resetAndDestroy()

    // The draw is answered, the admission finishes and finds the client gone: the drawn batch is given back (the
    // second call to the identity's budget) before the lease.
    const settled = await server.statsWhen((stats) => stats.pending === 0, 'the admission to finish')
    expect(settled).toEqual({ connections: 0, open: 0, pending: 0, slowCalls: 2, renewals: 0 })
    // The cap is 1: the next client gets the slot only if the one taken for the reset client was given back.
    const outcome = await connect(url)
    expect(outcome.kind, describeOutcome(outcome)).toBe('open')
    expect(server.alive, server.describe()).toBe(true)
  })
})

describe('connect/close cycles leave no lease behind', () => {
  const PARALLEL = 20
  const MAX = 100

  it.each<{ kind: StoreKind; cycles: number }>([
    { kind: 'memory', cycles: 10_000 },
    { kind: 'redis', cycles: 2_000 },
  ])(
    '$kind store: $cycles cycles, half close(), half terminate(), 20 at a time',
    async ({ kind, cycles }) => {
      const store = createStore(kind)
      const server = await startServer({ store, maxConnectionsPerIdentity: MAX, handshakesPerIp: false })
      let peakOpen = 0
      server.wss.on('connection', () => {
        peakOpen = Math.max(peakOpen, server.protection.openConnections)
      })

      const outcomes = { open: 0, refused: 0, failed: 0 }
      let started = 0
      const t0 = performance.now()
      const worker = async () => {
        while (started < cycles) {
          const i = started++
          const outcome = await connect(server.url, { track: false })
          outcomes[outcome.kind]++
          if (outcome.kind !== 'open') continue
          const closed = once(outcome.ws, 'close')
          if (i % 2 === 0) outcome.ws.close()
          else outcome.ws.terminate()
          await closed
        }
      }
      await Promise.all(Array.from({ length: PARALLEL }, worker))
      const cyclesMs = performance.now() - t0

      expect(outcomes).toEqual({ open: cycles, refused: 0, failed: 0 })
      expect(server.accepted).toHaveLength(cycles)
      expect(await eventually(() => server.protection.openConnections === 0, 5_000)).toBe(true)
      expect(server.protection.pendingUpgrades).toBe(0)
      // Releases are fire-and-forget on the socket's 'close': on Redis they may still be in flight.
      expect(await eventually(async () => (await freeSlots(store, LOCAL_IDENTITY, MAX)) === MAX)).toBe(true)
      const settledMs = performance.now() - t0
      console.info(
        `[ws upgrade] ${kind}: ${cycles} connect/close cycles in ${cyclesMs.toFixed(0)} ms ` +
          `(${((cycles / cyclesMs) * 1000).toFixed(0)}/s), all leases free after ${settledMs.toFixed(0)} ms, ` +
          `peak open on the server ${peakOpen}`,
      )

      // And exactly MAX new connections succeed.
      const again = await Promise.all(Array.from({ length: MAX + 1 }, () => connect(server.url)))
      expect(again.filter((outcome) => outcome.kind === 'open')).toHaveLength(MAX)
      const refused = again.filter((outcome) => outcome.kind === 'refused')
      expect(refused.map((outcome) => outcome.kind === 'refused' && outcome.status)).toEqual([429])
    },
  )
})

describe('several processes on one Redis', () => {
  it('2 servers, cap 5 per identity: 50 parallel upgrades (25 each) open exactly 5, 45 get 429', async () => {
    const prefix = `ws-mp-${randomUUID().slice(0, 8)}:`
    const job: WsWorkerJob = {
      redisUrl: inject('redisUrl'),
      prefix,
      protect: { maxConnectionsPerIdentity: 5, handshakesPerIp: false, failPolicy: 'closed' },
    }
    const servers = [new ServerProcess(job), new ServerProcess(job)]
    const urls = await Promise.all(servers.map((server) => server.ready()))

    const outcomes = await Promise.all(Array.from({ length: 50 }, (_, i) => connect(urls[i % 2] as string)))
    const opened = outcomes.filter((outcome) => outcome.kind === 'open')
    const statuses = outcomes.flatMap((outcome) => (outcome.kind === 'refused' ? [outcome.status] : []))
    expect({ opened: opened.length, refused: statuses.length }).toEqual({ opened: 5, refused: 45 })
    expect(new Set(statuses)).toEqual(new Set([429]))

    const stats = await Promise.all(servers.map((server) => server.stats()))
    expect(stats.reduce((sum, s) => sum + s.connections, 0)).toBe(5)
    expect(stats.reduce((sum, s) => sum + s.open, 0)).toBe(5)
    expect(stats.every((s) => s.pending === 0)).toBe(true)
    const store = createStore('redis', prefix)
    expect(await freeSlots(store, LOCAL_IDENTITY, 5)).toBe(0)

    // Closing them gives every slot back in Redis.
    for (const outcome of opened) if (outcome.kind === 'open') outcome.ws.close()
    expect(await eventually(async () => (await freeSlots(store, LOCAL_IDENTITY, 5)) === 5)).toBe(true)
  })

  it('a SIGKILLed server: its leases block until they expire, then the slots come back within leaseMs + 500 ms', async () => {
    const prefix = `ws-kill-${randomUUID().slice(0, 8)}:`
    const leaseMs = 1_500
    const max = 5
    const protect = {
      maxConnectionsPerIdentity: max,
      leaseMs,
      handshakesPerIp: false as const,
      failPolicy: 'closed' as const,
    }
    const victim = new ServerProcess({ redisUrl: inject('redisUrl'), prefix, protect, countRenewals: true })
    const victimUrl = await victim.ready()
    const survivor = await startServer({ ...protect, store: createStore('redis', prefix) })

    const held = await Promise.all(Array.from({ length: max }, () => connect(victimUrl)))
    expect(held.map((outcome) => outcome.kind)).toEqual(Array(max).fill('open'))
    // Four renewal rounds (one every leaseMs / 3) after the leases were taken: the fourth comes more than leaseMs
    // after them, so only the renewals keep the leases now.
    const { renewals } = await victim.stats()
    expect((await victim.renewals(renewals + 4 * max)).open).toBe(max)
    expectConnectionCap429(await connectRefused(survivor.url), max)

    const killedAt = performance.now()
    await victim.kill()
    expect(victim.child.signalCode).toBe('SIGKILL')
    const rightAfter = await connectRefused(survivor.url)
    expectConnectionCap429(rightAfter, max)
    // The earliest dead lease ends at most leaseMs after the last renewal.
    expect(Number(rightAfter.headers['retry-after'])).toBeLessThanOrEqual(Math.ceil(leaseMs / 1000))

    let recoveredMs = Number.NaN
    while (performance.now() - killedAt <= leaseMs + 500) {
      const outcome = await connect(survivor.url)
      if (outcome.kind === 'open') {
        recoveredMs = performance.now() - killedAt
        break
      }
      expect(outcome.kind === 'refused' && outcome.status).toBe(429)
      await sleep(50)
    }
    console.info(`[ws upgrade] slot back ${recoveredMs.toFixed(0)} ms after SIGKILL (leaseMs ${leaseMs})`)
    expect(recoveredMs, 'no upgrade admitted within leaseMs + 500 ms of the SIGKILL').toBeLessThanOrEqual(
      leaseMs + 500,
    )
    expect(survivor.accepted).toHaveLength(1)
  })
})

describe('Redis down (a private redis-server paused with SIGSTOP)', () => {
  const TIMEOUT_MS = 100
  const BOUND_MS = TIMEOUT_MS + 200
  let redis: RedisProcess
  let client: Redis

  beforeAll(async () => {
    redis = await startRedis()
    client = new Redis(redis.url, limiterClientOptions)
    client.on('error', noop)
    await whenReady(client)
  })

  afterAll(async () => {
    redis?.resume()
    client?.disconnect()
    await redis?.stop()
  })

  it('failPolicy open admits, failPolicy closed refuses with 429, each within timeoutMs + 200 ms', async () => {
    const store = new RedisStore({ client, prefix: 'ws-outage:', timeoutMs: TIMEOUT_MS })
    await store.warmUp()
    // Handshake bucket on (the default) as well: both of the admission's store calls meet the outage.
    const open = await startServer({ store, failPolicy: 'open', maxConnectionsPerIdentity: 5 })
    const closed = await startServer({ store, failPolicy: 'closed', maxConnectionsPerIdentity: 5 })
    await connectOpen(open.url)
    await connectOpen(closed.url)

    redis.pause()
    try {
      const admitted = await connect(open.url)
      const refused = await connect(closed.url)
      console.info(
        `[ws upgrade] Redis paused, store timeoutMs ${TIMEOUT_MS}: fail-open upgrade decided in ` +
          `${admitted.ms.toFixed(0)} ms, fail-closed in ${refused.ms.toFixed(0)} ms`,
      )
      expect(admitted.kind).toBe('open')
      expect(admitted.ms).toBeLessThanOrEqual(BOUND_MS)
      expect(refused.kind === 'refused' && refused.status).toBe(429)
      expect(refused.ms).toBeLessThanOrEqual(BOUND_MS)
      expect(open.protection.pendingUpgrades + closed.protection.pendingUpgrades).toBe(0)
    } finally {
      redis.resume()
    }
    // Once Redis answers again (after the breaker's cooldown if it opened), fail-closed admits again.
    expect(
      await eventually(async () => (await connect(closed.url)).kind === 'open', 3_000),
      'fail-closed server did not admit again after Redis resumed',
    ).toBe(true)
  })
})

describe('close() of the protection', () => {
  it.each<StoreKind>(['memory', 'redis'])(
    '%s store: sockets get 1001, leases are released, handleUpgrade is restored',
    async (kind) => {
      const store = createStore(kind)
      const wss = new WebSocketServer({ port: 0, host: HOST })
      await once(wss, 'listening')
      cleanups.push(async () => {
        for (const ws of wss.clients) ws.terminate()
        await new Promise<void>((resolve) => wss.close(() => resolve()))
      })
      const original = wss.handleUpgrade
      const protection = protectWebSocketServer(wss, { store, maxConnectionsPerIdentity: 3 })
      cleanups.push(() => protection.close())
      expect(wss.handleUpgrade).not.toBe(original)
      let connectionEvents = 0
      wss.on('connection', (ws) => {
        ws.on('error', noop)
        connectionEvents++
      })
      const url = `ws://${HOST}:${(wss.address() as AddressInfo).port}/`

      const clients = await Promise.all(Array.from({ length: 3 }, () => connectOpen(url)))
      const closes = clients.map((ws) =>
        once(ws, 'close').then(([code, reason]) => ({ code, reason: String(reason) })),
      )
      expect((await connectRefused(url)).status).toBe(429)
      expect(await freeSlots(store, LOCAL_IDENTITY, 3)).toBe(0)

      await protection.close()
      // close() resolves once the releases did: nothing to wait for.
      expect(await freeSlots(store, LOCAL_IDENTITY, 3)).toBe(3)
      expect(protection.openConnections).toBe(0)
      expect(wss.handleUpgrade).toBe(original)
      expect(await Promise.all(closes)).toEqual(
        Array(3).fill({ code: CloseCodes.GOING_AWAY, reason: CloseReasons.GOING_AWAY }),
      )

      // Unprotected now: ws alone admits past the old cap, and no lease is taken.
      const after = await Promise.all(Array.from({ length: 5 }, () => connect(url)))
      expect(after.map((outcome) => outcome.kind)).toEqual(Array(5).fill('open'))
      expect(connectionEvents).toBe(8)
      expect(await freeSlots(store, LOCAL_IDENTITY, 3)).toBe(3)
    },
  )

  it('an upgrade still pending when close() runs is refused with 503, holding no slot and no connection', async () => {
    const store = createStore('memory')
    let entered: () => void = noop
    const identifying = new Promise<void>((resolve) => {
      entered = resolve
    })
    let identify: (identity: string) => void = noop
    const server = await startServer({
      store,
      maxConnectionsPerIdentity: 2,
      handshakesPerIp: false,
      identify: () =>
        new Promise<string>((resolve) => {
          identify = resolve
          entered()
        }),
    })
    const late = connect(server.url)
    await identifying
    expect(server.protection.pendingUpgrades).toBe(1)
    await server.protection.close()
    // The admission decides only now, after close(): its lease is taken, then given back with the refusal.
    identify('late-user')

    const outcome = await late
    expect(outcome.kind === 'refused' && [outcome.status, outcome.headers['retry-after']]).toEqual([503, '1'])
    expect(server.protection.pendingUpgrades).toBe(0)
    expect(server.protection.openConnections).toBe(0)
    expect(server.accepted).toHaveLength(0)
    expect(await freeSlots(store, 'late-user', 2)).toBe(2)
  })
})

describe('invalid options', () => {
  const cases: { option: string; options: unknown }[] = [
    { option: 'maxConnectionsPerIdentity', options: { maxConnectionsPerIdentity: 0 } },
    { option: 'maxConnectionsPerIdentity', options: { maxConnectionsPerIdentity: 1.5 } },
    { option: 'leaseMs', options: { leaseMs: -1 } },
    // Past 2^31 - 1 ms Node fires a timer after 1 ms: idle sockets terminated at once, leases renewed every 1 ms.
    { option: 'leaseMs', options: { leaseMs: 2 ** 33 } },
    { option: 'heartbeatMs', options: { heartbeatMs: 2 ** 31 } },
    { option: 'heartbeatMs', options: { heartbeatMs: 1e12 } },
    { option: 'heartbeatMs', options: { heartbeatMs: 1.5 } },
    { option: 'handshakesPerIp.capacity', options: { handshakesPerIp: { capacity: 0, refillPerSecond: 1 } } },
    {
      option: 'handshakesPerIp.refillPerSecond',
      options: { handshakesPerIp: { capacity: 5, refillPerSecond: 0 } },
    },
    { option: 'handshakesPerIp', options: { handshakesPerIp: true } },
    { option: 'identify', options: { identify: 'x' } },
    { option: 'maxConnections', options: { maxConnections: 0 } },
    { option: 'failPolicy', options: { failPolicy: 'sometimes' } },
    { option: 'options', options: 'fast' },
  ]

  it.each(cases)('$options → TOLLBOOTH_ERR_INVALID_OPTION naming $option', ({ option, options }) => {
    const wss = new WebSocketServer({ noServer: true })
    cleanups.push(() => new Promise<void>((resolve) => wss.close(() => resolve())))
    const original = wss.handleUpgrade
    let thrown: unknown
    try {
      protectWebSocketServer(wss, options as ProtectWebSocketOptions)
    } catch (error) {
      thrown = error
    }
    expect(thrown).toMatchObject({ code: ErrorCodes.INVALID_OPTION })
    expect((thrown as Error).message).toContain(`protectWebSocketServer: "${option}"`)
    // Nothing was wrapped.
    expect(wss.handleUpgrade).toBe(original)
  })

  it.each([
    {
      options: { messagesPerSec: 5 },
      message: 'protectWebSocketServer: unknown option "messagesPerSec" (did you mean "messagesPerSecond"?)',
    },
    {
      options: { handshakesPerIp: { capacity: 5, refillPersecond: 1 } },
      message:
        'protectWebSocketServer: unknown option "handshakesPerIp.refillPersecond" (did you mean "refillPerSecond"?)',
    },
    {
      options: { identityMessages: { capacity: 100, refillPerSecond: 10, batches: 5 } },
      message: 'protectWebSocketServer: unknown option "identityMessages.batches" (did you mean "batch"?)',
    },
    {
      options: { hooks: { onDecison: () => {} } },
      message: 'protectWebSocketServer: unknown option "hooks.onDecison" (did you mean "onDecision"?)',
    },
  ])(
    'unknown key $options → TOLLBOOTH_ERR_INVALID_OPTION with the closest known name',
    ({ options, message }) => {
      const wss = new WebSocketServer({ noServer: true })
      cleanups.push(() => new Promise<void>((resolve) => wss.close(() => resolve())))
      const original = wss.handleUpgrade
      // The options come from a variable (it.each), as from JavaScript: only the runtime check can catch them.
      expect(() => protectWebSocketServer(wss, options as ProtectWebSocketOptions)).toThrow(
        expect.objectContaining({ code: ErrorCodes.INVALID_OPTION, message }),
      )
      expect(wss.handleUpgrade).toBe(original)
    },
  )

  // null is a value, never "use the default": a null maxConnectionsPerIdentity must not quietly become 10.
  it.each([
    'identify',
    'trustProxy',
    'ipv6Prefix',
    'ipv4Prefix',
    'store',
    'failPolicy',
    'name',
    'hooks',
    'maxConnectionsPerIdentity',
    'leaseMs',
    'handshakesPerIp',
    'maxConnections',
    'maxMessageBytes',
    'inflatedBytesPerSecond',
    'messagesPerSecond',
    'messageBurst',
    'dropsBeforeClose',
    'abuseFactor',
    'identityMessages',
    'maxBufferedBytes',
    'heartbeatMs',
    'maxSubscriptionsPerConnection',
    'onDrop',
    'onProtocolError',
  ])('%s: null → TOLLBOOTH_ERR_INVALID_OPTION naming it', (option) => {
    const wss = new WebSocketServer({ noServer: true })
    cleanups.push(() => new Promise<void>((resolve) => wss.close(() => resolve())))
    const original = wss.handleUpgrade
    expect(() => protectWebSocketServer(wss, { [option]: null } as ProtectWebSocketOptions)).toThrow(
      expect.objectContaining({
        code: ErrorCodes.INVALID_OPTION,
        message: expect.stringContaining(`"${option}"`),
      }),
    )
    expect(wss.handleUpgrade).toBe(original)
  })

  it('something other than a WebSocketServer → TOLLBOOTH_ERR_INVALID_OPTION naming "wss"', () => {
    expect(() => protectWebSocketServer({} as WebSocketServer)).toThrow(
      expect.objectContaining({ code: ErrorCodes.INVALID_OPTION, message: expect.stringContaining('"wss"') }),
    )
  })
})
