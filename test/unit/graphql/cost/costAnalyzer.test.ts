import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import {
  buildSchema,
  executeSync,
  GraphQLError,
  type GraphQLFieldConfigMap,
  GraphQLInputObjectType,
  GraphQLInt,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLSchema,
  GraphQLString,
  getIntrospectionQuery,
  parse,
} from 'graphql'
import { describe, expect, it, vi } from 'vitest'
import type { CostAnalysisOptions } from '../../../../src/graphql/cost/costAnalyzer.js'
import { CostAnalyzer, TooLargeToPriceError } from '../../../../src/graphql/cost/costAnalyzer.js'
import type { CostMap } from '../../../../src/graphql/cost/costModel.js'
import { realCost } from '../../../helpers/responseCost.js'

/**
 * Every expected number below is worked out by hand from the cost-directive model (object 1 or its @cost,
 * scalar/enum 0 or its @cost, list = size × item, connection size on its sizedFields, mutation root field +10,
 * abstract selection = max over possible types, weighted arguments/input fields added once when provided);
 * the arithmetic is in the comment next to each number.
 */

const directiveSdl = readFileSync(
  fileURLToPath(new URL('../../../../schema/cost-directives.graphql', import.meta.url)),
  'utf8',
)

const librarySdl = /* GraphQL */ `
  type Query {
    book(id: ID): Book
    bookBy(isbn: String @cost(weight: 4), id: ID): Book
    filtered(filter: Filter): Book
    filteredMany(filters: [Filter!]): Book
    books(first: Int, last: Int): [Book!]! @listSize(slicingArguments: ["first", "last"])
    booksDefault(first: Int = 20): [Book!]! @listSize(slicingArguments: ["first"], assumedSize: 50)
    booksAssumed(first: Int): [Book!]! @listSize(slicingArguments: ["first"], assumedSize: 4)
    shelf: [Book!]! @listSize(assumedSize: 4)
    allBooks: [Book!]!
    bookConnection(first: Int, last: Int): BookConnection!
      @listSize(slicingArguments: ["first", "last"], sizedFields: ["edges", "nodes"])
    matrix: [[Cell!]!]!
    media: Media
    search(term: String): [SearchResult!]! @listSize(assumedSize: 2)
    tags: [String!]!
    paged(page: PageInput): [Book!]! @listSize(slicingArguments: ["page.first"])
  }

  input PageInput {
    first: Int
  }

  type Mutation {
    addBook(title: String): Book
    ping: Boolean
  }

  interface Media {
    id: ID!
  }

  type Book implements Media {
    id: ID!
    title: String
    author: Author
    publisher: Publisher
    summary: Summary @cost(weight: 5)
    checksum: String @cost(weight: 3)
    editor: Editor
    coEditor: Editor @cost(weight: 2)
    signature: Signature
    grade: Grade
    reviews(first: Int): [Review!]! @listSize(slicingArguments: ["first"])
  }

  type Film implements Media {
    id: ID!
    director: Author
    studio: Publisher
  }

  union SearchResult = Book | Author

  type Author {
    name: String
    bio: Bio
  }
  type Publisher {
    name: String
    address: Address
  }
  type Address {
    zipCode: Int
  }
  type Summary {
    text: String
  }
  type Bio {
    text: String
  }
  type Review {
    stars: Int
  }
  type Cell {
    v: Int
  }
  type Editor @cost(weight: 7) {
    name: String
  }
  scalar Signature @cost(weight: 6)
  enum Grade @cost(weight: 2) {
    A
    B
  }

  type BookConnection {
    edges: [BookEdge!]!
    nodes: [Book!]!
    pageInfo: PageInfo!
    totalCount: Int
  }
  type BookEdge {
    cursor: String
    node: Book
  }
  type PageInfo {
    hasNextPage: Boolean
  }

  input Filter {
    text: String @cost(weight: 2)
    tags: [String!]
    sub: SubFilter
  }
  input SubFilter {
    deep: String @cost(weight: 3)
  }
`

const schema = buildSchema(`${directiveSdl}\n${librarySdl}`)

function estimate(
  query: string,
  variables?: Record<string, unknown>,
  options?: CostAnalysisOptions,
  onSchema: GraphQLSchema = schema,
): number {
  return new CostAnalyzer(options).estimate({ schema: onSchema, document: parse(query), variables })
}

function actual(query: string, data: unknown, variables?: Record<string, unknown>): number {
  return new CostAnalyzer().actual({ schema, document: parse(query), variables }, data)
}

function thrown(fn: () => unknown): unknown {
  try {
    fn()
  } catch (error) {
    return error
  }
  throw new Error('expected a throw')
}

