/**
 * Recipes of the documentation that users combine, run as written: each ```ts block is taken from its guide, written
 * into `.tmp/doc-recipes/` inside the repository (so `tollbooth` resolves to the built package, as in
 * test/unit/docs.test.ts) and run in a `node` process of its own; only its fixed port is replaced by a free one,
 * printed on stdout.
 * - docs/graphql.md: the Yoga recipe's `context` with the graphql-ws recipe, over HTTP and over graphql-ws;
 * - docs/operations.md: the client settings and shutdown snippet, stopped with SIGTERM while Redis is up, and after
 *   Redis went down.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createClient } from 'graphql-ws'
import { afterEach, describe, expect, it } from 'vitest'
import { WebSocket } from 'ws'
import { JsonLinesProcess } from './../helpers/childProcess.js'
import { startRedis } from './../helpers/redisServer.js'

const root = fileURLToPath(new URL('../..', import.meta.url))
const recipeDir = join(root, '.tmp', 'doc-recipes')

const cleanups: (() => unknown)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** The ```ts blocks of a guide, in order. */
function typescriptBlocks(guide: string): string[] {
  const text = readFileSync(join(root, guide), 'utf8')
  return [...text.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((match) => match[1] as string)
}

/** The one ```ts block of `guide` that contains `marker`. */
function blockWith(guide: string, marker: string): string {
  const found = typescriptBlocks(guide).filter((block) => block.includes(marker))
  expect(found, `${guide}: blocks containing ${JSON.stringify(marker)}`).toHaveLength(1)
  return found[0] as string
}

/**
 * Writes `code` as a script in which `listen` (a call with the fixed port, as written) listens on a free port and
 * prints it as a JSON line; the recipe runs from that script.
 */
function writeRecipe(name: string, code: string, listen: string): string {
  const [target, port] = /^(.*)\.listen\((\d+)\)$/.exec(listen)?.slice(1) ?? []
  expect(code, `${name}: the listen call`).toContain(listen)
  const script = join(recipeDir, `${name}.ts`)
  mkdirSync(recipeDir, { recursive: true })
  const printPort = `function (this: import('node:net').Server) {
    console.log(JSON.stringify({ port: (this.address() as import('node:net').AddressInfo).port, instead: ${port} }))
  }`
  writeFileSync(script, code.replace(listen, `${target}.listen(0, ${printPort})`))
  return script
}

/** A recipe running in a process of its own, killed after the test if it still runs. */
function run(script: string, env: Record<string, string> = {}): JsonLinesProcess {
  const recipe = new JsonLinesProcess({ script, jobVariable: 'RECIPE', job: {}, label: script, env })
  cleanups.push(() => recipe.kill())
  return recipe
}

/** `SIGTERM`, then the exit code (null when killed by a signal). */
async function terminate(recipe: JsonLinesProcess): Promise<number | null> {
  const exited = new Promise<number | null>((resolve) => recipe.child.once('exit', (code) => resolve(code)))
  recipe.child.kill('SIGTERM')
  return exited
}

describe('docs/graphql.md: the Yoga recipe’s context with the graphql-ws recipe', () => {
  const guide = 'docs/graphql.md'

  it('the two recipes build their context alike', () => {
    const context = (block: string) =>
      /^ {2}context: \(\{ request, connectionParams \}\) => \(\{\n.*\n {2}\}\),$/m.exec(block)?.[0]
    const yoga = context(blockWith(guide, 'createServer(yoga).listen(4000)'))
    expect(yoga).toBeDefined()
    expect(context(blockWith(guide, 'yoga.getEnveloped('))).toBe(yoga)
  })

  it('knows the user over HTTP and over graphql-ws (no request there), and refuses nothing', async () => {
    const recipe = run(
      writeRecipe('graphql-ws', blockWith(guide, 'yoga.getEnveloped('), 'httpServer.listen(4000)'),
    )
    const { port } = await recipe.next<{ port: number }>()
    const hello = async (authorization?: string) => {
      const response = await fetch(`http://127.0.0.1:${port}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(authorization ? { authorization } : {}) },
        body: JSON.stringify({ query: '{ hello }' }),
      })
      return ((await response.json()) as { data?: { hello?: string } }).data?.hello
    }
    expect(await hello('Bearer 1')).toBe('hello, Ada')
    expect(await hello()).toBe('hello, stranger')

    const overWebSocket = async (connectionParams: Record<string, unknown>) => {
      const closes: number[] = []
      const client = createClient({
        url: `ws://127.0.0.1:${port}/graphql`,
        webSocketImpl: WebSocket,
        connectionParams,
        retryAttempts: 0,
        on: { closed: (event) => closes.push((event as { code: number }).code) },
      })
      try {
        const result = await new Promise<unknown>((resolve, reject) => {
          let value: unknown
          client.subscribe(
            { query: '{ hello }' },
            {
              next: (data) => {
                value = data
              },
              error: reject,
              complete: () => resolve(value),
            },
          )
        })
        return { result, closes }
      } finally {
        await client.dispose()
      }
    }
    expect(await overWebSocket({ authorization: 'Bearer 1' })).toMatchObject({
      result: { data: { hello: 'hello, Ada' } },
      closes: [],
    })
    expect((await overWebSocket({})).result).toMatchObject({ data: { hello: 'hello, stranger' } })
    expect(recipe.stderr).toBe('')
  })
})

describe('docs/operations.md: the client settings and shutdown snippet', () => {
  const code = () => blockWith('docs/operations.md', "process.once('SIGTERM'")

  for (const redisAtShutdown of ['up', 'down'] as const) {
    it(`exits 0 on SIGTERM with Redis ${redisAtShutdown}`, async () => {
      const redis = await startRedis()
      cleanups.push(() => redis.stop())
      const recipe = run(writeRecipe(`shutdown-redis-${redisAtShutdown}`, code(), '}).listen(3000)'), {
        REDIS_URL: redis.url,
        KEY_SECRET: 'a secret of the test',
      })
      const { port } = await recipe.next<{ port: number }>()
      expect((await fetch(`http://127.0.0.1:${port}/`, { headers: { 'x-api-key': 'k' } })).status).toBe(200)
      if (redisAtShutdown === 'down') await redis.stop()
      expect(await terminate(recipe)).toBe(0)
      expect(recipe.stderr).not.toContain("Stream isn't writeable")
    })
  }
})
