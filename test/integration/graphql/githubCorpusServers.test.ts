/**
 * The GitHub corpus of Cha et al. (test/fixtures/github-corpus: 151 real GitHub queries with their real responses,
 * and the authors' list sizes) served through real servers with tollbooth: Yoga (node:http) with useTollbooth, and
 * Apollo Server (`startStandaloneServer`) with tollboothApolloPlugin, both on 127.0.0.1 port 0, over the corpus'
 * own GitHub schema with the list sizes of list-sizes.yaml as `costs`. test/unit/graphql/cost/githubCorpus.test.ts
 * prices the corpus with the analyzer alone; this file checks what the servers do with it.
 *
 * Every field of the schema resolves to what GitHub answered: the recorded response, read by response key (alias
 * or name) from the parent's recorded object, the root object being the response of the entry the request names
 * in its `x-corpus-entry` header. Each query is sent with its variables to both servers, and for each:
 * - the response data is the recorded data;
 * - `extensions.cost.requestedQueryCost` ≥ `actualQueryCost`: the price charged before execution is never below
 *   what the response really cost;
 * - `actualQueryCost` is the cost of the recorded response counted without tollbooth (every object and list item
 *   1, an empty list 1, scalars 0), so the bound above is checked against an independent figure;
 * - both servers report the same requested and actual cost.
 * The corpus fits tollbooth's default guard limits (at most depth 12, 13 root fields, 422 tokens, no alias); the
 * budget is too large to refuse anything, and `maxCost` is above the corpus' largest estimate.
 */
import { readFileSync } from 'node:fs'
import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import { ApolloServer, type BaseContext } from '@apollo/server'
import { startStandaloneServer } from '@apollo/server/standalone'
import {
  buildSchema,
  type DocumentNode,
  type GraphQLFieldResolver,
  type GraphQLSchema,
  isEnumType,
  isObjectType,
  parse,
} from 'graphql'
import { createYoga } from 'graphql-yoga'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { tollboothApolloPlugin } from '../../../src/graphql/apollo/index.js'
import { type CostExtension, type TollboothGraphQLOptions, useTollbooth } from '../../../src/graphql/index.js'
import { tokenBucket } from '../../../src/index.js'
import { type CorpusEntry, corpusDir, translateListSizes } from '../../helpers/githubCorpus.js'
import { realCost } from '../../helpers/responseCost.js'

/** The request header naming the corpus entry whose recorded response the resolvers answer. */
const ENTRY_HEADER = 'x-corpus-entry'
/** What the recordings hold for every enum value. */
const REDACTED = 'REDACTED'
/**
 * Above the corpus' largest estimate (8039 with these list sizes, printed after the file; above the default 5000),
 * so that no query is refused for its price: each must be answered.
 */
const MAX_COST = 10_000

// ---------------------------------------------------------------------------------------------------------------
// The corpus
// ---------------------------------------------------------------------------------------------------------------

interface Entry extends CorpusEntry {
  readonly label: string
  readonly document: DocumentNode
  /** What GitHub answered as `data`. */
  readonly data: Record<string, unknown>
}

function loadEntries(): Entry[] {
  const corpus: CorpusEntry[] = JSON.parse(readFileSync(`${corpusDir}/github-queries.json`, 'utf8'))
  return corpus.map((entry, index) => ({
    ...entry,
    label: `#${index} ${entry.source}/${entry.id}`,
    document: parse(entry.query),
    // Three entries (github-query-2020-07-22-3) store the data object itself, without the `data` wrapper.
    data: ('data' in entry.response ? entry.response.data : entry.response) as Record<string, unknown>,
  }))
}

// ---------------------------------------------------------------------------------------------------------------
// The servers
// ---------------------------------------------------------------------------------------------------------------

/**
 * The corpus schema with every field answering the recorded response: the parent's recorded value under the
 * field's response key; at the root, the data of the entry the request names. Enum values recorded as REDACTED
 * are answered as they are. (The corpus selects no abstract type, so no `resolveType` is needed; a query that did
 * would fail here, not pass unchecked.)
 */
