/**
 * graphqlWsRetry with a real graphql-ws client against a real tollbooth-protected graphql-ws server
 * (protectWebSocketServer over a `ws` server on 127.0.0.1 port 0): a connection closed 1013 for going over its
 * message rate reconnects after the pair's backoff and its subscription completes; a 1008 (abuse) and a graphql-ws
 * 4403 are final; a refused upgrade is retried no sooner than its Retry-After (Node, `withUpgradeRefusals`), and a
 * 401 is final. The server counts every upgrade request and every admitted connection.
 */
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { GraphQLInt, GraphQLObjectType, GraphQLSchema, GraphQLString } from 'graphql'
import { type Client, createClient, type ServerOptions } from 'graphql-ws'
import { type Extra, useServer } from 'graphql-ws/use/ws'
import { afterEach, describe, expect, it } from 'vitest'
import { WebSocket, WebSocketServer } from 'ws'
import { graphqlWsRetry, refusedUpgradeOf, withUpgradeRefusals } from '../../../src/client/index.js'
import {
  type ProtectWebSocketOptions,
  protectWebSocketServer,
  type WebSocketProtection,
} from '../../../src/ws/index.js'

const cleanups: (() => unknown)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const schema = new GraphQLSchema({
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
          for (let i = 1; i <= (args.to ?? 3); i++) yield { count: i }
        },
      },
    },
  }),
})

interface Served {
  readonly url: string
  /** Upgrade requests the HTTP server received, admitted or not. */
  readonly upgrades: () => number
  /** Connections tollbooth admitted and graphql-ws served. */
  readonly connections: () => number
}

/** A graphql-ws server behind protectWebSocketServer, on its own node:http server. */
async function serve(
  protect: ProtectWebSocketOptions,
  onConnect?: (
    protection: () => WebSocketProtection,
  ) => ServerOptions<Record<string, unknown> | undefined, Extra>['onConnect'],
): Promise<Served> {
  const http: Server = createServer()
  let upgrades = 0
  http.on('upgrade', () => upgrades++)
  const wss = new WebSocketServer({ server: http })
  let connections = 0
  wss.on('connection', () => connections++)
  // useServer first, as an app does; the protection wraps the server afterwards.
  let protection: WebSocketProtection | undefined
  const connect = onConnect?.(() => protection as WebSocketProtection)
  useServer({ schema, ...(connect ? { onConnect: connect } : {}) }, wss)
  protection = protectWebSocketServer(wss, { heartbeatMs: 0, ...protect })
  const active = protection
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  cleanups.push(async () => {
    await active.close()
    for (const ws of wss.clients) ws.terminate()
    await new Promise((resolve) => wss.close(resolve))
    http.closeAllConnections()
    await new Promise((resolve) => http.close(resolve))
  })
  return {
    url: `ws://127.0.0.1:${(http.address() as AddressInfo).port}`,
    upgrades: () => upgrades,
    connections: () => connections,
  }
}

interface Tracked {
  readonly client: Client
  /** The delay of every reconnection the pair waited for, in order. */
  readonly waits: number[]
  /** Close events the client saw. */
  readonly closes: { code: number; reason: string }[]
}

/**
 * A graphql-ws client using graphqlWsRetry (baseMs 40, jitter of half the cap: 20 ms, then 40, 80, …), whose waits
 * are recorded and then really waited. `onFirstConnection` runs with the socket of the first connection only.
 */
function client(
  url: string,
  options: {
    webSocketImpl?: unknown
    connectionParams?: Record<string, unknown>
    /** Connect at once and stay connected while idle. */
    eager?: boolean
    onFirstConnection?: (socket: WebSocket) => void
  } = {},
): Tracked {
  const waits: number[] = []
  const closes: Tracked['closes'] = []
  const retry = graphqlWsRetry({
    baseMs: 40,
    maxMs: 1_000,
    maxAttempts: 3,
    random: () => 0.5,
    sleep: (ms) => {
      waits.push(ms)
      return new Promise((resolve) => setTimeout(resolve, ms))
    },
  })
  const graphqlClient = createClient({
    url,
    webSocketImpl: options.webSocketImpl ?? WebSocket,
    ...(options.connectionParams ? { connectionParams: options.connectionParams } : {}),
    ...(options.eager ? { lazy: false, onNonLazyError: () => {} } : {}),
    ...retry,
    on: {
      connected: (socket, _payload, wasRetry) => {
        if (!wasRetry) options.onFirstConnection?.(socket as WebSocket)
      },
      closed: (event) => {
        const { code, reason } = event as { code: number; reason: string }
        closes.push({ code, reason })
      },
    },
  })
  cleanups.push(() => graphqlClient.dispose())
  return { client: graphqlClient, waits, closes }
}

/** Runs `query` to its end: its results, and what the sink's error got (`undefined` on completion). */
function run(graphqlClient: Client, query: string): Promise<{ results: unknown[]; error: unknown }> {
  const results: unknown[] = []
  return new Promise((resolve) => {
    graphqlClient.subscribe(
      { query },
      {
        next: (result) => results.push(result),
        error: (error) => resolve({ results, error }),
        complete: () => resolve({ results, error: undefined }),
      },
    )
  })
}

/** Sends graphql-ws pings (valid protocol messages) at once, more than the connection's burst. */
const pingFlood = (count: number) => (socket: WebSocket) => {
  for (let i = 0; i < count; i++) socket.send(JSON.stringify({ type: 'ping' }))
}

