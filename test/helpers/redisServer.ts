import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs'
import { type AddressInfo, createServer, type Server } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'

const HOST = '127.0.0.1'
// A shared Redis listens on the default port of this machine; tests must never touch it.
const SHARED_REDIS_PORT = 6379
const CLUSTER_BUS_OFFSET = 10_000
const MAX_PORT = 65_535
const READY_TIMEOUT_MS = 5_000
const STOP_TIMEOUT_MS = 5_000
const CLUSTER_TIMEOUT_MS = 15_000
/** A reshard moves slot by slot, a few commands each, and its keys: far longer than forming a cluster. */
const RESHARD_TIMEOUT_MS = 180_000
const QUERY_TIMEOUT_MS = 500

const execFileAsync = promisify(execFile)

export interface RedisProcess {
  readonly host: string
  readonly port: number
  readonly url: string
  /** pid of the current (or last) redis-server process; changes on restart(). */
  readonly pid: number
  stop(): Promise<void>
  kill(): Promise<void>
  /** SIGSTOP: the server keeps its connections but answers nothing until resume(). */
  pause(): void
  resume(): void
  restart(): Promise<void>
}

export interface RedisClusterProcess {
  readonly nodes: RedisProcess[]
  readonly startupNodes: { host: string; port: number }[]
  stop(): Promise<void>
  /**
   * Stops every node and starts them again (their nodes-<port>.conf kept, so the cluster forms again; the data is
   * gone: nothing is persisted), then waits for cluster_state:ok.
   */
  restart(): Promise<void>
  /** The nodes that are masters now (roles change with failovers), by asking each running node. */
  masters(): Promise<RedisProcess[]>
  /** Waits until every node answering says cluster_state:ok. */
  waitUntilOk(): Promise<void>
  /**
   * Moves `slots` slots, with their keys, from master `from` to master `to` with `redis-cli --cluster reshard`, as an
   * operator would while clients keep sending; resolves once every slot has moved.
   */
  moveSlots(from: RedisProcess, to: RedisProcess, slots: number): Promise<void>
}

const { children: liveChildren, dirs: tmpDirs } = cleanupRegistry()

interface CleanupRegistry {
  children: Set<ChildProcess>
  dirs: Set<string>
}

/** One registry per process, even if this module gets evaluated more than once. */
function cleanupRegistry(): CleanupRegistry {
  const key = Symbol.for('tollbooth.test.redisServer')
  const store = globalThis as unknown as Record<symbol, CleanupRegistry | undefined>
  const existing = store[key]
  if (existing) return existing
  const registry: CleanupRegistry = { children: new Set(), dirs: new Set() }
  store[key] = registry

  // Runs inside 'exit' and signal handlers, so it must be synchronous: SIGKILL needs no waiting.
  const cleanup = () => {
    for (const child of registry.children) child.kill('SIGKILL')
    for (const dir of registry.dirs) rmSync(dir, { recursive: true, force: true })
  }
  process.on('exit', cleanup)
  // vitest kills its fork workers with SIGTERM, which skips 'exit'. Where nobody else handles a
  // signal, clean up and re-raise it; where someone does (vitest's main process), they exit.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    if (process.listenerCount(signal) > 0) continue
    process.once(signal, () => {
      cleanup()
      process.kill(process.pid, signal)
    })
  }
  return registry
}

export async function startRedis(options: { port?: number } = {}): Promise<RedisProcess> {
  const extraArgs = debugCommandArgs(await requireBinary('redis-server'))
  if (options.port !== undefined) return launch(options.port, extraArgs)
  for (let attempt = 1; ; attempt++) {
    const [port] = await reservePorts(1)
    try {
      return await launch(port as number, extraArgs)
    } catch (error) {
      // Someone can grab the port between our reservation and redis binding it: pick another.
      if (attempt >= 3 || !String(error).includes('Address already in use')) throw error
    }
  }
}

