/**
 * Requests per second of a GraphQL Yoga server, plain and protected, side by side in one run.
 *
 *   npm run bench:graphql
 *
 * Contenders, each a Yoga 5 server (node:http, 127.0.0.1, port 0) in this process on the same schema and the same
 * resolvers, all alive for the whole run:
 * - plain:  Yoga with its defaults (parse and validation caches on), nothing else;
 * - plainAgain: a second plain Yoga, an A/A control: its ratio to the first shows how far this run can read one
 *           server against itself, i.e. what a ratio of this run is good to;
 * - memory: + useTollbooth, a tokenBucket on the default MemoryStore, default guards and cost model (costs given as
 *           `@listSize(slicingArguments: ["first"])` through the `costs` option), `extensions.cost` and RateLimit
 *           headers on (the defaults): one budget decision per operation, in process;
 * - redis:  the same with the tokenBucket on a RedisStore (default batching and timeout): one budget decision per
 *           operation in Redis (the decisions of one event-loop turn travel in one script call);
 * - armor:  + @escape.tech/graphql-armor's `new EnvelopArmor().protect()` plugins with their defaults (cost limit
 *           5000, max depth 6, max aliases 15, max directives 50, max tokens 1000, field suggestions blocked): a
 *           static-analysis-only protection, for reference;
 * - with `--breakdown`, the memory contender again with `costExtension: false`, with `headers: false`, and with both:
 *           what reporting costs;
 * - with `--calibrate` (`npm run bench:graphql -- --calibrate`), two reference plugins that do no protection: one
 *           spending BURN_MICROS µs of CPU per operation, one deferring execution by a turn of the event loop (see
 *           `burnPlugin` and `deferPlugin`): what a known cost reads as here, and how much scheduling alone moves.
 * Budgets are far beyond what the load can spend (capacity 1e9, refill 1e6/s): nothing is refused, what is measured
 * is the overhead. The identity is the `x-bench-user` header (read by `identify`), spread over USERS values.
 *
 * Load: autocannon with CONNECTIONS connections (no pipelining), each cycling through USERS prebuilt POST requests
 * that mix the QUERIES below (with variables, a fragment, a bare query); WARMUP_S of the same load (not counted),
 * then MEASURE_S measured. autocannon runs in a separate process (this file again, with `--load`, in a plain
 * `node --import <tsx loader>`, as bench/ws.ts does), so this process only serves; with 2 CPUs, the server, the
 * load and redis-server share the machine. ROUNDS rounds, each running the contenders in the order of `roundOrder`;
 * the table shows medians, the verdicts paired ratios (each round's rate over plain Yoga's in the same round).
 * Every response is checked: non-2xx, socket errors, timeouts and GraphQL `errors` are counted and printed.
 *
 * NODE_ENV: graphql-js checks every `isObjectType()`-style test more slowly unless NODE_ENV is 'production', which
 * weighs on whatever walks types per response value (the executor, tollbooth's actual-cost walk). Production servers
 * set it: `NODE_ENV=production npm run bench:graphql` measures that setting (the load process inherits it).
 *
 * Redis: a private redis-server started by `startRedis()` (never the shared one on :6379), stopped at the end.
 *
 * What is measured is the built package, imported by its own name (`tollbooth`, `tollbooth/graphql`: `dist/`,
 * what npm publishes; the script builds first), not the TypeScript sources: tsx compiles those with esbuild's
 * `keepNames`, which wraps every function created per request in a `__name()` call, a cost no user pays.
 */
import { createServer, type Server } from 'node:http'
import { createRequire } from 'node:module'
import type { AddressInfo } from 'node:net'
import { cpus } from 'node:os'
import { EnvelopArmor } from '@escape.tech/graphql-armor'
import { createSchema, createYoga, type Plugin } from 'graphql-yoga'
import { Redis, type RedisOptions } from 'ioredis'
import { RedisStore, type Store, tokenBucket } from 'tollbooth'
import { type TollboothGraphQLOptions, useTollbooth } from 'tollbooth/graphql'
import { startRedis } from '../test/helpers/redisServer.js'
import {
  announceMeasuredPhase,
  LoadProcess,
  type Measured as MeasuredLoad,
  serveLoadJobs,
} from './loadProcess.js'
import { count, fmt, loadAverage, median, pct, verdict, versusPlain } from './report.js'

