/**
 * What a refusal costs, and what a point of introspection buys, on Yoga and Apollo Server with tollbooth, beside the
 * plain server and graphql-armor.
 *
 *   npm run bench:pricing
 *   npm run bench:pricing -- --rounds 5
 *
 * 1. **Refusals.** 40 distinct documents of 10 kB, each `{ users { id } }` selected 800 times at the root (with a
 *    `first` argument of its own, so no cache answers for another), sent one after another to each server, each
 *    server alone in a process of its own (what one server's caches hold does not weigh on another's garbage
 *    collection). Per document: the server's CPU time (user + system, `process.cpuUsage()` around the 40
 *    requests), the heap it holds afterwards (a parse cache holding hostile documents shows there), and the answer. tollbooth refuses
 *    them for `maxRootFields` before graphql-js' validation, whose OverlappingFieldsCanBeMerged compares the 800
 *    fields pairwise; the plain server and graphql-armor validate them in full. Target: ≤ 5 ms per refusal.
 * 2. **Introspection per point.** On a schema of 200 types of 25 fields (each with two arguments), the CPU time per
 *    point of `__schema { types { name fields { name args { … } type { … } } } }` against that of an ordinary query
 *    of lists and objects on the same schema (`items(first: 100)` with nested objects), both priced and charged by
 *    tollbooth (maxCost and the budget raised so that both run). Target: introspection within 3× of the ordinary
 *    query's CPU per point.
 *
 * Requests are handed to each server in this process, without sockets (Yoga's `fetch`, Apollo's
 * `executeHTTPGraphQLRequest`): the CPU time measured is the server's handling of the request, nothing of a client.
 * ROUNDS rounds (3 by default) after an unmeasured warm-up (300 documents of the same shape, or 3 s of CPU for a
 * server that takes longer), as a server that has been running a while is; medians are printed. One process on a 2-core
 * machine that other work shares: the spread across rounds is printed next to each median.
 */
import { execFileSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { ApolloServer, HeaderMap } from '@apollo/server'
import { ApolloArmor, EnvelopArmor } from '@escape.tech/graphql-armor'
import { type GraphQLSchema, parse } from 'graphql'
import { createSchema, createYoga, type Plugin, type YogaServerInstance } from 'graphql-yoga'
import { MemoryStore, tokenBucket } from 'tollbooth'
import { tollboothApolloPlugin } from 'tollbooth/apollo'
import { type TollboothGraphQLOptions, useTollbooth } from 'tollbooth/graphql'
import { fmt, loadAverage, median } from './report.js'

const { values: flags } = parseArgs({
  options: { rounds: { type: 'string', default: '3' }, contender: { type: 'string' } },
})
const ROUNDS = Number(flags.rounds)

const REFUSED_DOCUMENTS = 40
const WARM_UP_DOCUMENTS = 300
const WARM_UP_MS = 3000
const ROOT_FIELDS = 800
const TYPES = 200
const FIELDS = 25

/** One server under measurement: answers a query with its status and body. */
interface Contender {
  readonly name: string
  ask(query: string): Promise<{
    status: number
    body: {
      errors?: { extensions?: { code?: string } }[]
      extensions?: { cost?: { actualQueryCost?: number } }
    }
  }>
}

function budget() {
  return tokenBucket({ name: 'bench', store: new MemoryStore(), capacity: 1e9, refillPerSecond: 1e6 })
}

const identify = () => 'bench'

function yogaContender(name: string, schema: GraphQLSchema, plugins: Plugin[]): Contender {
  const yoga: YogaServerInstance<object, object> = createYoga({ schema, plugins, logging: false })
  return {
    name,
    async ask(query) {
      const response = await yoga.fetch('http://bench/graphql', {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json' },
        body: JSON.stringify({ query }),
      })
      return { status: response.status, body: await response.json() }
    },
  }
}

async function apolloContender(
  name: string,
  schema: GraphQLSchema,
  plugins: ConstructorParameters<typeof ApolloServer>[0]['plugins'],
  validationRules: ConstructorParameters<typeof ApolloServer>[0]['validationRules'] = [],
): Promise<Contender> {
  const server = new ApolloServer({ schema, plugins, validationRules, logger: silent })
  await server.start()
  return {
    name,
    async ask(query) {
      const response = await server.executeHTTPGraphQLRequest({
        httpGraphQLRequest: {
          method: 'POST',
          headers: new HeaderMap([['content-type', 'application/json']]),
          search: '',
          body: { query },
        },
        context: async () => ({}),
      })
      const text = response.body.kind === 'complete' ? response.body.string : ''
      return { status: response.status ?? 200, body: JSON.parse(text) }
    },
  }
}

const silent = { debug() {}, info() {}, warn() {}, error() {} }

/** The server's CPU time for `run`, in milliseconds. */
async function cpuMs(run: () => Promise<void>): Promise<number> {
  const before = process.cpuUsage()
  await run()
  const spent = process.cpuUsage(before)
  return (spent.user + spent.system) / 1000
}

// ---------------------------------------------------------------------------------------------------------------
// 1. Refusals
// ---------------------------------------------------------------------------------------------------------------

const usersSchema = createSchema({
  typeDefs: 'type User { id: ID! } type Query { users(first: Int): [User!]! }',
  resolvers: { Query: { users: () => [] } },
})

/** Distinct per round and document: no parse or validation cache answers for another. */
function wideDocument(round: number, index: number): string {
  return `{ users(first: ${round * 1000 + index}) { id } ${'users { id } '.repeat(ROOT_FIELDS - 1)}}`
}

/** The contenders of the refusal measurement, by name: each is measured in a process of its own. */
const refusalContenders: Record<string, () => Promise<Contender>> = {
  Yoga: async () => yogaContender('Yoga', usersSchema, []),
  'Yoga + graphql-armor': async () =>
    yogaContender('Yoga + graphql-armor', usersSchema, new EnvelopArmor().protect().plugins as Plugin[]),
  'Yoga + tollbooth': async () =>
    yogaContender('Yoga + tollbooth', usersSchema, [useTollbooth({ limiter: budget(), identify }) as Plugin]),
  Apollo: () => apolloContender('Apollo', usersSchema, []),
  'Apollo + graphql-armor': () => {
    const armor = new ApolloArmor().protect()
    return apolloContender(
      'Apollo + graphql-armor',
      usersSchema,
      armor.plugins as never,
      armor.validationRules as never,
    )
  },
  'Apollo + tollbooth': () =>
    apolloContender('Apollo + tollbooth', usersSchema, [
      tollboothApolloPlugin({ limiter: budget(), identify }),
    ]),
}

/** Measures one contender (in this process, which runs nothing else) and prints its row. */
async function measureRefusals(contender: Contender): Promise<void> {
  // Warm up on documents of the same shape: up to WARM_UP_DOCUMENTS, or WARM_UP_MS of CPU for the slow ones.
  const warmUp = process.cpuUsage()
  for (let i = 0; i < WARM_UP_DOCUMENTS; i++) {
    await contender.ask(wideDocument(99, i))
    const spent = process.cpuUsage(warmUp)
    if ((spent.user + spent.system) / 1000 > WARM_UP_MS) break
  }
  const perDocument: number[] = []
  let answer = ''
  for (let round = 0; round < ROUNDS; round++) {
    const ms = await cpuMs(async () => {
      for (let i = 0; i < REFUSED_DOCUMENTS; i++) {
        const { status, body } = await contender.ask(wideDocument(round, i))
        answer = `${status} ${body.errors?.[0]?.extensions?.code ?? '(no error)'}`
      }
    })
    perDocument.push(ms / REFUSED_DOCUMENTS)
  }
  const spread = `${Math.min(...perDocument).toFixed(2)}–${Math.max(...perDocument).toFixed(2)}`
  const heap = `${Math.round(process.memoryUsage().heapUsed / 2 ** 20)} MiB`
  console.log(
    `${`${contender.name.padEnd(26)}${median(perDocument).toFixed(2).padStart(8)}  (${spread})`.padEnd(52)}${heap.padStart(9)}   ${answer}`,
  )
}

// ---------------------------------------------------------------------------------------------------------------
// 2. Introspection per point
// ---------------------------------------------------------------------------------------------------------------

function wideSchema(): GraphQLSchema {
  const types = Array.from({ length: TYPES }, (_, t) => {
    const fields = Array.from({ length: FIELDS }, (_, f) => `  f${f}(a: Int, b: String): T${(t + f) % TYPES}`)
    return `type T${t} {\n  id: ID\n${fields.join('\n')}\n}`
  })
  const resolvers: Record<string, Record<string, () => unknown>> = {
    Query: { items: () => Array.from({ length: 100 }, (_, i) => ({ id: i })) },
  }
  for (let t = 0; t < TYPES; t++) {
    const fields: Record<string, () => unknown> = {}
    for (let f = 0; f < FIELDS; f++) fields[`f${f}`] = () => ({ id: f })
    resolvers[`T${t}`] = fields
  }
  return createSchema({
    typeDefs: `${types.join('\n')}\ntype Query { items(first: Int): [T0] }`,
    resolvers,
  })
}

const INTROSPECTION =
  '{ __schema { types { name fields { name args { name type { name } } type { name kind ofType { name } } } } } }'
/** Objects and lists, about as many points as the introspection, priced by `costs` below. */
const ORDINARY = `{ items(first: 100) { id ${Array.from({ length: 12 }, (_, f) => `f${f} { id f1 { id } }`).join(' ')} } }`

async function introspectionPerPoint(): Promise<void> {
  const schema = wideSchema()
  const tollbooth: TollboothGraphQLOptions = {
    limiter: budget(),
    identify,
    maxCost: 1e7,
    maxFieldVisits: 1e7,
    costs: { 'Query.items': { listSize: { slicingArguments: ['first'] } } },
  }
  const contenders = [
    yogaContender('Yoga + tollbooth', schema, [useTollbooth(tollbooth) as Plugin]),
    await apolloContender('Apollo + tollbooth', schema, [tollboothApolloPlugin(tollbooth)]),
  ]
  parse(INTROSPECTION)
  console.log(`\n2. CPU per point on a schema of ${TYPES} types × ${FIELDS} fields`)
  console.log(
    'server                  query           points   ms of CPU   µs per point   introspection / ordinary',
  )
  for (const contender of contenders) {
    const perPoint = new Map<string, number>()
    for (const [label, query] of [
      ['introspection', INTROSPECTION],
      ['ordinary', ORDINARY],
    ] as const) {
      const first = await contender.ask(query)
      const points = first.body.extensions?.cost?.actualQueryCost ?? Number.NaN
      const times: number[] = []
      for (let round = 0; round < ROUNDS; round++) {
        times.push(await cpuMs(async () => void (await contender.ask(query))))
      }
      const ms = median(times)
      perPoint.set(label, (ms * 1000) / points)
      const ratio =
        label === 'ordinary'
          ? `${((perPoint.get('introspection') ?? 0) / (perPoint.get('ordinary') ?? 1)).toFixed(2)}× (target ≤ 3×)`
          : ''
      console.log(
        `${contender.name.padEnd(24)}${label.padEnd(14)}${fmt(points).padStart(8)}${ms.toFixed(1).padStart(12)}${((ms * 1000) / points).toFixed(2).padStart(15)}   ${ratio}`,
      )
    }
  }
}

if (flags.contender !== undefined) {
  const make = refusalContenders[flags.contender]
  if (make === undefined) throw new Error(`no contender ${flags.contender}`)
  await measureRefusals(await make())
} else {
  console.log(`bench:pricing, ${ROUNDS} rounds, Node ${process.version}, load average ${loadAverage()}`)
  console.log(
    `\n1. ${REFUSED_DOCUMENTS} documents of ${ROOT_FIELDS} root fields (${wideDocument(0, 0).length} characters) each, one process per server`,
  )
  console.log('server                    ms of CPU per document (median, min–max)   heap after   answer')
  for (const name of Object.keys(refusalContenders)) {
    const script = fileURLToPath(import.meta.url)
    const args = [...process.execArgv, script, '--contender', name, '--rounds', String(ROUNDS)]
    process.stdout.write(execFileSync(process.execPath, args, { encoding: 'utf8' }))
  }
  await introspectionPerPoint()
}
