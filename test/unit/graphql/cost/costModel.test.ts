/**
 * A schema that uses `@cost` / `@listSize` without defining them. graphql refuses to build one from validated SDL
 * (`Unknown directive "@cost".`, before tollbooth sees it); built with `assumeValidSDL`, it would keep the directives
 * in its AST and tollbooth would silently price every field at the defaults: the cost model refuses it instead, and
 * says what to add. Checked through `CostAnalyzer` and through a real Yoga server's startup.
 */
import { buildSchema, GraphQLInt, GraphQLObjectType, GraphQLSchema, parse } from 'graphql'
import { createSchema, createYoga } from 'graphql-yoga'
import { describe, expect, it } from 'vitest'
import { ErrorCodes } from '../../../../src/core/errors.js'
import { CostAnalyzer, costDirectivesTypeDefs, useTollbooth } from '../../../../src/graphql/index.js'
import { tokenBucket } from '../../../../src/index.js'

const SDL = /* GraphQL */ `
  type Query {
    a: Int @cost(weight: 2)
    users(first: Int): [User!]! @listSize(slicingArguments: ["first"])
  }
  type User {
    name: String
  }
`

const hint =
  "but does not define it: add costDirectivesTypeDefs from 'tollbooth/graphql' to its type definitions, e.g. " +
  'createSchema({ typeDefs: [costDirectivesTypeDefs, typeDefs] })'

function refusal(build: () => unknown): { code?: string; message: string } | undefined {
  try {
    build()
  } catch (error) {
    const { code, message } = error as { code?: string; message: string }
    return { code, message }
  }
  return undefined
}

describe('a schema using the cost directives without defining them', () => {
  it('graphql refuses validated SDL before tollbooth sees it', () => {
    expect(refusal(() => createSchema({ typeDefs: SDL }))).toEqual({
      code: undefined,
      message: 'Unknown directive "@cost".\n\nUnknown directive "@listSize".',
    })
  })

  it('CostAnalyzer refuses an unvalidated one, naming the first use and costDirectivesTypeDefs', () => {
    const schema = buildSchema(SDL, { assumeValidSDL: true })
    expect(refusal(() => new CostAnalyzer().model(schema))).toEqual({
      code: ErrorCodes.INVALID_OPTION,
      message: `useTollbooth: the schema uses @cost (on Query.a) ${hint}`,
    })
  })

  it('names @listSize, and an argument, where that is the first use', () => {
    const listSizeOnly = buildSchema('type Query { users(first: Int): [Int!]! @listSize(assumedSize: 5) }', {
      assumeValidSDL: true,
    })
    expect(refusal(() => new CostAnalyzer().model(listSizeOnly))?.message).toBe(
      `useTollbooth: the schema uses @listSize (on Query.users) ${hint}`,
    )
    const onArgument = buildSchema('type Query { search(text: String @cost(weight: 5)): Int }', {
      assumeValidSDL: true,
    })
    expect(refusal(() => new CostAnalyzer().model(onArgument))?.message).toBe(
      `useTollbooth: the schema uses @cost (on Query.search(text:)) ${hint}`,
    )
  })

  it('@rateLimit without its definition (a login limit that would be gone), and a misspelt @Cost', () => {
    const login = buildSchema(
      'type Query { a: Int } type Mutation { login(email: String!): String @rateLimit(limit: 2, window: "1m") }',
      { assumeValidSDL: true },
    )
    expect(refusal(() => new CostAnalyzer().model(login))?.message).toBe(
      `useTollbooth: the schema uses @rateLimit (on Mutation.login) ${hint}`,
    )
    const misspelt = buildSchema(`${costDirectivesTypeDefs}\ntype Query { a: Int @Cost(weight: 2) }`, {
      assumeValidSDL: true,
    })
    expect(refusal(() => new CostAnalyzer().model(misspelt))).toEqual({
      code: ErrorCodes.INVALID_OPTION,
      message: 'useTollbooth: the schema uses @Cost (on Query.a) but does not define it: did you mean @cost?',
    })
  })

  it('createYoga with useTollbooth throws it at startup', () => {
    const limiter = tokenBucket({ name: 'cost-directives-check', capacity: 100, refillPerSecond: 1 })
    const schema = buildSchema(SDL, { assumeValidSDL: true })
    expect(
      refusal(() => createYoga({ schema, logging: false, plugins: [useTollbooth({ limiter })] })),
    ).toEqual({
      code: ErrorCodes.INVALID_OPTION,
      message: `useTollbooth: the schema uses @cost (on Query.a) ${hint}`,
    })
  })

  it('with costDirectivesTypeDefs added, the directives price the operation', async () => {
    const schema = createSchema({ typeDefs: [costDirectivesTypeDefs, SDL] })
    const analyzer = new CostAnalyzer()
    // @cost(weight: 2) on a scalar, and 7 users at 1 each (a scalar below them weighs 0).
    expect(analyzer.estimate({ schema, document: parse('{ a users(first: 7) { name } }') })).toBe(9)
    const limiter = tokenBucket({ name: 'cost-directives-defined', capacity: 100, refillPerSecond: 1 })
    const yoga = createYoga({
      schema: createSchema({
        typeDefs: [costDirectivesTypeDefs, SDL],
        resolvers: { Query: { a: () => 1, users: () => [] } },
      }),
      logging: false,
      plugins: [useTollbooth({ limiter })],
    })
    const response = await yoga.fetch('http://yoga/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ a users(first: 7) { name } }' }),
    })
    const body = (await response.json()) as {
      data: unknown
      extensions: { cost: { requestedQueryCost: number } }
    }
    expect(body.data).toEqual({ a: 1, users: [] })
    expect(body.extensions.cost.requestedQueryCost).toBe(9)
  })
})

describe('extensions.cost, checked as options are', () => {
  const withCost = (cost: unknown) =>
    new GraphQLSchema({
      query: new GraphQLObjectType({
        name: 'Query',
        fields: { a: { type: GraphQLInt, extensions: { cost } } },
      }),
    })
  const price = (cost: unknown) =>
    new CostAnalyzer().estimate({ schema: withCost(cost), document: parse('{ a }') })

  it('reads a number and { weight }', () => {
    expect(price(4)).toBe(4)
    expect(price({ weight: 6 })).toBe(6)
  })

  it('refuses a misspelt or unknown key, and a weight that is not a number, naming the coordinate', () => {
    expect(refusal(() => price({ wieght: 2 }))).toEqual({
      code: ErrorCodes.INVALID_OPTION,
      message: 'useTollbooth: unknown key "wieght" in extensions.cost on Query.a (did you mean "weight"?)',
    })
    expect(refusal(() => price({ weight: 2, multipliers: ['first'] }))?.message).toBe(
      'useTollbooth: unknown key "multipliers" in extensions.cost on Query.a (its one key is weight)',
    )
    expect(refusal(() => price('2'))?.message).toBe(
      'useTollbooth: "extensions.cost on Query.a" must be a non-negative finite number, got "2"',
    )
    expect(refusal(() => price({ weight: -1 }))?.message).toBe(
      'useTollbooth: "extensions.cost on Query.a: weight" must be a non-negative finite number, got -1',
    )
  })
})