const CONNECTIONS = 50
const WARMUP_S = 1
const MEASURE_S = 4
/** Many short rounds rather than a few long ones: the machine's load drifts, and each round is paired with plain. */
const ROUNDS = 10
const USERS = 1000
const BUDGET = { capacity: 1_000_000_000, refillPerSecond: 1_000_000 }
const IDENTITY_HEADER = 'x-bench-user'

type Key =
  | 'plain'
  | 'plainAgain'
  | 'memory'
  | 'redis'
  | 'armor'
  | 'burn'
  | 'deferred'
  | 'memoryNoExtension'
  | 'memoryNoHeaders'
  | 'memoryNoReporting'
/** Ratio targets against plain Yoga; the other contenders are references. */
const TARGETS: Partial<Record<Key, number>> = { memory: 0.95, redis: 0.9 }
/** `--calibrate`: two reference plugins that do nothing but spend known CPU, or defer execution (see below). */
const CALIBRATE = process.argv.includes('--calibrate')
/** `--breakdown`: the MemoryStore contender again without `extensions.cost`, without headers, without both. */
const BREAKDOWN = process.argv.includes('--breakdown')
const BURN_MICROS = 15

// ---------------------------------------------------------------------------------------------------------------
// Schema and queries: the same for every contender
// ---------------------------------------------------------------------------------------------------------------

const typeDefs = /* GraphQL */ `
  type Query {
    hello: String!
    user(id: ID!): User
    users(first: Int = 10): [User!]!
    post(id: ID!): Post
  }
  type User {
    id: ID!
    name: String!
    email: String
    posts(first: Int = 5): [Post!]!
  }
  type Post {
    id: ID!
    title: String!
    body: String
    author: User
  }
`

interface UserRow {
  id: string
  name: string
  email: string
}
interface PostRow {
  id: string
  title: string
  body: string
  authorId: string
}

const userRow = (id: string): UserRow => ({ id, name: `User ${id}`, email: `user${id}@example.com` })
const postRow = (id: string): PostRow => ({
  id,
  title: `Post ${id}`,
  body: 'Lorem ipsum dolor sit amet.',
  authorId: String(Number(id) % 97),
})

const resolvers = {
  Query: {
    hello: () => 'world',
    user: (_: unknown, args: { id: string }) => userRow(args.id),
    users: (_: unknown, args: { first: number }) =>
      Array.from({ length: Math.max(0, Math.min(args.first, 100)) }, (_, i) => userRow(String(i))),
    post: (_: unknown, args: { id: string }) => postRow(args.id),
  },
  User: {
    posts: (user: UserRow, args: { first: number }) =>
      Array.from({ length: Math.max(0, Math.min(args.first, 100)) }, (_, i) =>
        postRow(`${user.id}${String(i).padStart(2, '0')}`),
      ),
  },
  Post: {
    author: (post: PostRow) => userRow(post.authorId),
  },
}

/** Slicing arguments, so tollbooth prices `users(first: $n)` by `$n` (and caches a cost per value of `$n`). */
const costs: TollboothGraphQLOptions['costs'] = {
  'Query.users': { listSize: { slicingArguments: ['first'] } },
  'User.posts': { listSize: { slicingArguments: ['first'] } },
}

interface GraphQLRequestBody {
  query: string
  operationName?: string
  variables?: Record<string, unknown>
}

const USERS_QUERY = /* GraphQL */ `
  query Users($n: Int!) {
    users(first: $n) {
      id
      name
      posts(first: 5) {
        id
        title
      }
    }
  }
`
const USER_QUERY = /* GraphQL */ `
  query User($id: ID!) {
    user(id: $id) {
      id
      name
      email
    }
  }
`
const HELLO_QUERY = '{ hello }'
const POST_QUERY = /* GraphQL */ `
  query Post($id: ID!) {
    post(id: $id) {
      ...PostFields
      author {
        ...UserFields
      }
    }
  }
  fragment PostFields on Post {
    id
    title
    body
  }
  fragment UserFields on User {
    id
    name
  }
`

