/**
 * `npm start` — tollbooth's example server. One process, one port:
 *
 *   /graphql  GraphQL through Yoga: HTTP (GET and POST), SSE and graphql-ws; GraphiQL in a browser (or through
 *             Apollo Server with GRAPHQL_SERVER=apollo: HTTP and graphql-ws, Apollo Sandbox in a browser)
 *   /chat     a plain `ws` chat (text in, JSON out, broadcast to everyone, also seen by `subscription { messageAdded }`)
 *   /socket.io/  the same chat over Socket.IO (auth { token }; emit `chat:message`, receive `message`)
 *   /metrics  Prometheus text (tollbooth/metrics on prom-client)
 *
 * Protection: a cost budget per user (per client IP when anonymous), depth/alias/token guards, `login` limited to 5
 * per minute per IP and e-mail, concurrent subscriptions per identity, and on both WebSocket servers and Socket.IO
 * connections per identity, messages (events) per second and message size.
 *
 * Environment: PORT (default 4000; 0 picks a free one) · REDIS_URL=redis://… keeps every limit in Redis ·
 * REDIS_CLUSTER_NODES=host:port,host:port in a Redis Cluster · REDIS_PREFIX (default `tollbooth-example:`) ·
 * KEY_SECRET (HMAC for the identities hashed into Redis keys; set it, identities include IP addresses) ·
 * TRUST_PROXY: the proxies in front of the server, whose X-Forwarded-For is believed: a number of hops, or
 * addresses, CIDRs and `loopback`/`linklocal`/`uniquelocal`, comma-separated (default: none, the socket's address) ·
 * GRAPHQL_SERVER=apollo serves /graphql with Apollo Server 5 instead of Yoga (same API, same protection) ·
 * TOLLBOOTH_MODE=dry-run computes and reports everything and refuses nothing · LEASE_MS: lifetime of the connection
 * and subscription leases, which a crashed instance leaves behind until they expire (default 30000).
 *
 * SIGTERM / SIGINT (to the pid in the banner, or to `npm start`, whose script `exec`s node so that the two are one
 * process): stop accepting, close WebSockets with 1001, let HTTP requests in flight finish, end SSE streams, release
 * leases, quit Redis, exit 0.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Duplex } from 'node:stream'
import { useServer } from 'graphql-ws/use/ws'
import { Cluster, Redis } from 'ioredis'
import { collectDefaultMetrics, Registry } from 'prom-client'
import { type WebSocket, WebSocketServer } from 'ws'
import {
  createClientIpResolver,
  type FailPolicy,
  ipKey,
  MemoryStore,
  type RateLimiter,
  RedisStore,
  type Store,
  type TrustProxy,
  tokenBucket,
} from '../src/index.js'
import { createPrometheusMetrics } from '../src/metrics/index.js'
import { protectWebSocketServer } from '../src/ws/index.js'
import { createApolloGraphQL } from './apolloGraphQL.js'
import { Chat, createDemoSchema, type DemoUser, demoUsers, userByToken } from './demo-api.js'
import type { GraphQLEndpoint, GraphQLSetup } from './graphqlEndpoint.js'
import { createRestRoutes, MAX_UPLOAD_BYTES } from './restRoutes.js'
import { attachSocketIoChat, socketIoLimits, socketIoPolicy } from './socketIoChat.js'
import { createYogaGraphQL } from './yogaGraphQL.js'

const port = Number(process.env.PORT ?? 4000)
const redisUrl = process.env.REDIS_URL || undefined
const clusterNodes = process.env.REDIS_CLUSTER_NODES || undefined
const redisPrefix = process.env.REDIS_PREFIX || 'tollbooth-example:'
const keySecret = process.env.KEY_SECRET || undefined
const trustProxy = parseTrustProxy(process.env.TRUST_PROXY)
const mode = process.env.TOLLBOOTH_MODE === 'dry-run' ? 'dry-run' : 'enforce'
const leaseMs = Number(process.env.LEASE_MS || 30_000)
const graphqlServer = parseGraphQLServer(process.env.GRAPHQL_SERVER)

// ---------------------------------------------------------------------------------------------------------------
// Metrics and stores
// ---------------------------------------------------------------------------------------------------------------

const registry = new Registry()
collectDefaultMetrics({ register: registry })
// Decision time in finer buckets between 5 and 25 ms, where a p99 objective for the limiter usually lies.
const metrics = createPrometheusMetrics({
  registry,
  decisionDurationBuckets: [
    0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.0125, 0.015, 0.02, 0.025, 0.05, 0.1, 0.25, 1,
  ],
})

/** The recommended ioredis settings (docs/core.md, "Recommended ioredis settings"). */
const client: Redis | Cluster | undefined = clusterNodes
  ? new Cluster(parseNodes(clusterNodes), {
      redisOptions: { maxRetriesPerRequest: 1, connectTimeout: 1000 },
      enableOfflineQueue: false,
    })
  : redisUrl
    ? new Redis(redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 1, connectTimeout: 1000 })
    : undefined