describe('CostAnalyzer.estimate: objects and weights', () => {
  it("prices Apollo's documented example at 4", () => {
    // book 1 + author 1 + publisher 1 + address 1; title, name, name, zipCode are scalars (0) = 4
    expect(estimate('{ book { title author { name } publisher { name address { zipCode } } } }')).toBe(4)
  })

  it('a root scalar and __typename cost 0', () => {
    expect(estimate('{ tags }')).toBe(0) // list of scalars: 10 × 0
    expect(estimate('{ __typename book { __typename } }')).toBe(1) // book 1, __typename 0 twice
  })

  it('introspection costs what it returns on the schema: the estimate is the cost of the executed response', () => {
    const queries = [
      '{ __schema { queryType { name } } }',
      '{ __schema { types { name fields { name } } } }',
      '{ __type(name: "Book") { name fields(includeDeprecated: true) { name args { name } type { name ofType { name } } } } }',
      '{ __type(name: "NoSuchType") { name } }',
      '{ __schema { types { possibleTypes { name } enumValues { name } inputFields { name } interfaces { name } } } }',
      getIntrospectionQuery(),
    ]
    for (const query of queries) {
      const document = parse(query)
      const { data, errors } = executeSync({ schema, document })
      expect(errors, query).toBeUndefined()
      const counted = realCost(schema, document, data as Record<string, unknown>)
      expect(estimate(query), query).toBe(counted)
      expect(actual(query, data), query).toBe(counted)
      // introspectionCost weighs the __schema or __type field itself
      expect(estimate(query, undefined, { introspectionCost: 3 }), query).toBe(counted + 2)
    }
    // __type(name: "Book") { name }: the object 1; a type that does not exist: the null, 1
    expect(estimate('{ __type(name: "Book") { name } }')).toBe(1)
    expect(estimate('{ __type(name: "NoSuchType") { name } }')).toBe(1)
  })

  it('introspection past maxFieldVisits values is too large to price', () => {
    const error = thrown(() => estimate(getIntrospectionQuery(), undefined, { maxFieldVisits: 100 }))
    expect(error).toBeInstanceOf(TooLargeToPriceError)
  })

  it('@cost on a field replaces the default weight (object and scalar)', () => {
    expect(estimate('{ book { summary { text } } }')).toBe(6) // book 1 + summary @cost 5
    expect(estimate('{ book { checksum } }')).toBe(4) // book 1 + checksum @cost 3 (a String)
  })

  it('@cost on a type is the weight of every field returning it; a field @cost wins over it', () => {
    expect(estimate('{ book { editor { name } } }')).toBe(8) // book 1 + Editor @cost 7
    expect(estimate('{ book { coEditor { name } } }')).toBe(3) // book 1 + coEditor field @cost 2 (not 7)
    expect(estimate('{ book { signature } }')).toBe(7) // book 1 + scalar Signature @cost 6
    expect(estimate('{ book { grade } }')).toBe(3) // book 1 + enum Grade @cost 2
  })

  it('@cost on an argument is added only when the argument is provided', () => {
    expect(estimate('{ bookBy(isbn: "x") { title } }')).toBe(5) // book 1 + isbn 4
    expect(estimate('{ bookBy(id: "1") { title } }')).toBe(1) // book 1, isbn absent
    expect(estimate('{ bookBy(isbn: null) { title } }')).toBe(1) // null is not a value: book 1
    expect(estimate('query($i: String) { bookBy(isbn: $i) { title } }', { i: 'x' })).toBe(5) // 1 + 4
    expect(estimate('query($i: String) { bookBy(isbn: $i) { title } }', {})).toBe(1) // 1, not provided
  })

  it('@cost on input fields is added when provided, at any depth and for each item of a list of inputs', () => {
    expect(estimate('{ filtered(filter: { text: "a" }) { title } }')).toBe(3) // 1 + text 2
    expect(estimate('{ filtered(filter: { tags: ["a"] }) { title } }')).toBe(1) // 1, tags unweighted
    // 1 + text 2 + sub.deep 3 = 6
    expect(estimate('{ filtered(filter: { text: "a", sub: { deep: "b" } }) { title } }')).toBe(6)
    expect(
      estimate('query($f: Filter) { filtered(filter: $f) { title } }', {
        f: { text: 'a', sub: { deep: 'b' } },
      }),
    ).toBe(6) // same through a variable: 1 + 2 + 3
    // book 1 + text 2 (item 1) + text 2 (item 2) + 0 (item 3, tags only) = 5
    expect(
      estimate('{ filteredMany(filters: [{ text: "a" }, { text: "b" }, { tags: ["c"] }]) { title } }'),
    ).toBe(5)
    expect(
      estimate('query($fs: [Filter!]) { filteredMany(filters: $fs) { title } }', {
        fs: [{ text: 'a' }, { sub: { deep: 'x' } }, { text: 'b', sub: { deep: 'y' } }],
      }),
    ).toBe(11) // book 1 + 2 + 3 + (2 + 3) = 11
  })
})

