/**
 * An operation Yoga's own plugins run through `yoga.getEnveloped` rather than Yoga's HTTP handler, with the Fetch
 * `request` in its context — as `@graphql-yoga/plugin-graphql-sse` does, or a graphql-ws server that passes the
 * upgrade request as `request`: Yoga's `onExecutionResult` never comes for it, and it is settled all the same.
 *
 * `{ items { id } }` is estimated 10 (its default `first`) and holds 2 items: it costs 2.
 */
import { randomUUID } from 'node:crypto'
import { createSchema, createYoga } from 'graphql-yoga'
import { describe, expect, it } from 'vitest'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import { costDirectivesTypeDefs, useTollbooth } from '../../../src/graphql/index.js'

function yogaWithBudget(capacity: number) {
  const limiter = tokenBucket({
    name: `enveloped-${randomUUID().slice(0, 8)}`,
    capacity,
    refillPerSecond: 0.001,
  })
  const schema = createSchema({
    typeDefs: [
      costDirectivesTypeDefs,
      /* GraphQL */ `
        type Item { id: ID! }
        type Query { items(first: Int = 10): [Item!]! @listSize(slicingArguments: ["first"]) }
      `,
    ],
    resolvers: { Query: { items: () => [{ id: 'a' }, { id: 'b' }] } },
  })
  const yoga = createYoga({
    schema,
    logging: false,
    plugins: [useTollbooth({ limiter, identify: () => 'alice' })],
  })
  return { yoga, limiter }
}

describe('Yoga: an operation run through getEnveloped with a request in its context', () => {
  it('is settled: refunded to what it used, with extensions.cost', async () => {
    const { yoga, limiter } = yogaWithBudget(100)
    const params = { query: '{ items { id } }' }
    const request = new Request('http://localhost/graphql/stream', { method: 'POST' })
    const answers = []
    for (let i = 0; i < 3; i++) {
      // What @graphql-yoga/plugin-graphql-sse does for each operation it serves.
      const enveloped = yoga.getEnveloped({ request, params })
      const document = enveloped.parse(params.query)
      expect(enveloped.validate(enveloped.schema, document)).toEqual([])
      const contextValue = await enveloped.contextFactory()
      answers.push(await enveloped.execute({ schema: enveloped.schema, document, contextValue }))
    }
    for (const answer of answers) {
      expect(answer).toMatchObject({
        data: { items: [{ id: 'a' }, { id: 'b' }] },
        extensions: { cost: { requestedQueryCost: 10, actualQueryCost: 2 } },
      })
    }
    // Three operations of 2 each: 10 charged at the door, 8 given back.
    expect((await limiter.peek('alice')).remaining).toBe(100 - 3 * 2)
  })
})