/** The i-th request of the mix: four queries in turn, variables varying with i. */
function requestBody(i: number): GraphQLRequestBody {
  switch (i % 4) {
    case 0:
      return { query: USERS_QUERY, operationName: 'Users', variables: { n: [5, 10, 20][(i >> 2) % 3] } }
    case 1:
      return { query: USER_QUERY, operationName: 'User', variables: { id: String(i) } }
    case 2:
      return { query: HELLO_QUERY }
    default:
      return { query: POST_QUERY, operationName: 'Post', variables: { id: String(i) } }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The load generator (child process)
// ---------------------------------------------------------------------------------------------------------------

interface LoadJob {
  url: string
  connections: number
  warmupSeconds: number
  measureSeconds: number
  users: number
}

interface LoadResult {
  requests: number
  seconds: number
  perSecond: number
  p50: number
  p99: number
  non2xx: number
  /** Socket errors and timeouts, as autocannon counts them. */
  errors: number
  timeouts: number
  /** 2xx responses whose body holds `errors` or no `data`. */
  graphqlErrors: number
  sampleError: string | undefined
  statusCodes: Record<string, number>
  /** CPU time of the load generator over the measured phase, as a fraction of one core. */
  clientCpu: number
}

/** The part of autocannon 8's API used here (the package ships no types). */
interface AutocannonRequest {
  method: string
  path?: string
  headers: Record<string, string>
  body: string
  onResponse?: (status: number, body: string) => void
}
interface AutocannonResult {
  duration: number
  requests: { total: number; average: number }
  latency: { p50: number; p99: number }
  errors: number
  timeouts: number
  non2xx: number
  statusCodeStats: Record<string, { count: number }>
}
type Autocannon = (options: {
  url: string
  connections: number
  duration: number
  requests: AutocannonRequest[]
}) => Promise<AutocannonResult>

async function runLoad(job: LoadJob): Promise<LoadResult> {
  const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon
  let checking = false
  let graphqlErrors = 0
  let sampleError: string | undefined
  const onResponse = (status: number, body: string) => {
    if (!checking || status < 200 || status > 299) return
    if (body.includes('"errors"') || !body.includes('"data"')) {
      graphqlErrors++
      sampleError ??= body.slice(0, 300)
    }
  }
  const requests: AutocannonRequest[] = Array.from({ length: job.users }, (_, i) => ({
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/graphql-response+json',
      [IDENTITY_HEADER]: `user-${i}`,
    },
    body: JSON.stringify(requestBody(i)),
    onResponse,
  }))
  const options = { url: job.url, connections: job.connections, requests }
  await autocannon({ ...options, duration: job.warmupSeconds })
  announceMeasuredPhase()
  checking = true
  const cpuStart = process.cpuUsage()
  const result = await autocannon({ ...options, duration: job.measureSeconds })
  const cpu = process.cpuUsage(cpuStart)
  const statusCodes: Record<string, number> = {}
  for (const [code, { count }] of Object.entries(result.statusCodeStats)) statusCodes[code] = count
  return {
    requests: result.requests.total,
    seconds: result.duration,
    perSecond: result.requests.total / result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    graphqlErrors,
    sampleError,
    statusCodes,
    clientCpu: (cpu.user + cpu.system) / 1e6 / result.duration,
  }
}

/** A round's result with the server's CPU time, per request too. */
type Measured = MeasuredLoad<LoadResult> & {
  serverMicrosPerRequest: number
  /** RedisStore script calls over the measured phase (the Redis contender only). */
  storeCalls: number | undefined
}

// ---------------------------------------------------------------------------------------------------------------
// The servers (this process)
// ---------------------------------------------------------------------------------------------------------------

/** What the report needs of a contender: which it is and where it listens. */
interface Contender {
  readonly key: Key
  readonly name: string
  readonly url: string
}

const CONTENDER_NAMES: Record<Key, string> = {
  plain: 'plain Yoga',
  plainAgain: 'plain Yoga again (A/A control)',
  memory: 'Yoga + tollbooth, MemoryStore',
  redis: 'Yoga + tollbooth, RedisStore',
  armor: 'Yoga + graphql-armor (defaults)',
  memoryNoExtension: 'MemoryStore, no extensions.cost',
  memoryNoHeaders: 'MemoryStore, no headers',
  memoryNoReporting: 'MemoryStore, neither',
  burn: `Yoga + ${BURN_MICROS} µs busy loop`,
  deferred: 'Yoga + execution deferred',
}

/** The contenders of this run: the four compared servers and the A/A control, then the optional ones. */
function contenderKeys(): Key[] {
  const keys: Key[] = ['plain', 'plainAgain', 'memory', 'redis', 'armor']
  if (BREAKDOWN) keys.push('memoryNoExtension', 'memoryNoHeaders', 'memoryNoReporting')
  if (CALIBRATE) keys.push('burn', 'deferred')
  return keys
}

/** A contender's Yoga plugins; `redisStore` is needed by the Redis contender only. */
function contenderPlugins(key: Key, redisStore: Store | undefined): Plugin[] {
  switch (key) {
    case 'plain':
    case 'plainAgain':
      return []
    case 'memory':
      return [tollbooth(undefined, 'bench-memory')]
    case 'redis':
      if (redisStore === undefined) throw new Error('the Redis contender needs a RedisStore')
      return [tollbooth(redisStore, 'bench-redis')]
    case 'armor':
      return new EnvelopArmor().protect().plugins as Plugin[]
    case 'memoryNoExtension':
      return [tollbooth(undefined, 'bench-memory-no-extension', { costExtension: false })]
    case 'memoryNoHeaders':
      return [tollbooth(undefined, 'bench-memory-no-headers', { headers: false })]
    case 'memoryNoReporting':
      return [tollbooth(undefined, 'bench-memory-no-reporting', { costExtension: false, headers: false })]
    case 'burn':
      return [burnPlugin(BURN_MICROS)]
    case 'deferred':
      return [deferPlugin()]
  }
}

/** A Yoga server on node:http, 127.0.0.1, a free port. */
async function yogaServer(plugins: Plugin[]): Promise<{ url: string; server: Server }> {
  const yoga = createYoga({
    schema: createSchema({ typeDefs, resolvers }),
    plugins,
    logging: false,
    graphiql: false,
  })
  const server = createServer(yoga)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return { url: `http://127.0.0.1:${port}/graphql`, server }
}

async function closeServer(server: Server): Promise<void> {
  server.closeAllConnections()
  await new Promise((resolve) => server.close(resolve))
}

/** A RedisStore on the bench's private redis-server, counting its script calls and errors. */
class BenchRedis {
  readonly client: Redis
  readonly store: RedisStore
  /** Script calls the store made, counted by its latency hook: answered calls only, batched or not. */
  calls = 0
  readonly errors = new Map<string, number>()

  constructor(port: number) {
    const options: RedisOptions = { host: '127.0.0.1', port, enableOfflineQueue: false, lazyConnect: true }
    this.client = new Redis(options)
    this.store = new RedisStore({
      client: this.client,
      prefix: 'bench-gql:',
      hooks: {
        onStoreError: ({ error }) => count(this.errors, error.code ?? error.message),
        onStoreLatency: () => this.calls++,
        onBreakerChange: ({ to }) => count(this.errors, `breaker → ${to}`),
      },
    })
  }

  async connect(): Promise<string> {
    await this.client.connect()
    return /redis_version:(\S+)/.exec(await this.client.info('server'))?.[1] ?? '?'
  }

  async close(): Promise<void> {
    await this.client.quit().catch(() => this.client.disconnect())
  }
}

function tollbooth(
  store: Store | undefined,
  name: string,
  reporting: Pick<TollboothGraphQLOptions, 'costExtension' | 'headers'> = {},
): Plugin {
  return useTollbooth({
    limiter: tokenBucket({ name, store, ...BUDGET }),
    identify: (context) => (context.request as Request).headers.get(IDENTITY_HEADER) ?? 'anonymous',
    costs,
    ...reporting,
  })
}

/**
 * Calibration (`--calibrate`): what a plugin that only spends `micros` of CPU per operation reads here, to translate
 * a ratio into microseconds on this machine.
 */
function burnPlugin(micros: number): Plugin {
  return {
    onExecute() {
      const until = performance.now() + micros / 1000
      while (performance.now() < until) {
        // spinning on purpose
      }
    },
  }
}

/**
 * Calibration (`--calibrate`): a plugin that adds no work but runs each execution one event-loop turn later.
 * Requests read in the same turn then execute, and are answered, together: on a machine where the server and the
 * load generator share cores this changes the server's cost per request by far more than any plugin's own work.
 * Anything that waits for I/O before executing (a RedisStore decision) gets part of that effect.
 */
function deferPlugin(): Plugin {
  return {
    onExecute() {
      return new Promise<void>((resolve) => setImmediate(resolve))
    },
  }
}

/** Sends every distinct query once and checks the answer; returns `extensions.cost.requestedQueryCost` of each. */
async function check(contender: Contender): Promise<(number | undefined)[]> {
  const costsSeen: (number | undefined)[] = []
  for (let i = 0; i < 4; i++) {
    const response = await fetch(contender.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/graphql-response+json',
        [IDENTITY_HEADER]: 'check',
      },
      body: JSON.stringify(requestBody(i)),
    })
    const text = await response.text()
    const body = JSON.parse(text) as {
      data?: unknown
      errors?: unknown
      extensions?: { cost?: { requestedQueryCost: number } }
    }
    if (response.status !== 200 || body.errors !== undefined || body.data == null) {
      throw new Error(`${contender.name}: query ${i} answered ${response.status} ${text.slice(0, 300)}`)
    }
    costsSeen.push(body.extensions?.cost?.requestedQueryCost)
  }
  return costsSeen
}

