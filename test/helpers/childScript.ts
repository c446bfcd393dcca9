/**
 * The child's end of the JSON-lines protocol of test/helpers/childProcess.ts, shared by the helper scripts that run
 * in child processes (test/helpers/worker.ts, wsServerWorker.ts, yogaServerWorker.ts). No vitest here: it runs outside it.
 */

/** Prints `message` as one JSON line on stdout; resolves once it is written. */
export function send(message: unknown): Promise<void> {
  return new Promise((resolve, reject) => {
    process.stdout.write(`${JSON.stringify(message)}\n`, (error) => (error ? reject(error) : resolve()))
  })
}

/** The job the parent passed in the environment variable `variable` (see `jobVariable` of childProcess.ts). */
export function jobFromEnvironment<Job>(variable: string): Job {
  const raw = process.env[variable]
  if (raw === undefined) throw new Error(`no job in ${variable}`)
  return JSON.parse(raw) as Job
}

/** Runs the script's `main`; if it fails, prints the error on stderr (`<label> <pid>: <stack>`) and exits with 1. */
export function runScript(label: string, main: () => Promise<void>): void {
  main().catch((error: unknown) => {
    process.stderr.write(
      `${label} ${process.pid}: ${error instanceof Error ? (error.stack ?? error.message) : error}\n`,
    )
    process.exit(1)
  })
}
