/**
 * Frames ws refuses on its own (here: messages over `maxMessageBytes`, closed with 1009) are something any client
 * can send at will. On a graphql-ws server they must not reach graphql-ws' socket 'error' listener, which logs
 * each one with its stack: the server's console stays silent, each socket still gets 1009, and `onProtocolError`
 * sees every one. On a plain ws server the app's own 'error' listener keeps getting them.
 *
 * Real servers on 127.0.0.1 port 0 and real `ws` clients; console.error / console.warn are spied on to read what
 * the server would have printed.
 */
import { once } from 'node:events'
import { buildSchema } from 'graphql'
import { useServer } from 'graphql-ws/use/ws'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { WebSocket, WebSocketServer } from 'ws'
import { ErrorCodes } from '../../../src/core/errors.js'
import { protectWebSocketServer, type WebSocketProtocolError } from '../../../src/ws/index.js'
import { clientFrame, rawConnect, upgradeRequestLines } from '../../helpers/rawWebSocket.js'

const HOST = '127.0.0.1'
const MAX_MESSAGE_BYTES = 1024
const OVERSIZED = 'x'.repeat(MAX_MESSAGE_BYTES + 1)
const ATTEMPTS = 10
const schema = buildSchema('type Query { hello: String }')

const cleanups: (() => unknown)[] = []
afterEach(async () => {
  vi.restoreAllMocks()
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function listen(wss: WebSocketServer): Promise<string> {
  await once(wss, 'listening')
  cleanups.push(() => {
    for (const socket of wss.clients) socket.terminate()
    return new Promise((resolve) => wss.close(resolve))
  })
  return `ws://${HOST}:${(wss.address() as { port: number }).port}`
}

/** Connects (offering `protocol`, if any), sends one oversized message, and resolves with the close code it got. */
async function sendOversized(url: string, protocol?: string): Promise<number> {
  const client = protocol === undefined ? new WebSocket(url) : new WebSocket(url, protocol)
  client.on('error', () => {})
  cleanups.push(() => client.terminate())
  await once(client, 'open')
  expect(client.protocol).toBe(protocol ?? '')
  const closed = once(client, 'close') as Promise<[number, Buffer]>
  client.send(OVERSIZED)
  const [code] = await closed
  return code
}

/** console.error and console.warn, spied on: every line the server would have printed (kept out of the output). */
function consoleLines(): () => unknown[][] {
  const error = vi.spyOn(console, 'error').mockImplementation(() => {})
  const warn = vi.spyOn(console, 'warn').mockImplementation(() => {})
  return () => [...error.mock.calls, ...warn.mock.calls]
}

describe('protocol errors: messages over maxMessageBytes', () => {
  it(`graphql-ws: ${ATTEMPTS} oversized messages, ${ATTEMPTS} closes with 1009, nothing on the console`, async () => {
    const wss = new WebSocketServer({ port: 0, host: HOST })
    useServer({ schema }, wss)
    const seen: WebSocketProtocolError[] = []
    const protection = protectWebSocketServer(wss, {
      maxMessageBytes: MAX_MESSAGE_BYTES,
      heartbeatMs: 0,
      onProtocolError: (_socket, error) => seen.push(error),
    })
    cleanups.push(() => protection.close())
    const url = await listen(wss)
    const printed = consoleLines()

    const codes: number[] = []
    for (let i = 0; i < ATTEMPTS; i++) codes.push(await sendOversized(url, 'graphql-transport-ws'))

    expect(codes).toEqual(Array(ATTEMPTS).fill(1009))
    expect(seen.map((error) => error.code)).toEqual(Array(ATTEMPTS).fill('WS_ERR_UNSUPPORTED_MESSAGE_LENGTH'))
    expect(printed()).toEqual([])
    expect(protection.openConnections).toBe(0)
  })

  it('graphql-ws without the protection logs each one (what the test above would catch)', async () => {
    const wss = new WebSocketServer({ port: 0, host: HOST, maxPayload: MAX_MESSAGE_BYTES })
    useServer({ schema }, wss)
    const url = await listen(wss)
    const printed = consoleLines()

    expect(await sendOversized(url, 'graphql-transport-ws')).toBe(1009)
    expect(await sendOversized(url, 'graphql-transport-ws')).toBe(1009)

    const logged = 'Internal error emitted on a WebSocket socket. Please check your implementation.'
    expect(printed().map(([message, error]) => [message, (error as { code?: string }).code])).toEqual([
      [logged, 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH'],
      [logged, 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH'],
    ])
  })

  it("plain ws: the app's 'error' listener and onProtocolError both see each one", async () => {
    const wss = new WebSocketServer({ port: 0, host: HOST })
    const seen: string[] = []
    const protection = protectWebSocketServer(wss, {
      maxMessageBytes: MAX_MESSAGE_BYTES,
      heartbeatMs: 0,
      onProtocolError: (_socket, error) => seen.push(`hook ${error.code}`),
    })
    cleanups.push(() => protection.close())
    wss.on('connection', (socket) => {
      socket.on('error', (error: Error & { code?: string }) => seen.push(`listener ${error.code}`))
    })
    const url = await listen(wss)

    expect(await sendOversized(url)).toBe(1009)
    expect(await sendOversized(url)).toBe(1009)

    expect(seen).toEqual([
      'hook WS_ERR_UNSUPPORTED_MESSAGE_LENGTH',
      'listener WS_ERR_UNSUPPORTED_MESSAGE_LENGTH',
      'hook WS_ERR_UNSUPPORTED_MESSAGE_LENGTH',
      'listener WS_ERR_UNSUPPORTED_MESSAGE_LENGTH',
    ])
  })

  it('graphql-ws: a socket that offered no subprotocol is no way around it (bad frames sent with the handshake)', async () => {
    const wss = new WebSocketServer({ port: 0, host: HOST })
    useServer({ schema }, wss)
    const seen: string[] = []
    const protection = protectWebSocketServer(wss, {
      heartbeatMs: 0,
      onProtocolError: (_socket, error) => seen.push(error.code),
    })
    cleanups.push(() => protection.close())
    const url = await listen(wss)
    const port = Number(new URL(url).port)
    const printed = consoleLines()

    for (let i = 0; i < ATTEMPTS; i++) {
      const raw = await rawConnect(port, HOST)
      // No Sec-WebSocket-Protocol: graphql-ws closes such a socket with 4406, its 'error' listener already attached.
      // The frame with opcode 3 (reserved) arrives in the same write as the handshake.
      raw.socket.write(
        Buffer.concat([
          Buffer.from(`${upgradeRequestLines(HOST, port).join('\r\n')}\r\n\r\n`),
          clientFrame({ opcode: 3, payload: Buffer.from('x') }),
        ]),
      )
      await raw.gone
    }

    expect(seen).toEqual(Array(ATTEMPTS).fill('WS_ERR_INVALID_OPCODE'))
    expect(printed()).toEqual([])
  })

  it('a throwing onProtocolError changes nothing: each socket still gets 1009, the next one is served', async () => {
    const wss = new WebSocketServer({ port: 0, host: HOST })
    useServer({ schema }, wss)
    let calls = 0
    const protection = protectWebSocketServer(wss, {
      maxMessageBytes: MAX_MESSAGE_BYTES,
      heartbeatMs: 0,
      onProtocolError: () => {
        calls++
        throw new Error('broken counter')
      },
    })
    cleanups.push(() => protection.close())
    const url = await listen(wss)
    const printed = consoleLines()

    expect(await sendOversized(url, 'graphql-transport-ws')).toBe(1009)
    expect(await sendOversized(url, 'graphql-transport-ws')).toBe(1009)

    expect(calls).toBe(2)
    expect(printed()).toEqual([])
  })

  it('onProtocolError must be a function', () => {
    const wss = new WebSocketServer({ noServer: true })
    expect(() => protectWebSocketServer(wss, { onProtocolError: 42 as never })).toThrow(
      expect.objectContaining({
        code: ErrorCodes.INVALID_OPTION,
        message: 'protectWebSocketServer: "onProtocolError" must be a function, got 42',
      }),
    )
  })
})
