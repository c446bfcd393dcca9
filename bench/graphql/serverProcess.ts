/** The bench's side of a contender's process (bench/graphql/server.ts): its URL, its counters, its end. */
import { type ChildProcess, spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import { createInterface } from 'node:readline'
import { fileURLToPath, pathToFileURL } from 'node:url'
import type { ContenderKey } from './contenders.js'

/** What the bench reads from a server process, before and after a measured phase. */
export interface ServerStats {
  /** CPU time of the process so far (user + system), in µs. */
  cpuMicros: number
  /** The system part of it (the kernel's, on the process' behalf: socket reads and writes, mostly), in µs. */
  systemMicros: number
  /** Garbage collections so far: scavenges (minor), and the rest (mark-compact, incremental marking, …). */
  minorGcs: number
  majorGcs: number
  /** Time spent in garbage collection so far, in µs (as `PerformanceObserver` reports it). */
  gcMicros: number
  /** RedisStore script calls answered so far (counted by its latency hook), for the Redis contenders. */
  storeCalls: number | undefined
  /** RedisStore errors and breaker changes so far, by code. */
  storeErrors: Record<string, number>
}

const SERVER_SCRIPT = fileURLToPath(new URL('./server.ts', import.meta.url))

export class ServerProcess {
  readonly child: ChildProcess
  private readonly lines: string[] = []
  private waiter: (() => void) | undefined

  /** `nodeOptions` go to the server's `node` before the script (`--cpu-prof`, say). */
  constructor(
    readonly key: ContenderKey,
    redisPort: number,
    nodeOptions: readonly string[] = [],
  ) {
    // The project's own tsx, loaded into a plain `node` (as test/integration/multiProcess.test.ts does).
    const loader = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
    this.child = spawn(
      process.execPath,
      [...nodeOptions, '--import', loader, SERVER_SCRIPT, key, String(redisPort)],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    )
    createInterface({ input: this.child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
      this.lines.push(line)
      this.waiter?.()
    })
    this.child.once('exit', () => this.waiter?.())
  }

  /** Where the server listens, once it does; throws what the server failed with. */
  async url(): Promise<string> {
    const answer = JSON.parse(await this.next()) as { url: string } | { error: string }
    if ('error' in answer) throw new Error(`server ${this.key} failed to start: ${answer.error}`)
    return answer.url
  }

  async stats(): Promise<ServerStats> {
    this.child.stdin?.write('stats\n')
    return JSON.parse(await this.next()) as ServerStats
  }

  /** Starts counting the bytes the server allocates (bench/graphql/server.ts' `Allocations`). */
  async startCountingAllocations(): Promise<void> {
    this.child.stdin?.write('allocations start\n')
    await this.next()
  }

  /** Stops counting; the bytes allocated since `startCountingAllocations`, garbage included (an estimate). */
  async allocatedBytes(): Promise<number> {
    this.child.stdin?.write('allocations stop\n')
    return (JSON.parse(await this.next()) as { bytes: number }).bytes
  }

  private async next(): Promise<string> {
    while (this.lines.length === 0) {
      if (this.child.exitCode !== null || this.child.signalCode !== null) {
        throw new Error(`server ${this.key} exited (${this.child.exitCode ?? this.child.signalCode})`)
      }
      await new Promise<void>((resolve) => {
        this.waiter = resolve
      })
      this.waiter = undefined
    }
    return this.lines.shift() as string
  }

  /** Ends stdin (the server exits, writing its CPU profile if asked to); killed if it has not exited in 10 s. */
  async stop(): Promise<void> {
    this.child.stdin?.end()
    if (this.child.exitCode !== null || this.child.signalCode !== null) return
    const exited = new Promise((resolve) => this.child.once('exit', resolve))
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 10_000)
    await exited
    clearTimeout(timer)
  }
}