function recordedSchema(sdl: string, entries: readonly Entry[]): GraphQLSchema {
  const schema = buildSchema(sdl)
  const resolve: GraphQLFieldResolver<unknown, { req: IncomingMessage }> = (source, _args, context, info) => {
    const parent =
      info.path.prev === undefined ? entries[Number(context.req.headers[ENTRY_HEADER])]?.data : source
    return (parent as Record<string, unknown> | undefined)?.[info.path.key as string]
  }
  for (const type of Object.values(schema.getTypeMap())) {
    if (type.name.startsWith('__')) continue
    if (isObjectType(type)) {
      for (const field of Object.values(type.getFields())) {
        field.resolve = resolve as GraphQLFieldResolver<unknown, unknown>
      }
    } else if (isEnumType(type)) {
      // The authors replaced every enum value of the recordings by REDACTED: that one is sent as it is.
      const serialize = type.serialize.bind(type)
      type.serialize = (value: unknown) => (value === REDACTED ? value : serialize(value))
    }
  }
  return schema
}

interface CorpusServer {
  readonly url: string
  close(): Promise<void>
}

type ServerName = 'Yoga' | 'Apollo Server'

async function startYoga(schema: GraphQLSchema, options: TollboothGraphQLOptions): Promise<CorpusServer> {
  // Node's request rides in Yoga's server context as `req`, as Apollo's context gets it below.
  const yoga = createYoga({ schema, plugins: [useTollbooth(options)], logging: false, graphiql: false })
  const server = createServer(yoga)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`,
    close: async () => {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    },
  }
}

async function startApollo(schema: GraphQLSchema, options: TollboothGraphQLOptions): Promise<CorpusServer> {
  const apollo = new ApolloServer<BaseContext>({ schema, plugins: [tollboothApolloPlugin(options)] })
  const { url } = await startStandaloneServer(apollo, {
    listen: { port: 0, host: '127.0.0.1' },
    context: async ({ req }) => ({ req }),
  })
  return { url, close: () => apollo.stop() }
}

interface Reply {
  readonly status: number
  readonly data: unknown
  readonly errors: unknown
  readonly cost: CostExtension | undefined
}

async function ask(server: CorpusServer, index: number, entry: Entry): Promise<Reply> {
  const response = await fetch(server.url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/graphql-response+json',
      [ENTRY_HEADER]: String(index),
    },
    body: JSON.stringify({ query: entry.query, variables: entry.variables }),
  })
  const body = (await response.json()) as {
    data?: unknown
    errors?: unknown
    extensions?: { cost?: CostExtension }
  }
  return { status: response.status, data: body.data, errors: body.errors, cost: body.extensions?.cost }
}

// ---------------------------------------------------------------------------------------------------------------
// The checks
// ---------------------------------------------------------------------------------------------------------------

describe('GitHub corpus (Cha et al.) served by Yoga and Apollo Server with tollbooth', () => {
  const sdl = readFileSync(`${corpusDir}/github.graphql`, 'utf8')
  const entries = loadEntries()
  const corpusSchema = buildSchema(sdl)
  const { costs } = translateListSizes(corpusSchema, readFileSync(`${corpusDir}/list-sizes.yaml`, 'utf8'))
  const names: readonly ServerName[] = ['Yoga', 'Apollo Server']
  /** Every entry's reply from each server, in corpus order. */
  const replies = new Map<ServerName, Reply[]>()

  beforeAll(async () => {
    const options = (): TollboothGraphQLOptions => ({
      limiter: tokenBucket({ name: 'github-corpus', capacity: 1_000_000_000, refillPerSecond: 1_000_000 }),
      identify: () => 'corpus',
      costs,
      maxCost: MAX_COST,
    })
    const servers: Record<ServerName, CorpusServer> = {
      Yoga: await startYoga(recordedSchema(sdl, entries), options()),
      'Apollo Server': await startApollo(recordedSchema(sdl, entries), options()),
    }
    try {
      for (const name of names) {
        const server = servers[name]
        const answered: Reply[] = []
        for (const [index, entry] of entries.entries()) answered.push(await ask(server, index, entry))
        replies.set(name, answered)
      }
    } finally {
      for (const server of Object.values(servers)) await server.close()
    }
  })

  afterAll(() => {
    const yoga = replies.get('Yoga') ?? []
    const ratios = yoga
      .map((reply) => (reply.cost?.requestedQueryCost ?? 0) / (reply.cost?.actualQueryCost ?? 1))
      .sort((a, b) => a - b)
    const at = (p: number) => ratios[Math.max(0, Math.ceil(p * ratios.length) - 1)]?.toFixed(3)
    console.log(
      `GitHub corpus through the servers: ${yoga.length} queries; requested/actual median ${at(0.5)}, ` +
        `p90 ${at(0.9)}, max ${at(1)}; largest requested ${Math.max(...yoga.map((r) => r.cost?.requestedQueryCost ?? 0))}`,
    )
  })

  /** For each server, the entries where `problem` says something is wrong, labelled. */
  const problems = (problem: (reply: Reply, entry: Entry) => string | undefined): string[] =>
    names.flatMap((name) =>
      (replies.get(name) ?? []).flatMap((reply, index) => {
        const entry = entries[index] as Entry
        const found = problem(reply, entry)
        return found === undefined ? [] : [`${name} ${entry.label}: ${found}`]
      }),
    )

  it('the corpus holds 151 queries, and each server answered every one with 200, no error, and a cost', () => {
    expect(entries).toHaveLength(151)
    for (const name of names) expect(replies.get(name)).toHaveLength(151)
    const failed = problems((reply) =>
      reply.status !== 200 || reply.errors !== undefined || reply.cost === undefined
        ? `HTTP ${reply.status}, errors ${JSON.stringify(reply.errors)?.slice(0, 300)}`
        : undefined,
    )
    expect(failed, failed.join('\n')).toEqual([])
  })

  it('every response holds the recorded data', () => {
    const differing = problems((reply, entry) =>
      JSON.stringify(reply.data) === JSON.stringify(entry.data)
        ? undefined
        : 'data differs from the recording',
    )
    expect(differing, differing.join('\n')).toEqual([])
    // and the comparison can tell: the recorded data is not empty
    for (const entry of entries) expect(Object.keys(entry.data).length).toBeGreaterThan(0)
  })

  it('actualQueryCost is the cost of the recorded response, counted without tollbooth', () => {
    const mismatches = problems((reply, entry) => {
      const counted = realCost(corpusSchema, entry.document, entry.data)
      return reply.cost?.actualQueryCost === counted
        ? undefined
        : `actualQueryCost ${reply.cost?.actualQueryCost}, counted ${counted}`
    })
    expect(mismatches, mismatches.join('\n')).toEqual([])
  })

  it('no requestedQueryCost is below the actualQueryCost: the charge before execution bounds the real cost', () => {
    const under = problems((reply) => {
      const { requestedQueryCost, actualQueryCost } = reply.cost ?? { requestedQueryCost: 0 }
      return actualQueryCost !== undefined && requestedQueryCost >= actualQueryCost
        ? undefined
        : `requested ${requestedQueryCost} < actual ${actualQueryCost}`
    })
    expect(under, under.join('\n')).toEqual([])
  })

  it('Yoga and Apollo Server report the same requested and actual cost for every query', () => {
    const yoga = replies.get('Yoga') ?? []
    const apollo = replies.get('Apollo Server') ?? []
    const differing = entries.flatMap((entry, index) => {
      const [y, a] = [yoga[index]?.cost, apollo[index]?.cost]
      return y?.requestedQueryCost === a?.requestedQueryCost && y?.actualQueryCost === a?.actualQueryCost
        ? []
        : [
            `${entry.label}: Yoga ${y?.requestedQueryCost}/${y?.actualQueryCost}, ` +
              `Apollo ${a?.requestedQueryCost}/${a?.actualQueryCost}`,
          ]
    })
    expect(differing, differing.join('\n')).toEqual([])
    expect(yoga).toHaveLength(151)
  })
})
