import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { buildSchema, type DocumentNode, Kind, parse, validate, visit } from 'graphql'
import { describe, expect, it } from 'vitest'
import {
  type CostAnalysisOptions,
  CostAnalyzer,
  TooLargeToPriceError,
} from '../../../../src/graphql/cost/costAnalyzer.js'
import type { FieldExplanation } from '../../../../src/graphql/cost/explain.js'

/**
 * graphql-js executes the fields with one response name under one parent as one field, with their sub-selections
 * merged (the spec's CollectFields): `{ a a }` runs `a` once. The estimate, the count of the response and the
 * explanation price that merged field once.
 *
 * Every expected number is worked out by hand from the cost-directive model: an object 1 (or its @cost), a scalar 0
 * (or its @cost), a list size × (weight + children), a connection's size on its sizedFields, a root mutation field
 * +10, weighted arguments when given, an abstract selection the most expensive of its possible types. The
 * arithmetic is next to each number; "each occurrence charged" gives what pricing every node on its own would give.
 */

const directiveSdl = readFileSync(
  fileURLToPath(new URL('../../../../schema/cost-directives.graphql', import.meta.url)),
  'utf8',
)

const schema = buildSchema(/* GraphQL */ `
  ${directiveSdl}
  type Query {
    object1: Int @cost(weight: 1)
    obj: Obj
    heavy: Obj @cost(weight: 5)
    list(first: Int): [Obj!]! @listSize(slicingArguments: ["first"])
    conn(first: Int): ObjConnection! @listSize(slicingArguments: ["first"], sizedFields: ["edges"])
    media: Media
    search: [Result!]! @listSize(assumedSize: 2)
  }
  type Mutation {
    add(tag: String @cost(weight: 2)): Obj
  }
  type Obj {
    id: ID
    x: Leaf
    y: Leaf
    z: Leaf
    child: Obj
    items(first: Int): [Leaf!]! @listSize(slicingArguments: ["first"])
  }
  type Leaf {
    v: Int
  }
  type ObjConnection {
    edges: [ObjEdge!]!
    total: Int
  }
  type ObjEdge {
    cursor: String
    node: Obj
  }
  interface Media {
    id: ID
    cover: Image
    related: Media
  }
  type Book implements Media {
    id: ID
    cover: Image
    related: Media
    author: Person
  }
  type Film implements Media {
    id: ID
    cover: Image
    related: Media
    director: Person
  }
  union Result = Book | Person
  type Image {
    url: String
    thumb: Image
  }
  type Person {
    name: String
    photo: Image
  }
`)

/** Only validated documents are priced: a test document that would not validate is a mistake of the test. */
function valid(query: string): DocumentNode {
  const document = parse(query)
  expect(validate(schema, document).map((error) => error.message)).toEqual([])
  return document
}

function estimate(query: string, variables?: Record<string, unknown>, options?: CostAnalysisOptions): number {
  return new CostAnalyzer(options).estimate({ schema, document: valid(query), variables })
}

function actual(query: string, data: unknown, variables?: Record<string, unknown>): number {
  return new CostAnalyzer().actual({ schema, document: valid(query), variables }, data)
}

interface Tree {
  readonly [field: string]: Tree
}

/** Each explained field as `Parent.field total` (a second entry with the same label gets ` (again)`). */
function tree(fields: readonly FieldExplanation[]): Tree {
  const result: Record<string, Tree> = {}
  for (const field of fields) {
    let label = `${field.parentType}.${field.field} ${field.total}`
    while (label in result) label += ' (again)'
    result[label] = tree(field.children)
  }
  return result
}

function explained(query: string, variables?: Record<string, unknown>) {
  const explanation = new CostAnalyzer().explain({ schema, document: valid(query), variables })
  return { total: explanation.total, tree: tree(explanation.fields), fields: explanation.fields }
}

function thrown(fn: () => unknown): unknown {
  try {
    fn()
  } catch (error) {
    return error
  }
  throw new Error('expected a throw')
}

