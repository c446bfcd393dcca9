/**
 * `npm start` — examples/server.ts, run as a child process (node with tsx's loader, as `npm start` runs it, on PORT=0).
 *
 * The six commands of its banner are run exactly as printed (`sh -c <line>`, from the repository's directory):
 * a 200 with `extensions.cost`, a 429 with `Retry-After`, a WebSocket refused with HTTP 429 at its cap, a 6th
 * REST login attempt refused, an upload past its size cut off with 413, and Socket.IO events past their burst
 * acknowledged with RATE_LIMITED. Then,
 * on the same process: GraphiQL's page, the GraphiQL introspection query through the guards, the `/chat` WebSocket,
 * a graphql-ws subscription and one over SSE, a chat message reaching a GraphQL subscription, `/metrics` (names,
 * and no identity in any label), and SIGTERM (an open chat socket closed with 1001, exit code 0). Another process
 * runs on the test Redis (REDIS_URL) to show the banner names it and a query works there, and a third behind a
 * trusted proxy (TRUST_PROXY=loopback) to show every limit keyed by address counting a /56 as one client.
 */
import { execFile } from 'node:child_process'
import { once } from 'node:events'
import { promisify } from 'node:util'
import { buildClientSchema, getIntrospectionQuery, parse } from 'graphql'
import { createClient } from 'graphql-ws'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { WebSocket } from 'ws'
import { type ExampleServer, repositoryRoot, startExample } from '../helpers/exampleServer.js'
import { openSse, postGraphQL } from '../helpers/graphqlHttp.js'
import { rawConnect, upgradeRequestLines } from '../helpers/rawWebSocket.js'
import { startRedis } from '../helpers/redisServer.js'
import { realCost } from '../helpers/responseCost.js'

const root = repositoryRoot
const run = promisify(execFile)

/** A parsed JSON response: the assertions judge its shape, not the compiler. */
// biome-ignore lint/suspicious/noExplicitAny: JSON bodies are indexed freely and checked by `expect`
type Json = any

async function sh(command: string): Promise<{ stdout: string; code: number }> {
  try {
    const { stdout } = await run('sh', ['-c', command], { cwd: root, timeout: 20_000 })
    return { stdout, code: 0 }
  } catch (error) {
    const failed = error as { stdout?: string; stderr?: string; code?: number }
    return { stdout: `${failed.stdout ?? ''}${failed.stderr ?? ''}`, code: failed.code ?? -1 }
  }
}

async function graphql(url: string, query: string, token?: string): Promise<{ status: number; body: Json }> {
  const response = await fetch(`${url}/graphql`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/graphql-response+json',
      ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
    },
    body: JSON.stringify({ query }),
  })
  return { status: response.status, body: (await response.json()) as Json }
}

/** A plain WebSocket client that records the JSON messages it receives. */
async function chatClient(url: string, token?: string) {
  const socket = new WebSocket(`${url.replace(/^http/, 'ws')}/chat${token ? `?token=${token}` : ''}`)
  const messages: Json[] = []
  socket.on('message', (data) => messages.push(JSON.parse(data.toString()) as Json))
  const closed = new Promise<number>((resolve) => socket.once('close', (code) => resolve(code)))
  await once(socket, 'open')
  return { socket, messages, closed }
}

async function until(
  condition: () => boolean,
  what: string,
  ms = 5000,
  probe?: () => Promise<void>,
): Promise<void> {
  const deadline = Date.now() + ms
  for (;;) {
    await probe?.()
    if (condition()) return
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** A graphql-ws connection (the raw protocol) as `token`'s user, with a `messageAdded` subscription sent. */
async function graphqlWsSubscription(url: string, token: string) {
  const socket = new WebSocket(`${url.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws')
  const closed = new Promise<number>((resolve) => socket.once('close', (code) => resolve(code)))
  const acked = new Promise<void>((resolve) =>
    socket.on('message', (data) => {
      if ((JSON.parse(data.toString()) as { type: string }).type === 'connection_ack') resolve()
    }),
  )
  await once(socket, 'open')
  socket.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${token}` } }))
  await acked
  const query = 'subscription { messageAdded { text } }'
  socket.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query } }))
  return { socket, closed }
}