describe('CostAnalyzer.estimate: list sizes', () => {
  it('takes the size from a slicing argument given as a literal or a variable', () => {
    expect(estimate('{ books(first: 3) { title } }')).toBe(3) // 3 × book 1
    expect(estimate('{ books(first: 3) { author { name } } }')).toBe(6) // 3 × (book 1 + author 1)
    expect(estimate('query($n: Int) { books(first: $n) { title } }', { n: 7 })).toBe(7) // 7 × 1
    expect(estimate('query($n: Int = 5) { books(first: $n) { title } }', {})).toBe(5) // variable default: 5 × 1
  })

  it('the largest of two slicing arguments wins', () => {
    expect(estimate('{ books(first: 3, last: 5) { title } }')).toBe(5) // max(3, 5) × 1
    expect(estimate('{ books(first: 8, last: 2) { title } }')).toBe(8) // max(8, 2) × 1
  })

  it('a schema default of a slicing argument counts as given (before assumedSize)', () => {
    expect(estimate('{ booksDefault { title } }')).toBe(20) // first defaults to 20; assumedSize 50 unused
    expect(estimate('{ booksDefault(first: 2) { title } }')).toBe(2) // 2 × 1
  })

  it('falls back to assumedSize, then to defaultListSize', () => {
    expect(estimate('{ booksAssumed { title } }')).toBe(4) // no first given: assumedSize 4 × 1
    expect(estimate('{ booksAssumed(first: 9) { title } }')).toBe(9) // 9 × 1
    expect(estimate('query($n: Int) { booksAssumed(first: $n) { title } }', {})).toBe(4) // $n absent: 4
    expect(estimate('{ shelf { title } }')).toBe(4) // assumedSize only: 4 × 1
    expect(estimate('{ allBooks { title } }')).toBe(10) // no @listSize: defaultListSize 10 × 1
    expect(estimate('{ books { title } }')).toBe(10) // slicing arguments, none given, no assumedSize: 10
    expect(estimate('{ allBooks { title } }', undefined, { defaultListSize: 6 })).toBe(6) // 6 × 1
    expect(estimate('query($n: Int) { books(first: $n) { title } }', { n: null })).toBe(10) // null: default
  })

  it('a dotted slicing argument reads an input field', () => {
    expect(estimate('{ paged(page: { first: 6 }) { title } }')).toBe(6) // 6 × 1
    expect(estimate('query($p: PageInput) { paged(page: $p) { title } }', { p: { first: 2 } })).toBe(2) // 2 × 1
    expect(estimate('{ paged { title } }')).toBe(10) // not given: defaultListSize 10 × 1
  })

  it('sizedFields put the size on edges and nodes of a connection, not on pageInfo', () => {
    // connection 1 + pageInfo 1 + edges 5 × (edge 1 + node 1) + nodes 5 × book 1 = 1 + 1 + 10 + 5 = 17
    expect(
      estimate(
        '{ bookConnection(first: 5) { totalCount pageInfo { hasNextPage } edges { cursor node { title } } nodes { title } } }',
      ),
    ).toBe(17)
    // connection 1 + nodes max(3, 8) × 1 = 9
    expect(estimate('{ bookConnection(first: 3, last: 8) { nodes { title } } }')).toBe(9)
    // no slicing argument given and no assumedSize: connection 1 + nodes 10 × 1 = 11
    expect(estimate('{ bookConnection { nodes { title } } }')).toBe(11)
  })

  it('sizedFields reach edges/nodes selected through a fragment spread or an inline fragment', () => {
    // connection 1 + pageInfo 1 + edges 5 × (edge 1 + node 1) = 12
    expect(
      estimate(
        '{ bookConnection(first: 5) { ...Page } } fragment Page on BookConnection { pageInfo { hasNextPage } edges { node { title } } }',
      ),
    ).toBe(12)
    // connection 1 + nodes 4 × (book 1 + author 1) = 9
    expect(
      estimate('{ bookConnection(first: 4) { ... on BookConnection { nodes { author { name } } } } }'),
    ).toBe(9)
    // connection 1 + nodes 6 × 1 (inline fragment without type condition, slicing from a variable) = 7
    expect(
      estimate('query($n: Int) { bookConnection(first: $n) { ... { nodes { title } } } }', { n: 6 }),
    ).toBe(7)
  })

  it('nested lists multiply', () => {
    expect(estimate('{ books(first: 3) { reviews(first: 2) { stars } } }')).toBe(9) // 3 × (1 + 2 × 1)
    expect(estimate('{ books(first: 3) { reviews { stars } } }')).toBe(33) // 3 × (1 + 10 × 1)
    // edges 4 × (edge 1 + node 1 + reviews 2 × 1) + connection 1 = 4 × 4 + 1 = 17
    expect(estimate('{ bookConnection(first: 4) { edges { node { reviews(first: 2) { stars } } } } }')).toBe(
      17,
    )
    expect(estimate('{ matrix { v } }')).toBe(100) // [[Cell]]: 10 × 10 × 1
  })
})

describe('CostAnalyzer.estimate: mutations, abstract types, directives', () => {
  it('adds mutationCost (10) per root mutation field, aliases included', () => {
    expect(estimate('mutation { addBook(title: "x") { title } }')).toBe(11) // 10 + book 1
    expect(estimate('mutation { ping }')).toBe(10) // 10 + Boolean 0
    // (10 + book 1) + (10 + book 1 + author 1) = 23
    expect(
      estimate('mutation { a: addBook(title: "x") { title } b: addBook(title: "y") { author { name } } }'),
    ).toBe(23)
    expect(estimate('mutation { addBook { title } }', undefined, { mutationCost: 3 })).toBe(4) // 3 + 1
    // nested fields of the payload are not root mutation fields: 10 + book 1 + author 1 = 12
    expect(estimate('mutation { addBook { author { name } } }')).toBe(12)
  })

  it('prices an interface or union selection at the most expensive possible type', () => {
    // media 1 + max(Book: author 1, Film: director 1 + studio 1) = 1 + 2 = 3
    expect(
      estimate(
        '{ media { id ... on Book { author { name } } ... on Film { director { name } studio { name } } } }',
      ),
    ).toBe(3)
    // 2 × (item 1 + max(Book: author 1 + publisher 1, Author: 0)) = 2 × 3 = 6
    expect(
      estimate(
        '{ search(term: "x") { ... on Book { author { name } publisher { name } } ... on Author { name } } }',
      ),
    ).toBe(6)
    // 2 × (1 + max(Book: summary 5, Author: bio 1)) = 12 (a sum would give 2 × 7 = 14)
    expect(estimate('{ search { ... on Book { summary { text } } ... on Author { bio { text } } } }')).toBe(
      12,
    )
    // a fragment on the interface applies to every implementation: 1 + max(Book 0+1, Film 0+1+1) = 3
    expect(
      estimate(
        '{ media { ...M ... on Film { studio { name } } } } fragment M on Media { ... on Book { author { name } } ... on Film { director { name } } }',
      ),
    ).toBe(3)
  })

  it('honours @skip and @include with variables, on fields and fragments', () => {
    const query = `query($a: Boolean!, $p: Boolean!) {
      book { author @include(if: $a) { name } publisher @skip(if: $p) { name } }
    }`
    expect(estimate(query, { a: true, p: false })).toBe(3) // book 1 + author 1 + publisher 1
    expect(estimate(query, { a: false, p: false })).toBe(2) // book 1 + publisher 1
    expect(estimate(query, { a: false, p: true })).toBe(1) // book 1
    expect(estimate(query, { a: true, p: true })).toBe(2) // book 1 + author 1
    const fragments = `query($a: Boolean!, $p: Boolean!) {
      book { ... @include(if: $a) { author { name } } ...P @skip(if: $p) }
    }
    fragment P on Book { publisher { address { zipCode } } }`
    expect(estimate(fragments, { a: true, p: false })).toBe(4) // book 1 + author 1 + publisher 1 + address 1
    expect(estimate(fragments, { a: false, p: true })).toBe(1) // book 1
    // a skipped connection contributes nothing: book 1 only
    expect(
      estimate(
        'query($s: Boolean!) { book { id } bookConnection(first: 5) @skip(if: $s) { nodes { id } } }',
        { s: true },
      ),
    ).toBe(1)
  })

  it('prices the named operation of a document with several', () => {
    const query = 'query A { book { title } } query B { books(first: 4) { author { name } } }'
    const analyzer = new CostAnalyzer()
    const document = parse(query)
    expect(analyzer.estimate({ schema, document, operationName: 'A' })).toBe(1) // book 1
    expect(analyzer.estimate({ schema, document, operationName: 'B' })).toBe(8) // 4 × (1 + 1)
  })
})