export interface ClusterOptions {
  /** @default 3 */
  masters?: number
  /** Replicas of each master. @default 0 */
  replicas?: number
  /** `cluster-node-timeout`: how long a master may be unreachable before its replica is promoted. @default 2000 */
  nodeTimeoutMs?: number
  /**
   * `cluster-require-full-coverage`: with `true` (Redis' default) every node refuses commands while any slot has no
   * reachable master, from the moment a master is marked failed until its replica takes over. @default true
   */
  requireFullCoverage?: boolean
}

export async function startRedisCluster(options: ClusterOptions = {}): Promise<RedisClusterProcess> {
  const masters = options.masters ?? 3
  const replicas = options.replicas ?? 0
  if (masters < 3) throw new Error(`a Redis cluster needs at least 3 masters, got ${masters}`)
  const extraArgs = debugCommandArgs(await requireBinary('redis-server'))
  await requireBinary('redis-cli')

  const ports = await reservePorts(masters * (1 + replicas), { clusterBus: true })
  const nodes: RedisServer[] = []
  const cluster: RedisClusterProcess = {
    nodes,
    startupNodes: ports.map((port) => ({ host: HOST, port })),
    stop: async () => {
      await Promise.all(nodes.map((node) => node.stop()))
    },
    restart: async () => {
      await Promise.all(nodes.map((node) => node.stop()))
      await Promise.all(nodes.map((node) => node.restart()))
      await waitForClusterOk(ports)
    },
    masters: async () => {
      const infos = await Promise.all(nodes.map((node) => query(node.port, 'INFO', 'replication')))
      return nodes.filter((_, i) => infos[i]?.includes('role:master'))
    },
    waitUntilOk: () => waitForClusterOk(ports),
    moveSlots: async (from, to, slots) => {
      const [fromId, toId] = await Promise.all(
        // Asked while the test's load runs: a busy machine may take more than a boot probe's 500 ms.
        [from.port, to.port].map((port) => queryWithin(10_000, port, 'CLUSTER', 'MYID')),
      )
      if (fromId === undefined || toId === undefined) throw new Error('a master did not say its node id')
      await redisCli(
        [
          '--cluster',
          'reshard',
          `${HOST}:${from.port}`,
          '--cluster-from',
          fromId,
          '--cluster-to',
          toId,
          '--cluster-slots',
          String(slots),
          '--cluster-yes',
        ],
        RESHARD_TIMEOUT_MS,
      )
      await waitForClusterOk(ports)
    },
  }
  try {
    const nodeTimeoutMs = options.nodeTimeoutMs ?? 2000
    for (const port of ports) {
      const args = clusterArgs(port, nodeTimeoutMs, options.requireFullCoverage ?? true)
      nodes.push(await launch(port, [...extraArgs, ...args]))
    }
    await createCluster(ports, replicas)
    await waitForClusterOk(ports)
    if (replicas > 0) await waitForReplicasInSync(ports, masters * replicas)
    return cluster
  } catch (error) {
    await cluster.stop()
    throw error
  }
}

class RedisServer implements RedisProcess {
  readonly host = HOST
  readonly url: string
  #child: ChildProcess | undefined

  constructor(
    readonly port: number,
    private readonly dir: string,
    private readonly args: string[],
  ) {
    this.url = `redis://${HOST}:${port}`
  }

  get pid(): number {
    return this.#child?.pid ?? -1
  }

  async start(): Promise<void> {
    // Output goes to a file rather than a pipe so an open pipe never keeps the test process alive.
    const logFile = join(this.dir, 'redis.log')
    const log = openSync(logFile, 'w')
    const child = spawn('redis-server', this.args, { cwd: this.dir, stdio: ['ignore', log, log] })
    closeSync(log)
    liveChildren.add(child)
    child.once('exit', () => liveChildren.delete(child))
    child.on('error', () => {}) // a failed spawn leaves pid undefined, reported as "exited during startup"
    child.unref()
    this.#child = child
    try {
      await this.#waitUntilReady()
    } catch (error) {
      await this.kill()
      throw new Error(`redis-server on port ${this.port}: ${(error as Error).message}\n${readLog(logFile)}`)
    }
  }

