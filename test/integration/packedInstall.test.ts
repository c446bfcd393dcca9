/**
 * The package as npm publishes it, installed into a consumer that has only what tollbooth declares: `npm pack`
 * (of the built `dist/`) unpacked into `<tmp>/<consumer>/node_modules/tollbooth`, the `dependencies` of
 * package.json and the consumer's chosen peers linked from this repository's node_modules (offline), then the
 * consumer compiled by `tsc` (strict, skipLibCheck off, nodenext) and run by `node`. A memory-only consumer has no
 * ioredis, ws, prom-client or graphql-yoga; an Envelop-only consumer has graphql and @envelop/core, no graphql-yoga.
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

async function ask(context: AppContext): Promise<string> {
  const { parse, validate, execute, schema } = getEnveloped(context)
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
console.log(JSON.stringify(answers))
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
    'an Envelop-only consumer (graphql and @envelop/core, no graphql-yoga) compiles against tollbooth/graphql with a typed context and runs',
    async () => {
      const peers = [
        'graphql',
        '@envelop/core',
        ...(await dependenciesOf(join(REPO, 'node_modules/@envelop/core'))),
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
        output: ['world', 'world', 'RATE_LIMITED', 'world', 'world', 'world'],
      })
    },
    TIMEOUT_MS,
  )
})