describe('CostAnalyzer: the same weights from SDL, the costs option and field extensions', () => {
  const weightsSdl = `
    type Query {
      book(isbn: String @cost(weight: 4)): Book
      books(first: Int, filter: Filter): [Book!]! @listSize(slicingArguments: ["first"], assumedSize: 4)
      bookConnection(first: Int): BookConnection @listSize(slicingArguments: ["first"], sizedFields: ["nodes"])
    }
    type Book {
      title: String
      editor: Editor
      summary: Summary @cost(weight: 5)
    }
    type Editor @cost(weight: 7) {
      name: String
    }
    type Summary {
      text: String
    }
    type BookConnection {
      nodes: [Book!]!
      totalCount: Int
    }
    input Filter {
      text: String @cost(weight: 2)
    }
  `
  const plainSdl = weightsSdl.replace(/@(cost|listSize)\([^)]*\)/g, '')
  const costs: CostMap = {
    'Query.book(isbn:)': { weight: 4 },
    'Query.books': { listSize: { slicingArguments: ['first'], assumedSize: 4 } },
    'Query.bookConnection': { listSize: { slicingArguments: ['first'], sizedFields: ['nodes'] } },
    'Book.summary': { weight: 5 },
    Editor: { weight: 7 },
    'Filter.text': { weight: 2 },
  }

  function extensionsSchema(): GraphQLSchema {
    const Summary = new GraphQLObjectType({ name: 'Summary', fields: { text: { type: GraphQLString } } })
    const Editor = new GraphQLObjectType({
      name: 'Editor',
      extensions: { cost: { weight: 7 } },
      fields: { name: { type: GraphQLString } },
    })
    const Book = new GraphQLObjectType({
      name: 'Book',
      fields: {
        title: { type: GraphQLString },
        editor: { type: Editor },
        summary: { type: Summary, extensions: { cost: { weight: 5 } } },
      },
    })
    const BookConnection = new GraphQLObjectType({
      name: 'BookConnection',
      fields: {
        nodes: { type: new GraphQLNonNull(new GraphQLList(new GraphQLNonNull(Book))) },
        totalCount: { type: GraphQLInt },
      },
    })
    const Filter = new GraphQLInputObjectType({
      name: 'Filter',
      fields: { text: { type: GraphQLString, extensions: { cost: { weight: 2 } } } },
    })
    const queryFields: GraphQLFieldConfigMap<unknown, unknown> = {
      book: { type: Book, args: { isbn: { type: GraphQLString, extensions: { cost: { weight: 4 } } } } },
      books: {
        type: new GraphQLNonNull(new GraphQLList(new GraphQLNonNull(Book))),
        args: { first: { type: GraphQLInt }, filter: { type: Filter } },
        extensions: { listSize: { slicingArguments: ['first'], assumedSize: 4 } },
      },
      bookConnection: {
        type: BookConnection,
        args: { first: { type: GraphQLInt } },
        extensions: { listSize: { slicingArguments: ['first'], sizedFields: ['nodes'] } },
      },
    }
    return new GraphQLSchema({ query: new GraphQLObjectType({ name: 'Query', fields: queryFields }) })
  }

  const cases: [query: string, expected: number][] = [
    ['{ book { title } }', 1], // book 1
    ['{ book(isbn: "x") { editor { name } summary { text } } }', 17], // book 1 + Editor 7 + summary 5 + isbn 4
    ['{ books { title } }', 4], // assumedSize 4 × 1
    ['{ books(first: 3, filter: { text: "a" }) { editor { name } } }', 26], // 3 × (1 + 7) + text 2
    ['{ bookConnection(first: 6) { totalCount nodes { summary { text } } } }', 37], // 1 + 6 × (1 + 5)
  ]
  const variants: [name: string, schema: GraphQLSchema, options: CostAnalysisOptions][] = [
    ['SDL directives', buildSchema(`${directiveSdl}\n${weightsSdl}`), {}],
    ['the costs option', buildSchema(plainSdl), { costs }],
    ['field extensions', extensionsSchema(), {}],
  ]

  it('the plain SDL really has no directives left (the comparison is meaningful)', () => {
    expect(plainSdl).not.toContain('@')
    expect(
      estimate(
        '{ book(isbn: "x") { editor { name } summary { text } } }',
        undefined,
        {},
        buildSchema(plainSdl),
      ),
    ).toBe(
      3, // book 1 + editor 1 + summary 1, no weights at all
    )
  })

  for (const [name, variantSchema, options] of variants) {
    it(`gives the hand-computed numbers with ${name}`, () => {
      const got = cases.map(([query]) => estimate(query, undefined, options, variantSchema))
      expect(got).toEqual(cases.map(([, expected]) => expected))
    })
  }

  it("'*.field' applies to that field on every type; the costs option wins over SDL", () => {
    // book 1 + summary 9 = 10
    expect(
      estimate('{ book { summary { text } } }', undefined, { costs: { '*.summary': { weight: 9 } } }),
    ).toBe(10)
    // costs option 1 overrides @cost(weight: 5): book 1 + summary 1 = 2
    expect(
      estimate('{ book { summary { text } } }', undefined, { costs: { 'Book.summary': { weight: 1 } } }),
    ).toBe(2)
    // 'Book.summary' wins over '*.summary': 1 + 2 = 3
    const both = { costs: { '*.summary': { weight: 9 }, 'Book.summary': { weight: 2 } } }
    expect(estimate('{ book { summary { text } } }', undefined, both)).toBe(3)
  })

  it('an unknown coordinate throws TOLLBOOTH_ERR_INVALID_OPTION', () => {
    for (const coordinate of ['Nope', 'Book.nope', 'Query.book(nope:)', '*.nope', 'Filter.nope', 'Book.']) {
      const error = thrown(() =>
        estimate('{ book { title } }', undefined, { costs: { [coordinate]: { weight: 1 } } }),
      )
      expect(error, coordinate).toMatchObject({ code: 'TOLLBOOTH_ERR_INVALID_OPTION' })
    }
    // and a known one does not
    expect(estimate('{ book { title } }', undefined, { costs: { 'Query.book(id:)': { weight: 1 } } })).toBe(1)
  })
})

