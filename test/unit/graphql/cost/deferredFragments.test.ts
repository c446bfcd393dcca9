import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { parse } from 'graphql'
import { createSchema, createYoga } from 'graphql-yoga'
import { describe, expect, it } from 'vitest'
import { CostAnalyzer } from '../../../../src/graphql/cost/costAnalyzer.js'

/**
 * Executors that support `@defer` (graphql-yoga's, @graphql-tools/executor) run each deferred fragment as a patch
 * of its own: its fields are not merged with the same response keys around it, and a deferred spread of a fragment
 * already spread runs it again. The estimate prices each deferred fragment again where it appears; `if: false`
 * merges as usual.
 *
 * Expected numbers are worked out by hand: `me` 1, one `friends(first: 40) { name }` 40 (40 people at 1, names 0);
 * and checked against the resolvers a real Yoga server runs for the same documents.
 */

const directiveSdl = readFileSync(
  fileURLToPath(new URL('../../../../schema/cost-directives.graphql', import.meta.url)),
  'utf8',
)

const typeDefs = /* GraphQL */ `
  directive @defer(label: String, if: Boolean! = true) on FRAGMENT_SPREAD | INLINE_FRAGMENT
  type Person {
    name: String
    friends(first: Int = 10): [Person!]! @listSize(slicingArguments: ["first"])
  }
  type Query {
    me: Person
  }
`

const calls = { me: 0, friends: 0, friendsReturned: 0 }
const schema = createSchema({
  typeDefs: [directiveSdl, typeDefs],
  resolvers: {
    Query: {
      me: () => {
        calls.me++
        return {}
      },
    },
    Person: {
      name: () => 'n',
      friends: (_: unknown, args: { first: number }) => {
        calls.friends++
        calls.friendsReturned += args.first
        return Array.from({ length: args.first }, () => ({}))
      },
    },
  },
})

const FRIENDS = 'fragment F on Person { friends(first: 40) { name } }'

function estimate(query: string, variables?: Record<string, unknown>): number {
  return new CostAnalyzer().estimate({ schema, document: parse(query), variables })
}

/** Runs the document on a real Yoga server, reading every part of its incremental response; the work it did. */
async function ran(query: string, variables?: Record<string, unknown>): Promise<number> {
  calls.me = 0
  calls.friends = 0
  calls.friendsReturned = 0
  const yoga = createYoga({ schema, logging: false })
  const response = await yoga.fetch('http://yoga/graphql', {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'multipart/mixed' },
    body: JSON.stringify({ query, variables }),
  })
  const text = await response.text()
  if (response.status !== 200 || text.includes('"errors"')) throw new Error(`${response.status} ${text}`)
  // In the model: me 1, each friends list its items at 1
  return calls.me + calls.friendsReturned
}

describe('@defer: each deferred fragment is priced as the patch it runs as', () => {
  it('the same fragment spread deferred k times costs k + 1 runs', async () => {
    for (const deferred of [0, 1, 49]) {
      const query = `{ me { ...F ${'...F @defer '.repeat(deferred)}} } ${FRIENDS}`
      const expected = 1 + (deferred + 1) * 40
      expect(estimate(query), `${deferred} deferred`).toBe(expected)
      expect(await ran(query), `${deferred} deferred`).toBe(expected)
    }
  })

  it('a deferred spread before a plain one: both run', async () => {
    const query = `{ me { ...F @defer ...F } } ${FRIENDS}`
    expect(estimate(query)).toBe(81)
    expect(await ran(query)).toBe(81)
  })

  it('a deferred inline fragment does not merge with the same field beside it', async () => {
    const query = '{ me { friends(first: 40) { name } ... @defer { friends(first: 40) { name } } } }'
    expect(estimate(query)).toBe(81)
    expect(await ran(query)).toBe(81)
  })

  it("a deferred fragment's own fields merge with each other", async () => {
    const query = '{ me { ... @defer { friends(first: 40) { name } friends(first: 40) { name } } } }'
    expect(estimate(query)).toBe(41)
    expect(await ran(query)).toBe(41)
  })

  it('`if: false` merges as usual, literal or variable, and the cost is cached per value of the variable', async () => {
    expect(estimate(`{ me { ...F ...F @defer(if: false) } } ${FRIENDS}`)).toBe(41)
    expect(await ran(`{ me { ...F ...F @defer(if: false) } } ${FRIENDS}`)).toBe(41)
    const query = `query($d: Boolean!) { me { ...F ...F @defer(if: $d) } } ${FRIENDS}`
    const analyzer = new CostAnalyzer()
    const document = parse(query)
    expect(analyzer.estimate({ schema, document, variables: { d: false } })).toBe(41)
    expect(analyzer.estimate({ schema, document, variables: { d: true } })).toBe(81)
    expect(analyzer.estimate({ schema, document, variables: { d: false } })).toBe(41)
    expect(await ran(query, { d: true })).toBe(81)
  })
})