let lastRedisError = ''
client?.on('error', (error: Error) => {
  // ioredis reports every failed reconnection: say it once per distinct error.
  if (error.message === lastRedisError) return
  lastRedisError = error.message
  console.error(`redis: ${error.message} (limiters answer by their fail policy meanwhile)`)
})
client?.on('ready', () => {
  lastRedisError = ''
})

const redisStores: RedisStore[] = []
/** The one store every limiter of the server shares (their names keep them apart). */
function createStore(): Store {
  if (client === undefined) return new MemoryStore()
  const store = new RedisStore({
    client,
    name: 'redis',
    prefix: redisPrefix,
    hooks: metrics.storeHooks,
    ...(keySecret === undefined ? {} : { keySecret }),
  })
  metrics.watchStore(store)
  redisStores.push(store)
  return store
}
const store = createStore()
const storeLabel = clusterNodes
  ? `Redis Cluster (${clusterNodes})`
  : redisUrl
    ? `Redis (${redactUrl(redisUrl)})`
    : 'memory (embedded; REDIS_URL or REDIS_CLUSTER_NODES switch to Redis)'

// ---------------------------------------------------------------------------------------------------------------
// Identity
// ---------------------------------------------------------------------------------------------------------------

const bearer = (value: string | null | undefined): string | undefined =>
  value?.match(/^\s*Bearer\s+(\S+)\s*$/i)?.[1]

/** The demo user of `Bearer <token>` (a header, or graphql-ws `connectionParams.authorization`), if any. */
function userOf(authorization: unknown): DemoUser | undefined {
  const token = typeof authorization === 'string' ? bearer(authorization) : undefined
  return token === undefined ? undefined : userByToken(token)
}

/** The client's network: its address (through TRUST_PROXY) as `ipKey` groups it, IPv6 by /56. */
const resolveClientIp = createClientIpResolver({ trustProxy })
const ipIdentity = (req: IncomingMessage | undefined): string =>
  `ip:${req === undefined ? 'unknown' : ipKey(resolveClientIp(req))}`

/**
 * WebSocket upgrades: `authorization: Bearer <token>`, or `?token=<token>` (browsers cannot set headers on a
 * WebSocket), else the client IP. An unknown token is refused with 401 before the upgrade.
 */
function upgradeIdentity(req: IncomingMessage): string {
  const token =
    bearer(req.headers.authorization) ?? new URL(req.url ?? '/', 'http://x').searchParams.get('token')
  if (token === null || token === undefined) return ipIdentity(req)
  const user = userByToken(token)
  if (user === undefined) throw new Error('unknown token')
  return `user:${user.id}`
}

// ---------------------------------------------------------------------------------------------------------------
// GraphQL
// ---------------------------------------------------------------------------------------------------------------