describe('CostAnalyzer: cost cache', () => {
  it('returns a different cost when a slicing variable changes and the same cost for the same variables', () => {
    const analyzer = new CostAnalyzer()
    const document = parse('query($n: Int, $id: ID) { book(id: $id) { title } books(first: $n) { title } }')
    const run = (variables: Record<string, unknown>) => analyzer.estimate({ schema, document, variables })
    expect(run({ n: 3 })).toBe(4) // book 1 + 3 × 1
    expect(run({ n: 7 })).toBe(8) // book 1 + 7 × 1
    expect(run({ n: 3 })).toBe(4)
    expect(run({ n: 3, id: 'other' })).toBe(4) // $id does not change the cost
    expect(run({})).toBe(11) // book 1 + defaultListSize 10 × 1
  })

  it('keys on @skip/@include variables and weighted input variables too', () => {
    const analyzer = new CostAnalyzer()
    const document = parse(
      'query($a: Boolean!, $f: Filter) { filtered(filter: $f) { title author @include(if: $a) { name } } }',
    )
    const run = (variables: Record<string, unknown>) => analyzer.estimate({ schema, document, variables })
    expect(run({ a: true, f: { text: 'x' } })).toBe(4) // book 1 + author 1 + text 2
    expect(run({ a: false, f: { text: 'x' } })).toBe(3) // book 1 + text 2
    expect(run({ a: false, f: { tags: ['x'] } })).toBe(1) // book 1
    expect(run({ a: true, f: { text: 'x' } })).toBe(4)
  })

  it('an operation that cannot be priced takes no cache slot', () => {
    const analyzer = new CostAnalyzer()
    const price = vi.spyOn(analyzer as unknown as { price: () => number }, 'price')
    const document = parse('query($n: Int) { books(first: $n) { title } }')
    const run = (variables: Record<string, unknown>) => analyzer.estimate({ schema, document, variables })
    expect(run({ n: 3 })).toBe(3)
    expect(price).toHaveBeenCalledTimes(1)
    // As many invalid values as the cache holds entries per document: each is priced (and refused), none kept.
    for (let i = 0; i < 64; i++) expect(thrown(() => run({ n: `bad ${i}` }))).toBeInstanceOf(GraphQLError)
    expect(price).toHaveBeenCalledTimes(65)
    expect(run({ n: 3 })).toBe(3)
    expect(price).toHaveBeenCalledTimes(65) // still cached
  })

  it('keys the cache on the values of priced arguments only: other variables count only by being given or not', () => {
    const analyzer = new CostAnalyzer()
    const price = vi.spyOn(analyzer as unknown as { price: () => number }, 'price')
    const document = parse(
      'query($isbn: String, $id: ID, $n: Int) { bookBy(isbn: $isbn, id: $id) { title } books(first: $n) { title } }',
    )
    const run = (variables: Record<string, unknown>) => analyzer.estimate({ schema, document, variables })
    // bookBy: book 1 + isbn 4 when given; books: 3 × 1.
    for (let i = 0; i < 100; i++) expect(run({ isbn: 'x', id: `book-${i}`, n: 3 })).toBe(8)
    expect(price).toHaveBeenCalledTimes(1) // a hundred ids, one estimate
    expect(run({ isbn: null, id: 'book-1', n: 3 })).toBe(4) // the weighted argument's value keys the cache
    expect(run({ isbn: 'x', n: 3 })).toBe(8) // `id` absent: a key of its own
    expect(run({ isbn: 'x', id: null, n: 3 })).toBe(8) // `id` null: another
    expect(price).toHaveBeenCalledTimes(4)
  })

  it('a null for a non-null argument is refused even after the same document was priced with a value', () => {
    const analyzer = new CostAnalyzer()
    const itemSchema = buildSchema('type Query { item(id: ID!): Item } type Item { name: String }')
    const document = parse('query($id: ID = "i1") { item(id: $id) { name } }')
    const run = (variables: Record<string, unknown>) =>
      analyzer.estimate({ schema: itemSchema, document, variables })
    expect(run({ id: 'x' })).toBe(1)
    expect(thrown(() => run({ id: null }))).toBeInstanceOf(GraphQLError)
  })

  it('a result without data costs nothing, even when its other variables are invalid', () => {
    const analyzer = new CostAnalyzer()
    const document = parse('query($n: Int, $id: ID!) { book(id: $id) { title } books(first: $n) { title } }')
    expect(analyzer.priceOperation({ schema, document, variables: { n: 3, id: '1' } }).cost).toBe(4)
    // Same cost variables, so the cached cost serves; `$id` is invalid, so the executor answers without data.
    const refused = analyzer.priceOperation({ schema, document, variables: { n: 3, id: { not: 'an id' } } })
    expect(refused.cost).toBe(4)
    expect(refused.actual(undefined)).toBe(0)
    expect(refused.actual(null)).toBe(0)
  })

  it('refuses a fragment explosion quickly with TooLargeToPriceError', () => {
    // F0 spreads F1 twice, ..., F9 spreads F10 twice: 2^10 = 1024 copies of F10's 12 fields, well over 10000
    const fragments = Array.from(
      { length: 10 },
      (_, i) => `fragment F${i} on Book { title ...F${i + 1} ...F${i + 1} }`,
    )
    fragments.push(
      `fragment F10 on Book { ${Array.from({ length: 12 }, (_, i) => `t${i}: title`).join(' ')} }`,
    )
    const document = parse(`{ book { ...F0 } }\n${fragments.join('\n')}`)
    const analyzer = new CostAnalyzer()
    const started = performance.now()
    const error = thrown(() => analyzer.estimate({ schema, document }))
    expect(error).toBeInstanceOf(TooLargeToPriceError)
    expect((error as TooLargeToPriceError).maxFieldVisits).toBe(10_000)
    expect(performance.now() - started).toBeLessThan(2000)
    // the same document priced with a bigger budget is a finite number: book 1 (all fields are scalars)
    expect(new CostAnalyzer({ maxFieldVisits: 100_000 }).estimate({ schema, document })).toBe(1)
  })

  it('refuses 40 levels (2^40 expansions unbounded) as fast, and actual() walks each fragment once', () => {
    const fragments = Array.from(
      { length: 40 },
      (_, i) => `fragment F${i} on Book { title ...F${i + 1} ...F${i + 1} }`,
    )
    fragments.push('fragment F40 on Book { author { name } }')
    const document = parse(`{ book { ...F0 } }\n${fragments.join('\n')}`)
    const started = performance.now()
    expect(thrown(() => new CostAnalyzer().estimate({ schema, document }))).toBeInstanceOf(
      TooLargeToPriceError,
    )
    expect(
      new CostAnalyzer().actual({ schema, document }, { book: { title: 't', author: { name: 'a' } } }),
    ).toBe(2)
    expect(performance.now() - started).toBeLessThan(2000)
  })
})

