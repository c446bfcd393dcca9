/**
 * One bench:graphql contender in a process of its own:
 *
 *   node --import <tsx loader> bench/graphql/server.ts <contender key> <redis port, 0 for none>
 *
 * Starts the server on 127.0.0.1 (a free port) and prints `{ "url" }` (or `{ "error" }`), then answers each
 * `stats` line on stdin with this process' counters (`ServerStats`), and `allocations start` / `allocations stop`
 * lines with `{}` / `{ "bytes" }` (`Allocations`); exits when stdin ends. The bench's side is
 * bench/graphql/serverProcess.ts.
 */
import { createServer } from 'node:http'
import type { HeapProfiler } from 'node:inspector'
import { Session } from 'node:inspector/promises'
import type { AddressInfo } from 'node:net'
import { PerformanceObserver } from 'node:perf_hooks'
import { createInterface } from 'node:readline'
import {
  ApolloServer,
  type ApolloServerOptions,
  type ApolloServerPlugin,
  type BaseContext,
  HeaderMap,
} from '@apollo/server'
import { startStandaloneServer } from '@apollo/server/standalone'
import { ApolloArmor, EnvelopArmor } from '@escape.tech/graphql-armor'
import { createSchema, createYoga, type Plugin } from 'graphql-yoga'
import { Redis } from 'ioredis'
import { RedisStore, type Store, tokenBucket } from 'tollbooth'
import { type TollboothGraphQLOptions, useTollbooth } from 'tollbooth/graphql'
import { APOLLO_PLUGIN_MODULE, BURN_MICROS, CONTENDER_KEYS, type ContenderKey } from './contenders.js'
import { BUDGET, costs, IDENTITY_HEADER, resolvers, typeDefs } from './schema.js'
import type { ServerStats } from './serverProcess.js'
import { WORKLOADS, type Workload, type WorkloadName } from './workloads.js'

/** The Node request, which the Apollo contenders' context carries (for IP identity, and `identify` here). */
interface ApolloBenchContext extends BaseContext {
  req: { headers: Record<string, string | string[] | undefined> }
}

/** `tollboothApolloPlugin` as used here; imported when a contender needs it, as it may not be built yet. */
type ApolloPluginFactory = (
  options: Omit<TollboothGraphQLOptions, 'identify'> & { identify: (context: ApolloBenchContext) => string },
) => NonNullable<ApolloServerOptions<ApolloBenchContext>['plugins']>[number]

/** This process' counters, as the bench reads them (`stats` lines on stdin). */
class Counters {
  minorGcs = 0
  majorGcs = 0
  gcMicros = 0
  storeCalls: number | undefined
  readonly storeErrors: Record<string, number> = {}

  constructor() {
    new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        // NODE_PERFORMANCE_GC_MINOR is 1 (a scavenge); every other kind is a full or incremental mark.
        if ((entry as { detail?: { kind?: number } }).detail?.kind === 1) this.minorGcs++
        else this.majorGcs++
        this.gcMicros += entry.duration * 1000
      }
    }).observe({ entryTypes: ['gc'] })
  }

  storeError(what: string): void {
    this.storeErrors[what] = (this.storeErrors[what] ?? 0) + 1
  }

  stats(): ServerStats {
    const cpu = process.cpuUsage()
    return {
      cpuMicros: cpu.user + cpu.system,
      systemMicros: cpu.system,
      minorGcs: this.minorGcs,
      majorGcs: this.majorGcs,
      gcMicros: this.gcMicros,
      storeCalls: this.storeCalls,
      storeErrors: this.storeErrors,
    }
  }
}

/**
 * Bytes this process allocates between `start` and `stop`, garbage included: V8's sampling heap profiler with the
 * objects later collected kept in its profile. It samples about one allocation per SAMPLING_BYTES and scales each
 * sample by its size, so the total is an estimate that does not depend on the machine's speed or load: two
 * identical servers read within about 2% of each other (the JIT's state moves it a little).
 */
class Allocations {
  private static readonly SAMPLING_BYTES = 4096
  private readonly session = new Session()

  constructor() {
    this.session.connect()
  }

  /** `samplingBytes`: finer than the default for a count over few requests. */
  async start(samplingBytes = Allocations.SAMPLING_BYTES): Promise<void> {
    // Node 20's types lack the two flags that keep collected objects; its V8 takes them.
    const params: HeapProfiler.StartSamplingParameterType & Record<string, unknown> = {
      samplingInterval: samplingBytes,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    }
    await this.session.post('HeapProfiler.startSampling', params)
  }

  async stop(): Promise<number> {
    const { profile } = await this.session.post('HeapProfiler.stopSampling')
    let bytes = 0
    const pending = [profile.head]
    for (let node = pending.pop(); node !== undefined; node = pending.pop()) {
      bytes += node.selfSize
      pending.push(...node.children)
    }
    return bytes
  }
}