const job: Omit<LoadJob, 'url'> = {
  connections: CONNECTIONS,
  warmupSeconds: WARMUP_S,
  measureSeconds: MEASURE_S,
  users: USERS,
}

function printPreamble(redisVersion: string, loadPid: number | undefined): void {
  console.log(
    `Node ${process.version}, ${cpus().length} CPUs (${cpus()[0]?.model ?? '?'}), redis-server ${redisVersion}, ` +
      `NODE_ENV=${process.env.NODE_ENV ?? '(unset: graphql-js in development mode)'}, ` +
      `load average before: ${loadAverage()}`,
  )
  console.log(
    `autocannon: ${CONNECTIONS} connections, no pipelining, ${USERS} prebuilt requests cycled per connection ` +
      `(4 queries in turn, ${USERS} identities in the ${IDENTITY_HEADER} header); ${WARMUP_S} s warm-up + ` +
      `${MEASURE_S} s measured, ${ROUNDS} rounds in a balanced order, medians shown`,
  )
  console.log(
    `load generator in a separate process (pid ${loadPid}); servers and their stores in this one ` +
      `(pid ${process.pid}); CPU is process CPU time over the measured phase (100% = one core)`,
  )
  console.log(
    `tollbooth: tokenBucket ${JSON.stringify(BUDGET)}, identify from ${IDENTITY_HEADER}, costs: @listSize on ` +
      'Query.users and User.posts; every other option default',
  )
}