describe('CostAnalyzer.actual', () => {
  it("counts the real items of lists, and a null pays its field's weight (its resolver ran)", () => {
    const query = '{ books(first: 5) { title author { name } } book { title } }'
    const data = {
      books: [
        { title: 't', author: { name: 'a' } },
        { title: 't', author: null },
        { title: 't', author: { name: 'b' } },
      ],
      book: null,
    }
    expect(actual(query, data)).toBe(7) // 3 books + 2 authors + the null author 1; book null 1
    expect(new CostAnalyzer().estimate({ schema, document: parse(query) })).toBe(11) // 5 × (1 + 1) + 1
    // An empty list: its resolver ran, so the field's weight once (Book: 1)
    expect(actual('{ books(first: 5) { title } }', { books: [] })).toBe(1)
    expect(actual('{ tags }', { tags: ['a', 'b'] })).toBe(0) // scalars
  })

  it('counts connections, nested lists and weights as the estimate does', () => {
    // connection 1 + pageInfo 1 + 2 edges + 2 nodes (one of them null) = 6
    expect(
      actual('{ bookConnection(first: 10) { pageInfo { hasNextPage } edges { cursor node { title } } } }', {
        bookConnection: {
          pageInfo: { hasNextPage: true },
          edges: [
            { cursor: 'a', node: { title: 't' } },
            { cursor: 'b', node: null },
          ],
        },
      }),
    ).toBe(6)
    // 3 cells + the empty row's weight once
    expect(actual('{ matrix { v } }', { matrix: [[{ v: 1 }, { v: 2 }], [], [{ v: 3 }]] })).toBe(4)
    // book 1 + summary 5 + editor 7 + isbn 4 (provided, so charged) = 17
    expect(
      actual('{ bookBy(isbn: "x") { summary { text } editor { name } } }', {
        bookBy: { summary: { text: 's' }, editor: { name: 'e' } },
      }),
    ).toBe(17)
  })

  it('adds mutationCost per root mutation field', () => {
    // (10 + book 1) + (10 + book 1): the second mutation ran, it returned null
    expect(
      actual('mutation { a: addBook(title: "x") { title } b: addBook(title: "y") { title } }', {
        a: { title: 'x' },
        b: null,
      }),
    ).toBe(22)
  })

  it('honours @skip/@include variables in the selection it walks', () => {
    const query = 'query($a: Boolean!) { book { author @include(if: $a) { name } } }'
    // author excluded: only book 1 counts, even if the data holds an author
    expect(actual(query, { book: { author: { name: 'n' } } }, { a: false })).toBe(1)
    expect(actual(query, { book: { author: { name: 'n' } } }, { a: true })).toBe(2)
  })

  it('uses __typename to price an item with the fragment of its concrete type', () => {
    const query = `{ search {
      __typename
      ... on Book { extra: summary { text } author { name } }
      ... on Author { extra: bio { text } }
    } }`
    const data = {
      search: [
        { __typename: 'Book', extra: { text: 's' }, author: { name: 'a' } },
        { __typename: 'Author', extra: { text: 'b' } },
        { __typename: 'Author', extra: null },
      ],
    }
    // Book: 1 + summary 5 + author 1 = 7; Author: 1 + bio 1 = 2; Author: 1 + a null bio 1 = 2; total 11
    expect(actual(query, data)).toBe(11)
    // the estimate bounds it: 2 × (1 + max(Book 5 + 1, Author 1)) = 14
    expect(new CostAnalyzer().estimate({ schema, document: parse(query) })).toBe(14)
  })

  it('prices an interface field by the concrete type named in __typename', () => {
    const query =
      '{ media { __typename id ... on Film { director { name } } ... on Book { author { name } } } }'
    expect(actual(query, { media: { __typename: 'Film', id: '1', director: { name: 'd' } } })).toBe(2) // 1 + 1
    expect(actual(query, { media: { __typename: 'Book', id: '1', author: null } })).toBe(2) // 1 + a null author 1
    expect(actual(query, { media: null })).toBe(1) // the field ran, and answered null
    expect(actual(query, {})).toBe(0) // it never ran
  })
})