// Shopify-like budgets: bursts up to the capacity, a steady refill. Users fall back to a local (per-process)
// bucket while Redis is down; anonymous callers are let through (a read-only API must not go down with Redis).
const userBudget = tokenBucket({
  name: 'gql-user',
  store,
  capacity: 1000,
  refillPerSecond: 50,
  failPolicy: 'local',
  hooks: metrics.limiterHooks,
})
// The capacity holds GraphiQL's introspection of this schema (about 600), priced by what it returns as any query is.
const anonymousBudget = tokenBucket({
  name: 'gql-anon',
  store,
  capacity: 1000,
  refillPerSecond: 10,
  failPolicy: 'open',
  hooks: metrics.limiterHooks,
})
const limits = { maxDepth: 8, maxAliases: 10, maxRootFields: 10, maxTokens: 2000, maxCharacters: 10_000 }
const maxCost = 1000
const subscriptionsPerIdentity = 3

const chat = new Chat()
const setup: GraphQLSetup = {
  schema: createDemoSchema(chat),
  userOf,
  tollbooth: {
    limiter: (context) => (context.user ? userBudget : anonymousBudget),
    identify: (context) => (context.user ? `user:${context.user.id}` : ipIdentity(context.req)),
    store,
    trustProxy,
    maxCost,
    limits,
    subscriptions: { maxPerIdentity: subscriptionsPerIdentity, costPerEvent: 1, leaseMs },
    mode,
    hooks: metrics.limiterHooks,
    onOperation: metrics.onOperation,
  },
}
// GRAPHQL_SERVER=apollo serves the same API, with the same protection, on Apollo Server.
const graphql: GraphQLEndpoint =
  graphqlServer === 'apollo' ? await createApolloGraphQL(setup) : createYogaGraphQL(setup)

// ---------------------------------------------------------------------------------------------------------------
// WebSockets: graphql-ws at /graphql, the chat at /chat (two servers on one port: routed by path on 'upgrade')
// ---------------------------------------------------------------------------------------------------------------

const graphqlWss = new WebSocketServer({ noServer: true })
const graphqlWsPolicy: FailPolicy = 'open'
const graphqlWsLimits = { maxConnectionsPerIdentity: 5, messagesPerSecond: 20, maxMessageBytes: 16 * 1024 }
const graphqlWsProtection = protectWebSocketServer(graphqlWss, {
  store,
  trustProxy,
  leaseMs,
  name: 'graphql-ws',
  hooks: metrics.limiterHooks,
  failPolicy: graphqlWsPolicy,
  identify: upgradeIdentity,
  ...graphqlWsLimits,
  maxSubscriptionsPerConnection: 5,
  onDrop: () => metrics.webSocketDropped('graphql-ws'),
})
metrics.watchWebSocketServer('graphql-ws', graphqlWsProtection)

// graphql-ws on the server's recipe, plus a re-key from the client IP to the user named in connection_init's
// `authorization` (a browser cannot send headers with its upgrade).
const graphqlWs = useServer(
  graphql.graphqlWsOptions({
    onConnect: async (ctx) => {
      const user = userOf(ctx.connectionParams?.authorization)
      if (user === undefined) return true
      // Over the cap of the user's connections: graphql-ws closes with 4403 Forbidden.
      return (await graphqlWsProtection.rekey(ctx.extra.socket as WebSocket, `user:${user.id}`)).allowed
    },
  }),
  graphqlWss,
)
graphqlWss.on('connection', (socket) => {
  socket.once('close', (code) => metrics.webSocketClosed('graphql-ws', code))
})

const chatWss = new WebSocketServer({ noServer: true })
const chatPolicy: FailPolicy = 'local'
const chatLimits = {
  maxConnectionsPerIdentity: 2,
  messagesPerSecond: 5,
  messageBurst: 10,
  maxMessageBytes: 4096,
}
const chatProtection = protectWebSocketServer(chatWss, {
  store,
  trustProxy,
  leaseMs,
  name: 'chat',
  hooks: metrics.limiterHooks,
  failPolicy: chatPolicy,
  identify: upgradeIdentity,
  ...chatLimits,
  onDrop: (socket, { retryAfterMs }) => {
    metrics.webSocketDropped('chat')
    socket.send(JSON.stringify({ type: 'error', error: 'rate limited: message dropped', retryAfterMs }))
  },
})
metrics.watchWebSocketServer('chat', chatProtection)

