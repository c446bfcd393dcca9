/**
 * A code-first schema annotated the way graphql-query-complexity reads it (`extensions.complexity`, a number or a
 * function of the arguments and the children's complexity), priced with its estimators: tollbooth's price is the
 * number graphql-query-complexity's own `getComplexity` gives, over a corpus of operations, and both servers charge
 * exactly that (a budget of the price admits the operation, one point less refuses it). Nothing is refunded: a list
 * that returns fewer items than an estimator assumed pays its price.
 */
import { randomUUID } from 'node:crypto'
import {
  type DocumentNode,
  GraphQLID,
  GraphQLInputObjectType,
  GraphQLInt,
  GraphQLInterfaceType,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLScalarType,
  GraphQLSchema,
  GraphQLString,
  GraphQLUnionType,
  parse,
} from 'graphql'
import {
  type ComplexityEstimator,
  fieldExtensionsEstimator,
  getComplexity,
  simpleEstimator,
} from 'graphql-query-complexity'
import { createYoga } from 'graphql-yoga'
import { afterEach, describe, expect, it } from 'vitest'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import { MemoryStore } from '../../../src/core/stores/memoryStore.js'
import { CostAnalyzer, costDirectiveEstimator, useTollbooth } from '../../../src/graphql/index.js'
import { closeServers, graphqlServerDrivers } from '../../helpers/graphqlServers.js'

interface Calls {
  comments: number
}

/** Every resolver of the schema answers at once; `comments` returns 2 comments whatever `first` asks. */
function codeFirstSchema(calls: Calls, extraExtensions: Record<string, Record<string, unknown>> = {}) {
  const node: GraphQLInterfaceType = new GraphQLInterfaceType({
    name: 'Node',
    fields: { id: { type: new GraphQLNonNull(GraphQLID) } },
  })
  const user = new GraphQLObjectType({
    name: 'User',
    interfaces: [node],
    fields: {
      id: { type: new GraphQLNonNull(GraphQLID) },
      name: { type: GraphQLString, extensions: { complexity: 2, ...extraExtensions['User.name'] } },
    },
  })
  const comment = new GraphQLObjectType({
    name: 'Comment',
    interfaces: [node],
    fields: {
      id: { type: new GraphQLNonNull(GraphQLID) },
      text: { type: GraphQLString },
      author: { type: user, extensions: { complexity: 3 }, resolve: () => ({ id: 'u1', name: 'Ann' }) },
    },
  })
  const post: GraphQLObjectType = new GraphQLObjectType({
    name: 'Post',
    interfaces: [node],
    fields: () => ({
      id: { type: new GraphQLNonNull(GraphQLID) },
      title: { type: GraphQLString },
      comments: {
        type: new GraphQLList(comment),
        args: { first: { type: GraphQLInt, defaultValue: 5 } },
        extensions: {
          complexity: ({ args, childComplexity }: { args: { first: number }; childComplexity: number }) =>
            1 + args.first * childComplexity,
          ...extraExtensions['Post.comments'],
        },
        resolve: () => {
          calls.comments++
          return [
            { id: 'c1', text: 'a' },
            { id: 'c2', text: 'b' },
          ]
        },
      },
      related: { type: new GraphQLList(post), resolve: () => [] },
    }),
  })
  const searchResult = new GraphQLUnionType({ name: 'SearchResult', types: [user, post] })
  const query = new GraphQLObjectType({
    name: 'Query',
    fields: {
      posts: {
        type: new GraphQLList(post),
        args: { count: { type: new GraphQLNonNull(GraphQLInt) } },
        extensions: {
          complexity: ({ args, childComplexity }: { args: { count: number }; childComplexity: number }) =>
            args.count * childComplexity,
          ...extraExtensions['Query.posts'],
        },
        resolve: (_: unknown, { count }: { count: number }) =>
          Array.from({ length: Math.min(count, 3) }, (_, index) => ({ id: `p${index}`, title: `t${index}` })),
      },
      post: {
        type: post,
        args: { id: { type: new GraphQLNonNull(GraphQLID) } },
        resolve: (_: unknown, { id }: { id: string }) => ({ id, title: 'one' }),
      },
      node: {
        type: node,
        args: { id: { type: new GraphQLNonNull(GraphQLID) } },
        resolve: (_: unknown, { id }: { id: string }) => ({ id, title: 'one', __typename: 'Post' }),
      },
      search: {
        type: new GraphQLList(searchResult),
        args: { term: { type: GraphQLString }, limit: { type: GraphQLInt, defaultValue: 10 } },
        extensions: {
          complexity: ({ args, childComplexity }: { args: { limit: number }; childComplexity: number }) =>
            10 + args.limit * childComplexity,
          ...extraExtensions['Query.search'],
        },
        resolve: () => [{ id: 'u1', name: 'Ann', __typename: 'User' }],
      },
    },
  })
  const mutation = new GraphQLObjectType({
    name: 'Mutation',
    fields: {
      createPost: {
        type: post,
        args: { title: { type: new GraphQLNonNull(GraphQLString) } },
        extensions: { complexity: 20 },
        resolve: (_: unknown, { title }: { title: string }) => ({ id: 'new', title }),
      },
    },
  })
  return new GraphQLSchema({
    query,
    mutation,
    types: [user, post, comment],
    // Yoga and Apollo resolve abstract types from `__typename`.
  })
}

