import SchemaBuilder from '@pothos/core'
import { buildSchema, type GraphQLObjectType, parse } from 'graphql'
import { describe, expect, it } from 'vitest'
import { CostAnalyzer } from '../../../../src/graphql/cost/costAnalyzer.js'
import { costDirectivesTypeDefs } from '../../../../src/graphql/index.js'
import { directiveUses, extensionUses } from '../../../helpers/extensionTwin.js'

/**
 * A Pothos schema carries tollbooth's weights as `extensions: { cost, listSize }` on its fields, arguments, input
 * fields, object types, scalars and enums, and is priced as the same schema annotated with `@cost` / `@listSize` in
 * SDL. Every number is worked out by hand: an object 1 or its weight, a scalar or enum 0 or its weight, a list size ×
 * (weight + children), a weighted argument or input field added when given.
 */

interface Book {
  title: string
}

const builder = new SchemaBuilder<{ Scalars: { Isbn: { Input: string; Output: string } } }>({})

builder.scalarType('Isbn', {
  serialize: (value) => value,
  parseValue: (value) => String(value),
  extensions: { cost: { weight: 6 } },
})
const Grade = builder.enumType('Grade', { values: ['A', 'B'] as const, extensions: { cost: { weight: 2 } } })
const Editor = builder.objectRef<{ name: string }>('Editor').implement({
  extensions: { cost: { weight: 7 } },
  fields: (t) => ({ name: t.exposeString('name') }),
})
const Filter = builder.inputType('Filter', {
  fields: (t) => ({
    text: t.string({ extensions: { cost: { weight: 2 } } }),
    tags: t.stringList(),
  }),
})
const BookRef = builder.objectRef<Book>('Book').implement({
  fields: (t) => ({
    title: t.exposeString('title'),
    summary: t.string({ resolve: () => '', extensions: { cost: { weight: 5 } } }),
    isbn: t.field({ type: 'Isbn', resolve: () => '' }),
    grade: t.field({ type: Grade, resolve: () => 'A' as const }),
    editor: t.field({ type: Editor, resolve: () => ({ name: '' }) }),
    coEditor: t.field({ type: Editor, resolve: () => ({ name: '' }), extensions: { cost: { weight: 2 } } }),
    reviews: t.intList({
      args: { first: t.arg.int() },
      resolve: () => [],
      extensions: { listSize: { slicingArguments: ['first'] } },
    }),
  }),
})
builder.queryType({
  fields: (t) => ({
    books: t.field({
      type: [BookRef],
      args: { first: t.arg.int(), last: t.arg.int() },
      resolve: () => [],
      extensions: { listSize: { slicingArguments: ['first', 'last'], assumedSize: 4 } },
    }),
    bookBy: t.field({
      type: BookRef,
      nullable: true,
      args: { isbn: t.arg.string({ extensions: { cost: { weight: 4 } } }), id: t.arg.id() },
      resolve: () => null,
    }),
    filtered: t.field({
      type: BookRef,
      nullable: true,
      args: { filter: t.arg({ type: Filter }) },
      resolve: () => null,
    }),
  }),
})

const schema = builder.toSchema()

const twin = buildSchema(/* GraphQL */ `
  ${costDirectivesTypeDefs}
  scalar Isbn @cost(weight: 6)
  enum Grade @cost(weight: 2) { A B }
  type Editor @cost(weight: 7) { name: String! }
  input Filter { text: String @cost(weight: 2), tags: [String!] }
  type Book {
    title: String!
    summary: String! @cost(weight: 5)
    isbn: Isbn!
    grade: Grade!
    editor: Editor!
    coEditor: Editor! @cost(weight: 2)
    reviews(first: Int): [Int!]! @listSize(slicingArguments: ["first"])
  }
  type Query {
    books(first: Int, last: Int): [Book!]! @listSize(slicingArguments: ["first", "last"], assumedSize: 4)
    bookBy(isbn: String @cost(weight: 4), id: ID): Book
    filtered(filter: Filter): Book
  }
`)

const operations: [string, Record<string, unknown> | undefined, number][] = [
  // 3 × (Book 1 + summary 5) = 18
  ['{ books(first: 3) { summary } }', undefined, 18],
  // max(2, 6) × (1 + isbn 6 + grade 2 + editor 7 + coEditor 2) = 6 × 18 = 108
  ['{ books(first: 2, last: 6) { isbn grade editor { name } coEditor { name } } }', undefined, 108],
  // assumedSize 4 × (1 + reviews $n = 3 × Int 0) = 4
  ['query($n: Int) { books { reviews(first: $n) } }', { n: 3 }, 4],
  // book 1 + isbn 4 (given) = 5; not given: 1
  ['{ bookBy(isbn: "x") { title } }', undefined, 5],
  ['{ bookBy(id: "1") { title } }', undefined, 1],
  // 1 + text 2 (given, through a variable)
  ['query($f: Filter) { filtered(filter: $f) { title } }', { f: { text: 'a', tags: ['b'] } }, 3],
]

describe('a Pothos schema with extensions: { cost, listSize }', () => {
  it('holds the same weights as the SDL twin, in extensions and only there', () => {
    expect(extensionUses(schema).sort()).toEqual(directiveUses(twin).sort())
    expect(extensionUses(schema)).toHaveLength(9)
    expect((schema.getType('Book') as GraphQLObjectType).getFields().summary?.extensions).toMatchObject({
      cost: { weight: 5 },
    })
    expect(directiveUses(schema)).toEqual([])
  })

  it.each(operations)('prices %s as its SDL twin: %j → %i', (query, variables, expected) => {
    const document = parse(query)
    expect(new CostAnalyzer().estimate({ schema, document, variables })).toBe(expected)
    expect(new CostAnalyzer().estimate({ schema: twin, document, variables })).toBe(expected)
    expect(new CostAnalyzer().explain({ schema, document, variables })).toEqual(
      new CostAnalyzer().explain({ schema: twin, document, variables }),
    )
  })
})