chatWss.on('connection', (socket) => {
  const identity = chatProtection.identityOf(socket) ?? ''
  // Names only: an anonymous sender is a guest, never its IP.
  const name = demoUsers.find((user) => `user:${user.id}` === identity)?.name ?? 'guest'
  socket.send(JSON.stringify({ type: 'welcome', you: name, online: chatWss.clients.size }))
  socket.on('message', (data, isBinary) => {
    if (isBinary) return
    const text = data.toString().trim()
    if (text.length > 0) chat.post(name, text)
  })
  socket.once('close', (code) => metrics.webSocketClosed('chat', code))
})
chat.onMessage((message) => {
  const frame = JSON.stringify({ type: 'message', ...message })
  for (const socket of chatWss.clients) if (socket.readyState === socket.OPEN) socket.send(frame)
})

// ---------------------------------------------------------------------------------------------------------------
// HTTP
// ---------------------------------------------------------------------------------------------------------------

/**
 * HTTP responses still being produced, except for requests that accept `text/event-stream` (SSE streams end only
 * when the client leaves): shutdown lets these finish. One entry per open request, so the server's connections
 * bound its size.
 */
const inFlight = new Set<ServerResponse>()

// POST /login and POST /upload: plain HTTP routes on the same store, identities and metrics.
const restRoutes = createRestRoutes({
  store,
  hooks: metrics.limiterHooks,
  trustProxy,
  uploadIdentity: (req) => {
    const user = userOf(req.headers.authorization)
    return user === undefined ? ipIdentity(req) : `user:${user.id}`
  },
})

const server = createServer((req: IncomingMessage, res: ServerResponse) => {
  const path = (req.url ?? '/').split('?')[0]
  if (!(req.headers.accept ?? '').includes('text/event-stream')) {
    inFlight.add(res)
    res.once('close', () => inFlight.delete(res))
  }
  if (path === '/metrics' && req.method === 'GET') {
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      (error: unknown) => res.writeHead(500).end(String(error)),
    )
    return
  }
  if (path === '/') {
    res.writeHead(302, { location: graphql.path }).end()
    return
  }
  if (restRoutes.handle(req, res)) return
  graphql.handle(req, res)
})

// The chat over Socket.IO at /socket.io/ (engine.io takes its requests and upgrades from the server itself).
const socketIo = attachSocketIoChat({
  server,
  store,
  hooks: metrics.limiterHooks,
  trustProxy,
  leaseMs,
  chat,
  userByToken,
  anonymousIdentity: ipIdentity,
  onDrop: () => metrics.webSocketDropped('socket.io'),
})
metrics.watchWebSocketServer('socket.io', socketIo.protection)

server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
  const path = (req.url ?? '/').split('?')[0]
  if (path?.startsWith('/socket.io/') && !shuttingDown) return
  const wss = path === graphql.path ? graphqlWss : path === '/chat' ? chatWss : undefined
  if (wss === undefined || shuttingDown) {
    socket.end(
      `HTTP/1.1 ${shuttingDown ? '503 Service Unavailable' : '404 Not Found'}\r\nConnection: close\r\n\r\n`,
    )
    return
  }
  wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req))
})

// ---------------------------------------------------------------------------------------------------------------
// Start
// ---------------------------------------------------------------------------------------------------------------

async function start(): Promise<void> {
  if (client !== undefined) await connectRedis()
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, () => resolve())
  })
  // PORT=0 picks a free port (the test does): print the one actually bound.
  const { port: bound } = server.address() as AddressInfo
  console.log(banner(`http://localhost:${bound}`, process.pid))
}

/**
 * Waits for the client to be ready on every master and loads the scripts: without an offline queue, commands sent
 * before the client is ready would fail. An unreachable store does not stop the server: each limiter answers by its
 * fail policy until the store is back.
 */
async function connectRedis(): Promise<void> {
  // One store's warmUp loads the scripts on every node for all stores on this client.
  await redisStores[0]?.warmUp().catch((error: unknown) => {
    console.error(
      `redis: ${(error as Error).message}; starting anyway (limiters answer by their fail policy)`,
    )
  })
}