interface CorpusEntry {
  readonly name: string
  readonly query: string
  readonly variables?: Record<string, unknown>
  readonly operationName?: string
}

/** Operations over every way graphql-query-complexity's walk can count differently from a naive sum. */
const CORPUS: readonly CorpusEntry[] = [
  { name: 'a scalar only', query: '{ post(id: "1") { title } }' },
  { name: 'a list by its count', query: '{ posts(count: 3) { id title } }' },
  { name: 'nested lists', query: '{ posts(count: 4) { comments(first: 3) { text author { name } } } }' },
  { name: 'a default argument', query: '{ posts(count: 2) { comments { id } } }' },
  {
    name: 'variables',
    query: 'query($n: Int!, $f: Int) { posts(count: $n) { comments(first: $f) { text } } }',
    variables: { n: 7, f: 2 },
  },
  { name: 'aliases, each priced', query: '{ a: posts(count: 2) { id } b: posts(count: 5) { id } }' },
  { name: 'the same field twice', query: '{ posts(count: 2) { id } posts(count: 2) { title } }' },
  {
    name: 'a fragment',
    query: '{ posts(count: 3) { ...P } } fragment P on Post { title comments(first: 2) { text } }',
  },
  {
    name: 'a fragment spread twice',
    query: '{ a: post(id: "1") { ...P } b: post(id: "2") { ...P } } fragment P on Post { comments { id } }',
  },
  {
    name: 'an inline fragment',
    query: '{ node(id: "1") { id ... on Post { comments(first: 4) { text } } } }',
  },
  {
    name: 'a union, the dearest member',
    query:
      '{ search(term: "x", limit: 3) { ... on User { name } ... on Post { comments(first: 2) { id } } } }',
  },
  { name: 'an interface and __typename', query: '{ node(id: "1") { __typename id ... on User { name } } }' },
  {
    name: '@skip and @include',
    query: 'query($s: Boolean!) { posts(count: 2) { title @skip(if: $s) comments @include(if: $s) { id } } }',
    variables: { s: true },
  },
  {
    name: '@skip and @include, the other way',
    query: 'query($s: Boolean!) { posts(count: 2) { title @skip(if: $s) comments @include(if: $s) { id } } }',
    variables: { s: false },
  },
  { name: 'a mutation', query: 'mutation { createPost(title: "t") { id comments(first: 1) { text } } }' },
  {
    name: 'one of several operations',
    query: 'query A { post(id: "1") { id } } query B { posts(count: 9) { related { id } } }',
    operationName: 'B',
  },
  { name: 'deep recursion', query: '{ posts(count: 2) { related { related { related { title } } } } }' },
]

const estimators = (): ComplexityEstimator[] => [
  fieldExtensionsEstimator(),
  simpleEstimator({ defaultComplexity: 1 }),
]

function complexityOf(schema: GraphQLSchema, entry: CorpusEntry, chain = estimators()): number {
  return getComplexity({
    estimators: chain,
    schema,
    query: parse(entry.query),
    ...(entry.variables === undefined ? {} : { variables: entry.variables }),
    ...(entry.operationName === undefined ? {} : { operationName: entry.operationName }),
  })
}