describe('one response key under one parent is one field', () => {
  it('{ object1 object1 } costs what one object1 costs', () => {
    // object1 @cost 1, run once: 1 (each occurrence charged: 2)
    expect(estimate('{ object1 object1 }')).toBe(1)
    expect(actual('{ object1 object1 }', { object1: 7 })).toBe(1)
    expect(explained('{ object1 object1 }')).toMatchObject({ total: 1, tree: { 'Query.object1 1': {} } })
  })

  it('{ a { x } a { y } } is a { x y }, at every depth', () => {
    // obj 1 + x 1 + y 1 = 3 (each occurrence charged: (1 + 1) + (1 + 1) = 4)
    const query = '{ obj { x { v } } obj { y { v } } }'
    expect(estimate(query)).toBe(3)
    expect(actual(query, { obj: { x: { v: 1 }, y: { v: 2 } } })).toBe(3)
    // both sub-selections are walked: a null x pays its weight, y counts: 1 + 1 + 1; an x that never ran costs 0
    expect(actual(query, { obj: { x: null, y: { v: 2 } } })).toBe(3)
    expect(actual(query, { obj: { y: { v: 2 } } })).toBe(2)
    // obj 1 + child (1 + x 1 + y 1) = 4 (each occurrence charged: 3 + 3 + 1 = 7)
    const deeper = '{ obj { child { x { v } } } obj { child { y { v } } } obj { id } }'
    expect(estimate(deeper)).toBe(4)
    expect(actual(deeper, { obj: { id: '1', child: { x: { v: 1 }, y: { v: 2 } } } })).toBe(4)
  })

  it('explains the merged field once, with the merged children', () => {
    const { total, tree: fields, fields: raw } = explained('{ obj { x { v } } obj { y { v } } }')
    expect(total).toBe(3)
    expect(fields).toEqual({
      'Query.obj 3': { 'Obj.x 1': { 'Leaf.v 0': {} }, 'Obj.y 1': { 'Leaf.v 0': {} } },
    })
    // obj: (weight 1 + children 2) × 1
    expect(raw[0]).toMatchObject({ weight: 1, childrenCost: 2, multiplier: 1, total: 3 })
  })

  it('a response key is the alias, else the field name: different aliases of one field are not merged', () => {
    expect(estimate('{ a: obj { id } b: obj { id } }')).toBe(2) // two fields: 1 + 1
    expect(estimate('{ a: object1 b: object1 }')).toBe(2) // 1 + 1
    // `a: f  f: f`: keys a and f, two fields: 1 + 1
    expect(estimate('{ a: object1 object1: object1 }')).toBe(2)
    // an alias spelt like the field name is the same key: one field, 1 (each occurrence charged: 2)
    expect(estimate('{ object1: object1 object1 }')).toBe(1)
    // key obj twice: obj 1 + x 1 = 2 (each occurrence charged: 1 + 2 = 3)
    expect(estimate('{ obj { id } obj: obj { x { v } } }')).toBe(2)
    // keys obj (field heavy) and heavy (field obj): heavy 5 + obj 1 = 6
    expect(estimate('{ obj: heavy { id } heavy: obj { id } }')).toBe(6)
    expect(actual('{ a: obj { id } b: obj { id } }', { a: { id: '1' }, b: { id: '1' } })).toBe(2)
    expect(actual('{ obj { id } obj: obj { x { v } } }', { obj: { id: '1', x: { v: 1 } } })).toBe(2)
  })

  it('fields of named and inline fragments merge with the fields written beside them', () => {
    const fragment = 'fragment F on Obj { x { v } y { v } }'
    // obj 1 + x 1 + y 1 + z 1 = 4 (each occurrence charged: 1 + 1 + (1 + 1) + 1 = 5)
    const mixed = `{ obj { x { v } ...F ... on Obj { z { v } } } } ${fragment}`
    expect(estimate(mixed)).toBe(4)
    expect(actual(mixed, { obj: { x: { v: 1 }, y: { v: 2 }, z: { v: 3 } } })).toBe(4)
    // a fragment spread twice in one selection is collected once: obj 1 + x 1 + y 1 = 3 (each occurrence charged: 5)
    expect(estimate(`{ obj { ...F ...F } } ${fragment}`)).toBe(3)
    // an inline fragment without a type condition: obj 1 + x 1 = 2 (each occurrence charged: 3)
    expect(estimate('{ obj { ... { x { v } } x { v } } }')).toBe(2)
    // fragments under two occurrences of one key, merged a level down:
    // obj 1 + child (1 + x 1 + y 1) = 4 (each occurrence charged: (1 + 1 + 1) + (1 + 1 + 1 + 1) = 7)
    const nested = `{ obj { ...A } obj { ...B } }
      fragment A on Obj { child { x { v } } }
      fragment B on Obj { child { x { v } y { v } } }`
    expect(estimate(nested)).toBe(4)
    expect(explained(nested).tree).toEqual({
      'Query.obj 4': {
        'Obj.child 3': { 'Obj.x 1': { 'Leaf.v 0': {} }, 'Obj.y 1': { 'Leaf.v 0': {} } },
      },
    })
  })

  it('a root mutation field selected twice runs once: mutationCost and weighted arguments once', () => {
    // 10 + tag 2 + Obj (1 + x 1) = 14 (each occurrence charged: (10 + 2 + 1) + (10 + 2 + 2) = 27)
    const query = 'mutation { add(tag: "t") { id } add(tag: "t") { x { v } } }'
    expect(estimate(query)).toBe(14)
    expect(actual(query, { add: { id: '1', x: { v: 1 } } })).toBe(14)
  })
})

