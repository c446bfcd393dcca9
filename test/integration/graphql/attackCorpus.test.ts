/**
 * A corpus of hostile GraphQL documents sent over HTTP to real servers (127.0.0.1, port 0) protected by tollbooth
 * with its default limits (maxCharacters 100000, maxTokens 5000, maxDepth 15, maxAliases 30, maxDirectives 50,
 * maxRootFields 20, maxBatchSize 10, maxFieldVisits 10000) and a budget so large that no refusal here comes from the
 * budget. The same corpus runs against both servers tollbooth has an adapter for: Yoga (node:http) with
 * useTollbooth, and Apollo Server (`startStandaloneServer`, batching on) with tollboothApolloPlugin.
 *
 * For every attack: the exact `extensions.code` of the guard that fires first (on Yoga the guards run in this
 * order: batch size when Yoga reads the request; characters, then tokens while parsing; graphql-js' own rules and
 * tollbooth's structural rules during validation; cost, then budget before execution), the HTTP status (sent with
 * `accept: application/graphql-response+json`, so a refusal is not a 200), no resolver ran (every resolver of the
 * schema counts its calls), and the wall time of the round trip, printed as a table per server after the file.
 * Afterwards the server still answers a normal query, and the heap has not grown by more than MEMORY_BOUND.
 *
 * Apollo Server differs where docs/graphql.md says it must (Apollo's limits, not the plugin's): the parse-time
 * guards are answered after Apollo's own parse and validation (the refusal replaces Apollo's error when those fail
 * first), graphql-js' rules run before tollbooth's structural rules and a document they reject gets only their
 * errors, the structural rules answer their first error, and a refused batch is one refusal per operation. Each of
 * those attacks asserts Apollo's exact answer. On Apollo no attack may be a 500, nor be logged as "Unexpected error
 * processing request" (Apollo's `logger` is captured).
 *
 * Yoga runs with `batching: { limit: 1000 }` and `limits.maxBatchSize: 10`, so Yoga's own batch limit cannot fire
 * before tollbooth's.
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { ApolloServer, type BaseContext } from '@apollo/server'
import { startStandaloneServer } from '@apollo/server/standalone'
import { createSchema, createYoga } from 'graphql-yoga'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { tollboothApolloPlugin } from '../../../src/graphql/apollo/index.js'
import { type TollboothGraphQLOptions, useTollbooth } from '../../../src/graphql/index.js'
import { RefusalCodes } from '../../../src/graphql/refusal.js'
import { tokenBucket } from '../../../src/index.js'

const MiB = 1024 * 1024
/** How long one refusal may take, round trip included; the printed times are what matters. */
const REFUSAL_BOUND_MS = 1_000
/**
 * The same on Apollo Server for text Apollo parses and validates although a parse-time guard has refused it (a
 * megabyte of query text, every operation of a refused batch): it answers a plugin's error before then with a 500.
 */
const APOLLO_PARSED_REFUSAL_BOUND_MS = 10_000
/** How much the heap may grow over the whole corpus. */
const MEMORY_BOUND = 128 * MiB

// ---------------------------------------------------------------------------------------------------------------
// The server
// ---------------------------------------------------------------------------------------------------------------

/** Resolver calls since the start; every field of the schema counts. */
let resolverCalls = 0

const typeDefs = /* GraphQL */ `
  type Query {
    node: Node
    hello: String
  }
  type Node {
    child: Node
    name: String
    list(first: Int): [Node]
  }
`

const resolvers = {
  Query: {
    node: () => {
      resolverCalls++
      return {}
    },
    hello: () => {
      resolverCalls++
      return 'world'
    },
  },
  Node: {
    child: () => {
      resolverCalls++
      return {}
    },
    name: () => {
      resolverCalls++
      return 'n'
    },
    list: (_: unknown, args: { first?: number | null }) => {
      resolverCalls++
      return Array.from({ length: Math.min(args.first ?? 3, 100) }, () => ({}))
    },
  },
}

/**
 * A full garbage collection, so that the heap measured is what is kept (vitest's workers run without
 * `--expose-gc`: the flag is set at run time, and `gc` read from a fresh context).
 */
function collectGarbage(): void {
  setFlagsFromString('--expose-gc')
  ;(runInNewContext('gc') as () => void)()
}