describe('graphql-query-complexity estimators as the cost source', () => {
  const schema = codeFirstSchema({ comments: 0 })

  it.each(CORPUS)('prices "$name" as getComplexity does', (entry) => {
    const analyzer = new CostAnalyzer({ estimators: estimators() })
    const document: DocumentNode = parse(entry.query)
    const expected = complexityOf(schema, entry)
    const input = { schema, document, variables: entry.variables, operationName: entry.operationName }
    expect(analyzer.estimate(input)).toBe(expected)
    // From the cache, the same.
    expect(analyzer.estimate(input)).toBe(expected)
  })

  it('gives the corpus prices a hand count gives, so that a change in either side shows', () => {
    const analyzer = new CostAnalyzer({ estimators: estimators() })
    const price = (query: string, variables?: Record<string, unknown>) =>
      analyzer.estimate({ schema, document: parse(query), variables })
    // posts: count × (id 1 + title 1) = 3 × 2.
    expect(price('{ posts(count: 3) { id title } }')).toBe(6)
    // posts 4 × comments(1 + 3 × (text 1 + author (3 + name 2))) = 4 × 19.
    expect(price('{ posts(count: 4) { comments(first: 3) { text author { name } } } }')).toBe(76)
    // The same field twice is counted twice (graphql-query-complexity does not merge): 2 × 1 + 2 × 1.
    expect(price('{ posts(count: 2) { id } posts(count: 2) { title } }')).toBe(4)
  })

  it('prices the fields the cost directives annotate by them, the others by the estimators', () => {
    // extensions.cost on Post.comments (a weight and a list size) wins over its extensions.complexity.
    const mixed = codeFirstSchema(
      { comments: 0 },
      { 'Post.comments': { cost: { weight: 4 }, listSize: { slicingArguments: ['first'] } } },
    )
    const analyzer = new CostAnalyzer({ estimators: estimators(), mutationCost: 10 })
    for (const entry of CORPUS) {
      const chain = [costDirectiveEstimator({ schema: mixed, mutationCost: 10 }), ...estimators()]
      const input = { schema: mixed, document: parse(entry.query), ...entry }
      expect(analyzer.estimate(input), entry.name).toBe(complexityOf(mixed, entry, chain))
    }
    // posts 2 × comments((4 + id 1) × first 3) by the directives = 2 × 15.
    expect(
      analyzer.estimate({
        schema: mixed,
        document: parse('{ posts(count: 2) { comments(first: 3) { id } } }'),
      }),
    ).toBe(30)
    // The same without the directives: 2 × (1 + 3 × 1).
    expect(
      analyzer.estimate({ schema, document: parse('{ posts(count: 2) { comments(first: 3) { id } } }') }),
    ).toBe(8)
  })

  it('refuses at startup what the chain cannot price as the directives do, and estimators that are not functions', () => {
    const sized = codeFirstSchema(
      { comments: 0 },
      { 'Query.posts': { listSize: { slicingArguments: ['count'], sizedFields: ['comments'] } } },
    )
    expect(() => new CostAnalyzer({ estimators: estimators() }).model(sized)).toThrow(
      expect.objectContaining({
        code: 'TOLLBOOTH_ERR_INVALID_OPTION',
        message: expect.stringContaining('sizedFields:), found on Query.posts'),
      }),
    )
    // A sparse list: index 1 is a hole, which Array.prototype.every would skip.
    const sparse: ComplexityEstimator[] = [fieldExtensionsEstimator()]
    sparse[2] = simpleEstimator({ defaultComplexity: 1 })
    for (const wrong of [[], [42], simpleEstimator({ defaultComplexity: 1 }), sparse]) {
      expect(() => new CostAnalyzer({ estimators: wrong as never })).toThrow(
        expect.objectContaining({
          code: 'TOLLBOOTH_ERR_INVALID_OPTION',
          message: expect.stringContaining('"estimators"'),
        }),
      )
    }
  })

  it('keeps one price per value of the variables the operation declares, whatever else the request sends', () => {
    let postPriced = 0
    const counting: ComplexityEstimator = ({ field }) => {
      if (field.name === 'post') postPriced++
    }
    const analyzer = new CostAnalyzer({ estimators: [counting, ...estimators()] })
    const document = parse('query($id: ID!) { post(id: $id) { title } }')
    for (let i = 0; i < 20; i++) {
      expect(analyzer.estimate({ schema, document, variables: { id: '1', [`unused${i}`]: i } })).toBe(2)
    }
    expect(postPriced).toBe(1)
    for (let i = 0; i < 5; i++) analyzer.estimate({ schema, document, variables: { id: String(i + 2) } })
    expect(postPriced).toBe(6)
  })

  it('warns once per schema when a schema annotated with complexity is priced without estimators', async () => {
    const warnings: Error[] = []
    const onWarning = (warning: Error) => warnings.push(warning)
    process.on('warning', onWarning)
    try {
      const analyzer = new CostAnalyzer()
      const annotated = codeFirstSchema({ comments: 0 })
      for (let i = 0; i < 3; i++)
        analyzer.estimate({ schema: annotated, document: parse('{ post(id: "1") { id } }') })
      // Warnings are emitted on the next tick.
      await new Promise((resolve) => setImmediate(resolve))
      const ours = warnings.filter((w) => (w as { code?: string }).code === 'TOLLBOOTH_COMPLEXITY_NOT_READ')
      expect(ours).toHaveLength(1)
      expect(ours[0]?.message).toContain(
        'User.name, Post.comments, Comment.author and 3 more carry extensions.complexity',
      )
      // With estimators, nothing to say.
      new CostAnalyzer({ estimators: estimators() }).estimate({
        schema: codeFirstSchema({ comments: 0 }),
        document: parse('{ post(id: "1") { id } }'),
      })
      await new Promise((resolve) => setImmediate(resolve))
      expect(
        warnings.filter((w) => (w as { code?: string }).code === 'TOLLBOOTH_COMPLEXITY_NOT_READ'),
      ).toHaveLength(1)
    } finally {
      process.off('warning', onWarning)
    }
  })

  it('refuses an operation with a field no estimator prices, as getComplexity does', () => {
    const analyzer = new CostAnalyzer({ estimators: [fieldExtensionsEstimator()] })
    expect(() => analyzer.estimate({ schema, document: parse('{ post(id: "1") { title } }') })).toThrow(
      'No complexity could be calculated for field Query.post',
    )
  })
})

