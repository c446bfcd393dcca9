import { type ChildProcess, spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'

/** The repository's directory, where the example server runs from. */
export const repositoryRoot = fileURLToPath(new URL('../..', import.meta.url))

export interface ExampleServer {
  readonly child: ChildProcess
  /** `http://localhost:<port>` */
  readonly url: string
  readonly banner: string
  /** The banner's commands, in order, exactly as printed. */
  readonly commands: string[]
  stdout(): string
  stderr(): string
}

/**
 * Starts examples/server.ts as `npm start` does (node with tsx's loader), on a free port with the memory store
 * unless `env` says otherwise, and waits for the whole banner.
 */
export async function startExample(env: Record<string, string> = {}): Promise<ExampleServer> {
  const child = spawn(process.execPath, ['--import', import.meta.resolve('tsx'), 'examples/server.ts'], {
    cwd: repositoryRoot,
    env: { ...process.env, PORT: '0', REDIS_URL: '', REDIS_CLUSTER_NODES: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  let err = ''
  child.stderr?.on('data', (chunk: Buffer) => {
    err += chunk.toString()
  })
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString()
      const match = /server on (http:\/\/localhost:\d+)/.exec(out)
      if (match && /node -e .*\n/.test(out)) resolve(match[1] as string)
    })
    child.once('exit', (code) => reject(new Error(`exited with ${code} before listening: ${out}\n${err}`)))
  })
  const banner = out
  const afterTry = banner.slice(banner.indexOf('\nTry:\n') + 6)
  const commands = afterTry
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
  return { child, url, banner, commands, stdout: () => out, stderr: () => err }
}
