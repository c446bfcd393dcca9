import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { buildSchema, type OperationDefinitionNode, parse } from 'graphql'
import { describe, expect, it } from 'vitest'
import { CostAnalyzer } from '../../../../src/graphql/cost/costAnalyzer.js'
import { ResponsePlan } from '../../../../src/graphql/cost/responsePlan.js'

/**
 * Counting a response for the refund must take work in proportion to the response, not to the number of possible
 * types to the power of the nesting: an object of an interface type whose `__typename` was not selected is priced as
 * its dearest possible type, but the values below it are counted once, not once per possible type at every level.
 *
 * Work is measured without timing: every object of the response is a Proxy that counts the reads of its fields,
 * and the plan's own counters give the selections it compiled and the objects it counted. Every expected cost is
 * worked out by hand: an object 1, `name` 1, `pages` 3, `minutes` 2, a list its real items.
 */

const directiveSdl = readFileSync(
  fileURLToPath(new URL('../../../../schema/cost-directives.graphql', import.meta.url)),
  'utf8',
)

const schema = buildSchema(/* GraphQL */ `
  ${directiveSdl}
  interface Node {
    id: ID!
    name: String @cost(weight: 1)
    related(first: Int = 2): [Node!]! @listSize(slicingArguments: ["first"])
  }
  type Book implements Node {
    id: ID!
    name: String @cost(weight: 1)
    related(first: Int = 2): [Node!]! @listSize(slicingArguments: ["first"])
    pages: Int @cost(weight: 3)
  }
  type Movie implements Node {
    id: ID!
    name: String @cost(weight: 1)
    related(first: Int = 2): [Node!]! @listSize(slicingArguments: ["first"])
    minutes: Int @cost(weight: 2)
  }
  type Person implements Node {
    id: ID!
    name: String @cost(weight: 1)
    related(first: Int = 2): [Node!]! @listSize(slicingArguments: ["first"])
  }
  type Query {
    node: Node
  }
`)

/** Response objects that count every read of their fields (what the walk does per object). */
class ReadCounter {
  reads = 0
  objects = 0

  object(fields: Record<string, unknown>): Record<string, unknown> {
    this.objects++
    return new Proxy(fields, {
      get: (target, key, receiver) => {
        if (typeof key === 'string') this.reads++
        return Reflect.get(target, key, receiver)
      },
    })
  }
}

/** `{ node { related(first: n) { … levels deep … { <leaf> } } } }`. */
function chainQuery(levels: number, first: number, leaf: string): string {
  let selection = leaf
  for (let level = 0; level < levels; level++) selection = `related(first: ${first}) { ${selection} }`
  return `{ node { ${selection} } }`
}

/** The response to `chainQuery`: `first` related objects at each level, `leaf` set at the bottom. */
function chainData(
  counter: ReadCounter,
  levels: number,
  first: number,
  leaf: Record<string, unknown>,
): Record<string, unknown> {
  const objectAt = (remaining: number): Record<string, unknown> =>
    remaining === 0
      ? counter.object({ ...leaf })
      : counter.object({ related: Array.from({ length: first }, () => objectAt(remaining - 1)) })
  return { node: objectAt(levels) }
}

function responsePlan(analyzer: CostAnalyzer, query: string): ResponsePlan {
  const document = parse(query)
  const operation = document.definitions[0] as OperationDefinitionNode
  return new ResponsePlan(analyzer.model(schema), analyzer.settings, document, operation, {})
}