/** Priced 2: post 1 + id 1 (simpleEstimator). */
const CHEAPEST = { query: '{ post(id: "1") { id } }' }

describe.each(graphqlServerDrivers)('$name with estimators', (driver) => {
  afterEach(closeServers)

  it('charges every corpus operation exactly its getComplexity price, refunds nothing, and refuses it one point short', async () => {
    const calls: Calls = { comments: 0 }
    const schema = codeFirstSchema(calls)
    const store = new MemoryStore()
    // A bucket per identity holding exactly what the identity's operation costs: capacity from the header.
    const limiters = new Map<number, ReturnType<typeof tokenBucket>>()
    const limiterOf = (capacity: number) => {
      let limiter = limiters.get(capacity)
      if (limiter === undefined) {
        limiter = tokenBucket({ name: `b${capacity}`, store, capacity, refillPerSecond: 0.001 })
        limiters.set(capacity, limiter)
      }
      return limiter
    }
    const server = await driver.start(
      {
        limiter: (context) => limiterOf(Number(driver.requestHeader(context, 'x-capacity'))),
        identify: (context) => driver.requestHeader(context, 'x-user') ?? 'anonymous',
        estimators: estimators(),
        maxCost: 100_000,
      },
      { served: { schema, calls } },
    )
    for (const entry of CORPUS) {
      const price = complexityOf(schema, entry)
      const body = { query: entry.query, variables: entry.variables, operationName: entry.operationName }
      // Admitted on a budget of exactly its price, and charged all of it: the next one-point operation is refused.
      const user = randomUUID()
      const headers = { 'x-user': user, 'x-capacity': String(price) }
      const admitted = await server.post(body, headers)
      expect(admitted.body.errors, entry.name).toBeUndefined()
      expect(admitted.body.extensions?.cost, entry.name).toMatchObject({
        requestedQueryCost: price,
        actualQueryCost: price,
        throttleStatus: { currentlyAvailable: 0 },
      })
      expect((await server.post(CHEAPEST, headers)).status, entry.name).toBe(429)
      // One point short of its price (a budget of price + 1 that paid the 2 points of CHEAPEST): refused.
      const shortHeaders = { 'x-user': randomUUID(), 'x-capacity': String(price + 1) }
      expect((await server.post(CHEAPEST, shortHeaders)).body.extensions?.cost?.actualQueryCost).toBe(2)
      expect((await server.post(body, shortHeaders)).status, entry.name).toBe(429)
    }
  })

  it('refuses an operation an estimator prices below 0, which would lower the price of the fields beside it', async () => {
    const calls: Calls = { comments: 0 }
    const schema = codeFirstSchema(calls)
    const limiter = tokenBucket({
      name: 'neg',
      store: new MemoryStore(),
      capacity: 100,
      refillPerSecond: 0.001,
    })
    const server = await driver.start({ limiter, estimators: estimators() }, { served: { schema, calls } })
    // getComplexity: 1000 × 2 + (−1000) × 2 = 0, so 2,000 points of posts for the minimum cost of 1.
    const query = '{ big: posts(count: 1000) { id title } cancel: posts(count: -1000) { id title } }'
    expect(complexityOf(schema, { name: 'negative', query })).toBe(0)
    const refused = await server.post({ query })
    expect(refused.status).toBe(400)
    expect(refused.body.data ?? null).toBeNull()
    expect(refused.body.errors?.[0]?.extensions?.code).toBe('COST_LIMIT_EXCEEDED')
    expect(refused.body.errors?.[0]?.message).toContain('an estimator priced Query.posts at -2000, below 0')
    // The refusal spent minCost (1), as every refused operation does: the next 2-point operation leaves 97 of 100.
    const next = await server.post(CHEAPEST)
    expect(next.body.extensions?.cost?.throttleStatus?.currentlyAvailable).toBe(97)
  })

  it('refuses with 400 an operation an estimator fails on, without showing what it threw', async () => {
    const calls: Calls = { comments: 0 }
    const schema = codeFirstSchema(calls)
    const failing: ComplexityEstimator = ({ field }) => {
      if (field.name === 'comments') throw new Error('secret: db password')
    }
    const limiter = tokenBucket({
      name: 'fail',
      store: new MemoryStore(),
      capacity: 100,
      refillPerSecond: 0.001,
    })
    const server = await driver.start(
      { limiter, estimators: [failing, ...estimators()] },
      { served: { schema, calls } },
    )
    const refused = await server.post({ query: '{ posts(count: 2) { comments { id } } }' })
    expect(refused.status).toBe(400)
    expect(refused.body.errors?.[0]?.extensions?.code).toBe('COST_LIMIT_EXCEEDED')
    expect(refused.body.errors?.[0]?.message).toContain('an estimator failed on Post.comments')
    expect(JSON.stringify(refused.body)).not.toContain('secret')
    expect(calls.comments).toBe(0)
    // The refusal spent minCost (1), then 2.
    expect((await server.post(CHEAPEST)).body.extensions?.cost?.throttleStatus?.currentlyAvailable).toBe(97)
  })

  it('keeps the whole price of a list that returned fewer items than its estimator assumed', async () => {
    const calls: Calls = { comments: 0 }
    const schema = codeFirstSchema(calls)
    const limiter = tokenBucket({
      name: 'lists',
      store: new MemoryStore(),
      capacity: 1_000,
      refillPerSecond: 0.001,
    })
    const server = await driver.start({ limiter, estimators: estimators() }, { served: { schema, calls } })
    // posts(count: 10) returns 3 posts, each 2 comments of the 8 priced: 10 × (1 + 8 × 1) = 90, all of it kept.
    const reply = await server.post({ query: '{ posts(count: 10) { comments(first: 8) { id } } }' })
    expect(reply.body.data.posts).toHaveLength(3)
    expect(calls.comments).toBe(3)
    expect(reply.body.extensions?.cost).toMatchObject({ requestedQueryCost: 90, actualQueryCost: 90 })
    expect(reply.body.extensions?.cost?.throttleStatus?.currentlyAvailable).toBe(910)
  })
})