describe('abstract types: fields merge per concrete type', () => {
  // Book: cover { url thumb { url } } 2 + author 1 = 3; Film: cover { url } 1 + director 1 = 2;
  // media 1 + max(3, 2) = 4 (each occurrence charged, Book would be 1 + 2 + 1 = 4, media 5)
  const covers = `{ media { __typename cover { url }
    ... on Book { cover { thumb { url } } author { name } }
    ... on Film { director { name } } } }`

  it('an interface: the fields of `... on Book` merge with the fields selected on the interface, for a Book only', () => {
    expect(estimate(covers)).toBe(4)
    const book = { __typename: 'Book', cover: { url: 'u', thumb: { url: 't' } }, author: { name: 'a' } }
    expect(actual(covers, { media: book })).toBe(4) // media 1 + cover 1 + thumb 1 + author 1
    const film = { __typename: 'Film', cover: { url: 'u' }, director: { name: 'd' } }
    expect(actual(covers, { media: film })).toBe(3) // media 1 + cover 1 + director 1
  })

  it('explains a key that runs differently per type as one entry per type', () => {
    expect(explained(covers)).toEqual({
      total: 4,
      fields: expect.anything(),
      tree: {
        'Query.media 4': {
          'Media.__typename 0': {},
          'Book.cover 2': { 'Image.url 0': {}, 'Image.thumb 1': { 'Image.url 0': {} } },
          'Film.cover 1': { 'Image.url 0': {} },
          'Book.author 1': { 'Person.name 0': {} },
          'Film.director 1': { 'Person.name 0': {} },
        },
      },
    })
  })

  it('`... on Iface` and `... on A` merge for type A only', () => {
    // related returns Media (1 + the dearer of Book/Film below it).
    // Book: related { id cover { url } } = 1 + cover 1 = 2; Film: related { id } = 1; media 1 + 2 = 3
    // (each occurrence charged: the Media fragment 1 on every type, Book 1 + 2 = 3, media 4)
    const query = `{ media {
      ... on Media { related { id } }
      ... on Book { related { cover { url } } } } }`
    expect(estimate(query)).toBe(3)
    const data = { media: { related: { id: '2', cover: { url: 'u' } } } }
    // without __typename the analyzer takes the dearest possible type, Book: 1 + related 1 + cover 1
    expect(actual(query, data)).toBe(3)
  })

  it('a union: fragments on one member merge; an interface fragment applies to the members implementing it', () => {
    // Book: author { name photo { url } } = 1 + 1 = 2; Person: photo 1; search 2 × (1 + max(2, 1)) = 6
    // (each occurrence charged: Book author 1 + author 2 = 3, 2 × 4 = 8)
    const members = `{ search {
      ... on Book { author { name } }
      ... on Person { photo { url } }
      ... on Book { author { photo { url } } } } }`
    expect(estimate(members)).toBe(6)
    expect(explained(members).tree).toEqual({
      'Query.search 6': {
        'Book.author 2': { 'Person.name 0': {}, 'Person.photo 1': { 'Image.url 0': {} } },
        'Person.photo 1': { 'Image.url 0': {} },
      },
    })
    const data = {
      search: [{ author: { name: 'a', photo: { url: 'u' } } }, { photo: { url: 'p' } }],
    }
    // no __typename: each item as its dearest possible type: Book 1 + author 1 + photo 1 = 3; Person 1 + 1 = 2
    expect(actual(members, data)).toBe(5)
    // Book: cover { url thumb { url } } = 2; Person: nothing; 2 × (1 + 2) = 6 (each occurrence charged: 2 × (1 + 1 + 2) = 8)
    const throughInterface = `{ search {
      ... on Media { cover { url } }
      ... on Book { cover { thumb { url } } } } }`
    expect(estimate(throughInterface)).toBe(6)
  })

  it('a fragment is collected once per concrete type, not once for all of them', () => {
    const fragment = 'fragment C on Media { cover { url } }'
    // Book and Film each get C once: media 1 + cover 1 = 2 (collecting C once for all types would lose Film's)
    expect(estimate(`{ media { ... on Book { ...C } ... on Film { ...C } } } ${fragment}`)).toBe(2)
    // for a Book, C spread twice is one cover: 1 + 1 = 2 (each occurrence charged: Book 1 + 1 + 1, media 3)
    expect(estimate(`{ media { ...C ... on Book { ...C } } } ${fragment}`)).toBe(2)
  })
})

