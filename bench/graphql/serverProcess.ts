/** The bench's side of a contender's process (bench/graphql/server.ts): its URL, its counters, its end. */
import { ScriptProcess } from '../scriptProcess.js'
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

const SERVER_SCRIPT = new URL('./server.ts', import.meta.url).href

export class ServerProcess {
  private readonly script: ScriptProcess

  /** `nodeOptions` go to the server's `node` before the script (`--cpu-prof`, say). */
  constructor(
    readonly key: ContenderKey,
    redisPort: number,
    nodeOptions: readonly string[] = [],
  ) {
    this.script = new ScriptProcess(`server ${key}`, SERVER_SCRIPT, [key, String(redisPort)], nodeOptions)
  }

  get pid(): number | undefined {
    return this.script.child.pid
  }

  /** Where the server listens, once it does; throws what the server failed with. */
  async url(): Promise<string> {
    const answer = JSON.parse(await this.script.next()) as { url: string } | { error: string }
    if ('error' in answer) throw new Error(`server ${this.key} failed to start: ${answer.error}`)
    return answer.url
  }

  async stats(): Promise<ServerStats> {
    this.script.send('stats')
    return JSON.parse(await this.script.next()) as ServerStats
  }

  /** Starts counting the bytes the server allocates (bench/graphql/server.ts' `Allocations`). */
  async startCountingAllocations(): Promise<void> {
    this.script.send('allocations start')
    await this.script.next()
  }

  /** Stops counting; the bytes allocated since `startCountingAllocations`, garbage included (an estimate). */
  async allocatedBytes(): Promise<number> {
    this.script.send('allocations stop')
    return (JSON.parse(await this.script.next()) as { bytes: number }).bytes
  }

  /**
   * Bytes allocated per request over `requests` of `workload` answered one after another inside the server process
   * (bench/graphql/server.ts' `allocatedInProcess`).
   */
  async allocatedInProcess(workload: string, requests: number): Promise<number> {
    this.script.send(`in-process ${workload} ${requests}`)
    return (JSON.parse(await this.script.next()) as { bytes: number }).bytes
  }

  /** Ends stdin (the server exits, writing its CPU profile if asked to); killed if it has not exited in 10 s. */
  async stop(): Promise<void> {
    await this.script.stop(10_000)
  }
}