/** A RedisStore on the bench's private redis-server, its calls and errors counted into `counters`. */
async function redisStore(key: ContenderKey, port: number, counters: Counters): Promise<Store> {
  if (port === 0) throw new Error(`${key} needs the bench's redis-server`)
  const client = new Redis({ host: '127.0.0.1', port, enableOfflineQueue: false, lazyConnect: true })
  await client.connect()
  counters.storeCalls = 0
  const store = new RedisStore({
    client,
    prefix: `bench-gql-${key}:`,
    hooks: {
      onStoreError: ({ error }) => counters.storeError(error.code ?? error.message),
      onStoreLatency: () => {
        counters.storeCalls = (counters.storeCalls ?? 0) + 1
      },
      onBreakerChange: ({ to }) => counters.storeError(`breaker → ${to}`),
    },
  })
  await store.warmUp()
  return store
}

function limiter(name: string, store: Store | undefined) {
  return tokenBucket({ name, store, ...BUDGET })
}

type Reporting = Pick<TollboothGraphQLOptions, 'costExtension' | 'headers'>

function yogaTollbooth(name: string, store: Store | undefined, reporting: Reporting = {}): Plugin {
  return useTollbooth({
    limiter: limiter(name, store),
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

/**
 * Calibration (`--calibrate`): a plugin with the Yoga hooks `useTollbooth` registers by default, each doing nothing:
 * what Yoga spends on running a plugin of this shape, apart from anything tollbooth computes (and apart from its
 * steps around Yoga's handler, which are not hooks).
 */
function hooksPlugin(): Plugin {
  return {
    onParse() {},
    onValidate() {},
    onExecute() {},
    onSubscribe() {},
  }
}

async function yogaPlugins(key: ContenderKey, redisPort: number, counters: Counters): Promise<Plugin[]> {
  switch (key) {
    case 'yogaMemory':
      return [yogaTollbooth('bench-memory', undefined)]
    case 'yogaRedis':
      return [yogaTollbooth('bench-redis', await redisStore(key, redisPort, counters))]
    case 'yogaArmor':
      return new EnvelopArmor().protect().plugins as Plugin[]
    case 'yogaMemoryNoExtension':
      return [yogaTollbooth('bench-memory', undefined, { costExtension: false })]
    case 'yogaMemoryNoHeaders':
      return [yogaTollbooth('bench-memory', undefined, { headers: false })]
    case 'yogaMemoryNoReporting':
      return [yogaTollbooth('bench-memory', undefined, { costExtension: false, headers: false })]
    case 'yogaBurn':
      return [burnPlugin(BURN_MICROS)]
    case 'yogaDeferred':
      return [deferPlugin()]
    case 'yogaHooks':
      return [hooksPlugin()]
    default:
      return []
  }
}

/** A server as the bench drives it: its URL, and the same server asked one request in this process. */
interface Served {
  url: string
  /** Answers `body` for `identity` without the network (throws on anything but a 200 without errors). */
  ask(body: string, identity: string): Promise<void>
}

/** A Yoga 5 server on node:http: its defaults (parse and validation caches on), no logging, no GraphiQL. */
async function startYoga(plugins: Plugin[]): Promise<Served> {
  const yoga = createYoga({
    schema: createSchema({ typeDefs, resolvers }),
    plugins,
    logging: false,
    graphiql: false,
  })
  const server = createServer(yoga)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`
  const ask = async (body: string, identity: string) => {
    const response = await yoga.fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: ACCEPT, [IDENTITY_HEADER]: identity },
      body,
    })
    answered(response.status, await response.text())
  }
  return { url, ask }
}

const ACCEPT = 'application/graphql-response+json'

function answered(status: number, body: string): void {
  if (status !== 200 || body.includes('"errors"'))
    throw new Error(`answered ${status}: ${body.slice(0, 200)}`)
}

async function apolloOptions(
  key: ContenderKey,
  redisPort: number,
  counters: Counters,
): Promise<ApolloServerOptions<ApolloBenchContext>> {
  const base = { typeDefs, resolvers }
  switch (key) {
    case 'apolloArmor': {
      // graphql-armor types its Apollo plugins against Apollo Server 4; they are plain plugin objects.
      const armor = new ApolloArmor().protect() as unknown as Partial<ApolloServerOptions<ApolloBenchContext>>
      return { ...base, ...armor } as ApolloServerOptions<ApolloBenchContext>
    }
    case 'apolloHooks':
      return { ...base, plugins: [apolloHooksPlugin()] }
    case 'apolloMemory':
    case 'apolloRedis': {
      const { tollboothApolloPlugin } = (await import(APOLLO_PLUGIN_MODULE)) as {
        tollboothApolloPlugin: ApolloPluginFactory
      }
      const store = key === 'apolloRedis' ? await redisStore(key, redisPort, counters) : undefined
      const plugin = tollboothApolloPlugin({
        limiter: limiter(key === 'apolloRedis' ? 'bench-redis' : 'bench-memory', store),
        identify: (context) => {
          const value = context.req.headers[IDENTITY_HEADER]
          return typeof value === 'string' ? value : 'anonymous'
        },
        costs,
      })
      return { ...base, plugins: [plugin] }
    }
    default:
      return base
  }
}

/**
 * Calibration (`--calibrate`): an Apollo plugin with the request hooks tollbooth's Apollo plugin registers for a
 * single operation, each doing nothing: what Apollo spends on running a plugin of this shape (it awaits each hook).
 */
function apolloHooksPlugin(): ApolloServerPlugin<ApolloBenchContext> {
  return {
    async requestDidStart() {
      return {
        async parsingDidStart() {},
        async didResolveOperation() {},
        async responseForOperation() {
          return null
        },
        async willSendResponse() {},
      }
    },
  }
}

/**
 * An Apollo Server 5 on node:http through `startStandaloneServer` (its own body parser and CORS handling), its
 * defaults otherwise; the context carries the Node request, as tollbooth's Apollo plugin reads the client from it.
 */
async function startApollo(options: ApolloServerOptions<ApolloBenchContext>): Promise<Served> {
  const server = new ApolloServer<ApolloBenchContext>(options)
  const { url } = await startStandaloneServer(server, {
    context: async ({ req }) => ({ req }),
    listen: { port: 0, host: '127.0.0.1' },
  })
  const ask = async (body: string, identity: string) => {
    const req = { headers: { [IDENTITY_HEADER]: identity }, socket: { remoteAddress: '127.0.0.1' } }
    const response = await server.executeHTTPGraphQLRequest({
      httpGraphQLRequest: {
        method: 'POST',
        headers: new HeaderMap([
          ['content-type', 'application/json'],
          ['accept', ACCEPT],
        ]),
        search: '',
        body: JSON.parse(body) as unknown,
      },
      context: async () => ({ req }),
    })
    if (response.body.kind !== 'complete') throw new Error('answered in chunks')
    answered(response.status ?? 200, response.body.string)
  }
  return { url, ask }
}

/**
 * Bytes allocated per request when the server answers `requests` of the workload one after another in this process
 * (Yoga's `fetch`, Apollo's `executeHTTPGraphQLRequest`), after as many unmeasured: what the server and its plugins
 * allocate, without node:http and the load's concurrency, which move the count over the network by kilobytes from
 * one pass to the next. Sampled finely, as the requests are fewer.
 */
async function allocatedInProcess(
  served: Served,
  workload: Workload,
  requests: number,
  allocations: Allocations,
): Promise<number> {
  const bodies = Array.from({ length: workload.identities }, (_, i) =>
    JSON.stringify(workload.requestBody(i)),
  )
  const pass = async () => {
    for (let i = 0; i < requests; i++) {
      const index = i % bodies.length
      await served.ask(bodies[index] as string, `in-process-${index}`)
    }
  }
  await pass()
  await allocations.start(IN_PROCESS_SAMPLING_BYTES)
  await pass()
  return (await allocations.stop()) / requests
}

const IN_PROCESS_SAMPLING_BYTES = 512

async function serve(key: ContenderKey, redisPort: number): Promise<void> {
  const counters = new Counters()
  const served = key.startsWith('apollo')
    ? await startApollo(await apolloOptions(key, redisPort, counters))
    : await startYoga(await yogaPlugins(key, redisPort, counters))
  process.stdout.write(`${JSON.stringify({ url: served.url })}\n`)
  const allocations = new Allocations()
  for await (const line of createInterface({ input: process.stdin })) {
    if (line === 'stats') process.stdout.write(`${JSON.stringify(counters.stats())}\n`)
    else if (line === 'allocations start') {
      await allocations.start()
      process.stdout.write('{}\n')
    } else if (line === 'allocations stop') {
      process.stdout.write(`${JSON.stringify({ bytes: await allocations.stop() })}\n`)
    } else if (line.startsWith('in-process ')) {
      const [, workload, requests] = line.split(' ')
      const bytes = await allocatedInProcess(
        served,
        WORKLOADS[workload as WorkloadName],
        Number(requests),
        allocations,
      )
      process.stdout.write(`${JSON.stringify({ bytes })}\n`)
    }
  }
  // Through process.exit, so that --cpu-prof writes its profile; open sockets and Redis clients end with it.
  process.exit(0)
}

const key = process.argv[2] as ContenderKey
if (!CONTENDER_KEYS.includes(key)) throw new Error(`bench/graphql/server.ts: unknown contender ${key}`)
try {
  await serve(key, Number(process.argv[3] ?? 0))
} catch (error) {
  process.stdout.write(`${JSON.stringify({ error: String((error as Error).stack ?? error) })}\n`)
  process.exit(1)
}