describe('@skip and @include on one of the duplicates', () => {
  it('only the included occurrences run and are merged (literal conditions)', () => {
    // the skipped object1 does not run, the other does: 1
    expect(estimate('{ object1 @skip(if: true) object1 }')).toBe(1)
    // excluded: obj { y } only, 1 + 1 = 2
    expect(estimate('{ obj @include(if: false) { x { v } } obj { y { v } } }')).toBe(2)
    // included: obj { x y }, 1 + 1 + 1 = 3 (each occurrence charged: 4)
    expect(estimate('{ obj @include(if: true) { x { v } } obj { y { v } } }')).toBe(3)
  })

  it('with variables, per value, through the cost cache', () => {
    const query = 'query($v: Boolean!) { obj @include(if: $v) { x { v } } obj { y { v } } }'
    const analyzer = new CostAnalyzer()
    const document = valid(query)
    const price = (v: boolean) => analyzer.estimate({ schema, document, variables: { v } })
    expect(price(true)).toBe(3) // obj { x y }: 1 + 1 + 1 (each occurrence charged: 4)
    expect(price(false)).toBe(2) // obj { y }: 1 + 1
    expect(price(true)).toBe(3)
    expect(actual(query, { obj: { y: { v: 2 } } }, { v: false })).toBe(2)
    // x is not in the selection that ran: the walk does not count it even if the data held it
    expect(actual(query, { obj: { x: { v: 1 }, y: { v: 2 } } }, { v: false })).toBe(2)
    expect(actual(query, { obj: { x: { v: 1 }, y: { v: 2 } } }, { v: true })).toBe(3)
    expect(explained(query, { v: false }).tree).toEqual({
      'Query.obj 2': { 'Obj.y 1': { 'Leaf.v 0': {} } },
    })
    // on a fragment spread: s = true, obj { x }: 1 + 1 = 2; s = false, obj { x y }: 1 + 1 + 1 = 3 (each occurrence charged: 4)
    const spread =
      'query($s: Boolean!) { obj { ...F @skip(if: $s) x { v } } } fragment F on Obj { x { v } y { v } }'
    expect(estimate(spread, { s: true })).toBe(2)
    expect(estimate(spread, { s: false })).toBe(3)
  })
})

describe('lists: duplicates with the same slicing arguments', () => {
  it('a list selected twice is one list of merged items', () => {
    // 3 × (Obj 1 + x 1 + y 1) = 9 (each occurrence charged: 3 × 2 + 3 × 2 = 12)
    const literal = '{ list(first: 3) { x { v } } list(first: 3) { y { v } } }'
    expect(estimate(literal)).toBe(9)
    // $n = 4: 4 × 3 = 12 (each occurrence charged: 16)
    const variable = 'query($n: Int) { list(first: $n) { x { v } } list(first: $n) { y { v } } }'
    expect(estimate(variable, { n: 4 })).toBe(12)
    // items(first: 3) is 3 × Leaf 1 = 3; list 2 × (1 + 3) = 8 (each occurrence charged: 16)
    expect(
      estimate('{ list(first: 2) { items(first: 3) { v } } list(first: 2) { id items(first: 3) { v } } }'),
    ).toBe(8)
    // two real items: (1 + x 1 + y 1) + (1 + null x 1 + y 1) = 6, below the estimate of 9
    const data = {
      list: [
        { x: { v: 1 }, y: { v: 2 } },
        { x: null, y: { v: 3 } },
      ],
    }
    expect(actual(literal, data)).toBe(6)
  })

  it('a connection selected twice: its sizedFields merge under one size', () => {
    // conn 1 + edges 5 × (edge 1 + node (1 + x 1 + y 1)) = 1 + 20 = 21 (each occurrence charged: 16 + 16 = 32)
    const query = `{
      conn(first: 5) { edges { node { x { v } } } }
      conn(first: 5) { total edges { cursor node { y { v } } } }
    }`
    expect(estimate(query)).toBe(21)
    expect(explained(query).fields[0]?.children[0]).toMatchObject({
      field: 'edges',
      multiplier: 5,
      sizeSource: 'sizedFields of conn: slicing argument first = 5',
      total: 20,
    })
    const data = {
      conn: {
        total: 2,
        edges: [
          { cursor: 'a', node: { x: { v: 1 }, y: { v: 2 } } },
          { cursor: 'b', node: { x: null, y: { v: 3 } } },
        ],
      },
    }
    // conn 1 + (edge 1 + node 1 + x 1 + y 1) + (edge 1 + node 1 + null x 1 + y 1) = 1 + 4 + 4 = 9
    expect(actual(query, data)).toBe(9)
  })

  it('different arguments under one key do not validate, so they are never priced; aliases price both', () => {
    const errors = validate(schema, parse('{ list(first: 3) { id } list(first: 5) { id } }'))
    expect(errors.map((error) => error.message)).toEqual([
      expect.stringMatching(/^Fields "list" conflict because they have differing arguments\./),
    ])
    // two lists: 3 × 1 + 5 × 1 = 8
    expect(estimate('{ a: list(first: 3) { id } b: list(first: 5) { id } }')).toBe(8)
  })
})