describe('the refund walk is linear in the response', () => {
  it("11 nested interface lists without __typename (the attack's document): each object read once", () => {
    const levels = 11
    const query = chainQuery(levels, 1, 'name')
    const analyzer = new CostAnalyzer()
    // node 1 + 11 lists of one object 1 each + name 1 = 13
    expect(analyzer.estimate({ schema, document: parse(query) })).toBe(13)
    const counter = new ReadCounter()
    const data = chainData(counter, levels, 1, { name: 'n' })
    expect(counter.objects).toBe(12) // node and one object per level
    expect(analyzer.actual({ schema, document: parse(query) }, data)).toBe(13)
    // One read per object: `related`, or `name` at the bottom. Priced once per possible type at every level, the
    // walk reads about 3^11 fields.
    expect(counter.reads).toBeLessThanOrEqual(2 * counter.objects)
  })

  it('compiles each selection once and counts each object once', () => {
    const levels = 9
    const analyzer = new CostAnalyzer()
    const plan = responsePlan(analyzer, chainQuery(levels, 1, 'name'))
    const counter = new ReadCounter()
    const data = chainData(counter, levels, 1, { name: 'n' })
    // node 1 + 9 + name 1
    expect(plan.cost(data)).toBe(11)
    // The operation's selection, node's, and one per level
    expect(plan.work.compiledSelections).toBe(levels + 2)
    // The root object is the response's data, the others node and the levels below it
    expect(plan.work.countedObjects).toBe(counter.objects + 1)
    // A second response compiles nothing more
    plan.cost(chainData(new ReadCounter(), levels, 1, { name: 'n' }))
    expect(plan.work.compiledSelections).toBe(levels + 2)
  })

  it('a full tree of 3 items at each of 6 levels costs its real items, each object read once', () => {
    const levels = 6
    const query = chainQuery(levels, 3, 'name')
    const counter = new ReadCounter()
    const data = chainData(counter, levels, 3, { name: 'n' })
    // 3 + 9 + … + 729 objects below node
    const items = (3 ** (levels + 1) - 3) / 2
    expect(counter.objects).toBe(items + 1)
    // node 1 + the related objects 1 each + name 1 on each of the 729 at the bottom
    const expected = 1 + items + 3 ** levels
    const analyzer = new CostAnalyzer()
    expect(analyzer.estimate({ schema, document: parse(query) })).toBe(expected)
    expect(analyzer.actual({ schema, document: parse(query) }, data)).toBe(expected)
    expect(counter.reads).toBeLessThanOrEqual(2 * counter.objects)
  })

  it('type-specific fragments at every level: the dearest type per object, each value counted once', () => {
    const levels = 10
    let selection = 'name'
    for (let level = 0; level < levels; level++) {
      selection = `related(first: 1) { ... on Book { pages } ... on Movie { minutes } ${selection} }`
    }
    const query = `{ node { ${selection} } }`
    const counter = new ReadCounter()
    // Without __typename: each object holds `pages` (a Book's); the bottom one `name` too
    const objectAt = (remaining: number): Record<string, unknown> =>
      remaining === 0
        ? counter.object({ pages: 1, name: 'n' })
        : counter.object({ pages: 1, related: [objectAt(remaining - 1)] })
    const data = { node: objectAt(levels) }
    // node 1; each of the 10 related objects 1 + pages 3 (a Book, the dearest: Movie's minutes 2); name 1
    expect(new CostAnalyzer().actual({ schema, document: parse(query) }, data)).toBe(1 + 10 * 4 + 1)
    // Each object: its own fields read once (pages, minutes, related or name), not once per possible type
    expect(counter.reads).toBeLessThanOrEqual(4 * counter.objects)
  })

  it('one key that runs differently per type at every level: each object counted once per distinct selection', () => {
    // x is `related` for a Book and for a Movie, with different sub-selections that merge into the same one below:
    // priced per type, the walk of one level would walk the next twice, 2^10 times at the bottom.
    const levels = 10
    const fragments = ['fragment F0 on Node { name }']
    for (let level = 1; level <= levels; level++) {
      const below = `...F${level - 1}`
      fragments.push(
        `fragment F${level} on Node { ... on Book { x: related(first: 1) { ${below} } } ` +
          `... on Movie { x: related(first: 1) { ${below} id } } }`,
      )
    }
    const query = `{ node { ...F${levels} } }\n${fragments.join('\n')}`
    const analyzer = new CostAnalyzer()
    // node 1 + 10 levels of one object 1 + name 1 (a Person has no x: the Book or the Movie path is the dearest)
    expect(analyzer.estimate({ schema, document: parse(query) })).toBe(12)
    const counter = new ReadCounter()
    const objectAt = (remaining: number): Record<string, unknown> =>
      remaining === 0
        ? counter.object({ name: 'n' })
        : counter.object({ x: [objectAt(remaining - 1)], ...(remaining % 2 === 0 ? { id: '1' } : {}) })
    const data = { node: objectAt(levels) }
    const plan = responsePlan(analyzer, query)
    expect(plan.cost(data)).toBe(12)
    // An object is reached through the Book's and the Movie's selection of x, the same two at every level, and
    // read once for each of the two groups of x in each
    expect(counter.reads).toBeLessThanOrEqual(4 * counter.objects)
    expect(plan.work.countedObjects).toBeLessThanOrEqual(2 * counter.objects + 1)
  })
})