describe("useTollbooth with estimators, over Yoga's fetch", () => {
  const tick = new GraphQLObjectType({ name: 'Tick', fields: { n: { type: GraphQLInt } } })
  const schema = new GraphQLSchema({
    query: new GraphQLObjectType({
      name: 'Query',
      fields: {
        ok: { type: GraphQLInt, extensions: { complexity: 1 }, resolve: () => 1 },
        unpriced: { type: GraphQLInt, resolve: () => 2 },
      },
    }),
    subscription: new GraphQLObjectType({
      name: 'Subscription',
      fields: {
        ticks: {
          type: tick,
          args: { count: { type: new GraphQLNonNull(GraphQLInt) } },
          // 5 + the tick's n (1): 6 per event.
          extensions: {
            complexity: ({ childComplexity }: { childComplexity: number }) => 5 + childComplexity,
          },
          subscribe: async function* (_: unknown, { count }: { count: number }) {
            for (let n = 1; n <= count; n++) yield { ticks: { n } }
          },
        },
      },
    }),
  })

  /** The `next` results of a GraphQL-over-SSE response, read to its end. */
  async function sse(yoga: ReturnType<typeof createYoga>, query: string) {
    const response = await yoga.fetch('http://yoga/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ query }),
    })
    const results: { data?: unknown; errors?: { extensions?: { code?: string } }[] }[] = []
    for (const block of (await response.text()).split('\n\n')) {
      const lines = block.split('\n')
      if (!lines.includes('event: next')) continue
      const data = lines.filter((line) => line.startsWith('data:')).map((line) => line.slice(5))
      results.push(JSON.parse(data.join('\n')))
    }
    return results
  }

  it("pays each subscription event the operation's price from the event budget", async () => {
    const store = new MemoryStore()
    const limiter = tokenBucket({ name: 'ops', store, capacity: 100, refillPerSecond: 0.001 })
    const events = tokenBucket({ name: 'events', store, capacity: 20, refillPerSecond: 0.001 })
    const yoga = createYoga({
      schema,
      plugins: [
        useTollbooth({
          limiter,
          estimators: estimators(),
          subscriptions: { limiter: events },
          identify: () => 'one',
        }),
      ],
    })
    const results = await sse(yoga, 'subscription { ticks(count: 10) { n } }')
    // 20 points pay 3 events of 6; the 4th is refused and ends the subscription.
    expect(results.slice(0, 3).map((result) => result.data)).toEqual([1, 2, 3].map((n) => ({ ticks: { n } })))
    expect(results).toHaveLength(4)
    expect(results[3]?.errors?.[0]?.extensions?.code).toBe('RATE_LIMITED')
    // The subscription itself paid its price (6) from the operations' budget.
    expect((await limiter.peek('one')).remaining).toBe(94)
  })

  it('refuses an operation that selects a field no estimator prices, with 400 and nothing run', async () => {
    let ran = 0
    const limiter = tokenBucket({ name: 'ops', capacity: 100, refillPerSecond: 0.001 })
    const yoga = createYoga({
      schema,
      plugins: [
        useTollbooth({ limiter, estimators: [fieldExtensionsEstimator()] }),
        { onExecute: () => void ran++ },
      ],
    })
    const refused = await yoga.fetch('http://yoga/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ ok unpriced }' }),
    })
    expect(refused.status).toBe(400)
    const body = (await refused.json()) as { errors: { message: string; extensions: { code: string } }[] }
    expect(body.errors[0]?.extensions.code).toBe('COST_LIMIT_EXCEEDED')
    expect(body.errors[0]?.message).toContain('No complexity could be calculated for field Query.unpriced')
    expect(ran).toBe(0)
  })
})

