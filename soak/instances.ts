/**
 * Instances of the example server (examples/server.ts) as child processes on one Redis Cluster, as `npm start` runs
 * it: node with tsx's loader, PORT=0, the cluster's nodes in REDIS_CLUSTER_NODES. Everything an instance writes to
 * stderr is kept: the soak fails on anything that looks thrown or unhandled.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const TSX_LOADER = import.meta.resolve('tsx')

/**
 * What a crash, an unhandled error or a warning of Node's prints (the example's own "redis: …" lines about outages
 * are expected).
 */
const THROWN =
  /Unhandled|uncaught|TypeError|ReferenceError|RangeError|SyntaxError|ReplyError|\(node:\d+\)|\n\s+at .+:\d+:\d+\)?/

export interface InstanceOptions {
  readonly clusterNodes: string
  readonly prefix: string
  readonly leaseMs: number
  readonly mode: 'enforce' | 'dry-run'
}

export class Instance {
  readonly child: ChildProcess
  /** `http://127.0.0.1:<port>` once started. */
  url = ''
  private stderr = ''
  private killedOnPurpose = false

  constructor(
    readonly name: string,
    options: InstanceOptions,
  ) {
    this.child = spawn(process.execPath, ['--import', TSX_LOADER, 'examples/server.ts'], {
      cwd: ROOT,
      env: {
        ...process.env,
        PORT: '0',
        REDIS_URL: '',
        REDIS_CLUSTER_NODES: options.clusterNodes,
        REDIS_PREFIX: options.prefix,
        // The load driver chooses each identity's address through X-Forwarded-For.
        TRUST_PROXY: 'loopback',
        LEASE_MS: String(options.leaseMs),
        TOLLBOOTH_MODE: options.mode,
        NODE_ENV: 'production',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    this.child.stderr?.on('data', (chunk: Buffer) => {
      this.stderr += chunk.toString()
    })
  }

  /** Resolves once the banner names the port. */
  async started(): Promise<this> {
    let out = ''
    this.url = await new Promise<string>((resolve, reject) => {
      this.child.stdout?.on('data', (chunk: Buffer) => {
        out += chunk.toString()
        const match = /server on http:\/\/localhost:(\d+)/.exec(out)
        if (match !== null) resolve(`http://127.0.0.1:${match[1]}`)
      })
      this.child.once('exit', (code) => reject(new Error(`${this.name} exited with ${code}: ${this.stderr}`)))
    })
    return this
  }

  get pid(): number {
    return this.child.pid ?? -1
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null
  }

  /** SIGKILL, as a crash: nothing is released, its leases expire on their own. */
  kill(): void {
    this.killedOnPurpose = true
    this.child.kill('SIGKILL')
  }

  /** SIGTERM and wait: the example closes its sockets, releases its leases, quits Redis. */
  async stop(): Promise<void> {
    if (!this.alive) return
    this.killedOnPurpose = true
    const exited = new Promise((resolve) => this.child.once('exit', resolve))
    this.child.kill('SIGTERM')
    await exited
  }

  /** What went wrong in the instance: a stderr line that looks thrown, or an exit nobody asked for. */
  problems(): string[] {
    const problems: string[] = []
    if (THROWN.test(this.stderr)) problems.push(`${this.name} printed: ${this.stderr.slice(0, 2000)}`)
    if (!this.alive && !this.killedOnPurpose) {
      problems.push(`${this.name} exited on its own (${this.child.exitCode ?? this.child.signalCode})`)
    }
    return problems
  }

  /** CPU time (s) and resident memory (MB) of the process, from /proc. */
  usage(): { cpuSeconds: number; rssMb: number } | undefined {
    try {
      const stat = readFileSync(`/proc/${this.pid}/stat`, 'utf8')
      // Fields after the command name (which may hold spaces, inside parentheses): utime is the 14th, stime 15th.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      const ticks = Number(fields[11]) + Number(fields[12])
      const statm = readFileSync(`/proc/${this.pid}/statm`, 'utf8').split(' ')
      return { cpuSeconds: ticks / 100, rssMb: (Number(statm[1]) * 4096) / 2 ** 20 }
    } catch {
      return undefined
    }
  }
}