/** Every label value of every sample in a Prometheus text exposition. */
function labelValues(text: string): string[] {
  return text
    .split('\n')
    .filter((line) => !line.startsWith('#') && line.includes('{'))
    .flatMap((line) => [...line.slice(line.indexOf('{'), line.lastIndexOf('}')).matchAll(/="([^"]*)"/g)])
    .map((match) => match[1] as string)
}

/** A graphql-ws client of the example's /graphql, signed in as Alice. */
function aliceOverGraphqlWs(url: string) {
  return createClient({
    url: `${url.replace(/^http/, 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    retryAttempts: 0,
    connectionParams: { authorization: 'Bearer alice-token' },
  })
}

/** The events of `countdown(from: 3)`, a subscription of the demo API. */
async function countdown(client: ReturnType<typeof createClient>): Promise<unknown[]> {
  const events: unknown[] = []
  for await (const result of client.iterate({
    query: 'subscription { countdown(from: 3, intervalMs: 20) }',
  })) {
    events.push(result.data?.countdown)
  }
  return events
}

describe('npm start: the example server (memory store)', () => {
  let example: ExampleServer

  beforeAll(async () => {
    example = await startExample({})
  })
  afterAll(() => {
    if (example?.child.exitCode === null) example.child.kill('SIGKILL')
  })

  it('prints where everything is, the store, each limit with its fail policy, and six commands', () => {
    const { banner, url } = example
    expect(banner).toContain(`GraphQL     ${url}/graphql`)
    expect(banner).toContain(`graphql-ws  ${url.replace('http', 'ws')}/graphql`)
    expect(banner).toContain(`chat        ${url.replace('http', 'ws')}/chat`)
    expect(banner).toContain(`metrics     ${url}/metrics`)
    expect(banner).toContain('store: memory')
    expect(banner).toContain('alice-token')
    for (const [limit, policy] of [
      ['gql-user', 'local'],
      ['gql-anon', 'open'],
      ['login', 'closed'],
      ['subscriptions', 'open'],
      ['graphql-ws', 'open'],
      ['chat', 'local'],
      ['socket.io', 'local'],
      ['login-ip', 'closed'],
      ['uploads', 'open'],
    ]) {
      expect(banner).toMatch(new RegExp(`\\n  ${limit} .*fail policy: ${policy}\\n`))
    }
    expect(banner).toContain(`REST        POST ${url}/login`)
    expect(banner).toContain(`socket.io   ${url}/socket.io/`)
    expect(example.commands).toHaveLength(6)
  })

  it('command 1: a 200 with extensions.cost (and the RateLimit headers)', async () => {
    const { stdout, code } = await sh(example.commands[0] as string)
    expect(code).toBe(0)
    expect(stdout).toMatch(/^HTTP\/1\.1 200 OK\r\n/)
    expect(stdout).toMatch(/\r\nratelimit-policy: "gql-user";q=1000;w=20\r\n/i)
    const body = JSON.parse(stdout.slice(stdout.indexOf('\r\n\r\n') + 4)) as Json
    expect(body.data.me).toEqual({ name: 'Alice' })
    expect(body.data.search).toHaveLength(3)
    expect(body.extensions.cost).toMatchObject({
      requestedQueryCost: 61,
      actualQueryCost: 19,
      throttleStatus: { maximumAvailable: 1000, restoreRate: 50 },
    })
  })

  it('command 2: a 200, then a 429 with Retry-After', async () => {
    const { stdout, code } = await sh(example.commands[1] as string)
    expect(code).toBe(0)
    const statuses = [...stdout.matchAll(/^HTTP\/1\.1 (\d+)/gm)].map((match) => match[1])
    expect(statuses).toEqual(['200', '429'])
    const refusal = stdout.slice(stdout.indexOf('HTTP/1.1 429'))
    const retryAfter = Number(/^retry-after: (\d+)/im.exec(refusal)?.[1])
    // 660 of 1000 spent, 660 more needed at 50/s: about 7 s.
    expect(retryAfter).toBeGreaterThanOrEqual(1)
    expect(retryAfter).toBeLessThanOrEqual(7)
    expect(refusal).toContain('"code":"RATE_LIMITED"')
  })

  it('command 3: a WebSocket refused at its cap, with HTTP 429 before the upgrade', async () => {
    const { stdout, code } = await sh(example.commands[2] as string)
    expect(stdout).toContain('2 chat connections open as carol: the cap')
    expect(stdout).toMatch(/3rd connection refused: HTTP 429 Too Many Requests retry-after: \d+/)
    expect(code).toBe(0)
  })

  it('command 4: five wrong passwords for one account answered 401, the 6th attempt refused with 429', async () => {
    const { stdout, code } = await sh(example.commands[3] as string)
    expect(code).toBe(0)
    expect(stdout.trim()).toBe('401 401 401 401 401 429')
  })

  it('command 5: an upload sent without a length, past 1 MiB, cut off with 413', async () => {
    const { stdout, code } = await sh(example.commands[4] as string)
    expect(code).toBe(0)
    expect(stdout.trim()).toBe('413')
  })

  it('command 6: Socket.IO chat messages past the burst of 10 acknowledged with RATE_LIMITED', async () => {
    const { stdout, code } = await sh(example.commands[5] as string)
    expect(code).toBe(0)
    expect(stdout.trim()).toBe([...Array(10).fill('ok'), 'RATE_LIMITED', 'RATE_LIMITED'].join(' '))
  })

  it('POST /login: the right password answers 200 with the token; POST /upload: a small body is received', async () => {
    const login = await fetch(`${example.url}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: ' Bob@Example.com ', password: 'builder' }),
    })
    expect(login.status).toBe(200)
    expect(await login.json()).toEqual({ token: 'bob-token' })
    const upload = await fetch(`${example.url}/upload`, { method: 'POST', body: 'x'.repeat(1000) })
    expect(upload.status).toBe(201)
    expect(await upload.json()).toEqual({ received: 1000 })
    expect(upload.headers.get('ratelimit-policy')).toContain('"upload-bytes";q=10485760')
  })

  it('POST /login whose client aborts its body leaves the server serving', async () => {
    const port = Number(new URL(example.url).port)
    const raw = await rawConnect(port, '127.0.0.1')
    raw.socket.write(
      'POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"email":',
    )
    raw.socket.destroy()
    await raw.gone
    const after = await fetch(`${example.url}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'carol@example.com', password: 'singer' }),
    })
    expect(after.status).toBe(200)
    expect(example.child.exitCode).toBeNull()
  })

  it('serves GraphiQL to a browser', async () => {
    const response = await fetch(`${example.url}/graphql`, { headers: { accept: 'text/html' } })
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toMatch(/^text\/html/)
    const html = await response.text()
    expect(html).toContain('<title>tollbooth example</title>')
    expect(html).toMatch(/graphiql/i)
  })

  it("lets GraphiQL's introspection query through the guards, anonymous and signed in", async () => {
    // Each about 600 points: the anonymous budget (1000) holds one, the signed-in one the other.
    for (const [token, options] of [
      [undefined, undefined],
      [
        'alice-token',
        {
          descriptions: true,
          specifiedByUrl: true,
          directiveIsRepeatable: true,
          schemaDescription: true,
          inputValueDeprecation: true,
          oneOf: true,
        },
      ],
    ] as const) {
      const query = getIntrospectionQuery(options)
      const { status, body } = await graphql(example.url, query, token)
      expect(body.errors).toBeUndefined()
      expect(status).toBe(200)
      const types = (body.data.__schema.types as { name: string }[]).map((type) => type.name)
      expect(types).toEqual(expect.arrayContaining(['Query', 'User', 'Post', 'Mutation', 'Subscription']))
      // Priced by what it returns, counted here from the answer itself, and charged exactly that.
      const counted = realCost(buildClientSchema(body.data), parse(query), body.data)
      expect(body.extensions.cost).toMatchObject({ requestedQueryCost: counted, actualQueryCost: counted })
    }
  })

  it('refuses what the guards are for: depth, aliases, the login limit', async () => {
    const deep = await graphql(
      example.url,
      '{ users { friends { friends { friends { friends { friends { friends { friends { name } } } } } } } } }',
    )
    expect(deep.body.errors[0].extensions.code).toBe('MAX_DEPTH_EXCEEDED')
    const aliases = Array.from({ length: 11 }, (_, i) => `a${i}: name`).join(' ')
    expect((await graphql(example.url, `{ me { ${aliases} } }`)).body.errors[0].extensions.code).toBe(
      'MAX_ALIASES_EXCEEDED',
    )
    const login = 'mutation { login(email: "dave@example.com", password: "guess") { token } }'
    const codes: (string | undefined)[] = []
    for (let i = 0; i < 6; i++)
      codes.push((await graphql(example.url, login)).body.errors?.[0]?.extensions.code)
    expect(codes).toEqual([undefined, undefined, undefined, undefined, undefined, 'RATE_LIMITED'])
    const ok = await graphql(
      example.url,
      'mutation { login(email: "alice@example.com", password: "wonderland") { token user { name } } }',
    )
    expect(ok.body.data.login).toEqual({ token: 'alice-token', user: { name: 'Alice' } })
  })

  it('/chat: a plain WebSocket chat, every message broadcast to everyone (the sender too)', async () => {
    const alice = await chatClient(example.url, 'alice-token')
    const guest = await chatClient(example.url)
    await until(() => alice.messages.length > 0 && guest.messages.length > 0, 'the welcomes')
    expect(alice.messages[0]).toMatchObject({ type: 'welcome', you: 'Alice' })
    expect(guest.messages[0]).toMatchObject({ type: 'welcome', you: 'guest' })
    alice.socket.send('hello from alice')
    guest.socket.send('hi, guest here')
    const texts = (client: typeof alice) =>
      client.messages.filter((m) => m.type === 'message').map((m) => `${m.from}: ${m.text}`)
    await until(() => texts(alice).length === 2 && texts(guest).length === 2, 'both messages on both sockets')
    expect(texts(alice)).toEqual(['Alice: hello from alice', 'guest: hi, guest here'])
    expect(texts(guest)).toEqual(texts(alice))
    alice.socket.close(1000)
    guest.socket.close(1000)
    await Promise.all([alice.closed, guest.closed])
  })

  it('a subscription over graphql-ws, one over SSE, and chat messages reaching `messageAdded`', async () => {
    const client = aliceOverGraphqlWs(example.url)
    try {
      expect(await countdown(client)).toEqual([3, 2, 1])

      // A document that does not parse is the client's error: answered as one, nothing logged by the server.
      const refused = await client
        .iterate({ query: 'subscription { countdown(from: 3' })
        .next()
        .then(
          () => undefined,
          (errors: unknown) => errors,
        )
      expect(refused).toEqual([
        expect.objectContaining({ message: expect.stringMatching(/^Syntax Error: /) }),
      ])
      expect(example.stderr()).not.toContain('Internal error')

      const sse = await fetch(`${example.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
        body: JSON.stringify({ query: 'subscription { countdown(from: 2, intervalMs: 20) }' }),
      })
      expect(sse.status).toBe(200)
      const stream = await sse.text()
      expect(stream).toContain('data: {"data":{"countdown":2}}')
      expect(stream).toContain('data: {"data":{"countdown":1}}')
      expect(stream).toContain('event: complete')

      const added: Record<string, unknown>[] = []
      const stop = client.subscribe(
        { query: 'subscription { messageAdded { from text } }' },
        {
          next: (result) => void added.push(result.data?.messageAdded as never),
          error: () => {},
          complete: () => {},
        },
      )
      const listener = await chatClient(example.url, 'bob-token')
      // The subscription is live once a message posted after it arrives: post until one does.
      for (let i = 0; added.length === 0 && i < 50; i++) {
        listener.socket.send(`ping ${i}`)
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
      expect(added[0]).toMatchObject({ from: 'Bob', text: expect.stringMatching(/^ping \d+$/) })
      stop()
      listener.socket.close(1000)
      await listener.closed
    } finally {
      await client.dispose()
    }
  })

  it('/metrics: Prometheus text with tollbooth metrics after the traffic above, and no identity in any label', async () => {
    const response = await fetch(`${example.url}/metrics`)
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/)
    const text = await response.text()
    for (const name of [
      'tollbooth_decisions_total',
      'tollbooth_fail_policy_decisions_total',
      'tollbooth_store_duration_seconds',
      'tollbooth_store_errors_total',
      'tollbooth_store_breaker_state',
      'tollbooth_graphql_operations_total',
      'tollbooth_graphql_requested_cost',
      'tollbooth_graphql_actual_cost',
      'tollbooth_ws_open_connections',
      'tollbooth_ws_closed_total',
      'process_cpu_seconds_total',
    ]) {
      expect(text).toContain(`# TYPE ${name} `)
    }
    expect(text).toMatch(
      /\ntollbooth_decisions_total\{limiter="gql-user",result="allowed",source="store"\} \d+\n/,
    )
    expect(text).toMatch(
      /\ntollbooth_decisions_total\{limiter="gql-user",result="denied",source="store"\} [1-9]\d*\n/,
    )
    expect(text).toMatch(
      /\ntollbooth_decisions_total\{limiter="gql-anon",result="allowed",source="store"\} \d+\n/,
    )
    expect(text).toMatch(
      /\ntollbooth_graphql_operations_total\{operation_type="query",refused="RATE_LIMITED",dry_run="false"\} [1-9]/,
    )
    expect(text).toMatch(
      /\ntollbooth_graphql_operations_total\{operation_type="subscription",refused="none",dry_run="false"\} [1-9]/,
    )
    expect(text).toMatch(/\ntollbooth_ws_open_connections\{server="chat"\} \d+\n/)
    expect(text).toMatch(/\ntollbooth_ws_closed_total\{server="chat",code="1000"\} [1-9]/)
    const values = labelValues(text)
    expect(values.length).toBeGreaterThan(20)
    for (const value of values) {
      expect(value).not.toMatch(/alice|bob|carol|dave|@|token|user:|ip:|127\.0\.0\.1|::1/i)
    }
  })

  it('SIGTERM: closes the WebSockets with 1001, ends SSE streams, cuts a client that ignores the close, exits 0', async () => {
    const chat = await chatClient(example.url, 'carol-token')
    const graphqlWs = await graphqlWsSubscription(example.url, 'alice-token')
    const sse = await fetch(`${example.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ query: 'subscription { messageAdded { text } }' }),
    })
    expect(sse.status).toBe(200)
    const sseEnded = sse.text().then(
      () => 'ended',
      () => 'ended',
    )
    // A raw client that never answers the server's close frame.
    const { port, hostname } = new URL(example.url)
    const silent = await rawConnect(Number(port), hostname, { allowHalfOpen: true })
    const lines = upgradeRequestLines(hostname, Number(port))
    silent.socket.write(`${['GET /chat HTTP/1.1', ...lines.slice(1)].join('\r\n')}\r\n\r\n`)
    await until(
      () => silent.received().toString('latin1').startsWith('HTTP/1.1 101'),
      'the raw client admitted',
    )

    const exited = once(example.child, 'exit')
    const signalled = performance.now()
    example.child.kill('SIGTERM')
    expect(await chat.closed).toBe(1001)
    expect(await graphqlWs.closed).toBe(1001)
    expect(await sseEnded).toBe('ended')
    const [code] = await exited
    expect(code).toBe(0)
    // The server ended its side of the silent connection (the client, half-open, would keep its own forever).
    await until(() => silent.ended(), 'the server ending the silent connection')
    silent.socket.destroy()
    // The silent client held the shutdown for its 2 s grace, not for ws' 30 s closing timeout.
    expect(performance.now() - signalled).toBeLessThan(8000)
    expect(example.stdout()).toContain('SIGTERM: shutting down')
  })
})

describe('npm start: the example server with REDIS_URL', () => {
  let example: ExampleServer
  const redisUrl = inject('redisUrl')
  const prefix = `example-${process.pid}-${Date.now()}:`

  beforeAll(async () => {
    example = await startExample({ REDIS_URL: redisUrl, REDIS_PREFIX: prefix })
  })
  afterAll(() => {
    if (example?.child.exitCode === null) example.child.kill('SIGKILL')
  })

  it('names the Redis store at startup and answers queries from it', async () => {
    expect(example.banner).toContain(`store: Redis (${redisUrl}`)
    const { status, body } = await graphql(
      example.url,
      '{ me { name } users(first: 2) { name } }',
      'bob-token',
    )
    expect(status).toBe(200)
    expect(body.data).toEqual({ me: { name: 'Bob' }, users: [{ name: 'Alice' }, { name: 'Bob' }] })
    expect(body.extensions.cost).toMatchObject({
      requestedQueryCost: 3,
      actualQueryCost: 3,
      throttleStatus: { maximumAvailable: 1000, currentlyAvailable: 997 },
    })
    const metrics = await (await fetch(`${example.url}/metrics`)).text()
    expect(metrics).toMatch(/\ntollbooth_store_duration_seconds_count\{store="redis"\} [1-9]/)
    expect(metrics).toMatch(/\ntollbooth_store_breaker_state\{store="redis",state="closed"\} 1\n/)
    expect(metrics).toMatch(
      /\ntollbooth_decisions_total\{limiter="gql-user",result="allowed",source="store"\} 1\n/,
    )
  })

  it('SIGTERM: releases every connection and subscription lease in Redis, quits Redis, exits 0', async () => {
    const redis = new Redis(redisUrl)
    try {
      const leaseKeys = async () =>
        (await redis.keys(`${prefix}*`)).filter((key) => /-connections|subscriptions/.test(key)).sort()
      const chat = await chatClient(example.url, 'carol-token')
      const graphqlWs = await graphqlWsSubscription(example.url, 'alice-token')
      // Leases: the chat connection, the graphql-ws connection, the subscription (once graphql-ws started it).
      let keys: string[] = []
      await until(
        () => keys.length === 3,
        'three lease keys',
        5000,
        async () => {
          keys = await leaseKeys()
        },
      )
      expect(keys.map((key) => key.slice(prefix.length).replace(/\{.*\}$/, '{…}'))).toEqual([
        'chat-connections:{…}',
        'gql:subscriptions:{…}',
        'graphql-ws-connections:{…}',
      ])

      const exited = once(example.child, 'exit')
      example.child.kill('SIGTERM')
      expect(await chat.closed).toBe(1001)
      expect(await graphqlWs.closed).toBe(1001)
      const [code] = await exited
      expect(code).toBe(0)
      expect(await leaseKeys()).toEqual([])
    } finally {
      redis.disconnect()
    }
  })
})

describe('npm start on a Redis that freezes', () => {
  it('SIGTERM while Redis is paused (SIGSTOP): the server still exits 0, not held by QUIT', async () => {
    const redis = await startRedis()
    try {
      const example = await startExample({ REDIS_URL: redis.url })
      const answered = await postGraphQL(`${example.url}/graphql`, '{ __typename }')
      expect(answered.status).toBe(200)
      redis.pause()
      const exited = once(example.child, 'exit')
      example.child.kill('SIGTERM')
      const [code] = await exited
      expect(code).toBe(0)
      expect(example.stderr()).not.toContain('still not done')
    } finally {
      redis.resume()
      await redis.stop()
    }
  })
})

describe('npm start behind a trusted proxy (TRUST_PROXY=loopback): each limit counts a /56 as one client', () => {
  let example: ExampleServer
  /** Eight addresses in eight /64s of the /56 `2001:db8:<n>::/56`, one /56 per limit so the limits do not mix. */
  const network = (n: number) =>
    Array.from({ length: 8 }, (_, i) => `2001:db8:${n}:${(i * 31).toString(16)}::${i + 1}`)
  const post = (query: string, address: string) =>
    postGraphQL(`${example.url}/graphql`, query, { headers: { 'x-forwarded-for': address } })
  /** A WebSocket upgrade as `address`: 'open' (held until the end), or the refusal's HTTP status. */
  const upgrade = (path: string, address: string, protocol?: string) =>
    new Promise<number | 'open'>((resolve, reject) => {
      const socket = new WebSocket(`${example.url.replace(/^http/, 'ws')}${path}`, protocol, {
        headers: { 'x-forwarded-for': address },
      })
      socket.once('open', () => {
        held.push(socket)
        resolve('open')
      })
      socket.once('unexpected-response', (_request, response) => resolve(response.statusCode ?? 0))
      socket.once('error', reject)
    })
  const held: WebSocket[] = []
  const streams: { abort(): void }[] = []

  beforeAll(async () => {
    example = await startExample({ TRUST_PROXY: 'loopback' })
  })
  afterAll(() => {
    for (const socket of held) socket.terminate()
    for (const stream of streams) stream.abort()
    if (example?.child.exitCode === null) example.child.kill('SIGKILL')
  })

  it('says whom it trusts', () => {
    expect(example.banner).toContain('client IP: X-Forwarded-For, trusting ["loopback"]')
  })

  it('login (@rateLimit, 5 per minute per client and e-mail): 40 attempts over 8 addresses, 5 run', async () => {
    const addresses = network(1)
    const login = 'mutation { login(email: "alice@example.com", password: "guess") { token } }'
    let refused = 0
    for (let attempt = 0; attempt < 40; attempt++) {
      const reply = await post(login, addresses[attempt % 8] as string)
      if (reply.body.errors?.[0]?.extensions?.field === 'Mutation.login') refused++
      else expect(reply.body.data).toEqual({ login: null })
    }
    expect(refused).toBe(35)
    // Another /56: another client.
    expect((await post(login, '2001:db8:1:100::1')).body.data).toEqual({ login: null })
  })

  it('the anonymous cost budget (1000): 8 addresses share it, 100 a query', async () => {
    const statuses: number[] = []
    // posts(first: 100) costs 100 and returns 100: nothing refunded. The budget refills 10/s: the 11th query would
    // need 10 s more.
    for (const address of [...network(2), ...network(2)])
      statuses.push((await post('{ posts(first: 100) { id } }', address)).status)
    expect(statuses).toEqual([
      ...Array.from({ length: 10 }, () => 200),
      ...Array.from({ length: 6 }, () => 429),
    ])
    expect((await post('{ posts(first: 100) { id } }', '2001:db8:2:100::1')).status).toBe(200)
  })

  it('/chat (2 connections per identity) and graphql-ws (5): 8 addresses of one /56 get 2 and 5', async () => {
    const chat: (number | string)[] = []
    for (const address of network(3)) chat.push(await upgrade('/chat', address))
    expect(chat).toEqual(['open', 'open', 429, 429, 429, 429, 429, 429])
    const graphqlWs: (number | string)[] = []
    for (const address of network(4))
      graphqlWs.push(await upgrade('/graphql', address, 'graphql-transport-ws'))
    expect(graphqlWs).toEqual(['open', 'open', 'open', 'open', 'open', 429, 429, 429])
    expect(await upgrade('/chat', '2001:db8:3:100::1')).toBe('open')
  })

  it('subscriptions (3 per identity, over SSE): the 4th address of the /56 is refused', async () => {
    const statuses: number[] = []
    for (const address of network(5).slice(0, 4)) {
      const stream = await openSse(`${example.url}/graphql`, 'subscription { messageAdded { id } }', {
        'x-forwarded-for': address,
      })
      streams.push(stream)
      statuses.push(stream.status)
    }
    expect(statuses).toEqual([200, 200, 200, 429])
  })
})

describe('GRAPHQL_SERVER=apollo npm start: the same API and protection on Apollo Server', () => {
  let example: ExampleServer

  beforeAll(async () => {
    example = await startExample({ GRAPHQL_SERVER: 'apollo' })
  })
  afterAll(() => {
    if (example?.child.exitCode === null) example.child.kill('SIGKILL')
  })

  it('says it serves Apollo; commands 1 and 2 answer as on Yoga: a 200 with extensions.cost, then a 429', async () => {
    expect(example.banner).toContain(`GraphQL     ${example.url}/graphql  (Apollo Server`)
    const first = await sh(example.commands[0] as string)
    expect(first.stdout).toMatch(/^HTTP\/1\.1 200 OK\r\n/)
    expect(first.stdout).toMatch(/\r\nratelimit-policy: "gql-user";q=1000;w=20\r\n/i)
    const body = JSON.parse(first.stdout.slice(first.stdout.indexOf('\r\n\r\n') + 4)) as Json
    expect(body.data.me).toEqual({ name: 'Alice' })
    expect(body.extensions.cost).toMatchObject({ requestedQueryCost: 61, actualQueryCost: 19 })

    const second = await sh(example.commands[1] as string)
    const statuses = [...second.stdout.matchAll(/^HTTP\/1\.1 (\d+)/gm)].map((match) => match[1])
    expect(statuses).toEqual(['200', '429'])
    expect(second.stdout.slice(second.stdout.indexOf('HTTP/1.1 429'))).toMatch(/^retry-after: \d+/im)
  })

  it('login (@rateLimit: 5 per minute per IP and e-mail): the 6th attempt is refused', async () => {
    const attempt = async () => {
      const response = await fetch(`${example.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          query: 'mutation { login(email: "carol@example.com", password: "nope") { token } }',
        }),
      })
      const body = (await response.json()) as Json
      return body.errors?.[0]?.extensions?.code ?? 'ran'
    }
    const codes: string[] = []
    for (let i = 0; i < 6; i++) codes.push(await attempt())
    expect(codes.slice(0, 5).every((code) => code !== 'RATE_LIMITED')).toBe(true)
    expect(codes[5]).toBe('RATE_LIMITED')
  })

  it('a subscription over graphql-ws is admitted and runs; a 4th at once is refused', async () => {
    const client = aliceOverGraphqlWs(example.url)
    try {
      expect(await countdown(client)).toEqual([3, 2, 1])
      // Three open subscriptions per identity: three that have delivered their first event hold their leases, and a
      // fourth gets SUBSCRIPTION_LIMIT_EXCEEDED as its result.
      const open = [1, 2, 3].map(() =>
        client.iterate({ query: 'subscription { countdown(from: 2, intervalMs: 5000) }' }),
      )
      const firsts = await Promise.all(open.map((subscription) => subscription.next()))
      expect(firsts.map((first) => first.value?.data?.countdown)).toEqual([2, 2, 2])
      const results: string[] = []
      for await (const result of client.iterate({ query: 'subscription { countdown(from: 1) }' })) {
        results.push(String(result.errors?.[0]?.extensions?.code ?? result.data?.countdown))
      }
      expect(results).toEqual(['SUBSCRIPTION_LIMIT_EXCEEDED'])
      await Promise.all(open.map((subscription) => subscription.return?.()))
    } finally {
      await client.dispose()
    }
  })

  it('a body over 100 kB is refused with 413 as a GraphQL error, without a stack', async () => {
    const response = await fetch(`${example.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: `{ me { name } } #${'x'.repeat(200_000)}` }),
    })
    expect(response.status).toBe(413)
    expect(await response.json()).toEqual({ errors: [{ message: 'request entity too large' }] })
  })

  it('GRAPHQL_SERVER with another value is refused at startup', async () => {
    await expect(startExample({ GRAPHQL_SERVER: 'express' })).rejects.toThrow(
      /GRAPHQL_SERVER must be "yoga" or "apollo", got "express"/,
    )
  })
})