describe('the price cache with estimators, against values JSON.stringify writes alike', () => {
  it('prices a JSON-scalar variable of 1e400 (Infinity) by itself, not as the null that came first', async () => {
    let served = 0
    // A pass-through scalar, as graphql-scalars' JSON: the variable reaches the estimator and the resolver as sent.
    const json = new GraphQLScalarType({ name: 'JSON' })
    const limitOf = (filter: { limit?: number | null } | null | undefined) =>
      Math.min(filter?.limit ?? 20, 500)
    const schema = new GraphQLSchema({
      query: new GraphQLObjectType({
        name: 'Query',
        fields: {
          items: {
            type: new GraphQLList(GraphQLInt),
            args: { filter: { type: json } },
            extensions: {
              complexity: ({ args }: { args: { filter?: { limit?: number | null } } }) =>
                limitOf(args.filter),
            },
            resolve: (_: unknown, { filter }: { filter?: { limit?: number | null } }) => {
              const items = Array.from({ length: limitOf(filter) }, (_, i) => i)
              served += items.length
              return items
            },
          },
        },
      }),
    })
    const limiter = tokenBucket({ name: 'poison', capacity: 1000, refillPerSecond: 0.001 })
    const yoga = createYoga({ schema, plugins: [useTollbooth({ limiter, estimators: estimators() })] })
    const query = 'query($f: JSON) { items(filter: $f) }'
    // Raw request text: JSON.parse reads 1e400 as Infinity.
    const post = async (variables: string) => {
      const response = await yoga.fetch('http://yoga/graphql', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: `{"query":${JSON.stringify(query)},"variables":${variables}}`,
      })
      const body = (await response.json()) as {
        extensions?: {
          cost?: { requestedQueryCost?: number; throttleStatus?: { currentlyAvailable?: number } }
        }
      }
      return body.extensions?.cost
    }
    expect((await post('{"f":{"limit":null}}'))?.requestedQueryCost).toBe(20)
    const infinite = await post('{"f":{"limit":1e400}}')
    expect(infinite?.requestedQueryCost).toBe(500)
    expect(served).toBe(520)
    // The budget paid both (it refills 0.001 a second: not a whole point within the test).
    expect(infinite?.throttleStatus?.currentlyAvailable).toBe(480)
  })
})