  async stop(): Promise<void> {
    const child = this.#child
    if (!isRunning(child)) return
    child.kill('SIGTERM')
    child.kill('SIGCONT') // a paused server only acts on SIGTERM once it runs again
    if (!(await waitForExit(child, STOP_TIMEOUT_MS))) await this.kill()
  }

  async kill(): Promise<void> {
    const child = this.#child
    if (!isRunning(child)) return
    child.kill('SIGKILL')
    await waitForExit(child, STOP_TIMEOUT_MS)
  }

  pause(): void {
    this.#signal('SIGSTOP')
  }

  resume(): void {
    this.#signal('SIGCONT')
  }

  async restart(): Promise<void> {
    await this.stop()
    await this.start()
  }

  #signal(signal: NodeJS.Signals): void {
    if (isRunning(this.#child)) this.#child.kill(signal)
  }

  async #waitUntilReady(): Promise<void> {
    const deadline = Date.now() + READY_TIMEOUT_MS
    while (Date.now() < deadline) {
      if (!isRunning(this.#child)) throw new Error('exited during startup')
      if ((await query(this.port, 'PING')) === 'PONG') return
      await sleep(50)
    }
    throw new Error(`did not answer PING within ${READY_TIMEOUT_MS} ms`)
  }
}

async function launch(port: number, extraArgs: string[]): Promise<RedisServer> {
  if (port === SHARED_REDIS_PORT) throw new Error(`port ${SHARED_REDIS_PORT} belongs to the shared Redis`)
  const dir = mkdtempSync(join(tmpdir(), `tollbooth-redis-${port}-`))
  tmpDirs.add(dir)
  const server = new RedisServer(port, dir, [...baseArgs(port, dir), ...extraArgs])
  await server.start()
  return server
}

function baseArgs(port: number, dir: string): string[] {
  return [
    ...['--port', String(port), '--bind', HOST, '--save', '', '--appendonly', 'no'],
    ...['--dir', dir, '--daemonize', 'no', '--protected-mode', 'no'],
  ]
}

function clusterArgs(port: number, nodeTimeoutMs: number, requireFullCoverage: boolean): string[] {
  return [
    ...['--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${port}.conf`],
    ...['--cluster-node-timeout', String(nodeTimeoutMs)],
    ...['--cluster-require-full-coverage', requireFullCoverage ? 'yes' : 'no'],
  ]
}

// --enable-debug-command exists since Redis 7.0; older servers refuse to start with it.
function debugCommandArgs(version: string): string[] {
  const major = Number(/v=(\d+)\./.exec(version)?.[1] ?? 0)
  return major >= 7 ? ['--enable-debug-command', 'yes'] : []
}

async function requireBinary(name: 'redis-server' | 'redis-cli'): Promise<string> {
  try {
    const { stdout } = await execFileAsync(name, ['--version'])
    return stdout
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
    throw new Error(
      `${name} not found on PATH: install it with "apt-get install -y redis-server" (Debian/Ubuntu)`,
    )
  }
}

async function createCluster(ports: number[], replicas: number): Promise<void> {
  const addresses = ports.map((port) => `${HOST}:${port}`)
  await redisCli([
    '--cluster',
    'create',
    ...addresses,
    '--cluster-replicas',
    String(replicas),
    '--cluster-yes',
  ])
}

async function redisCli(args: string[], timeoutMs = CLUSTER_TIMEOUT_MS): Promise<void> {
  try {
    await execFileAsync('redis-cli', args, { timeout: timeoutMs })
  } catch (error) {
    const { stdout = '', stderr = '', message } = error as Error & { stdout?: string; stderr?: string }
    throw new Error(`redis-cli ${args.slice(0, 2).join(' ')} failed: ${message}\n${stdout}${stderr}`)
  }
}

async function waitForClusterOk(ports: number[]): Promise<void> {
  const deadline = Date.now() + CLUSTER_TIMEOUT_MS
  while (Date.now() < deadline) {
    const infos = await Promise.all(ports.map((port) => query(port, 'CLUSTER', 'INFO')))
    if (infos.every((info) => info?.includes('cluster_state:ok'))) return
    await sleep(100)
  }
  throw new Error(
    `cluster on ports ${ports.join(', ')} did not reach cluster_state:ok in ${CLUSTER_TIMEOUT_MS} ms`,
  )
}

/** Until every replica has finished its first sync with its master (`master_link_status:up`). */
async function waitForReplicasInSync(ports: number[], expected: number): Promise<void> {
  const deadline = Date.now() + CLUSTER_TIMEOUT_MS
  while (Date.now() < deadline) {
    const infos = await Promise.all(ports.map((port) => query(port, 'INFO', 'replication')))
    const synced = infos.filter(
      (info) => info?.includes('role:slave') && info.includes('master_link_status:up'),
    )
    if (synced.length === expected) return
    await sleep(100)
  }
  throw new Error(`the cluster's ${expected} replicas did not all sync within ${CLUSTER_TIMEOUT_MS} ms`)
}

/** One command on a short-lived connection; undefined when the server does not answer in time. */
async function query(port: number, command: string, ...args: string[]): Promise<string | undefined> {
  return queryWithin(QUERY_TIMEOUT_MS, port, command, ...args)
}

/** `query`, waiting up to `ms` for the answer: a server busy with a test's load answers late, not never. */
async function queryWithin(
  ms: number,
  port: number,
  command: string,
  ...args: string[]
): Promise<string | undefined> {
  const client = new Redis({
    host: HOST,
    port,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  })
  client.on('error', () => {}) // refused connections are expected while a server boots
  const reply = client
    .connect()
    .then(() => client.call(command, args))
    .then(String, () => undefined)
  // ioredis' own timeouts do not bound the handshake with a listener that never answers.
  const timeout = sleep(ms).then(() => undefined)
  try {
    return await Promise.race([reply, timeout])
  } finally {
    client.disconnect()
  }
}

/** Finds free ports, holding each open until all are found so they are distinct. */
async function reservePorts(count: number, options: { clusterBus?: boolean } = {}): Promise<number[]> {
  const held: Server[] = []
  const ports: number[] = []
  try {
    for (let attempt = 1; ports.length < count; attempt++) {
      if (attempt > 100) throw new Error(`could not find ${count} free ports`)
      const port = await hold(0, held)
      if (port === undefined || port === SHARED_REDIS_PORT) continue
      if (options.clusterBus) {
        // Cluster nodes also listen on port + 10000 for the cluster bus.
        const busPort = port + CLUSTER_BUS_OFFSET
        if (busPort > MAX_PORT || (await hold(busPort, held)) === undefined) continue
      }
      ports.push(port)
    }
    return ports
  } finally {
    await Promise.all(held.map((server) => new Promise((resolve) => server.close(resolve))))
  }
}

function hold(port: number, held: Server[]): Promise<number | undefined> {
  return new Promise((resolve) => {
    const server = createServer()
    server.once('error', () => resolve(undefined))
    server.listen(port, HOST, () => {
      held.push(server)
      resolve((server.address() as AddressInfo).port)
    })
  })
}

function isRunning(child: ChildProcess | undefined): child is ChildProcess {
  // pid is undefined when the spawn itself failed
  return child?.pid !== undefined && child.exitCode === null && child.signalCode === null
}

function waitForExit(child: ChildProcess, timeoutMs: number): Promise<boolean> {
  if (!isRunning(child)) return Promise.resolve(true)
  return new Promise((resolve) => {
    const onExit = () => {
      clearTimeout(timer)
      resolve(true)
    }
    const timer = setTimeout(() => {
      child.off('exit', onExit)
      resolve(false)
    }, timeoutMs)
    child.once('exit', onExit)
  })
}

function readLog(file: string): string {
  try {
    return readFileSync(file, 'utf8').slice(-8_000)
  } catch {
    return '(no redis-server output)'
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}
