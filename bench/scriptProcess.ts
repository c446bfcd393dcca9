/**
 * A bench script run again in a `node` process of its own (a server, a load generator), spoken to in lines: the
 * bench writes a line to its stdin, the child answers with lines on stdout (JSON, by each bench's convention).
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import { createInterface } from 'node:readline'
import { fileURLToPath, pathToFileURL } from 'node:url'

export class ScriptProcess {
  readonly child: ChildProcess
  private readonly lines: string[] = []
  private waiter: (() => void) | undefined

  /**
   * Starts `script` (a `file:` URL) with `args`, under the project's own tsx loaded into a plain `node` (as
   * test/integration/multiProcess.test.ts does); `nodeOptions` go to `node` before the script. `name` is what an
   * error says exited.
   */
  constructor(
    private readonly name: string,
    script: string,
    args: readonly string[],
    nodeOptions: readonly string[] = [],
  ) {
    const loader = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
    this.child = spawn(
      process.execPath,
      [...nodeOptions, '--import', loader, fileURLToPath(script), ...args],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    )
    createInterface({ input: this.child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
      this.lines.push(line)
      this.waiter?.()
    })
    this.child.once('exit', () => this.waiter?.())
  }

  /** Writes one line to the child's stdin. */
  send(line: string): void {
    this.child.stdin?.write(`${line}\n`)
  }

  /** The child's next line on stdout; throws if it has exited without one. */
  async next(): Promise<string> {
    while (this.lines.length === 0) {
      if (this.child.exitCode !== null || this.child.signalCode !== null) {
        throw new Error(`${this.name} exited (${this.child.exitCode ?? this.child.signalCode})`)
      }
      await new Promise<void>((resolve) => {
        this.waiter = resolve
      })
      this.waiter = undefined
    }
    return this.lines.shift() as string
  }

  /** Ends the child's stdin, which ends it; killed if it has not exited after `killAfterMs`. */
  async stop(killAfterMs: number): Promise<void> {
    this.child.stdin?.end()
    if (this.child.exitCode !== null || this.child.signalCode !== null) return
    const exited = new Promise((resolve) => this.child.once('exit', resolve))
    const timer = setTimeout(() => this.child.kill('SIGKILL'), killAfterMs)
    await exited
    clearTimeout(timer)
  }
}
