/**
 * One client holding one IPv6 /56 (the delegation of a typical home line: 256 /64s) is one client to every limiter
 * keyed by address: it cannot walk around a limit by rotating through its addresses and its /64s. Walked here for every such limiter the GraphQL
 * plugin and the WebSocket guard create (the example server's are walked in exampleServer.test.ts), through real
 * HTTP and WebSocket connections from loopback, with `trustProxy: 'loopback'` so that X-Forwarded-For chooses the
 * client address. Each test also shows a second /56 counted on its own, and `ipv6Prefix` / `ipv4Prefix` changing
 * the grouping (so the grouping is the prefix's doing, not every address falling under one key).
 */
import { randomUUID } from 'node:crypto'
import { once } from 'node:events'
import type { AddressInfo } from 'node:net'
import { createSchema, createYoga } from 'graphql-yoga'
import { afterEach, describe, expect, it } from 'vitest'
import { WebSocket, WebSocketServer } from 'ws'
import { tokenBucket } from '../../src/core/limiters/tokenBucket.js'
import { MemoryStore } from '../../src/core/stores/memoryStore.js'
import {
  costDirectivesTypeDefs,
  type TollboothGraphQLOptions,
  useTollbooth,
} from '../../src/graphql/index.js'
import { type ProtectWebSocketOptions, protectWebSocketServer } from '../../src/ws/index.js'
import { listen, openSse, postGraphQL } from '../helpers/graphqlHttp.js'

/** Eight addresses, each in a /64 of its own, of one /56 (`2001:db8:5::/56`); one address outside it. */
const ONE_NETWORK = Array.from({ length: 8 }, (_, i) => `2001:db8:5:${(i * 31).toString(16)}::${i + 1}`)
const OTHER_NETWORK = '2001:db8:5:105::1'
/** The first address of four /64s of one /56 (`2001:db8:5::/56`), the delegation of a typical home line. */
const ONE_SITE = ['2001:db8:5:5::1', '2001:db8:5:6::1', '2001:db8:5:10::1', '2001:db8:5:ff::1']

const cleanups: (() => unknown)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const from = (address: string) => ({ 'x-forwarded-for': address })