async function checkAll(contenders: readonly Contender[]): Promise<void> {
  for (const contender of contenders) {
    const seen = await check(contender)
    const costText = seen.every((c) => c === undefined) ? '' : `, extensions.cost ${seen.join(' / ')}`
    console.log(`  check ${contender.name}: 4 queries answered with data${costText}`)
  }
  console.log()
}

/**
 * The order of the servers in a round: the rows of Williams' balanced Latin square (n rounds, 2n when n is odd), so
 * that over a full set of rounds each server runs right after each other one equally often. Rotating one order
 * would keep every server's predecessor the same, and what a server leaves behind (warm caches for the same code,
 * its garbage) would always favour or burden the same one.
 */
function roundOrder(round: number, n: number): number[] {
  const first = [0]
  for (let low = 1, high = n - 1, i = 1; i < n; i++) first.push(i % 2 === 1 ? low++ : high--)
  const rows = n % 2 === 0 ? n : 2 * n
  const row = round % rows
  const order = first.map((position) => (position + row) % n)
  return row < n ? order : order.reverse()
}

function printRound(round: number, contender: Contender, result: Measured): void {
  const problems = result.non2xx + result.errors + result.timeouts + result.graphqlErrors
  console.log(
    `round ${round + 1}  ${contender.name.padEnd(32)} ${fmt(result.perSecond).padStart(7)} req/s` +
      `   p50 ${result.p50.toFixed(1)} ms  p99 ${result.p99.toFixed(1)} ms` +
      `   server ${result.serverMicrosPerRequest.toFixed(0)} µs CPU/req, ` +
      `CPU: server ${pct(result.serverCpu)} load ${pct(result.clientCpu)}` +
      (result.storeCalls === undefined
        ? ''
        : `, ${(result.storeCalls / result.requests).toFixed(2)} Redis calls/req`) +
      (problems === 0 ? '' : `   PROBLEMS: ${problems}`),
  )
}