describe('CostAnalyzer: review fixes', () => {
  it('without __typename, actual() prices an abstract item as its most expensive possible type, whatever the fragment order', () => {
    const cheapFirst =
      '{ search { ... on Author { extra: bio { text } } ... on Book { extra: summary { text } } } }'
    const dearFirst =
      '{ search { ... on Book { extra: summary { text } } ... on Author { extra: bio { text } } } }'
    const data = { search: [{ extra: { text: 's' } }] }
    // Could be a Book: 1 + summary 5 = 6 (an Author would be 1 + bio 1 = 2)
    expect(actual(cheapFirst, data)).toBe(6)
    expect(actual(dearFirst, data)).toBe(6)
  })

  it('reads __typename under an alias', () => {
    const query =
      '{ search { kind: __typename ... on Book { extra: summary { text } } ... on Author { extra: bio { text } } } }'
    // Author named: 1 + bio 1 = 2
    expect(actual(query, { search: [{ kind: 'Author', extra: { text: 'b' } }] })).toBe(2)
  })

  it('a key another fragment uses for another field is no __typename key: its value cannot earn a refund', () => {
    // A Book whose title is "Author": read as a type name, the item would be priced as an Author (1).
    const spoof = '{ search { ... on Author { t: __typename } ... on Book { t: title summary { text } } } }'
    // Unknown type: the most expensive possible one, Book: 1 + summary 5 = 6
    expect(actual(spoof, { search: [{ t: 'Author', summary: { text: 's' } }] })).toBe(6)
    // The other field is priced where it weighs: checksum @cost(weight: 3), Book 1 + 3 = 4
    const weighted = '{ search { ... on Author { t: __typename } ... on Book { t: checksum } } }'
    expect(actual(weighted, { search: [{ t: 'Author' }] })).toBe(4)
  })

  it('a __typename naming no possible type of the field is not believed', () => {
    const query = '{ search { kind: __typename ... on Book { extra: summary { text } } } }'
    // Film is a type of the schema, not of SearchResult: the most expensive possible type, Book 1 + 5
    expect(actual(query, { search: [{ kind: 'Film', extra: { text: 's' } }] })).toBe(6)
  })

  it("refuses '*.field' for arguments and input fields instead of ignoring it", () => {
    for (const coordinate of ['*.book(isbn:)', '*.deep']) {
      const error = thrown(() =>
        estimate('{ book { title } }', undefined, { costs: { [coordinate]: { weight: 1 } } }),
      )
      expect(error, coordinate).toMatchObject({ code: 'TOLLBOOTH_ERR_INVALID_OPTION' })
    }
  })

  it("merges 'Type.field' over '*.field' per property", () => {
    // weight 9 from '*.summary', list size from 'Book.summary' (not a list: no effect): book 1 + 9 = 10
    const costs = { '*.summary': { weight: 9 }, 'Book.summary': { listSize: { assumedSize: 3 } } }
    expect(estimate('{ book { summary { text } } }', undefined, { costs })).toBe(10)
  })

  it('an abstract field without its own weight weighs as its heaviest possible type', () => {
    const heavyFilm = buildSchema(`${directiveSdl}
      type Query { media: Media, film: Film }
      interface Media { id: ID! }
      type Film implements Media @cost(weight: 5) { id: ID! }
      type Book implements Media { id: ID! }`)
    // media → max(Film 5, Book 1) = 5, the same as asking for the film directly
    expect(estimate('{ media { id } }', undefined, undefined, heavyFilm)).toBe(5)
    expect(estimate('{ film { id } }', undefined, undefined, heavyFilm)).toBe(5)
  })

  it("a field selected on an interface is priced as the dearest of its implementations' fields", () => {
    const schemaWithInterface = buildSchema(`${directiveSdl}
      type Query { viaIface: Iface, impl: Impl }
      interface Iface { results: [Item!]! }
      type Impl implements Iface { results: [Item!]! @cost(weight: 50) @listSize(assumedSize: 100) }
      type Plain implements Iface { results: [Item!]! }
      type Item { id: ID! }`)
    // The implementation's own price: 1 + 100 × 50
    expect(estimate('{ impl { results { id } } }', undefined, undefined, schemaWithInterface)).toBe(5001)
    // Through the interface the same, not the interface field's defaults (1 + 10 × 1 = 11)
    expect(estimate('{ viaIface { results { id } } }', undefined, undefined, schemaWithInterface)).toBe(5001)
  })

  it('an interface field whose implementations assume different sizes is sized by the largest, the default included', () => {
    const sized = buildSchema(`${directiveSdl}
      type Query { viaIface: Iface }
      interface Iface { results: [Item!]! }
      type Small implements Iface { results: [Item!]! @listSize(assumedSize: 5) }
      type Unsized implements Iface { results: [Item!]! }
      type Item { id: ID! }`)
    // max(5, defaultListSize) items of 1: 1 + 10; with a default of 3: 1 + 5
    expect(estimate('{ viaIface { results { id } } }', undefined, undefined, sized)).toBe(11)
    expect(estimate('{ viaIface { results { id } } }', undefined, { defaultListSize: 3 }, sized)).toBe(6)
  })

  it("through an interface, each implementation is priced with its own arguments' defaults and weights", () => {
    const feeds = buildSchema(`${directiveSdl}
      type Query { feed: Feed, doc: Doc }
      interface Feed { items(first: Int = 5): [Item!]! @listSize(slicingArguments: ["first"]) }
      type BigFeed implements Feed { items(first: Int = 1000): [Item!]! @listSize(slicingArguments: ["first"]) }
      type SmallFeed implements Feed { items(first: Int = 5): [Item!]! @listSize(slicingArguments: ["first"]) }
      interface Doc { render: String }
      type Pdf implements Doc { render(format: String = "pdf" @cost(weight: 900)): String }
      type Txt implements Doc { render: String }
      type Item { heavy: Int @cost(weight: 10) }`)
    // BigFeed runs 1000 items (1 + heavy 10 each): 1 + 1000 × 11, whichever way it is asked
    expect(estimate('{ feed { ... on BigFeed { items { heavy } } } }', undefined, undefined, feeds)).toBe(
      11_001,
    )
    expect(estimate('{ feed { items { heavy } } }', undefined, undefined, feeds)).toBe(11_001)
    // Pdf's defaulted weighted argument is given (a default counts as given): 1 + 900
    expect(estimate('{ doc { render } }', undefined, undefined, feeds)).toBe(901)
  })

  it("a fragment's field sized by a connection in one place costs its own size where it is spread elsewhere", () => {
    const connections = buildSchema(`${directiveSdl}
      type Query {
        sized(first: Int): ItemConnection @listSize(slicingArguments: ["first"], sizedFields: ["edges"])
        all: ItemConnection!
      }
      type ItemConnection { edges: [Item!]! @listSize(assumedSize: 500) }
      type Item { heavy: Int @cost(weight: 10) }`)
    // Alone under `all`: 1 + 500 × (1 + 10) = 5501
    expect(estimate('{ all { edges { heavy } } }', undefined, undefined, connections)).toBe(5501)
    // Under `sized(first: 1)` only, edges take its size: 1 + 1 × 11 = 12
    expect(estimate('{ sized(first: 1) { edges { heavy } } }', undefined, undefined, connections)).toBe(12)
    // One fragment in both places: the shared node is priced at its own size too, max(1, 500): 2 × 5501
    const shared =
      '{ sized(first: 1) { ...F } all { ...F } } fragment F on ItemConnection { edges { heavy } }'
    expect(estimate(shared, undefined, undefined, connections)).toBe(2 * 5501)
  })

  it('sizedFields on only some implementations: through the interface, the others keep their own size', () => {
    const sources = buildSchema(`${directiveSdl}
      type Query { source: Source }
      interface Source { conn(first: Int): Conn }
      type Paged implements Source { conn(first: Int): Conn @listSize(slicingArguments: ["first"], sizedFields: ["edges"]) }
      type Dump implements Source { conn(first: Int): Conn }
      type Conn { edges: [Item!]! @listSize(assumedSize: 500) }
      type Item { heavy: Int @cost(weight: 10) }`)
    // Dump's edges: 500 × 11, + conn 1 + source 1
    expect(
      estimate(
        '{ source { ... on Dump { conn(first: 1) { edges { heavy } } } } }',
        undefined,
        undefined,
        sources,
      ),
    ).toBe(5502)
    expect(estimate('{ source { conn(first: 1) { edges { heavy } } } }', undefined, undefined, sources)).toBe(
      5502,
    )
  })

  it.each([
    [
      'a misspelt slicing argument',
      'items(first: Int): [Item!]! @listSize(slicingArguments: ["frist"])',
      '"@listSize on Query.items: slicingArguments" must name an argument of Query.items, got "frist" (did you mean "first"?)',
    ],
    [
      'a slicing argument that is no number',
      'items(ids: [ID!]!): [Item!]! @listSize(slicingArguments: ["ids"])',
      '"@listSize on Query.items: slicingArguments" must be arguments of type Int or Float, got "ids"',
    ],
    [
      'a sized field the type does not have',
      'items(first: Int): Page @listSize(slicingArguments: ["first"], sizedFields: ["edgez"])',
      '"@listSize on Query.items: sizedFields" must name a field of Page, got "edgez" (did you mean "edges"?)',
    ],
  ])('@listSize naming nothing in the schema is refused when the model is built: %s', (_, field, message) => {
    const wrong = buildSchema(`${directiveSdl}
      type Query { ${field} }
      type Page { edges: [Item!]! }
      type Item { id: ID! }`)
    expect(thrown(() => new CostAnalyzer().model(wrong))).toMatchObject({
      code: 'TOLLBOOTH_ERR_INVALID_OPTION',
      message: `useTollbooth: ${message}`,
    })
  })

  it('TooLargeToPriceError carries a stable code', () => {
    expect(new TooLargeToPriceError(10).code).toBe('TOLLBOOTH_ERR_TOO_LARGE_TO_PRICE')
  })
})

