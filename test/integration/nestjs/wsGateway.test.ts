/**
 * A NestJS `ws` gateway (@nestjs/websockets on @nestjs/platform-ws' WsAdapter, sharing the HTTP server) protected by
 * tollbooth/ws: `protectWebSocketServer` on the server the gateway's `afterInit` is given, closed in
 * `onModuleDestroy`. Real `ws` clients: an identity's third connection over a cap of 2 is refused before the
 * upgrade (HTTP 429 with Retry-After and the RateLimit fields), another identity is not, and a closed connection
 * gives its slot back.
 */
import type { IncomingMessage } from 'node:http'
import { Module, type OnModuleDestroy } from '@nestjs/common'
import { WsAdapter } from '@nestjs/platform-ws'
import { type OnGatewayInit, SubscribeMessage, WebSocketGateway } from '@nestjs/websockets'
import { afterEach, describe, expect, it } from 'vitest'
import { WebSocket, type WebSocketServer } from 'ws'
import { protectWebSocketServer, type WebSocketProtection } from '../../../src/ws/index.js'
import { type NestServer, startNest } from '../../helpers/nestApps.js'

@WebSocketGateway()
class EchoGateway implements OnGatewayInit<WebSocketServer>, OnModuleDestroy {
  protection: WebSocketProtection | undefined

  afterInit(server: WebSocketServer): void {
    this.protection = protectWebSocketServer(server, {
      identify: (req: IncomingMessage) => `user:${String(req.headers['x-user'])}`,
      maxConnectionsPerIdentity: 2,
      handshakesPerIp: false,
    })
  }

  async onModuleDestroy(): Promise<void> {
    await this.protection?.close()
  }

  // Without parameter decorators Nest passes (client, data).
  @SubscribeMessage('echo')
  echo(_client: WebSocket, data: unknown) {
    return { event: 'echo', data }
  }
}

@Module({ providers: [EchoGateway] })
class GatewayModule {}

type Outcome =
  | { kind: 'open'; socket: WebSocket }
  | { kind: 'refused'; status: number; headers: IncomingMessage['headers'] }

/** Connects as `user`: the open socket, or the HTTP answer that refused the upgrade. */
function connect(url: string, user: string): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, { headers: { 'x-user': user } })
    socket.once('open', () => resolve({ kind: 'open', socket }))
    socket.once('unexpected-response', (_req, res) => {
      resolve({ kind: 'refused', status: res.statusCode ?? 0, headers: res.headers })
      res.resume()
      socket.terminate()
    })
    socket.once('error', reject)
  })
}

async function connectOpen(url: string, user: string): Promise<WebSocket> {
  const outcome = await connect(url, user)
  if (outcome.kind !== 'open') throw new Error(`refused with ${outcome.status}`)
  return outcome.socket
}

/** One request and its reply through the gateway. */
function echo(socket: WebSocket, data: string): Promise<unknown> {
  return new Promise((resolve) => {
    socket.once('message', (message) => resolve(JSON.parse(String(message))))
    socket.send(JSON.stringify({ event: 'echo', data }))
  })
}

/** Waits (a turn of the event loop at a time) until `condition` holds, at most `turns` times. */
async function until(condition: () => boolean, turns = 1000): Promise<boolean> {
  for (let i = 0; i < turns; i++) {
    if (condition()) return true
    await new Promise((resolve) => setTimeout(resolve, 2))
  }
  return condition()
}

describe('a Nest ws gateway protected by protectWebSocketServer', () => {
  const open: NestServer[] = []
  const sockets: WebSocket[] = []
  afterEach(async () => {
    for (const socket of sockets.splice(0)) socket.terminate()
    await Promise.all(open.splice(0).map((server) => server.close()))
  })

  it('an identity’s 3rd connection over a cap of 2 is refused with 429; another identity connects; a close gives the slot back', async () => {
    const server = await startNest('express', GatewayModule, {
      configure: (app) => app.useWebSocketAdapter(new WsAdapter(app)),
    })
    open.push(server)
    const protection = server.app.get(EchoGateway).protection as WebSocketProtection
    const url = `ws://127.0.0.1:${server.port}/`

    const first = await connectOpen(url, 'alice')
    const second = await connectOpen(url, 'alice')
    sockets.push(first, second)
    expect(await echo(first, 'hello')).toEqual({ event: 'echo', data: 'hello' })

    const third = await connect(url, 'alice')
    expect(third.kind).toBe('refused')
    if (third.kind !== 'refused') return
    expect(third.status).toBe(429)
    expect(Number(third.headers['retry-after'])).toBeGreaterThanOrEqual(1)
    expect(third.headers['ratelimit-policy']).toBe('"ws-connections";q=2;qu="concurrent-requests"')

    sockets.push(await connectOpen(url, 'bob'))
    expect(protection.openConnections).toBe(3)

    first.close()
    expect(await until(() => protection.openConnections === 2)).toBe(true)
    const again = await connectOpen(url, 'alice')
    sockets.push(again)
    expect(await echo(again, 'back')).toEqual({ event: 'echo', data: 'back' })
    expect(protection.openConnections).toBe(3)
  })
})