function banner(url: string, pid: number): string {
  const wsUrl = url.replace(/^http/, 'ws')
  const graphqlUrl = `${url}${graphql.path}`
  const perSecond = (limiter: RateLimiter) => `${limiter.limit}, +${limiter.restorePerSecond}/s`
  const rows: [string, string, string][] = [
    [`${userBudget.name}`, `cost budget per user: ${perSecond(userBudget)}`, userBudget.failPolicy],
    [
      `${anonymousBudget.name}`,
      `cost budget per client IP: ${perSecond(anonymousBudget)}`,
      anonymousBudget.failPolicy,
    ],
    // @rateLimit in the schema; the plugin's field limits fail closed unless told otherwise.
    ['login', 'Mutation.login: 5 per minute per client IP (IPv6: /56) and e-mail (@rateLimit)', 'closed'],
    // The plugin's subscription leases use the default policy of a limiter.
    ['subscriptions', `${subscriptionsPerIdentity} open per identity, 1 budget unit per event`, 'open'],
    [
      'graphql-ws',
      `${graphqlWsLimits.maxConnectionsPerIdentity} connections per identity, ${graphqlWsLimits.messagesPerSecond} msg/s, ${graphqlWsLimits.maxMessageBytes / 1024} KiB`,
      graphqlWsPolicy,
    ],
    [
      'chat',
      `${chatLimits.maxConnectionsPerIdentity} connections per identity, ${chatLimits.messagesPerSecond} msg/s (burst ${chatLimits.messageBurst}), ${chatLimits.maxMessageBytes / 1024} KiB`,
      chatPolicy,
    ],
    [
      'socket.io',
      `${socketIoLimits.maxConnectionsPerIdentity} connections per identity, ${socketIoLimits.eventsPerSecond} events/s (burst ${socketIoLimits.eventBurst}), ${socketIoLimits.maxPacketBytes / 1024} KiB`,
      socketIoPolicy,
    ],
    ...restRoutes.limits,
  ]
  const width = Math.max(...rows.map(([, what]) => what.length))
  const q = (query: string) => `--data-urlencode '${query}'`
  const curl = (token: string) =>
    `curl -s -i -G ${graphqlUrl} -H 'authorization: Bearer ${token}'${graphql.curlFlags}`
  const smallQuery = 'query={ me { name } search(text: "limit", first: 10) { title author { name } } }'
  const bigQuery = 'query={ users(first: 60) { name posts(first: 10) { title } } }'
  const capScript = [
    `const W=require('ws'),u='${wsUrl}/chat?token=carol-token'`,
    "open=()=>new Promise((ok,ko)=>{const s=new W(u);s.on('open',()=>ok(s));s.on('error',ko)})",
  ].join(',')
  const capThen =
    "Promise.all([open(),open()]).then(()=>{console.log('2 chat connections open as carol: the cap');" +
    "const s=new W(u);s.on('unexpected-response',(q,r)=>{console.log('3rd connection refused: HTTP',r.statusCode,r.statusMessage,'retry-after:',r.headers['retry-after']);process.exit(0)});" +
    "s.on('open',()=>{console.log('3rd connection opened');process.exit(1)})})"
  return [
    `tollbooth example server on ${url}  (pid ${pid}: \`kill -TERM ${pid}\` or Ctrl+C stops it gracefully)`,
    `  GraphQL     ${graphqlUrl}  (${graphql.serves})`,
    `  graphql-ws  ${wsUrl}${graphql.path}`,
    `  chat        ${wsUrl}/chat?token=<token>  (plain WebSocket: send text, receive JSON)`,
    `  socket.io   ${url}/socket.io/  (the chat for socket.io-client: auth { token }, emit 'chat:message', on 'message')`,
    `  metrics     ${url}/metrics`,
    `  REST        POST ${url}/login (JSON email, password) · POST ${url}/upload (any body, ${MAX_UPLOAD_BYTES / 1024} KiB at most)`,
    `store: ${storeLabel}`,
    `identity: "authorization: Bearer <token>" (WebSockets: also ?token=<token> or graphql-ws connectionParams), else the client IP (IPv6: its /56)`,
    `  client IP: ${trustProxy === false ? "the socket's address (TRUST_PROXY trusts proxies' X-Forwarded-For)" : `X-Forwarded-For, trusting ${JSON.stringify(trustProxy)}`}`,
    `  demo tokens: ${demoUsers.map((user) => `${user.token} (${user.email} / ${user.password})`).join(', ')}`,
    'limits (fail policy: what each one answers while the store is unreachable):',
    ...rows.map(
      ([name, what, policy]) => `  ${name.padEnd(13)} ${what.padEnd(width)}  fail policy: ${policy}`,
    ),
    `  guards        max cost ${maxCost}, depth ${limits.maxDepth} (introspection 15), ${limits.maxAliases} aliases, ${limits.maxRootFields} root fields, ${limits.maxTokens} tokens, ${limits.maxCharacters} characters`,
    '',
    'Try:',
    '  # 1. 200 with extensions.cost: alice searches (priced 61 for a full page, 19 actually used: 42 refunded)',
    `  ${curl('alice-token')} ${q(smallQuery)}`,
    '  # 2. 429 with Retry-After: bob asks twice for 60 users x 10 posts (cost 660 each; budget 1000, +50/s)',
    `  for i in 1 2; do ${curl('bob-token')} ${q(bigQuery)} | grep -iE '^(HTTP/|retry-after|ratelimit)|RATE_LIMITED'; done`,
    '  # 3. WebSocket refused at its cap: the chat admits 2 connections per identity; a 3rd as carol gets HTTP 429',
    '  #    before the upgrade (node and the ws package of this repository: run it from its directory)',
    `  node -e "${capScript};${capThen}"`,
    '  # 4. POST /login: 5 wrong passwords for one account from one address, then the 6th attempt is refused (429)',
    `  for i in 1 2 3 4 5 6; do curl -s -o /dev/null -w '%{http_code} ' -X POST ${url}/login -H 'content-type: application/json' -d '{"email":"alice@example.com","password":"guess"}'; done; echo`,
    `  # 5. POST /upload: 2 MiB sent without a length (chunked) is cut off at ${MAX_UPLOAD_BYTES / 1024} KiB with 413`,
    `  head -c 2097152 /dev/zero | curl -s -o /dev/null -w '%{http_code}\\n' -X POST ${url}/upload -H 'transfer-encoding: chunked' -H 'expect:' --data-binary @-`,
    `  # 6. Socket.IO: alice sends ${socketIoLimits.eventBurst + 2} chat messages at once; past the burst of ${socketIoLimits.eventBurst}, acknowledged with RATE_LIMITED`,
    `  node -e "const s=require('socket.io-client').io('${url}',{auth:{token:'alice-token'},reconnection:false});s.on('connect',async()=>{const a=await Promise.all([...Array(12).keys()].map(i=>s.emitWithAck('chat:message','hi '+i)));console.log(a.map(r=>r.error?.code??'ok').join(' '));process.exit(0)})"`,
    '',
  ].join('\n')
}

