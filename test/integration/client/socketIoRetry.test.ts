/**
 * socketIoRetry against a real tollbooth/socket.io server on 127.0.0.1, with socket.io-client sockets: every wait it
 * takes goes through a `sleep` that records the delay and resolves when the test lets it, so the delays the server
 * asked for are asserted exactly and the tests never sleep for them.
 */
import { type Socket as ClientSocket, io } from 'socket.io-client'
import { afterEach, describe, expect, it } from 'vitest'
import { socketIoRefusalOf, socketIoRetry } from '../../../src/client/index.js'
import { byUser, type ProtectedSocketIo, startProtectedSocketIo, until } from '../../helpers/socketIo.js'

const cleanups: (() => unknown)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function server(options: Parameters<typeof startProtectedSocketIo>[0]): Promise<ProtectedSocketIo> {
  const s = await startProtectedSocketIo(options)
  cleanups.push(() => s.close())
  return s
}

/** A sleep that records each delay and waits until the test calls `wake()`. */
function recordingSleep() {
  const delays: number[] = []
  const waiting: (() => void)[] = []
  return {
    delays,
    sleep: (ms: number) => {
      delays.push(ms)
      return new Promise<void>((resolve) => waiting.push(resolve))
    },
    wake: () => {
      for (const resolve of waiting.splice(0)) resolve()
    },
  }
}

function client(url: string, options: Record<string, unknown> = {}): ClientSocket {
  const socket = io(url, { reconnection: false, forceNew: true, autoConnect: false, ...options })
  cleanups.push(() => socket.close())
  return socket
}

/** Full jitter at its top: the backoff's delay is its cap (minus one ms), so a server's wait is told apart from it. */
const noJitter = { random: () => 0.999, baseMs: 100, maxMs: 1000 }

describe('socketIoRetry', () => {
  it('waits out the Retry-After of a refused polling handshake, then connects', async () => {
    const s = await server({ handshakesPerIp: { capacity: 1, refillPerSecond: 0.1 } })
    const first = client(s.url, { transports: ['polling'] })
    first.connect()
    await new Promise<void>((resolve) => first.once('connect', () => resolve()))
    const socket = client(s.url, { transports: ['polling'] })
    const { delays, sleep } = recordingSleep()
    cleanups.push(socketIoRetry(socket, { ...noJitter, sleep }))
    socket.connect()
    await until(() => delays.length === 1, 'the first wait')
    // One token per 10 s: the server asked for 10 s, far above the 99 ms backoff.
    expect(delays[0]).toBe(10_000)
  })

  it('waits out the retryAfter of TOO_MANY_CONNECTIONS, and connects once a slot is back', async () => {
    const s = await server({ ...byUser, handshakesPerIp: false, maxConnectionsPerIdentity: 1, leaseMs: 9000 })
    const holder = client(s.url, { auth: { user: 'ann' } })
    holder.connect()
    await new Promise<void>((resolve) => holder.once('connect', () => resolve()))
    const socket = client(s.url, { auth: { user: 'ann' } })
    const { delays, sleep, wake } = recordingSleep()
    let connects = 0
    socket.on('connect', () => connects++)
    cleanups.push(socketIoRetry(socket, { ...noJitter, sleep }))
    socket.connect()
    await until(() => delays.length === 1, 'the first wait')
    expect(delays[0]).toBe(9000)
    holder.disconnect()
    await until(() => s.protection.openConnections === 0, 'the slot back')
    wake()
    await until(() => connects === 1, 'the reconnection')
  })

  it('gives up on UNAUTHORIZED, an app middleware error, and ABUSE, without waiting', async () => {
    const s = await server({
      identify: (socket) => {
        if (socket.handshake.auth.user === undefined) throw new Error('who?')
        return String(socket.handshake.auth.user)
      },
      handshakesPerIp: false,
      eventsPerSecond: 1,
      dropsBeforeDisconnect: 3,
      abuseFactor: 2,
    })
    s.io.use((socket, next) =>
      next(socket.handshake.auth.user === 'banned' ? new Error('banned') : undefined),
    )
    const reasons: unknown[] = []
    for (const auth of [{}, { user: 'banned' }]) {
      const socket = client(s.url, { auth })
      const { delays, sleep } = recordingSleep()
      cleanups.push(socketIoRetry(socket, { sleep, onGiveUp: (reason) => reasons.push(reason) }))
      socket.connect()
      await until(
        () => reasons.length > 0 && reasons.length === (Object.keys(auth).length === 0 ? 1 : 2),
        'giving up',
      )
      expect(delays).toEqual([])
    }
    expect(socketIoRefusalOf(reasons[0])?.code).toBe('UNAUTHORIZED')
    expect((reasons[1] as Error).message).toBe('banned')
    const flooder = client(s.url, { auth: { user: 'ann' } })
    const { delays, sleep } = recordingSleep()
    cleanups.push(socketIoRetry(flooder, { sleep, onGiveUp: (reason) => reasons.push(reason) }))
    flooder.connect()
    await new Promise<void>((resolve) => flooder.once('connect', () => resolve()))
    for (let i = 0; i < 20; i++) flooder.emit('flood')
    await until(() => reasons.length === 3, 'giving up after ABUSE')
    expect(socketIoRefusalOf(reasons[2])?.code).toBe('ABUSE')
    expect(delays).toEqual([])
  })

  it('reconnects after a RATE_LIMITED disconnect no sooner than its retryAfter, and after a dropped transport with the backoff', async () => {
    const s = await server({
      ...byUser,
      handshakesPerIp: false,
      eventsPerSecond: 0.5,
      eventBurst: 1,
      dropsBeforeDisconnect: 2,
      abuseFactor: 1000,
    })
    const socket = client(s.url, { auth: { user: 'ann' } })
    const { delays, sleep, wake } = recordingSleep()
    let connects = 0
    socket.on('connect', () => connects++)
    cleanups.push(socketIoRetry(socket, { ...noJitter, sleep }))
    socket.connect()
    await until(() => connects === 1, 'the connection')
    for (let i = 0; i < 3; i++) socket.emit('tick')
    await until(() => delays.length === 1, 'the wait after the disconnect')
    // The refused event's token is due in 2 s (0.5 per second), above the 1 s floor of a disconnect notice.
    expect(delays[0]).toBe(2000)
    wake()
    await until(() => connects === 2, 'the reconnection')
    // The server's side of the connection goes away: a network failure, retried with the backoff alone.
    for (const server of s.sockets) server.conn.close()
    await until(() => delays.length === 2, 'the wait after the transport closed')
    expect(delays[1]).toBe(99)
  })

  it('refuses a socket the Manager reconnects itself, and unknown options', () => {
    const managed = io('http://127.0.0.1:1', { autoConnect: false, forceNew: true })
    cleanups.push(() => managed.close())
    expect(() => socketIoRetry(managed)).toThrow(/reconnection: false/)
    expect(() => socketIoRetry(client('http://127.0.0.1:1'), { maxAttempt: 3 } as never)).toThrow(
      /maxAttempt/,
    )
  })
})
