import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { buildSchema, type GraphQLSchema, parse } from 'graphql'
import { describe, expect, it } from 'vitest'
import { type CostAnalysisOptions, CostAnalyzer } from '../../../../src/graphql/cost/costAnalyzer.js'
import { costDirectivesTypeDefs } from '../../../../src/graphql/index.js'
import {
  type CostVectorTable,
  priceVector as price,
  SDL_VECTORS,
} from '../../../helpers/collectCostVectors.js'
import { costElements, directiveUses, extensionTwin, extensionUses } from '../../../helpers/extensionTwin.js'

/**
 * A schema priced from `extensions.cost` / `extensions.listSize` (a code-first schema) costs what the same schema
 * priced from `@cost` / `@listSize` in SDL costs. Every operation the SDL tests price (test/unit/graphql/cost,
 * test/unit/cli/cost.test.ts, the GraphQL integration tests) is in test/fixtures/cost/sdl-vectors.json, recorded by
 * test/helpers/recordCostVectors.config.ts with its schema, options, variables, response (for a refund) and price.
 * Each schema is built from its SDL, then turned into its twin by extensionTwin(): each directive moved onto the
 * element's extensions through graphql-js configs, the AST and the two directive definitions gone. The twin must
 * give the price the SDL schema gives, or the same refusal.
 */

const table = JSON.parse(readFileSync(SDL_VECTORS, 'utf8')) as CostVectorTable
const sdlSchemas = table.schemas.map((sdl) => buildSchema(sdl))
const twins = sdlSchemas.map(extensionTwin)

type Vector = CostVectorTable['vectors'][number]

function input(schema: GraphQLSchema, vector: Vector) {
  return {
    schema,
    document: parse(vector.query),
    operationName: vector.operationName,
    variables: vector.variables,
  }
}

/** The standard introspection query asks for the directives: the twin does not define @cost and @listSize. */
const asksForDirectives = (vector: Vector) => /\bdirectives\s*\{/.test(vector.query)

describe('the recorded SDL vectors', () => {
  it('hold 797 operations on 22 schemas: 418 estimates, 368 refunds, 11 explanations, 83 refusals', () => {
    const kinds = { estimate: 0, actual: 0, explain: 0 }
    for (const vector of table.vectors) kinds[vector.kind]++
    expect(table.schemas.length).toBe(22)
    expect(table.vectors.length).toBe(797)
    expect(kinds).toEqual({ estimate: 418, actual: 368, explain: 11 })
    expect(table.vectors.filter((vector) => typeof vector.expected !== 'number').length).toBe(83)
  })

  it.each(table.schemas.map((_, index) => index))(
    'schema %i: its twin holds every directive as extensions, and no SDL',
    (index) => {
      const sdl = sdlSchemas[index] as GraphQLSchema
      const twin = twins[index] as GraphQLSchema
      const uses = directiveUses(sdl).sort()
      expect(uses.length).toBeGreaterThan(0)
      expect(extensionUses(twin).sort()).toEqual(uses)
      expect(directiveUses(twin)).toEqual([])
      expect([...costElements(twin)].filter((element) => element.nodes.length > 0)).toEqual([])
      expect(twin.astNode).toBeUndefined()
      expect(twin.getDirective('cost')).toBeUndefined()
      expect(twin.getDirective('listSize')).toBeUndefined()
    },
  )
})

describe('a code-first twin is priced as its SDL schema', () => {
  const cases = table.vectors.map((vector, index) => ({
    name: `#${index} ${vector.source} ${vector.kind}: ${vector.query.replace(/\s+/g, ' ').slice(0, 100)}`,
    vector,
  }))

  it.each(cases)('$name', ({ vector }) => {
    const sdl = sdlSchemas[vector.schema] as GraphQLSchema
    const twin = twins[vector.schema] as GraphQLSchema
    // Priced now on both: the recorded price only says which vectors refuse (a change of a price is not a failure
    // of the twin, a difference between the two is).
    const expected = price(sdl, vector)
    expect(typeof expected).toBe(typeof vector.expected)
    if (asksForDirectives(vector)) {
      // The twin's introspection answers two directives fewer: a price, but not the same one.
      const outcome = price(twin, vector)
      if (typeof expected === 'number') expect(outcome).toBeTypeOf('number')
      else expect(outcome).toEqual(expected)
      return
    }
    expect(price(twin, vector)).toEqual(expected)
    if (vector.kind === 'explain') {
      const options = vector.options as CostAnalysisOptions
      expect(new CostAnalyzer(options).explain(input(twin, vector))).toEqual(
        new CostAnalyzer(options).explain(input(sdl, vector)),
      )
    }
  })
})

describe("the `tollbooth cost` fixtures' twin", () => {
  const fixtures = fileURLToPath(new URL('../../../fixtures/cost/', import.meta.url))
  const read = (name: string) => readFileSync(`${fixtures}${name}`, 'utf8')
  // What `tollbooth cost` builds: the fixture's SDL with the directive definitions it does not declare.
  const sdl = buildSchema(`${costDirectivesTypeDefs}\n${read('schema.graphql')}`)
  const twin = extensionTwin(sdl)
  const document = parse(read('query.graphql'))
  const estimate = (
    schema: GraphQLSchema,
    variables?: Record<string, unknown>,
    options?: CostAnalysisOptions,
  ) => new CostAnalyzer(options).estimate({ schema, document, variables })

  it('holds the four directives as extensions', () => {
    expect(extensionUses(twin).sort()).toEqual([
      'Issue.author @cost',
      'Query.users @listSize',
      'Repo.issues @listSize',
      'User.friends @listSize',
    ])
    expect(twin.getType('Issue')?.toConfig().astNode).toBeUndefined()
  })

  it('prices the CLI tests’ numbers: 49 with $n = 7, 88 without, 123 with the config’s author 10', () => {
    const variables = JSON.parse(read('variables.json')) as Record<string, unknown>
    for (const schema of [sdl, twin]) {
      // users 7 × (1 + friends 2 × 1) = 21; repo 1 + issues (1 + pageInfo 1 + edges 5 × (1 + node 1 + author 3))
      expect(estimate(schema, variables)).toBe(49)
      // users takes its default first = 20: 20 × 3 = 60; 60 + 28
      expect(estimate(schema)).toBe(88)
      // options win over extensions as over SDL: edges 5 × (1 + 1 + 10) = 60, repo 63; 60 + 63
      expect(estimate(schema, undefined, { costs: { 'Issue.author': { weight: 10 } } })).toBe(123)
    }
  })

  it('a schema declaring its own @cost (on FIELD_DEFINITION | OBJECT) and using @listSize: 7 × 2 = 14', () => {
    const own = buildSchema(
      [
        'directive @cost(weight: Int!) on FIELD_DEFINITION | OBJECT',
        'directive @listSize(assumedSize: Int) on FIELD_DEFINITION',
        'type Query { items: [Int!]! @listSize(assumedSize: 7) @cost(weight: 2) }',
      ].join('\n'),
    )
    const ownTwin = extensionTwin(own)
    expect(ownTwin.getQueryType()?.getFields().items?.extensions).toEqual({
      cost: { weight: 2 },
      listSize: { assumedSize: 7 },
    })
    for (const schema of [own, ownTwin]) {
      expect(new CostAnalyzer().estimate({ schema, document: parse('{ items }') })).toBe(14)
    }
  })
})
