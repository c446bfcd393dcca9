import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { buildSchema, parse } from 'graphql'
import { describe, expect, it } from 'vitest'
import { CostAnalyzer } from '../../../../src/graphql/cost/costAnalyzer.js'

/**
 * A weighted input field of a recursive input type costs its weight wherever the argument's value holds it, however
 * deep: a filter tree of n clauses at 10 each costs 10n, not 10. The walk follows the value, so it ends where the
 * value does. Every expected number is worked out by hand: the list of items (assumedSize 1) weighs 1, each clause's
 * `field` 10, `A.w` 2, `B.v` 5.
 */

const directiveSdl = readFileSync(
  fileURLToPath(new URL('../../../../schema/cost-directives.graphql', import.meta.url)),
  'utf8',
)

const schema = buildSchema(/* GraphQL */ `
  ${directiveSdl}
  input Filter {
    field: String @cost(weight: 10)
    and: [Filter!]
    or: [Filter!]
  }
  "The recursive field comes first: it must not be compiled as weightless before the type's own weight is seen."
  input LateWeight {
    and: [LateWeight!]
    field: String @cost(weight: 10)
  }
  input A {
    b: B
    w: String @cost(weight: 2)
  }
  input B {
    a: A
    v: String @cost(weight: 5)
  }
  input Plain {
    and: [Plain!]
    text: String
  }
  type Item {
    id: ID
  }
  type Query {
    items(where: Filter): [Item!]! @listSize(assumedSize: 1)
    late(where: LateWeight): [Item!]! @listSize(assumedSize: 1)
    mutual(where: A): [Item!]! @listSize(assumedSize: 1)
    plain(where: Plain): [Item!]! @listSize(assumedSize: 1)
  }
`)

/** A full binary tree of clauses, `depth` levels below the top one. */
function clause(depth: number): string {
  return depth === 0 ? '{ field: "x" }' : `{ field: "x", and: [${clause(depth - 1)}, ${clause(depth - 1)}] }`
}

function estimate(query: string, variables?: Record<string, unknown>): number {
  return new CostAnalyzer().estimate({ schema, document: parse(query), variables })
}

describe('recursive input types keep their nested weights', () => {
  it('filter trees of 1, 3, 15 and 127 clauses cost 1 + 10 per clause', () => {
    for (const [depth, clauses] of [
      [0, 1],
      [1, 3],
      [3, 15],
      [6, 127],
    ] as const) {
      const query = `{ items(where: ${clause(depth)}) { id } }`
      expect(estimate(query), `${clauses} clauses`).toBe(1 + 10 * clauses)
    }
  })

  it('the same through a variable, under `or` as under `and`, and only the clauses given', () => {
    const where = { or: [{ field: 'a' }, { and: [{ field: 'b' }, { field: 'c' }] }, { and: [] }] }
    // 3 clauses with a field: 1 + 30
    expect(estimate('query($w: Filter) { items(where: $w) { id } }', { w: where })).toBe(31)
    // A clause without `field` weighs nothing
    expect(estimate('{ items(where: { and: [{ and: [{ and: [] }] }] }) { id } }')).toBe(1)
  })

  it('a recursive field declared before the weighted one', () => {
    expect(estimate(`{ late(where: ${clause(3)}) { id } }`)).toBe(151)
  })

  it('two input types that refer to each other', () => {
    // A.w 2 + B.v 5 + A.w 2 + B.v 5, and the list 1
    expect(
      estimate('{ mutual(where: { w: "1", b: { v: "1", a: { w: "1", b: { v: "1" } } } }) { id } }'),
    ).toBe(15)
  })

  it('a recursive input type without weights costs nothing', () => {
    expect(estimate('{ plain(where: { text: "a", and: [{ and: [{ text: "b" }] }] }) { id } }')).toBe(1)
  })

  it('the refund counts the same argument weights as the estimate', () => {
    const query = `{ items(where: ${clause(6)}) { id } }`
    const analyzer = new CostAnalyzer()
    // One item: 1 + 1270; an empty list still ran: its weight once, 1 + 1270
    expect(analyzer.actual({ schema, document: parse(query) }, { items: [{ id: '1' }] })).toBe(1271)
    expect(analyzer.actual({ schema, document: parse(query) }, { items: [] })).toBe(1271)
  })
})