describe('useTollbooth: every limiter keyed by address counts a /56 as one client', () => {
  const typeDefs = /* GraphQL */ `
    type Query { items(first: Int = 10): [ID!]! @listSize(slicingArguments: ["first"]) @cost(weight: 1) }
    type Mutation { login(email: String!, password: String!): Boolean }
    type Subscription { ticks: Int! }
  `

  async function start(options: Partial<TollboothGraphQLOptions> = {}) {
    const calls = { login: 0 }
    const schema = createSchema({
      typeDefs: [costDirectivesTypeDefs, typeDefs],
      resolvers: {
        Query: { items: (_: unknown, { first }: { first: number }) => Array.from({ length: first }, String) },
        Mutation: {
          login: () => {
            calls.login++
            return false
          },
        },
        Subscription: {
          ticks: {
            // One event, then held open until the client goes.
            subscribe: async function* () {
              yield { ticks: 1 }
              await new Promise(() => {})
            },
          },
        },
      },
    })
    const store = new MemoryStore()
    const yoga = createYoga({
      schema,
      logging: false,
      plugins: [
        useTollbooth({
          limiter: tokenBucket({
            name: `budget-${randomUUID().slice(0, 8)}`,
            store,
            capacity: 50,
            refillPerSecond: 0.01,
          }),
          store,
          trustProxy: 'loopback',
          fieldLimits: { 'Mutation.login': { limit: 5, windowMs: 60_000, by: ['email'] } },
          subscriptions: { maxPerIdentity: 2 },
          ...options,
        }),
      ],
    })
    const server = await listen(yoga)
    cleanups.push(() => server.close())
    const post = (query: string, address: string) =>
      postGraphQL(server.url, query, { headers: from(address) })
    return { calls, url: server.url, post }
  }

  const LOGIN = 'mutation { login(email: "victim@example.com", password: "guess") }'

  it('the login field limit: 40 attempts rotating over 8 /64s of one /56 run 5 times', async () => {
    const server = await start({
      limiter: tokenBucket({ name: 'big', capacity: 10_000, refillPerSecond: 1 }),
    })
    const statuses: number[] = []
    for (let attempt = 0; attempt < 40; attempt++) {
      const reply = await server.post(LOGIN, ONE_NETWORK[attempt % 8] as string)
      statuses.push(reply.status)
      if (reply.status === 429) expect(reply.body.errors?.[0]?.extensions?.field).toBe('Mutation.login')
    }
    expect(statuses.filter((status) => status === 200)).toHaveLength(5)
    expect(statuses.filter((status) => status === 429)).toHaveLength(35)
    expect(server.calls.login).toBe(5)
    // The next /56 is another client.
    expect((await server.post(LOGIN, OTHER_NETWORK)).status).toBe(200)
    expect(server.calls.login).toBe(6)
  })

  it('the login field limit counts a /56 as one client: rotating through its /64s runs 5 attempts in all', async () => {
    const server = await start({
      limiter: tokenBucket({ name: 'big-56', capacity: 10_000, refillPerSecond: 1 }),
    })
    for (let attempt = 0; attempt < 20; attempt++) await server.post(LOGIN, ONE_SITE[attempt % 4] as string)
    expect(server.calls.login).toBe(5)
  })

  it('a field limit with its own ipv6Prefix: per address at 128, per /48 at 48', async () => {
    const limiter = tokenBucket({ name: 'big-128', capacity: 10_000, refillPerSecond: 1 })
    const perAddress = await start({
      limiter,
      fieldLimits: { 'Mutation.login': { limit: 5, windowMs: 60_000, by: ['email'], ipv6Prefix: 128 } },
    })
    for (let attempt = 0; attempt < 40; attempt++)
      await perAddress.post(LOGIN, ONE_NETWORK[attempt % 8] as string)
    expect(perAddress.calls.login).toBe(40)

    // The plugin's ipv6Prefix applies to field limits that do not set their own.
    const perSite = await start({ limiter, ipv6Prefix: 48 })
    for (const address of [...ONE_NETWORK.slice(0, 3), OTHER_NETWORK, OTHER_NETWORK, OTHER_NETWORK]) {
      await perSite.post(LOGIN, address)
    }
    expect(perSite.calls.login).toBe(5)
  })

  it('the cost budget (the default identity): 8 /64s of one /56 share one budget', async () => {
    const server = await start()
    const statuses: number[] = []
    // 10 each from a budget of 50.
    for (const address of ONE_NETWORK)
      statuses.push((await server.post('{ items(first: 10) }', address)).status)
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429, 429])
    expect((await server.post('{ items(first: 10) }', OTHER_NETWORK)).status).toBe(200)

    const perAddress = await start({ ipv6Prefix: 128 })
    for (const address of ONE_NETWORK) {
      expect((await perAddress.post('{ items(first: 10) }', address)).status).toBe(200)
    }
  })

  it('subscription leases (per identity): 2 open for the /56, whichever of its addresses asks', async () => {
    const server = await start()
    const statuses: number[] = []
    for (const address of ONE_NETWORK.slice(0, 4)) {
      const stream = await openSse(server.url, 'subscription { ticks }', from(address))
      cleanups.push(() => stream.abort())
      statuses.push(stream.status)
      if (stream.status !== 200) expect(stream.body).toContain('SUBSCRIPTION_LIMIT_EXCEEDED')
    }
    expect(statuses).toEqual([200, 200, 429, 429])
    const other = await openSse(server.url, 'subscription { ticks }', from(OTHER_NETWORK))
    cleanups.push(() => other.abort())
    expect(other.status).toBe(200)
  })
})