/** The table of medians, the check of every response, the verdicts on paired ratios, Redis' calls and errors. */
function report(
  contenders: readonly Contender[],
  results: ReadonlyMap<Contender, Measured[]>,
  storeErrors: ReadonlyMap<string, number>,
  started: number,
): void {
  console.log()
  console.log(
    [
      'server'.padEnd(32),
      'req/s'.padStart(7),
      'min–max of rounds'.padStart(18),
      'p50 ms'.padStart(7),
      'p99 ms'.padStart(7),
      'µs CPU/req'.padStart(11),
      'CPU srv/load'.padStart(13),
      'responses'.padStart(10),
      'non-2xx'.padStart(8),
      'errors'.padStart(7),
      'gql errors'.padStart(11),
    ].join(' '),
  )
  const of = (contender: Contender) => results.get(contender) ?? []
  const sum = (rounds: Measured[], pick: (r: Measured) => number) =>
    rounds.reduce((total, r) => total + pick(r), 0)
  for (const contender of contenders) {
    const rounds = of(contender)
    const rates = rounds.map((r) => r.perSecond).sort((a, b) => a - b)
    console.log(
      [
        contender.name.padEnd(32),
        fmt(median(rates)).padStart(7),
        `${fmt(rates[0])}–${fmt(rates.at(-1))}`.padStart(18),
        median(rounds.map((r) => r.p50))
          .toFixed(1)
          .padStart(7),
        median(rounds.map((r) => r.p99))
          .toFixed(1)
          .padStart(7),
        median(rounds.map((r) => r.serverMicrosPerRequest))
          .toFixed(0)
          .padStart(11),
        `${pct(median(rounds.map((r) => r.serverCpu)))}/${pct(median(rounds.map((r) => r.clientCpu)))}`.padStart(
          13,
        ),
        fmt(sum(rounds, (r) => r.requests)).padStart(10),
        String(sum(rounds, (r) => r.non2xx)).padStart(8),
        String(sum(rounds, (r) => r.errors + r.timeouts)).padStart(7),
        String(sum(rounds, (r) => r.graphqlErrors)).padStart(11),
      ].join(' '),
    )
    const statuses: Record<string, number> = {}
    for (const r of rounds) {
      for (const [code, n] of Object.entries(r.statusCodes)) statuses[code] = (statuses[code] ?? 0) + n
    }
    if (Object.keys(statuses).some((code) => code !== '200')) console.log('  status codes:', statuses)
    const sample = rounds.find((r) => r.sampleError !== undefined)?.sampleError
    if (sample !== undefined) console.log(`  first GraphQL error: ${sample}`)
  }

  const failures = contenders.reduce(
    (total, c) => total + sum(of(c), (r) => r.non2xx + r.errors + r.timeouts + r.graphqlErrors),
    0,
  )
  console.log(
    failures === 0
      ? '\nall responses: 200, with data and without errors'
      : `\n${failures} responses were NOT 200 with data and without errors (see the table): the rates above are not comparable`,
  )

  // Verdicts on paired ratios: each round's rate over plain Yoga's in the same round, median over rounds (drift of
  // the machine's load between rounds cancels out); the ratio of the medians and of server CPU per request too.
  console.log()
  const plain = contenders.find((c) => c.key === 'plain') as Contender
  const plainRounds = of(plain)
  for (const contender of contenders) {
    if (contender === plain) continue
    const rounds = of(contender)
    const { paired, ofMedians, cpu } = versusPlain(rounds, plainRounds, (r) => r.serverMicrosPerRequest)
    const target = TARGETS[contender.key]
    const targetText =
      contender.key === 'plainAgain'
        ? '(control: the same server read against itself)'
        : target === undefined
          ? '(reference, no target)'
          : `target ≥ ${target.toFixed(2)}×   ${verdict(paired, target)}`
    console.log(
      `${contender.name.padEnd(32)} ${paired.toFixed(2)}× plain (paired; ratio of medians ${ofMedians.toFixed(2)}×)` +
        `   ${targetText}`,
    )
    console.log(
      `${''.padEnd(32)} server CPU per request, plain/this: ${cpu.toFixed(2)}× (what a CPU-bound server would get)` +
        (target === undefined ? '' : `   ${cpu >= target ? 'met' : 'NOT met'}`),
    )
  }
  console.log(
    `\nload average after: ${loadAverage()}; total ${((performance.now() - started) / 1000).toFixed(0)} s`,
  )
  const redisRounds = contenders.filter((c) => c.key === 'redis').flatMap(of)
  if (redisRounds.length > 0) {
    const calls = sum(redisRounds, (r) => r.storeCalls ?? 0)
    const requests = sum(redisRounds, (r) => r.requests)
    console.log(
      `RedisStore: ${fmt(calls)} script calls for ${fmt(requests)} requests over the measured phases ` +
        `(${(calls / requests).toFixed(2)} per request; decisions of one event-loop turn share a call)`,
    )
  }
  if (storeErrors.size > 0)
    console.log('RedisStore errors and breaker changes:', Object.fromEntries(storeErrors))
}