describe('CostAnalyzer: unknown option keys', () => {
  function refusal(fn: () => unknown): { code?: string; message: string } {
    return thrown(fn) as { code?: string; message: string }
  }

  it('refuses a key of its own options it does not know, and the keys only useTollbooth knows', () => {
    // `as never`: what JavaScript would pass (TypeScript refuses an object with no key in common with the type).
    const options = { defaultListsize: 5 } as never
    expect(refusal(() => new CostAnalyzer(options))).toMatchObject({
      code: 'TOLLBOOTH_ERR_INVALID_OPTION',
      message: 'useTollbooth: unknown option "defaultListsize" (did you mean "defaultListSize"?)',
    })
    const pluginOptions = { maxCost: 100, mutationCost: 5 }
    expect(refusal(() => new CostAnalyzer(pluginOptions)).message).toBe(
      'useTollbooth: unknown option "maxCost" (known options: costs, defaultListSize, mutationCost, ' +
        'introspectionCost, maxFieldVisits, estimators)',
    )
  })

  it('refuses an unknown key in a costs entry or its listSize, at construction', () => {
    const costs = { 'Book.summary': { wieght: 3 } } as never
    expect(refusal(() => new CostAnalyzer({ costs })).message).toBe(
      'useTollbooth: unknown option "costs["Book.summary"].wieght" (did you mean "weight"?)',
    )
    const listSize = { 'Query.books': { listSize: { assumedsize: 3 } } } as never
    expect(refusal(() => new CostAnalyzer({ costs: listSize })).message).toBe(
      'useTollbooth: unknown option "costs["Query.books"].listSize.assumedsize" (did you mean "assumedSize"?)',
    )
  })

  it("refuses an unknown key in a field's extensions.listSize when the schema's model is built", () => {
    const Query = new GraphQLObjectType({
      name: 'Query',
      fields: {
        tags: {
          type: new GraphQLList(GraphQLString),
          args: { first: { type: GraphQLInt } },
          extensions: { listSize: { slicingArgument: ['first'] } },
        },
      },
    })
    const onSchema = new GraphQLSchema({ query: Query })
    expect(refusal(() => new CostAnalyzer().model(onSchema)).message).toBe(
      'useTollbooth: unknown option "Query.tags.extensions.listSize.slicingArgument" ' +
        '(did you mean "slicingArguments"?)',
    )
  })
})
