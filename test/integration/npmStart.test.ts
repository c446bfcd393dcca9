/**
 * `npm start`, run as a user runs it: SIGTERM to the pid its banner prints, or to npm's own pid, shuts the example
 * server down gracefully — a request in flight gets its answer, the port refuses connections — and leaves no
 * process of the tree behind (npm runs its script through `sh -c`, which forwards no signal: the script must
 * `exec` node for npm's SIGTERM to reach the server).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { once } from 'node:events'
import { connect } from 'node:net'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { rawConnect } from '../helpers/rawWebSocket.js'

const root = fileURLToPath(new URL('../..', import.meta.url))

interface NpmStart {
  readonly npm: ChildProcess
  readonly exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  readonly port: number
  /** The pid the banner prints. */
  readonly pid: number
  stdout(): string
}

const started: NpmStart[] = []

afterEach(() => {
  // A failed test must not leave a server behind: kill the whole tree it recorded.
  for (const { npm, pid } of started.splice(0)) {
    for (const each of [pid, npm.pid ?? 0]) if (alive(each)) process.kill(each, 'SIGKILL')
  }
})

/** `npm start` on a free port, once its whole banner is out. */
async function npmStart(): Promise<NpmStart> {
  const npm = spawn('npm', ['start'], {
    cwd: root,
    env: {
      ...process.env,
      PORT: '0',
      REDIS_URL: '',
      REDIS_CLUSTER_NODES: '',
      npm_config_update_notifier: 'false',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    npm.once('exit', (code, signal) => resolve({ code, signal })),
  )
  let out = ''
  let err = ''
  npm.stderr?.on('data', (chunk: Buffer) => {
    err += chunk.toString()
  })
  const { port, pid } = await new Promise<{ port: number; pid: number }>((resolve, reject) => {
    npm.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString()
      const match = /server on http:\/\/localhost:(\d+) {2}\(pid (\d+): `kill -TERM \2`/.exec(out)
      if (match && /node -e .*\n/.test(out)) resolve({ port: Number(match[1]), pid: Number(match[2]) })
    })
    void exit.then(({ code }) =>
      reject(new Error(`npm start exited with ${code} before listening: ${out}\n${err}`)),
    )
  })
  const handle = { npm, exit, port, pid, stdout: () => out }
  started.push(handle)
  return handle
}

function alive(pid: number): boolean {
  if (pid <= 0) return false
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** `pid` and every process below it, from `ps`. */
function processTree(pid: number): number[] {
  const rows = execFileSync('ps', ['-eo', 'pid=,ppid='], { encoding: 'utf8' })
    .trim()
    .split('\n')
    .map((line) => line.trim().split(/\s+/).map(Number) as [number, number])
  const tree = [pid]
  for (let i = 0; i < tree.length; i++) {
    for (const [child, parent] of rows) if (parent === tree[i] && !tree.includes(child)) tree.push(child)
  }
  return tree
}

/** Polls until no process of `pids` exists (bounded): the processes are not ours to wait on. */
async function allGone(pids: readonly number[], ms = 15_000): Promise<number[]> {
  const deadline = Date.now() + ms
  for (;;) {
    const left = pids.filter(alive)
    if (left.length === 0 || Date.now() > deadline) return left
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** Resolves with the error code of a connection attempt to `port`, or 'connected'. */
async function connectOutcome(port: number): Promise<string> {
  const socket = connect({ port, host: '127.0.0.1' })
  try {
    await once(socket, 'connect')
    return 'connected'
  } catch (error) {
    return (error as NodeJS.ErrnoException).code ?? 'unknown'
  } finally {
    socket.destroy()
  }
}

/** Resolves once the shutdown has begun: the server prints this line once it has stopped listening. */
async function shutdownBegun(server: NpmStart): Promise<void> {
  if (server.stdout().includes('SIGTERM: shutting down')) return
  await new Promise<void>((resolve) => {
    const onData = () => {
      if (!server.stdout().includes('SIGTERM: shutting down')) return
      server.npm.stdout?.off('data', onData)
      resolve()
    }
    server.npm.stdout?.on('data', onData)
  })
}

describe('npm start: SIGTERM', () => {
  for (const target of ['the pid the banner prints', "npm's own pid"] as const) {
    it(`to ${target}: a request in flight is answered, the port closes, npm exits 0, no process is left`, async () => {
      const server = await npmStart()
      const tree = processTree(server.npm.pid as number)
      // The server is npm's own child: no shell or tsx process between them. (tsx may run an esbuild service below.)
      expect(tree.slice(0, 2)).toEqual([server.npm.pid, server.pid])

      // A POST whose body is half sent: Node answers `Expect: 100-continue` once the request reached the handler.
      const body = JSON.stringify({ query: '{ __typename }' })
      const request = await rawConnect(server.port, '127.0.0.1')
      request.socket.write(
        [
          'POST /graphql HTTP/1.1',
          `Host: 127.0.0.1:${server.port}`,
          'Content-Type: application/json',
          'Accept: application/graphql-response+json',
          `Content-Length: ${body.length}`,
          'Expect: 100-continue',
          '',
          '',
        ].join('\r\n'),
      )
      await new Promise<void>((resolve) => {
        const check = () => {
          if (!request.received().toString('latin1').startsWith('HTTP/1.1 100 Continue\r\n\r\n')) return
          request.socket.off('data', check)
          resolve()
        }
        request.socket.on('data', check)
        check()
      })
      request.socket.write(body.slice(0, 5))

      process.kill(target === "npm's own pid" ? (server.npm.pid as number) : server.pid, 'SIGTERM')
      await shutdownBegun(server)
      expect(await connectOutcome(server.port)).toBe('ECONNREFUSED')

      request.socket.write(body.slice(5))
      await request.gone
      const response = request.received().toString('utf8').slice('HTTP/1.1 100 Continue\r\n\r\n'.length)
      expect(response).toMatch(/^HTTP\/1\.1 200 OK\r\n/)
      const answer = JSON.parse(response.slice(response.indexOf('\r\n\r\n') + 4)) as {
        data: unknown
        extensions: { cost: { actualQueryCost: number } }
      }
      expect(answer.data).toEqual({ __typename: 'Query' })
      expect(answer.extensions.cost.actualQueryCost).toBe(1)

      expect(await server.exit).toEqual({ code: 0, signal: null })
      expect(await allGone(tree)).toEqual([])
      expect(await connectOutcome(server.port)).toBe('ECONNREFUSED')
    }, 60_000)
  }
})
