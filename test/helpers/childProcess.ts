/**
 * The parent's end of the JSON-lines protocol of the helper scripts that run in child processes
 * (test/helpers/worker.ts, test/helpers/wsServerWorker.ts; their end is test/helpers/childScript.ts): spawns
 * `node --import <tsx loader URL> <script>` with a JSON job in an environment variable, and reads what the child
 * prints on stdout, one JSON message a line.
 *
 * Nothing here registers cleanups: callers own the processes (`kill()`).
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import { createInterface } from 'node:readline'
import { fileURLToPath, pathToFileURL } from 'node:url'

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url))
// The project's own tsx, loaded into a plain `node`: the tsx CLI would run the script in a grandchild process, which
// a SIGKILL of the spawned pid would not reach.
const TSX_LOADER = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
const MESSAGE_TIMEOUT_MS = 15_000

export interface JsonLinesProcessOptions {
  /** Absolute path of the script to run. */
  readonly script: string
  /** The environment variable that carries the job (as JSON) to the script. */
  readonly jobVariable: string
  readonly job: unknown
  /** What `describe()` calls the process, e.g. `worker`. */
  readonly label: string
  /** Environment variables of its own, beside the parent's. */
  readonly env?: Readonly<Record<string, string>>
}

/** A helper script in a process of its own, and the JSON lines it prints. */
export class JsonLinesProcess {
  readonly child: ChildProcess
  stderr = ''
  private readonly label: string
  private readonly lines: unknown[] = []
  private waiter: (() => void) | undefined
  private readonly exited: Promise<void>

  constructor({ script, jobVariable, job, label, env = {} }: JsonLinesProcessOptions) {
    this.label = label
    this.child = spawn(process.execPath, ['--import', TSX_LOADER, script], {
      cwd: REPO_ROOT,
      env: { ...process.env, ...env, [jobVariable]: JSON.stringify(job) },
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    this.child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      this.stderr += chunk
    })
    createInterface({ input: this.child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
      try {
        this.lines.push(JSON.parse(line))
      } catch {
        this.stderr += `(unparsable stdout line) ${line}\n`
      }
      this.waiter?.()
    })
    this.exited = new Promise((resolve) => this.child.once('exit', () => resolve()))
    void this.exited.then(() => this.waiter?.())
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null
  }

  /** Whether the process ended in a way we did not cause (a non-zero exit code). */
  get failed(): boolean {
    return this.child.exitCode !== null && this.child.exitCode !== 0
  }

  describe(): string {
    const { pid, exitCode, signalCode } = this.child
    return `${this.label} ${pid} (exit code ${exitCode}, signal ${signalCode}), stderr:\n${this.stderr || '(empty)'}`
  }

  /** The next JSON line; fails with the process's stderr if it exits first or stays silent too long. */
  async next<T>(): Promise<T> {
    const deadline = Date.now() + MESSAGE_TIMEOUT_MS
    while (this.lines.length === 0) {
      if (!this.alive) throw new Error(`exited before answering: ${this.describe()}`)
      const left = deadline - Date.now()
      if (left <= 0) throw new Error(`no answer within ${MESSAGE_TIMEOUT_MS} ms: ${this.describe()}`)
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left)
        this.waiter = () => {
          clearTimeout(timer)
          resolve()
        }
      })
      this.waiter = undefined
    }
    return this.lines.shift() as T
  }

  /** SIGKILLs the process if it still runs; resolves once it has exited. */
  async kill(): Promise<void> {
    if (this.alive) this.child.kill('SIGKILL')
    await this.exited
  }
}