describe('the price cache, against a variable named __proto__', () => {
  const filter = new GraphQLInputObjectType({ name: 'Filter', fields: { limit: { type: GraphQLInt } } })
  const limitOf = (value: { limit?: number | null } | undefined) => Math.min(value?.limit ?? 1000, 1000)
  const schema = new GraphQLSchema({
    query: new GraphQLObjectType({
      name: 'Query',
      fields: {
        items: {
          type: new GraphQLList(GraphQLInt),
          args: { filter: { type: filter } },
          extensions: {
            complexity: ({ args }: { args: { filter?: { limit?: number | null } } }) => limitOf(args.filter),
          },
        },
      },
    }),
  })
  const document = parse('query Q($__proto__: Filter = { limit: 1 }) { items(filter: $__proto__) }')
  // What JSON.parse makes of a request body: "__proto__" an own key.
  const sent = JSON.parse('{"__proto__":{}}') as Record<string, unknown>

  it('with estimators: an absent $__proto__ (its default, 1) and a sent {} (1,000) are priced apart', () => {
    const analyzer = new CostAnalyzer({ estimators: estimators() })
    expect(analyzer.estimate({ schema, document, variables: {} })).toBe(1)
    expect(analyzer.estimate({ schema, document, variables: sent })).toBe(1000)
  })

  it('with the cost directives: the list sized by filter.limit, absent and sent priced apart', () => {
    const analyzer = new CostAnalyzer({
      costs: {
        'Query.items': { weight: 1, listSize: { slicingArguments: ['filter.limit'], assumedSize: 1000 } },
      },
    })
    expect(analyzer.estimate({ schema, document, variables: {} })).toBe(1)
    expect(analyzer.estimate({ schema, document, variables: sent })).toBe(1000)
  })
})

describe('introspection with estimators', () => {
  it('is priced by what it returns on the schema, as without estimators, not by its selections', () => {
    const schema = codeFirstSchema({ comments: 0 })
    const query = '{ __schema { types { name fields { name } } } }'
    const withEstimators = new CostAnalyzer({ estimators: estimators() }).estimate({
      schema,
      document: parse(query),
    })
    const withModel = new CostAnalyzer().estimate({ schema, document: parse(query) })
    expect(withEstimators).toBe(withModel)
    // graphql-query-complexity alone counts the selections: 1 + types (1 + name 1 + fields (1 + name 1)) = 5.
    expect(complexityOf(schema, { name: 'introspection', query })).toBe(5)
    expect(withEstimators).toBeGreaterThan(50)
  })
})