describe('protectWebSocketServer: every limiter keyed by address counts a /56 as one client', () => {
  async function start(options: ProtectWebSocketOptions) {
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' })
    await once(wss, 'listening')
    const delivered: string[] = []
    let dropped = 0
    const protection = protectWebSocketServer(wss, {
      trustProxy: 'loopback',
      handshakesPerIp: false,
      heartbeatMs: 0,
      onDrop: () => {
        dropped++
      },
      ...options,
    })
    wss.on('connection', (socket) => socket.on('message', (data) => delivered.push(data.toString())))
    cleanups.push(async () => {
      await protection.close()
      for (const client of wss.clients) client.terminate()
      await new Promise((resolve) => wss.close(resolve))
    })
    const url = `ws://127.0.0.1:${(wss.address() as AddressInfo).port}`
    /** Opens a connection as `address`: the socket, or the HTTP status of the refused upgrade. */
    const connect = (address: string) =>
      new Promise<WebSocket | number>((resolve, reject) => {
        const socket = new WebSocket(url, { headers: from(address) })
        socket.once('open', () => {
          cleanups.push(() => socket.terminate())
          resolve(socket)
        })
        socket.once('unexpected-response', (_request, response) => resolve(response.statusCode ?? 0))
        socket.once('error', reject)
      })
    return { connect, delivered, dropped: () => dropped }
  }

  const outcome = (result: WebSocket | number) => (typeof result === 'number' ? result : 'open')

  it('handshakes per IP: a bucket of 3 for the whole /56', async () => {
    const server = await start({ handshakesPerIp: { capacity: 3, refillPerSecond: 0.001 } })
    const outcomes: (number | string)[] = []
    for (const address of ONE_NETWORK) outcomes.push(outcome(await server.connect(address)))
    expect(outcomes).toEqual(['open', 'open', 'open', 429, 429, 429, 429, 429])
    expect(outcome(await server.connect(OTHER_NETWORK))).toBe('open')
  })

  it('connections per identity (the default identity is the address): 2 for the whole /56', async () => {
    const server = await start({ maxConnectionsPerIdentity: 2 })
    const outcomes: (number | string)[] = []
    for (const address of ONE_NETWORK) outcomes.push(outcome(await server.connect(address)))
    expect(outcomes).toEqual(['open', 'open', 429, 429, 429, 429, 429, 429])
    expect(outcome(await server.connect(OTHER_NETWORK))).toBe('open')
  })

  it('ipv6Prefix and ipv4Prefix change the grouping', async () => {
    const perAddress = await start({ maxConnectionsPerIdentity: 2, ipv6Prefix: 128 })
    for (const address of ONE_NETWORK) expect(outcome(await perAddress.connect(address))).toBe('open')

    const perIpv4Network = await start({ maxConnectionsPerIdentity: 2, ipv4Prefix: 24 })
    const outcomes: (number | string)[] = []
    for (let host = 1; host <= 4; host++)
      outcomes.push(outcome(await perIpv4Network.connect(`10.0.0.${host}`)))
    expect(outcomes).toEqual(['open', 'open', 429, 429])
    expect(outcome(await perIpv4Network.connect('10.0.1.1'))).toBe('open')
  })

  it("identity messages: the /56's connections draw on one budget of 4", async () => {
    const server = await start({ identityMessages: { capacity: 4, refillPerSecond: 0.001, batch: 1 } })
    const sockets: WebSocket[] = []
    for (const address of ONE_NETWORK.slice(0, 2)) {
      const socket = await server.connect(address)
      if (typeof socket === 'number') throw new Error(`refused with ${socket}`)
      sockets.push(socket)
    }
    for (let i = 0; i < 3; i++) for (const [n, socket] of sockets.entries()) socket.send(`${n}:${i}`)
    const deadline = Date.now() + 5000
    while (server.delivered.length + server.dropped() < 6 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
    expect(server.delivered).toHaveLength(4)
    expect(server.dropped()).toBe(2)
  })
})