/** A server under attack: where to send, what it logged, how to stop it. */
interface CorpusServer {
  readonly url: string
  /** What the server's logger got at warn and error level, one line each. */
  readonly logged: string[]
  close(): Promise<void>
}

type ServerName = 'Yoga' | 'Apollo Server'

/** The same options on both servers: the default limits, a budget nothing here can spend. */
function tollboothOptions(): TollboothGraphQLOptions {
  return {
    limiter: tokenBucket({ name: 'attack-corpus', capacity: 1_000_000_000, refillPerSecond: 1_000_000 }),
    identify: () => 'attacker',
  }
}

/** A logger keeping warn and error lines (debug and info are dropped). */
function recordingLogger(logged: string[]) {
  const record =
    (level: string) =>
    (...args: unknown[]) =>
      logged.push(`${level}: ${args.map(String).join(' ')}`)
  return { debug() {}, info() {}, warn: record('warn'), error: record('error') }
}

async function startYoga(): Promise<CorpusServer> {
  const logged: string[] = []
  const yoga = createYoga({
    schema: createSchema({ typeDefs, resolvers }),
    // tollbooth's own batch guard is there when asked for (Yoga's own is `batching.limit`: see yogaBatching.test.ts).
    plugins: [useTollbooth({ ...tollboothOptions(), limits: { maxBatchSize: 10 } })],
    batching: { limit: 1000 },
    logging: recordingLogger(logged),
    graphiql: false,
  })
  const server = createServer(yoga)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`,
    logged,
    close: async () => {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    },
  }
}

async function startApollo(): Promise<CorpusServer> {
  const logged: string[] = []
  const apollo = new ApolloServer<BaseContext>({
    schema: createSchema({ typeDefs, resolvers }),
    plugins: [tollboothApolloPlugin(tollboothOptions())],
    allowBatchedHttpRequests: true,
    logger: recordingLogger(logged),
  })
  const { url } = await startStandaloneServer(apollo, {
    listen: { port: 0, host: '127.0.0.1' },
    context: async ({ req }) => ({ req }),
  })
  return { url, logged, close: () => apollo.stop() }
}

let server: CorpusServer
let heapBefore: number

interface Outcome {
  status: number
  /** `extensions.code` of every error, in order. */
  codes: string[]
  /** The whole response body, parsed. */
  body: unknown
  ms: number
  /** Resolvers run while this request was answered. */
  calls: number
}

interface Row {
  attack: string
  size: string
  status: number
  code: string
  ms: number
}
/** The rows printed after the file, per server. */
const tables = new Map<ServerName, Row[]>()
let table: Row[] = []

/** POSTs a JSON body (a GraphQL request, or an array of them: a batch) and times the round trip. */
async function send(body: unknown): Promise<Outcome> {
  const text = JSON.stringify(body)
  const callsBefore = resolverCalls
  const start = performance.now()
  const response = await fetch(server.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json' },
    body: text,
    signal: AbortSignal.timeout(30_000),
  })
  const parsed = (await response.json()) as unknown
  const ms = performance.now() - start
  const results = (Array.isArray(parsed) ? parsed : [parsed]) as {
    errors?: { extensions?: { code?: string } }[]
  }[]
  const codes = results.flatMap((result) => (result.errors ?? []).map((e) => e.extensions?.code ?? '(none)'))
  return { status: response.status, codes, body: parsed, ms, calls: resolverCalls - callsBefore }
}

/**
 * Sends an attack and checks it is refused: the expected first code, the expected status, no resolver, in time.
 * Records the row printed after the file.
 */
async function expectRefused(
  attack: string,
  query: string | unknown[],
  expected: {
    code: string | readonly string[]
    status: number
    otherCodes?: readonly string[]
    boundMs?: number
  },
): Promise<Outcome> {
  const outcome = await send(typeof query === 'string' ? { query } : query)
  const size = typeof query === 'string' ? `${fmtSize(query.length)} chars` : `${query.length} ops`
  table.push({ attack, size, status: outcome.status, code: summarize(outcome.codes), ms: outcome.ms })
  const firstCodes: readonly string[] = typeof expected.code === 'string' ? [expected.code] : expected.code
  expect(firstCodes, JSON.stringify(outcome.body).slice(0, 500)).toContain(outcome.codes[0])
  // Every other error is one of the expected ones (graphql-js' own rules may report next to tollbooth's).
  const allowed = new Set([...firstCodes, ...(expected.otherCodes ?? [])])
  expect(outcome.codes.filter((code) => !allowed.has(code))).toEqual([])
  expect(outcome.status).toBe(expected.status)
  expect(outcome.calls).toBe(0)
  expect(resolverCalls).toBe(0)
  expect(outcome.ms).toBeLessThan(expected.boundMs ?? REFUSAL_BOUND_MS)
  return outcome
}

function messages(outcome: Outcome): string[] {
  const body = outcome.body as { errors?: { message: string }[] }
  return (body.errors ?? []).map((error) => error.message)
}

function fmtSize(chars: number): string {
  return chars >= 10_000 ? `${Math.round(chars / 1000).toLocaleString('en-US')}k` : String(chars)
}

/** `A, A, A, B` → `A ×3, B`. */
function summarize(codes: string[]): string {
  const counts = new Map<string, number>()
  for (const code of codes) counts.set(code, (counts.get(code) ?? 0) + 1)
  return [...counts].map(([code, n]) => (n === 1 ? code : `${code} ×${n}`)).join(', ')
}

afterAll(() => {
  for (const [name, rows] of tables) {
    const lines = [
      ['attack', 'size', 'status', 'code', 'ms'],
      ...rows.map((row) => [row.attack, row.size, String(row.status), row.code, row.ms.toFixed(1)]),
    ]
    const widths = lines[0]?.map((_, i) => Math.max(...lines.map((line) => (line[i] as string).length))) ?? []
    const line = (cells: string[]) =>
      cells
        .map((cell, i) => (i >= 4 ? cell.padStart(widths[i] ?? 0) : cell.padEnd(widths[i] ?? 0)))
        .join('  ')
    console.log(`[graphql attacks: ${name}]\n${lines.map(line).join('\n')}`)
  }
})

// ---------------------------------------------------------------------------------------------------------------
// Documents
// ---------------------------------------------------------------------------------------------------------------

/** `{ node { child { child … { name } … } } }` with `depth` levels of fields; compact (7 characters a level). */
function nested(depth: number): string {
  return `{node{${'child{'.repeat(depth - 2)}name${'}'.repeat(depth - 1)}}`
}

/** The n-th shortest GraphQL name: a…z, A…Z, _, then two characters, and so on. */
function shortName(n: number): string {
  const first = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_'
  const rest = `${first}0123456789`
  if (n < first.length) return first[n] as string
  let index = n - first.length
  let length = 2
  let count = first.length * rest.length
  while (index >= count) {
    index -= count
    length++
    count *= rest.length
  }
  let name = ''
  for (let i = 1; i < length; i++) {
    name = (rest[index % rest.length] as string) + name
    index = Math.floor(index / rest.length)
  }
  return (first[index] as string) + name
}

// ---------------------------------------------------------------------------------------------------------------
// The corpus
// ---------------------------------------------------------------------------------------------------------------

describe.each(['Yoga', 'Apollo Server'] as const)('%s under a corpus of hostile documents (HTTP)', (name) => {
  const onApollo = name === 'Apollo Server'

  beforeAll(async () => {
    resolverCalls = 0
    table = []
    tables.set(name, table)
    collectGarbage()
    heapBefore = process.memoryUsage().heapUsed
    server = onApollo ? await startApollo() : await startYoga()
  })

  afterAll(async () => {
    await server.close()
  })

  const { QUERY_TOO_LARGE, TOO_MANY_TOKENS, MAX_DEPTH_EXCEEDED, MAX_ALIASES_EXCEEDED } = RefusalCodes
  const { MAX_DIRECTIVES_EXCEEDED, MAX_ROOT_FIELDS_EXCEEDED, BATCH_TOO_LARGE, COST_LIMIT_EXCEEDED } =
    RefusalCodes

  // Nesting is refused before the parser recurses that deep: by the token limit, or by a depth check of the text.
  // graphql-js' parser is recursive descent, and maxTokens 5000 lets it reach ~2,500 levels of selection sets
  // (2 tokens a level on the way down) or ~5,000 levels of list values (1 token a level): past ~2,000 levels (less
  // while the parser is not yet optimized) it throws RangeError (stack overflow), which Yoga answers as a 500.
  const nestingRefusals = [TOO_MANY_TOKENS, MAX_DEPTH_EXCEEDED]

  it('deep nesting, depth 10,000 (70k characters): refused while parsing, not a stack overflow (500)', async () => {
    const query = nested(10_000)
    expect(query.length).toBeLessThan(100_000)
    await expectRefused('depth 10,000', query, { code: nestingRefusals, status: 400 })
  })

  it('deep nesting, depth 2,400 (17k characters, 4,800 tokens on the way down): refused, not a 500', async () => {
    await expectRefused('depth 2,400', nested(2_400), { code: nestingRefusals, status: 400 })
  })

  it('nested list values `[[[…]]]` × 4,900 in an argument (10k characters): refused, not a 500', async () => {
    const query = `{ node { list(first: ${'['.repeat(4_900)}${']'.repeat(4_900)}) { name } } }`
    await expectRefused('list value [ × 4,900', query, {
      code: nestingRefusals,
      status: 400,
      otherCodes: ['GRAPHQL_VALIDATION_FAILED'],
    })
  })

  it('deep nesting, depth 20 (under the token limit): MAX_DEPTH_EXCEEDED', async () => {
    await expectRefused('depth 20', nested(20), { code: MAX_DEPTH_EXCEEDED, status: 400 })
  })

  it('deep nesting, depth 18 through fragments: MAX_DEPTH_EXCEEDED', async () => {
    // Eight fragments, each two levels deep, chained: the operation is 18 levels deep, no selection set is.
    const fragments = Array.from(
      { length: 8 },
      (_, i) => `fragment D${i} on Node { child { child { ${i < 7 ? `...D${i + 1}` : 'name'} } } }`,
    )
    await expectRefused('depth 18 via fragments', `{ node { ...D0 } } ${fragments.join(' ')}`, {
      code: MAX_DEPTH_EXCEEDED,
      status: 400,
    })
  })

  it('10,000 aliases `aN: hello` (129k characters): stopped by the character limit before parsing', async () => {
    const query = `{ ${Array.from({ length: 10_000 }, (_, i) => `a${i}: hello`).join(' ')} }`
    expect(query.length).toBeGreaterThan(100_000)
    await expectRefused('10,000 aliases', query, { code: QUERY_TOO_LARGE, status: 413 })
  })

  it('10,000 aliases with the shortest names (under 100k characters): stopped by the token limit', async () => {
    const query = `{node{${Array.from({ length: 10_000 }, (_, i) => `${shortName(i)}:name`).join(' ')}}}`
    expect(query.length).toBeLessThan(100_000)
    await expectRefused('10,000 short aliases', query, { code: TOO_MANY_TOKENS, status: 400 })
  })

  it('31 aliases: MAX_ALIASES_EXCEEDED', async () => {
    const query = `{ node { ${Array.from({ length: 31 }, (_, i) => `a${i}: name`).join(' ')} } }`
    await expectRefused('31 aliases', query, { code: MAX_ALIASES_EXCEEDED, status: 400 })
  })

  it('directive overloading, @include(if: true) × 1000 on one field: stopped by the token limit', async () => {
    const query = `{ hello ${'@include(if: true) '.repeat(1000)}}`
    await expectRefused('@include × 1000', query, { code: TOO_MANY_TOKENS, status: 400 })
  })

  it('@include(if: true) × 51 on one field: MAX_DIRECTIVES_EXCEEDED alone, before graphql-js reports the repeats', async () => {
    const query = `{ hello ${'@include(if: true) '.repeat(51)}}`
    // tollbooth's rules run before graphql-js' and a refusal replaces validation: UniqueDirectivesPerLocationRule,
    // which would report each of the 50 repeats, never runs.
    const outcome = await expectRefused('@include × 51', query, {
      code: MAX_DIRECTIVES_EXCEEDED,
      status: 400,
    })
    expect(outcome.codes).toEqual([MAX_DIRECTIVES_EXCEEDED])
  })

  it('51 directives on 51 fields (valid otherwise): MAX_DIRECTIVES_EXCEEDED alone', async () => {
    const query = `{ node { ${'name @include(if: true) '.repeat(51)}} }`
    await expectRefused('51 fields × @include', query, { code: MAX_DIRECTIVES_EXCEEDED, status: 400 })
  })

  it('fragment cycle: refused by graphql-js NoFragmentCyclesRule, no hang', async () => {
    const query =
      '{ node { ...A } } fragment A on Node { child { ...B } } fragment B on Node { child { ...A } }'
    const outcome = await expectRefused('fragment cycle A↔B', query, {
      code: 'GRAPHQL_VALIDATION_FAILED',
      status: 400,
    })
    expect(messages(outcome)).toEqual(['Cannot spread fragment "A" within itself via "B".'])
  })

  it('fragment cycle through 50 fragments, one level each: MAX_DEPTH_EXCEEDED, before the cycle is reported', async () => {
    // tollbooth's depth rule walks past depth 15 before it comes back to C0, and runs before graphql-js'
    // NoFragmentCyclesRule: its refusal alone is answered.
    const fragments = Array.from(
      { length: 50 },
      (_, i) => `fragment C${i} on Node { name child { ...C${(i + 1) % 50} } }`,
    )
    const query = `{ node { ...C0 } } ${fragments.join(' ')}`
    const outcome = await expectRefused('fragment cycle ×50', query, {
      code: MAX_DEPTH_EXCEEDED,
      status: 400,
    })
    expect(outcome.codes).toEqual([MAX_DEPTH_EXCEEDED])
  })

  it('fragment explosion, 12 fragments each spreading the next 3 times (3^11 spreads): COST_LIMIT_EXCEEDED', async () => {
    // Depth 2, 4 tokens a spread: every structural guard passes; only pricing (maxFieldVisits) sees the expansion.
    const fragments = Array.from({ length: 12 }, (_, i) =>
      i < 11
        ? `fragment F${i} on Node { name ...F${i + 1} ...F${i + 1} ...F${i + 1} }`
        : `fragment F${i} on Node { name }`,
    )
    const query = `{ node { ...F0 } } ${fragments.join(' ')}`
    await expectRefused('fragment explosion 3^11', query, { code: COST_LIMIT_EXCEEDED, status: 400 })
  })

  it('fragment explosion nested in fields, 12 levels of 2 branches (depth 13): COST_LIMIT_EXCEEDED', async () => {
    const fragments = Array.from({ length: 12 }, (_, i) =>
      i < 11
        ? `fragment G${i} on Node { name child { ...G${i + 1} } list(first: 1) { ...G${i + 1} } }`
        : `fragment G${i} on Node { name }`,
    )
    const query = `{ node { ...G0 } } ${fragments.join(' ')}`
    await expectRefused('fragment explosion 2^11, nested', query, { code: COST_LIMIT_EXCEEDED, status: 400 })
  })

  it('field duplication `{ hello hello … }` × 5000: stopped by the token limit (5002 tokens)', async () => {
    await expectRefused('hello × 5000', `{ ${'hello '.repeat(5000)}}`, { code: TOO_MANY_TOKENS, status: 400 })
  })

  it('field duplication `{ hello … }` × 4000 (under the token limit): MAX_ROOT_FIELDS_EXCEEDED, before graphql-js compares pairs', async () => {
    // graphql-js 16.15's OverlappingFieldsCanBeMergedRule would meter its pairwise comparisons (500,000) on the
    // 4000 × 4000 pairs and give up; tollbooth's root-field rule refuses first, and validation never runs.
    const query = `{ ${'hello '.repeat(4000)}}`
    const outcome = await expectRefused('hello × 4000', query, {
      code: MAX_ROOT_FIELDS_EXCEEDED,
      status: 400,
    })
    expect(outcome.codes).toEqual([MAX_ROOT_FIELDS_EXCEEDED])
  })

  it('field duplication `{ node { name × 4000 } }` (under every tollbooth limit): graphql-js aborts validation', async () => {
    // No tollbooth guard sees this one (one alias-free field, depth 2, 4006 tokens, cost 1): graphql-js' metered
    // OverlappingFieldsCanBeMergedRule refuses it before comparing all 8 million pairs.
    const outcome = await expectRefused('node { name × 4000 }', `{ node { ${'name '.repeat(4000)}} }`, {
      code: 'GRAPHQL_VALIDATION_FAILED',
      status: 400,
    })
    expect(messages(outcome)).toEqual(['Validation aborted.'])
  })

  it("field duplication `{ node { name × 700 } }` (within graphql-js' meter): answered, and quickly", async () => {
    // 700 selections merge into one field: 2 resolvers run. What is measured is validation's pairwise comparison.
    const query = `{ node { ${'name '.repeat(700)}} }`
    const outcome = await send({ query })
    table.push({
      attack: 'node { name × 700 } (answered)',
      size: `${fmtSize(query.length)} chars`,
      status: outcome.status,
      code: summarize(outcome.codes) || '(none)',
      ms: outcome.ms,
    })
    expect(outcome.status).toBe(200)
    expect(outcome.codes).toEqual([])
    expect((outcome.body as { data: unknown }).data).toEqual({ node: { name: 'n' } })
    expect(outcome.calls).toBe(2)
    resolverCalls = 0
    expect(outcome.ms).toBeLessThan(REFUSAL_BOUND_MS)
  })

  // Apollo Server parses (and validates) the text of these before it can answer the refusal: a longer bound.
  const parsedByApollo = onApollo ? { boundMs: APOLLO_PARSED_REFUSAL_BOUND_MS } : {}

  it('a 1 MB query text: QUERY_TOO_LARGE before parsing', async () => {
    const query = `{ ${'hello '.repeat(Math.ceil(MiB / 6))}}`
    const outcome = await expectRefused('1 MB query', query, {
      code: QUERY_TOO_LARGE,
      status: 413,
      ...parsedByApollo,
    })
    // The refusal replaces the error graphql-js' validation answers first on Apollo ("Validation aborted.").
    expect(outcome.codes).toEqual([QUERY_TOO_LARGE])
  })

  /** Apollo answers a refused batch with one refusal per operation, all 413 together. */
  const expectBatchRefusal = (outcome: Outcome, size: number) => {
    if (!onApollo) {
      expect(outcome.codes).toEqual([BATCH_TOO_LARGE])
      expect(Array.isArray(outcome.body)).toBe(false)
      return
    }
    expect(Array.isArray(outcome.body)).toBe(true)
    expect(outcome.body).toHaveLength(size)
    expect(outcome.codes).toEqual(Array.from({ length: size }, () => BATCH_TOO_LARGE))
    for (const result of outcome.body as { data?: unknown; errors: unknown[] }[]) {
      expect(result.data).toBeUndefined()
      expect(result.errors).toHaveLength(1)
    }
  }

  it('an HTTP batch of 1000 operations: BATCH_TOO_LARGE (413) before any operation is parsed', async () => {
    const batch = Array.from({ length: 1000 }, () => ({ query: '{ hello }' }))
    const outcome = await expectRefused('batch of 1000', batch, {
      code: BATCH_TOO_LARGE,
      status: 413,
      ...parsedByApollo,
    })
    expectBatchRefusal(outcome, 1000)
  })

  it('an HTTP batch of 1000 deep, 1 MB operations: BATCH_TOO_LARGE, none of them parsed', async () => {
    const batch = Array.from({ length: 1000 }, () => ({ query: nested(140) }))
    const outcome = await expectRefused('batch of 1000 × depth 140', batch, {
      code: BATCH_TOO_LARGE,
      status: 413,
      ...parsedByApollo,
    })
    expectBatchRefusal(outcome, 1000)
  })

  it('an HTTP batch of 11 operations, one over maxBatchSize: BATCH_TOO_LARGE for the whole batch', async () => {
    const batch = Array.from({ length: 11 }, () => ({ query: '{ hello }' }))
    const outcome = await expectRefused('batch of 11', batch, { code: BATCH_TOO_LARGE, status: 413 })
    expectBatchRefusal(outcome, 11)
  })

  it('afterwards: a normal query is answered, and the heap has not grown much', async () => {
    const outcome = await send({ query: '{ hello node { name child { name } list(first: 2) { name } } }' })
    expect(outcome.status).toBe(200)
    expect(outcome.body).toMatchObject({
      data: {
        hello: 'world',
        node: { name: 'n', child: { name: 'n' }, list: [{ name: 'n' }, { name: 'n' }] },
      },
    })
    expect(outcome.calls).toBe(8)
    // A batch within the limit still works.
    const batch = await send([{ query: '{ hello }' }, { query: '{ node { name } }' }])
    expect(batch.status).toBe(200)
    expect(batch.body).toMatchObject([{ data: { hello: 'world' } }, { data: { node: { name: 'n' } } }])
    collectGarbage()
    const growth = process.memoryUsage().heapUsed - heapBefore
    console.log(
      `[graphql attacks: ${name}] heapUsed grew by ${(growth / MiB).toFixed(1)} MiB over the corpus`,
    )
    expect(growth).toBeLessThan(MEMORY_BOUND)
  })

  it('the server logged nothing at warn or error level over the whole corpus (no "Unexpected error")', () => {
    expect(server.logged).toEqual([])
  })
})
