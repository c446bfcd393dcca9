/**
 * The package as npm publishes it, installed into a consumer that has only what tollbooth declares: `npm pack`
 * (of the built `dist/`) unpacked into `<tmp>/<consumer>/node_modules/tollbooth`, the `dependencies` of
 * package.json and the consumer's chosen peers linked from this repository's node_modules (offline), then the
 * consumer compiled by `tsc` (strict, skipLibCheck off, nodenext) and run by `node`. A memory-only consumer has no
 * ioredis, ws, prom-client or graphql-yoga; an Envelop-only consumer has graphql and @envelop/core, no graphql-yoga.
 * A NestJS consumer is installed by npm itself, from the tarball and the registry, with NestJS 12 on Express (the
 * repository's own tree has 11): the peers tollbooth/nestjs declares and nothing of Fastify, ws or GraphQL.
 */
import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join, posix } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

const REPO = fileURLToPath(new URL('../..', import.meta.url))
const TSC = createRequire(import.meta.url).resolve('typescript/bin/tsc')
const TIMEOUT_MS = 120_000
/** An `npm install` from the registry, then a compile of NestJS' declarations. */
const INSTALL_TIMEOUT_MS = 300_000

interface Finished {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** Runs a command to its end; a non-zero exit is an answer, not an exception. */
function run(command: string, args: readonly string[], cwd: string): Promise<Finished> {
  return new Promise((resolve) => {
    execFile(command, args, { cwd, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : null
      resolve({ code, stdout, stderr })
    })
  })
}

async function mustRun(command: string, args: readonly string[], cwd: string): Promise<string> {
  const finished = await run(command, args, cwd)
  if (finished.code !== 0) {
    throw new Error(
      `${command} ${args.join(' ')} exited ${finished.code}: ${finished.stderr || finished.stdout}`,
    )
  }
  return finished.stdout
}

/** `packages` of the repository's node_modules, linked into `consumer/node_modules`. */
async function linkPackages(consumer: string, packages: readonly string[]): Promise<void> {
  for (const name of packages) {
    const link = join(consumer, 'node_modules', name)
    await mkdir(dirname(link), { recursive: true })
    await symlink(join(REPO, 'node_modules', name), link, 'dir')
  }
}

async function dependenciesOf(packageDir: string): Promise<string[]> {
  const manifest = JSON.parse(await readFile(join(packageDir, 'package.json'), 'utf8')) as {
    dependencies?: Record<string, string>
  }
  return Object.keys(manifest.dependencies ?? {})
}

/** The top-level names in a consumer's node_modules (`@scope/name` for scoped ones). */
async function installed(consumer: string): Promise<string[]> {
  const root = join(consumer, 'node_modules')
  const names: string[] = []
  for (const entry of await readdir(root)) {
    if (entry.startsWith('@')) names.push(...(await readdir(join(root, entry))).map((n) => `${entry}/${n}`))
    else names.push(entry)
  }
  return names.sort()
}

const TSCONFIG = {
  compilerOptions: {
    strict: true,
    // The strictest settings a consumer may choose: the published types must hold under them too.
    exactOptionalPropertyTypes: true,
    noUncheckedIndexedAccess: true,
    skipLibCheck: false,
    module: 'nodenext',
    moduleResolution: 'nodenext',
    target: 'es2022',
    types: ['node'],
    outDir: 'out',
    rootDir: 'src',
  },
  include: ['src'],
}

const MEMORY_CONSUMER = `import { MemoryStore, tokenBucket } from 'tollbooth'

const limiter = tokenBucket({ name: 'api', capacity: 2, refillPerSecond: 0.001, store: new MemoryStore() })
const allowed: boolean[] = []
for (let i = 0; i < 3; i++) allowed.push((await limiter.consume('alice')).allowed)
console.log(JSON.stringify(allowed))
`

const ENVELOP_CONSUMER = `import { envelop, useEngine, useSchema } from '@envelop/core'
import { buildSchema, execute, parse, specifiedRules, subscribe, validate } from 'graphql'
import { simpleEstimator } from 'graphql-query-complexity'
import { tokenBucket } from 'tollbooth'
import { useTollbooth } from 'tollbooth/graphql'

interface AppContext {
  user: { id: string }
  plan: 'free' | 'pro'
}

const free = tokenBucket({ name: 'free', capacity: 2, refillPerSecond: 0.001 })
const pro = tokenBucket({ name: 'pro', capacity: 5, refillPerSecond: 0.001 })

const getEnveloped = envelop({
  plugins: [
    useEngine({ parse, validate, specifiedRules, execute, subscribe }),
    useSchema(buildSchema('type Query { hello: String }')),
    useTollbooth<AppContext>({
      limiter: (context) => (context.plan === 'pro' ? pro : free),
      identify: (context) => context.user.id,
    }),
  ],
})

// Priced by graphql-query-complexity (3 a field): 5 points hold one { hello }.
const estimated = tokenBucket({ name: 'estimated', capacity: 5, refillPerSecond: 0.001 })
const getEstimated = envelop({
  plugins: [
    useEngine({ parse, validate, specifiedRules, execute, subscribe }),
    useSchema(buildSchema('type Query { hello: String }')),
    useTollbooth<AppContext>({
      limiter: estimated,
      identify: (context) => context.user.id,
      estimators: [simpleEstimator({ defaultComplexity: 3 })],
    }),
  ],
})

async function ask(context: AppContext, enveloped = getEnveloped): Promise<string> {
  const { parse, validate, execute, schema } = enveloped(context)
  const document = parse('{ hello }')
  if (validate(schema, document).length > 0) return 'invalid'
  const result = await execute({ schema, document, rootValue: { hello: 'world' }, contextValue: context })
  const code = result.errors?.[0]?.extensions?.code
  return typeof code === 'string' ? code : String(result.data?.hello)
}

const alice: AppContext = { user: { id: 'alice' }, plan: 'free' }
const bob: AppContext = { user: { id: 'bob' }, plan: 'pro' }
const answers: string[] = []
for (let i = 0; i < 3; i++) answers.push(await ask(alice))
for (let i = 0; i < 3; i++) answers.push(await ask(bob))
for (let i = 0; i < 2; i++) answers.push(await ask(alice, getEstimated))
console.log(JSON.stringify(answers))
`

/**
 * A NestJS 12 application on Express with a global TollboothGuard (capacity 2), a route that skips it, and a route
 * with cost 2 from a named budget (capacity 3); it prints what the requests got and shuts down.
 */
const NEST_CONSUMER = `import 'reflect-metadata'
import { Controller, Get, Module } from '@nestjs/common'
import { APP_GUARD, NestFactory } from '@nestjs/core'
import { tokenBucket } from 'tollbooth'
import { RateLimit, SkipRateLimit, TollboothGuard } from 'tollbooth/nestjs'

const api = tokenBucket({ name: 'api', capacity: 2, refillPerSecond: 0.001 })
const reports = tokenBucket({ name: 'reports', capacity: 3, refillPerSecond: 0.001 })

@Controller()
class AppController {
  @Get('items')
  items(): string {
    return 'ok'
  }

  @RateLimit('reports', { cost: 2 })
  @Get('report')
  report(): string {
    return 'report'
  }

  @SkipRateLimit()
  @Get('health')
  health(): string {
    return 'up'
  }
}

@Module({
  controllers: [AppController],
  providers: [
    { provide: APP_GUARD, useValue: new TollboothGuard({ limiters: { api, reports }, default: 'api' }) },
  ],
})
class AppModule {}

const app = await NestFactory.create(AppModule, { logger: false, abortOnError: false })
await app.listen(0, '127.0.0.1')
const url = await app.getUrl()
const statuses = async (path: string, count: number): Promise<number[]> => {
  const out: number[] = []
  for (let i = 0; i < count; i++) out.push((await fetch(url + path)).status)
  return out
}
const items = await statuses('/items', 2)
const refused = await fetch(url + '/items')
const report = await statuses('/report', 2)
const health = await statuses('/health', 3)
await app.close()
console.log(
  JSON.stringify({
    items,
    refused: {
      status: refused.status,
      type: refused.headers.get('content-type'),
      retryAfter: refused.headers.get('retry-after'),
      body: await refused.json(),
    },
    report,
    health,
  }),
)
`

/**
 * A Socket.IO server with protectSocketIo (one connection per user, two events at once) and socket.io-client
 * clients reading the refusals with tollbooth/client; it prints what they got and shuts down.
 */
const SOCKET_IO_CONSUMER = `import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Server } from 'socket.io'
import { io as connect, type Socket } from 'socket.io-client'
import { socketIoRefusalOf } from 'tollbooth/client'
import { protectSocketIo } from 'tollbooth/socket.io'

const http = createServer()
const io = new Server(http)
const protection = protectSocketIo(io, {
  identify: (socket) => String(socket.handshake.auth['user']),
  maxConnectionsPerIdentity: 1,
  eventsPerSecond: 0.01,
  eventBurst: 2,
})
io.on('connection', (socket) => socket.on('hello', (ack: (answer: string) => void) => ack('world')))
await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
const url = 'http://127.0.0.1:' + (http.address() as AddressInfo).port

const open = (): Promise<{ socket: Socket; refused: string | undefined }> =>
  new Promise((resolve) => {
    const socket = connect(url, { auth: { user: 'ann' }, reconnection: false, forceNew: true })
    socket.once('connect', () => resolve({ socket, refused: undefined }))
    socket.once('connect_error', (error) => resolve({ socket, refused: socketIoRefusalOf(error)?.code }))
  })
const first = await open()
const second = await open()
const answers: string[] = []
for (let i = 0; i < 3; i++) {
  const answer: unknown = await first.socket.emitWithAck('hello')
  answers.push(socketIoRefusalOf(answer)?.code ?? String(answer))
}
first.socket.close()
second.socket.close()
await protection.close()
io.close()
console.log(JSON.stringify({ first: first.refused ?? 'connected', second: second.refused, answers }))
`

describe('the packed package, installed with only its declared dependencies', () => {
  let tmp: string
  let entries: string[]
  let tarball: string

  beforeAll(async () => {
    if (!existsSync(join(REPO, 'dist', 'index.d.ts')))
      throw new Error('dist/ is missing: run `npm run build` first')
    tmp = await mkdtemp(join(tmpdir(), 'tollbooth-packed-'))
    // The scripts are not run: `prepare` would build again, and the test packs the dist/ just built.
    const packed = JSON.parse(
      await mustRun('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', tmp], REPO),
    ) as { filename: string }[]
    tarball = join(tmp, (packed[0] as { filename: string }).filename)
    entries = (await mustRun('tar', ['-tzf', tarball], tmp))
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => line.replace(/^package\//, ''))
  }, TIMEOUT_MS)

  afterAll(async () => {
    if (tmp !== undefined) await rm(tmp, { recursive: true, force: true })
  })

  /** A consumer directory with tollbooth unpacked and `packages` linked into its node_modules. */
  async function consumer(name: string, packages: readonly string[], source: string): Promise<string> {
    const dir = join(tmp, name)
    const unpacked = join(dir, 'node_modules', 'tollbooth')
    await mkdir(join(dir, 'src'), { recursive: true })
    await mkdir(unpacked, { recursive: true })
    await mustRun('tar', ['-xzf', tarball, '-C', unpacked, '--strip-components=1'], tmp)
    await linkPackages(dir, packages)
    await writeFile(join(dir, 'package.json'), JSON.stringify({ name, private: true, type: 'module' }))
    await writeFile(join(dir, 'tsconfig.json'), JSON.stringify(TSCONFIG))
    await writeFile(join(dir, 'src', 'main.ts'), source)
    return dir
  }

  /**
   * A consumer whose node_modules npm installs: the tarball and `packages` from the registry (tollbooth's optional
   * peers are not installed), and `@types/node` linked from this repository.
   */
  async function installedConsumer(
    name: string,
    packages: readonly string[],
    source: string,
    compilerOptions: Record<string, unknown>,
  ): Promise<string> {
    const dir = join(tmp, name)
    await mkdir(join(dir, 'src'), { recursive: true })
    await writeFile(join(dir, 'package.json'), JSON.stringify({ name, private: true, type: 'module' }))
    await mustRun(
      'npm',
      ['install', '--no-audit', '--no-fund', '--ignore-scripts', '--loglevel=error', tarball, ...packages],
      dir,
    )
    if (!existsSync(join(dir, 'node_modules', '@types', 'node'))) await linkPackages(dir, ['@types/node'])
    const tsconfig = { ...TSCONFIG, compilerOptions: { ...TSCONFIG.compilerOptions, ...compilerOptions } }
    await writeFile(join(dir, 'tsconfig.json'), JSON.stringify(tsconfig))
    await writeFile(join(dir, 'src', 'main.ts'), source)
    return dir
  }

  /** `tsc` over the consumer: its diagnostics, one a line (none when it compiles), then `node` on the output. */
  async function compileAndRun(dir: string): Promise<{ diagnostics: string[]; output: unknown }> {
    const compiled = await run(process.execPath, [TSC, '-p', dir, '--pretty', 'false'], dir)
    const diagnostics = compiled.stdout.split('\n').filter((line) => line.trim() !== '')
    if (compiled.code !== 0) return { diagnostics, output: undefined }
    const ran = await run(process.execPath, [join(dir, 'out', 'main.js')], dir)
    if (ran.code !== 0) throw new Error(`the consumer exited ${ran.code}: ${ran.stderr}`)
    return { diagnostics, output: JSON.parse(ran.stdout) }
  }

  it('holds the LICENSE', () => {
    expect(entries).toContain('LICENSE')
  })

  it('holds no source map whose sources are not shipped', async () => {
    const maps = entries.filter((entry) => entry.endsWith('.map'))
    const unpacked = join(tmp, 'maps')
    await mkdir(unpacked, { recursive: true })
    await mustRun('tar', ['-xzf', tarball, '-C', unpacked, '--strip-components=1'], tmp)
    const shipped = new Set(entries)
    const broken: string[] = []
    for (const map of maps) {
      const { sources } = JSON.parse(await readFile(join(unpacked, map), 'utf8')) as { sources: string[] }
      const missing = sources.filter((source) => !shipped.has(posix.join(posix.dirname(map), source)))
      if (missing.length > 0) broken.push(`${map} → ${missing.join(', ')}`)
    }
    expect(broken).toEqual([])
  })

  it(
    'a memory-only consumer (no ioredis, ws, prom-client, graphql-yoga) compiles against tollbooth and runs',
    async () => {
      const dependencies = await dependenciesOf(REPO)
      const dir = await consumer('memory-consumer', [...dependencies, '@types/node'], MEMORY_CONSUMER)
      expect(await installed(dir)).toEqual([...dependencies, '@types/node', 'tollbooth'].sort())
      expect(await compileAndRun(dir)).toEqual({ diagnostics: [], output: [true, true, false] })
    },
    TIMEOUT_MS,
  )

  it(
    'an Envelop-only consumer (graphql, @envelop/core and graphql-query-complexity, no graphql-yoga) compiles against tollbooth/graphql with a typed context and runs',
    async () => {
      const peers = [
        'graphql',
        '@envelop/core',
        ...(await dependenciesOf(join(REPO, 'node_modules/@envelop/core'))),
        'graphql-query-complexity',
        ...(await dependenciesOf(join(REPO, 'node_modules/graphql-query-complexity'))),
      ]
      const dependencies = await dependenciesOf(REPO)
      const dir = await consumer(
        'envelop-consumer',
        [...dependencies, ...peers, '@types/node'],
        ENVELOP_CONSUMER,
      )
      const names = await installed(dir)
      for (const absent of ['graphql-yoga', 'ioredis', 'ws', 'prom-client'])
        expect(names).not.toContain(absent)
      // Alice's free plan holds 2 operations of cost 1; Bob's pro plan holds 5.
      expect(await compileAndRun(dir)).toEqual({
        diagnostics: [],
        // Then 5 points of estimated budget: one operation of 3, the next refused.
        output: ['world', 'world', 'RATE_LIMITED', 'world', 'world', 'world', 'world', 'RATE_LIMITED'],
      })
    },
    TIMEOUT_MS,
  )

  it(
    'a NestJS 12 consumer on Express (no Fastify, ws or GraphQL) compiles against tollbooth/nestjs and runs',
    async () => {
      const dir = await installedConsumer(
        'nestjs-consumer',
        [
          '@nestjs/common@^12',
          '@nestjs/core@^12',
          '@nestjs/platform-express@^12',
          'reflect-metadata',
          'rxjs',
        ],
        NEST_CONSUMER,
        // What NestJS needs of every project that uses its decorators.
        { experimentalDecorators: true, emitDecoratorMetadata: true },
      )
      const names = await installed(dir)
      for (const absent of [
        'fastify',
        'ws',
        'graphql',
        'graphql-yoga',
        '@apollo/server',
        'ioredis',
        'prom-client',
      ])
        expect(names).not.toContain(absent)
      const nestVersion = (
        JSON.parse(await readFile(join(dir, 'node_modules/@nestjs/common/package.json'), 'utf8')) as {
          version: string
        }
      ).version
      expect(nestVersion).toMatch(/^12\./)
      expect(await compileAndRun(dir)).toEqual({
        diagnostics: [],
        output: {
          // Capacity 2: the third request to the default budget is refused, as tollbooth/http would answer it.
          items: [200, 200],
          refused: {
            status: 429,
            type: 'application/problem+json; charset=utf-8',
            retryAfter: '1000',
            body: {
              type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
              title: 'Request cannot be satisfied as assigned quota has been exceeded',
              status: 429,
              'violated-policies': ['api'],
              retryAfter: 1000,
            },
          },
          // Cost 2 from a budget of 3: one admitted.
          report: [200, 429],
          health: [200, 200, 200],
        },
      })
    },
    INSTALL_TIMEOUT_MS,
  )

  it(
    'a Socket.IO consumer (socket.io and its client, no ioredis, prom-client or GraphQL) compiles against tollbooth/socket.io and runs',
    async () => {
      const dir = await installedConsumer(
        'socketio-consumer',
        ['socket.io@^4', 'socket.io-client@^4'],
        SOCKET_IO_CONSUMER,
        {},
      )
      const names = await installed(dir)
      for (const absent of ['ioredis', 'prom-client', 'graphql', 'graphql-yoga', 'fastify', '@nestjs/common'])
        expect(names).not.toContain(absent)
      expect(await compileAndRun(dir)).toEqual({
        diagnostics: [],
        output: {
          first: 'connected',
          second: 'TOO_MANY_CONNECTIONS',
          answers: ['world', 'world', 'RATE_LIMITED'],
        },
      })
    },
    INSTALL_TIMEOUT_MS,
  )
})
