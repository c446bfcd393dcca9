import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { buildSchema, parse } from 'graphql'
import { createSchema, createYoga } from 'graphql-yoga'
import { describe, expect, it } from 'vitest'
import { CostAnalyzer } from '../../../../src/graphql/cost/costAnalyzer.js'

/**
 * The refund counts a field at the weight of what ran: the definition of the object's concrete type, when the
 * response tells it (`__typename`) or the field's type has one possible type, and the definitions it was selected on
 * (an interface's `@cost` counts for its implementations too), whichever is dearer. When the concrete type is
 * unknown, the dearest possible type. A fragment on an interface must not price an implementation's field at the
 * interface's weight: `{ docs { ...F } } fragment F on Doc { preview }` would be refunded almost all its price.
 *
 * Every expected number is worked out by hand: an object 1, `Pdf.preview` 50, `Doc.summary` 7, `Pdf.render(dpi:)` 4.
 */

const directiveSdl = readFileSync(
  fileURLToPath(new URL('../../../../schema/cost-directives.graphql', import.meta.url)),
  'utf8',
)

const oneImplementation = /* GraphQL */ `
  interface Doc {
    id: ID!
    preview: String
    summary: String @cost(weight: 7)
    render(dpi: Int): String
  }
  type Pdf implements Doc {
    id: ID!
    preview: String @cost(weight: 50)
    summary: String
    render(dpi: Int @cost(weight: 4)): String
  }
  type Query {
    docs(first: Int = 10): [Doc!]! @listSize(slicingArguments: ["first"])
  }
`

const twoImplementations = /* GraphQL */ `
  ${oneImplementation}
  type Txt implements Doc {
    id: ID!
    preview: String
    summary: String
    render(dpi: Int): String
  }
`

const pdfOnly = buildSchema(`${directiveSdl}\n${oneImplementation}`)
const pdfOrTxt = buildSchema(`${directiveSdl}\n${twoImplementations}`)

function priced(schema: typeof pdfOnly, query: string, data: unknown): { estimate: number; actual: number } {
  const analyzer = new CostAnalyzer()
  const input = { schema, document: parse(query) }
  return { estimate: analyzer.estimate(input), actual: analyzer.actual(input, data) }
}

const docs = (count: number, fields: Record<string, unknown>) =>
  Array.from({ length: count }, () => ({ ...fields }))

describe('the refund prices a field at the concrete type that ran', () => {
  it("a fragment on the interface: one possible type, that type's weight (19 × (1 + 50))", () => {
    const data = { docs: docs(19, { preview: 'p' }) }
    const query = '{ docs(first: 19) { ...F } } fragment F on Doc { preview }'
    expect(priced(pdfOnly, query, data)).toEqual({ estimate: 969, actual: 969 })
    // The same field selected directly, and through an inline fragment on the interface
    expect(priced(pdfOnly, '{ docs(first: 19) { preview } }', data)).toEqual({ estimate: 969, actual: 969 })
    expect(priced(pdfOnly, '{ docs(first: 19) { ... on Doc { preview } } }', data)).toEqual({
      estimate: 969,
      actual: 969,
    })
  })

  it('with __typename, each object at its own type; without it, each at the dearest', () => {
    const query = '{ docs(first: 2) { kind: __typename ...F } } fragment F on Doc { preview }'
    const named = {
      docs: [
        { kind: 'Txt', preview: 'p' },
        { kind: 'Pdf', preview: 'p' },
      ],
    }
    // Txt 1 + 0, Pdf 1 + 50
    expect(priced(pdfOrTxt, query, named)).toEqual({ estimate: 102, actual: 52 })
    const unnamed = { docs: [{ preview: 'p' }, { preview: 'p' }] }
    // Either could be a Pdf: 2 × (1 + 50)
    expect(priced(pdfOrTxt, '{ docs(first: 2) { ...F } } fragment F on Doc { preview }', unnamed)).toEqual({
      estimate: 102,
      actual: 102,
    })
  })

  it("a weight on the interface's field counts for an implementation that declares none (2 × (1 + 7))", () => {
    const data = { docs: docs(2, { summary: 's' }) }
    expect(priced(pdfOnly, '{ docs(first: 2) { summary } }', data)).toEqual({ estimate: 16, actual: 16 })
    const named = { docs: [{ __typename: 'Txt', summary: 's' }] }
    expect(priced(pdfOrTxt, '{ docs(first: 1) { __typename summary } }', named)).toEqual({
      estimate: 8,
      actual: 8,
    })
  })

  it("an implementation's weighted argument counts when the field is selected on the interface (1 + 4)", () => {
    const data = { docs: [{ render: 'r' }] }
    const query = '{ docs(first: 1) { ...F } } fragment F on Doc { render(dpi: 300) }'
    expect(priced(pdfOnly, query, data)).toEqual({ estimate: 5, actual: 5 })
    // A Txt ran no weighted argument: 1
    const named = { docs: [{ __typename: 'Txt', render: 'r' }] }
    expect(
      priced(
        pdfOrTxt,
        '{ docs(first: 1) { __typename ...F } } fragment F on Doc { render(dpi: 300) }',
        named,
      ),
    ).toEqual({ estimate: 5, actual: 1 })
  })

  it('through a real Yoga server: what the Pdf.preview resolver ran is what the refund keeps', async () => {
    let previews = 0
    const schema = createSchema({
      typeDefs: [directiveSdl, oneImplementation],
      resolvers: {
        Doc: { __resolveType: () => 'Pdf' },
        Query: { docs: (_: unknown, args: { first: number }) => docs(args.first, { id: '1' }) },
        Pdf: {
          preview: () => {
            previews++
            return 'p'
          },
        },
      },
    })
    const yoga = createYoga({ schema, logging: false })
    const query = '{ docs(first: 19) { ...F } } fragment F on Doc { preview }'
    const response = await yoga.fetch('http://yoga/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query }),
    })
    const body = (await response.json()) as { data: unknown }
    expect(previews).toBe(19)
    // The work that ran, in the model: 19 docs at 1, 19 previews at 50
    const ran = 19 * 1 + previews * 50
    const analyzer = new CostAnalyzer()
    expect(analyzer.actual({ schema, document: parse(query) }, body.data)).toBe(ran)
  })
})