// ---------------------------------------------------------------------------------------------------------------
// Shutdown
// ---------------------------------------------------------------------------------------------------------------

let shuttingDown = false

async function shutdown(signal: string): Promise<void> {
  if (shuttingDown) return
  shuttingDown = true
  const deadline = setTimeout(() => {
    console.error('shutdown: still not done after 10 s; exiting anyway')
    process.exit(1)
  }, 10_000)
  deadline.unref()
  // 1. Stop accepting connections (and upgrades: see the 'upgrade' handler). Said after the fact: whoever reads the
  //    line can count on the port refusing connections.
  server.close()
  server.closeIdleConnections()
  console.log(`${signal}: shutting down (no longer accepting connections)`)
  // 2. Close every admitted WebSocket with 1001 and release its connection lease.
  const sockets = [...chatWss.clients, ...graphqlWss.clients]
  await Promise.all([chatProtection.close(), graphqlWsProtection.close(), socketIo.protection.close()])
  // graphql-ws closes what is left with 1001 (Going away); both servers call back once all their sockets closed.
  const serversClosed = Promise.all([
    graphqlWs.dispose(),
    new Promise<void>((resolve) => chatWss.close(() => resolve())),
  ])
  // A client that does not complete the close handshake is cut after 2 s (ws itself would wait 30 s).
  await closed(sockets, 2000)
  await serversClosed
  // 3. Let HTTP requests in flight finish (for 5 s at most), then end what is still open (SSE streams, idle
  //    keep-alive connections): their subscriptions end and release their leases.
  await finished(inFlight, 5000)
  server.closeAllConnections()
  await graphql.stop()
  await new Promise((resolve) => setTimeout(resolve, 100))
  // 4. Quit Redis once the releases above have gone out.
  if (client !== undefined) await quitWithin(client, 1000)
  process.exit(0)
}