describe('graphqlWsRetry with a real graphql-ws client and a tollbooth/ws server', () => {
  it('reconnects after a 1013 (over the message rate) with the backoff, and the subscription completes', async () => {
    // 20 messages/s with a burst of 3: the 4th message at once is dropped, and one drop closes (dropsBeforeClose 1).
    // abuseFactor 10 → 1008 only from 200 messages/s, which 4 messages over the ≥100 ms judged never reach: 1013.
    const server = await serve({
      messagesPerSecond: 20,
      messageBurst: 3,
      dropsBeforeClose: 1,
      abuseFactor: 10,
    })
    const tracked = client(server.url, { onFirstConnection: pingFlood(10) })

    const { results, error } = await run(tracked.client, 'subscription { count(to: 3) }')

    expect(error).toBeUndefined()
    expect(results).toEqual([{ data: { count: 1 } }, { data: { count: 2 } }, { data: { count: 3 } }])
    expect(tracked.closes[0]).toEqual({ code: 1013, reason: 'rate limited' })
    expect(tracked.waits).toEqual([20]) // one reconnection, after 0.5 × baseMs
    expect(server.upgrades()).toBe(2)
    expect(server.connections()).toBe(2)
  })

  it('gives up on a 1008 (message rate abuse): no reconnection', async () => {
    // 2 messages/s with abuseFactor 2: the 4 messages received by the first drop, within the second over which
    // they are judged, are at least 4/s, which is abuse.
    const server = await serve({
      messagesPerSecond: 2,
      messageBurst: 3,
      dropsBeforeClose: 1,
      abuseFactor: 2,
    })
    const tracked = client(server.url, { onFirstConnection: pingFlood(10) })

    const { results, error } = await run(tracked.client, 'subscription { count(to: 3) }')

    expect(error).toMatchObject({ code: 1008, reason: 'message rate abuse' })
    expect(results).toEqual([])
    expect(tracked.closes).toEqual([{ code: 1008, reason: 'message rate abuse' }])
    expect(tracked.waits).toEqual([])
    expect(server.connections()).toBe(1)
  })

  it('gives up on a graphql-ws 4403 (the identity refused), which graphql-ws alone would retry', async () => {
    // One connection per user: the second of alice's is refused by rekey in onConnect, which graphql-ws turns into
    // a 4403 close; its default retries 4403 ("might grant access after retry"), the pair does not.
    const server = await serve({ maxConnectionsPerIdentity: 1 }, (protection) => async (ctx) => {
      const user = ctx.connectionParams?.user
      if (typeof user !== 'string') return false
      return (await protection().rekey(ctx.extra.socket, user)).allowed
    })
    const alice = client(server.url, { connectionParams: { user: 'alice' }, eager: true })
    await new Promise<void>((resolve) => alice.client.on('connected', () => resolve()))
    const alice2 = client(server.url, { connectionParams: { user: 'alice' } })

    const { error } = await run(alice2.client, '{ hello }')

    expect(error).toMatchObject({ code: 4403, reason: 'Forbidden' })
    expect(alice2.closes).toEqual([{ code: 4403, reason: 'Forbidden' }])
    expect(alice2.waits).toEqual([])
    expect(server.connections()).toBe(2)
    expect(alice.closes).toEqual([])
  })
})

describe('graphqlWsRetry and refused upgrades', () => {
  it("waits for a refused upgrade's Retry-After (Node, withUpgradeRefusals), then connects", async () => {
    // One handshake per second per IP: a first client spends it, the graphql-ws client's upgrade gets 429 with
    // Retry-After: 1 before any 101, and its reconnection a second later finds the token refilled.
    const server = await serve({ handshakesPerIp: { capacity: 1, refillPerSecond: 1 } })
    const first = new WebSocket(server.url)
    cleanups.push(() => first.terminate())
    await new Promise((resolve) => first.once('open', resolve))
    const tracked = client(server.url, { webSocketImpl: withUpgradeRefusals(WebSocket) })

    const { results, error } = await run(tracked.client, '{ hello }')

    expect(error).toBeUndefined()
    expect(results).toEqual([{ data: { hello: 'world' } }])
    // The backoff alone would have been 20 ms; the server asked for 1 s.
    expect(tracked.waits).toEqual([1_000])
    expect(server.upgrades()).toBe(3) // the first client, the refused upgrade, the reconnection
    expect(server.connections()).toBe(2)
  })

  it('without withUpgradeRefusals (as in a browser) the refused upgrade is retried with the backoff alone', async () => {
    const server = await serve({ handshakesPerIp: { capacity: 1, refillPerSecond: 1 } })
    const first = new WebSocket(server.url)
    cleanups.push(() => first.terminate())
    await new Promise((resolve) => first.once('open', resolve))
    const tracked = client(server.url)

    const { error } = await run(tracked.client, '{ hello }')

    // Three reconnections after 20, 40 and 80 ms, all well within the second the bucket needs: all refused.
    expect(error).toMatchObject({ message: 'Unexpected server response: 429' })
    expect(tracked.waits).toEqual([20, 40, 80])
    expect(server.upgrades()).toBe(5)
    expect(server.connections()).toBe(1)
  })

  it('gives up on a refused upgrade that waiting cannot fix (401: identify threw)', async () => {
    const server = await serve({
      identify: () => {
        throw new Error('no token')
      },
    })
    const tracked = client(server.url, { webSocketImpl: withUpgradeRefusals(WebSocket) })

    const { error } = await run(tracked.client, '{ hello }')

    expect(refusedUpgradeOf(error)?.status).toBe(401)
    expect(tracked.waits).toEqual([])
    expect(server.upgrades()).toBe(1)
    expect(server.connections()).toBe(0)
  })
})