/**
 * A copy of `document` whose selection sets count how often their selections are read: the work a walk does,
 * counted without a clock.
 */
function countingReads(document: DocumentNode): { document: DocumentNode; reads: () => number } {
  let reads = 0
  const counted = visit(document, {
    SelectionSet: {
      leave(node) {
        const { selections } = node
        const copy = { kind: Kind.SELECTION_SET }
        Object.defineProperty(copy, 'selections', {
          enumerable: true,
          get() {
            reads++
            return selections
          },
        })
        return copy
      },
    },
  })
  return { document: counted, reads: () => reads }
}

describe('maxFieldVisits still bounds the work', () => {
  it('counts every occurrence, as if nothing merged: 20 × object1 is 20 visits, priced as one object1', () => {
    const query = `{ ${'object1 '.repeat(20)}}`
    expect(estimate(query, undefined, { maxFieldVisits: 20 })).toBe(1)
    const error = thrown(() => estimate(query, undefined, { maxFieldVisits: 19 }))
    expect(error).toBeInstanceOf(TooLargeToPriceError)
  })

  it('refuses the same fragment spread 1,000 times at each of 4 levels, reading each fragment once', () => {
    // F3 is 1 + 1000 × (spread 1 + F4 1) = 2001 visits expanded; F2 already 1 + 1000 × 2002: far past 10,000.
    // Merged, each level would collect its fragment once: the refusal must not depend on how merging goes.
    const spreads = (name: string) => Array.from({ length: 1000 }, () => `...${name}`).join(' ')
    const query = `{ obj { ...F0 } }
      fragment F0 on Obj { child { ${spreads('F1')} } }
      fragment F1 on Obj { child { ${spreads('F2')} } }
      fragment F2 on Obj { child { ${spreads('F3')} } }
      fragment F3 on Obj { child { ${spreads('F4')} } }
      fragment F4 on Obj { id }`
    const { document, reads } = countingReads(parse(query))
    expect(thrown(() => new CostAnalyzer().estimate({ schema, document }))).toBeInstanceOf(
      TooLargeToPriceError,
    )
    // 11 selection sets: read once by the size check and a few times by planning, not once per spread (4,000)
    expect(reads()).toBeLessThan(100)
  })

  it('refuses a merge that would walk a sub-selection once per type at every level (2^24 walks)', () => {
    // Each level selects `related` on Media and again on Book: for a Book the two merge, for a Film only the first
    // runs, so the level below is walked twice, once per group of types. Expanded without merging, the document
    // is small (5 visits a level), so the merged walk itself must be bounded. (Not validated here: the point is
    // what pricing does with any document it is given.)
    const levels = Array.from(
      { length: 24 },
      (_, i) => `fragment L${i} on Media { related { ...L${i + 1} } ... on Book { related { id } } }`,
    )
    const query = `{ media { ...L0 } } ${levels.join(' ')} fragment L24 on Media { id }`
    const { document, reads } = countingReads(parse(query))
    expect(thrown(() => new CostAnalyzer().estimate({ schema, document }))).toBeInstanceOf(
      TooLargeToPriceError,
    )
    // stopped once the walk has visited 10,000 selections (a read visits at least one), not after 2^24 walks
    expect(reads()).toBeLessThan(20_000)
    // three levels fit: each level is related 1 + the dearer type below, Book (merged with { id }) or Film
    const small = `{ media { ...L0 } } ${levels.slice(0, 3).join(' ')} fragment L3 on Media { id }`
    // L2 = related (1 + 0) = 1 per type; L1 = related (1 + 1) = 2; L0 = related (1 + 2) = 3; media 1 + 3 = 4
    expect(estimate(small)).toBe(4)
  })
})