/** QUIT, or a disconnect when Redis does not answer within `ms`: a frozen Redis must not hold the shutdown. */
async function quitWithin(redis: Redis | Cluster, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), ms)
  })
  const outcome = await Promise.race([
    redis.quit().then(
      () => 'quit' as const,
      () => 'failed' as const,
    ),
    timeout,
  ])
  clearTimeout(timer)
  if (outcome !== 'quit') redis.disconnect()
}

/** Resolves when every response of `responses` has closed, or after `ms`. */
async function finished(responses: ReadonlySet<ServerResponse>, ms: number): Promise<void> {
  if (responses.size === 0) return
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms)
  })
  await Promise.race([
    Promise.all([...responses].map((res) => new Promise((resolve) => res.once('close', resolve)))),
    timeout,
  ])
  clearTimeout(timer)
}

/** Resolves when every socket has closed, terminating those still open after `ms`. */
async function closed(sockets: readonly WebSocket[], ms: number): Promise<void> {
  const open = sockets.filter((socket) => socket.readyState !== socket.CLOSED)
  if (open.length === 0) return
  const timer = setTimeout(() => {
    for (const socket of open) socket.terminate()
  }, ms)
  await Promise.all(open.map((socket) => new Promise((resolve) => socket.once('close', resolve))))
  clearTimeout(timer)
}

// `on`, not `once`: Ctrl+C under `npm start` delivers SIGINT twice (from the terminal and forwarded by npm), and a
// second signal must not kill the process mid-shutdown. The 10 s deadline bounds a shutdown that hangs.
process.on('SIGTERM', () => void shutdown('SIGTERM'))
process.on('SIGINT', () => void shutdown('SIGINT'))

/** GRAPHQL_SERVER: `yoga` (the default) or `apollo`; anything else is refused at startup. */
function parseGraphQLServer(value: string | undefined): 'yoga' | 'apollo' {
  const name = (value ?? '').trim().toLowerCase()
  if (name === '' || name === 'yoga') return 'yoga'
  if (name === 'apollo') return 'apollo'
  console.error(`GRAPHQL_SERVER must be "yoga" or "apollo", got "${value}"`)
  process.exit(1)
}

/** TRUST_PROXY: `2` (hops), or `loopback,10.0.0.0/8`; unset or empty trusts no proxy. */
function parseTrustProxy(value: string | undefined): TrustProxy {
  if (value === undefined || value.trim() === '') return false
  if (/^\d+$/.test(value.trim())) return Number(value.trim())
  return value.split(',').map((entry) => entry.trim())
}

function parseNodes(list: string): { host: string; port: number }[] {
  return list.split(',').map((entry) => {
    const at = entry.trim().lastIndexOf(':')
    return { host: entry.trim().slice(0, at), port: Number(entry.trim().slice(at + 1)) }
  })
}

/** The URL without its password. */
function redactUrl(url: string): string {
  try {
    const parsed = new URL(url)
    if (parsed.password !== '') parsed.password = '***'
    return parsed.toString()
  } catch {
    return 'an unparsable URL'
  }
}

start().catch((error: unknown) => {
  if ((error as NodeJS.ErrnoException).code === 'EADDRINUSE') {
    console.error(`Port ${port} is in use: set PORT to another one, or PORT=0 for any free port.`)
  } else {
    console.error(error)
  }
  process.exit(1)
})
