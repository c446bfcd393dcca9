/**
 * The load generator of a benchmark in a process of its own, so that it does not share the server's event loop:
 * the bench script runs itself again with `--load` (`serveLoadJobs`), and the server side (`LoadProcess`) sends it
 * one JSON job per line and reads one JSON result per line. The generator prints `{ "phase": "measure" }` when
 * the measured phase starts, so the server process can take its own CPU time over exactly that phase.
 */
import { createInterface } from 'node:readline'
import { ScriptProcess } from './scriptProcess.js'

/** A load result, plus this (server) process' CPU time over the measured phase. */
export type Measured<Result> = Result & {
  /** CPU time of the server process, as a fraction of one core. */
  serverCpu: number
  /** CPU time of the server process over the measured phase, in µs. */
  serverCpuMicros: number
}

/** The side of the generator: answers each job read from stdin with `run(job)`, exits when stdin ends. */
export async function serveLoadJobs<Job, Result>(run: (job: Job) => Promise<Result>): Promise<void> {
  for await (const line of createInterface({ input: process.stdin })) {
    if (line.trim() === '') continue
    const result = await run(JSON.parse(line) as Job)
    process.stdout.write(`${JSON.stringify(result)}\n`)
  }
}

/** Tells the server side that the measured phase starts now (the generator calls it after its warm-up). */
export function announceMeasuredPhase(): void {
  process.stdout.write(`${JSON.stringify({ phase: 'measure' })}\n`)
}

/** The server side: the generator process and its JSON answers. */
export class LoadProcess<Job, Result extends { seconds: number }> {
  private readonly script: ScriptProcess

  /** `script` is the bench's own `import.meta.url`; it is started with `--load`. */
  constructor(script: string) {
    this.script = new ScriptProcess('load generator', script, ['--load'])
  }

  get pid(): number | undefined {
    return this.script.child.pid
  }

  /**
   * Runs one job; adds this (server) process' CPU time over the measured phase. `onMeasuredPhase` is called when
   * that phase starts, for counters of the bench's own.
   */
  async run(job: Job, onMeasuredPhase?: () => void): Promise<Measured<Result>> {
    this.script.send(JSON.stringify(job))
    let cpuStart: NodeJS.CpuUsage | undefined
    for (;;) {
      const answer = JSON.parse(await this.script.next()) as Result | { phase: 'measure' }
      if ('phase' in answer) {
        cpuStart = process.cpuUsage()
        onMeasuredPhase?.()
        continue
      }
      const cpu = process.cpuUsage(cpuStart)
      const serverCpuMicros = cpu.user + cpu.system
      return { ...answer, serverCpu: serverCpuMicros / 1e6 / answer.seconds, serverCpuMicros }
    }
  }

  async stop(): Promise<void> {
    await this.script.stop(5_000)
  }
}