/** Every server in this process, measured one after the other, in a balanced order each round. */
async function main(): Promise<void> {
  const started = performance.now()
  const redis = await startRedis()
  const benchRedis = new BenchRedis(redis.port)
  const servers: Server[] = []
  const load = new LoadProcess<LoadJob, LoadResult>(import.meta.url)
  try {
    const redisVersion = await benchRedis.connect()
    const contenders: Contender[] = []
    for (const key of contenderKeys()) {
      const { url, server } = await yogaServer(contenderPlugins(key, benchRedis.store))
      servers.push(server)
      contenders.push({ key, name: CONTENDER_NAMES[key], url })
    }
    printPreamble(redisVersion, load.child.pid)
    await checkAll(contenders)

    const results = new Map<Contender, Measured[]>(contenders.map((c) => [c, []]))
    for (let round = 0; round < ROUNDS; round++) {
      const order = roundOrder(round, contenders.length).map((i) => contenders[i] as Contender)
      for (const contender of order) {
        let callsBefore = 0
        const measured = await load.run({ ...job, url: contender.url }, () => {
          callsBefore = benchRedis.calls
        })
        const result: Measured = {
          ...measured,
          serverMicrosPerRequest: measured.serverCpuMicros / measured.requests,
          storeCalls: contender.key === 'redis' ? benchRedis.calls - callsBefore : undefined,
        }
        results.get(contender)?.push(result)
        printRound(round, contender, result)
      }
    }
    report(contenders, results, benchRedis.errors, started)
  } finally {
    await load.stop()
    for (const server of servers) await closeServer(server)
    await benchRedis.close()
    await redis.stop()
  }
}

if (process.argv.includes('--load')) await serveLoadJobs(runLoad)
else await main()
