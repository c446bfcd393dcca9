/**
 * What other Yoga plugins and server adapters can do around the operations tollbooth settles as Yoga's HTTP handler
 * answers them: throw after the operation ran, copy its context, share one server context between concurrent
 * requests, answer with a Response whose headers cannot change. Each operation is still charged exactly once.
 *
 * `{ items { id } }` is estimated 10 (its default `first`) and holds 2 items: answered, it costs 2. With `first: 1`,
 * it is estimated 1 and costs 1.
 */
import { randomUUID } from 'node:crypto'
import { createSchema, createYoga, type Plugin } from 'graphql-yoga'
import { describe, expect, it } from 'vitest'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import { costDirectivesTypeDefs, type OperationEvent, useTollbooth } from '../../../src/graphql/index.js'

const ITEMS = '{ items { id } }'
const ITEMS_ESTIMATE = 10
const ITEMS_ACTUAL = 2
const CAPACITY = 1000

function yogaWithBudget(plugins: Plugin[]) {
  const limiter = tokenBucket({
    name: `handler-edges-${randomUUID().slice(0, 8)}`,
    capacity: CAPACITY,
    refillPerSecond: 0.001,
  })
  const events: OperationEvent[] = []
  const schema = createSchema({
    typeDefs: [
      costDirectivesTypeDefs,
      /* GraphQL */ `
        type Item { id: ID! }
        type Query { items(first: Int = 10): [Item!]! @listSize(slicingArguments: ["first"]) }
      `,
    ],
    resolvers: {
      Query: {
        // A turn of the event loop first, so that concurrent operations interleave.
        items: async (_: unknown, { first }: { first: number }) => {
          await new Promise((resolve) => setImmediate(resolve))
          return [{ id: 'a' }, { id: 'b' }].slice(0, first)
        },
      },
    },
  })
  const yoga = createYoga({
    schema,
    logging: false,
    maskedErrors: false,
    plugins: [
      useTollbooth({ limiter, identify: () => 'alice', onOperation: (event) => events.push(event) }),
      ...plugins,
    ],
  })
  const remaining = async () => (await limiter.peek('alice')).remaining
  return { yoga, remaining, events }
}

function post(yoga: { fetch: (url: string, init: RequestInit) => Promise<Response> | Response }) {
  return yoga.fetch('http://localhost/graphql', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query: ITEMS }),
  })
}

describe('Yoga: around the operations its HTTP handler answers', () => {
  it("a plugin's onExecutionResult throws after the operation ran: each is charged its estimate and reported once", async () => {
    const throwing: Plugin = {
      onExecutionResult() {
        throw new Error('plugin failed')
      },
    }
    const { yoga, remaining, events } = yogaWithBudget([throwing])

    const statuses = []
    for (let i = 0; i < 10; i++) statuses.push((await post(yoga)).status)

    expect(statuses).toEqual(Array(10).fill(500))
    // The resolvers ran and no answer counted what they returned: the estimate stays charged.
    expect(await remaining()).toBe(CAPACITY - 10 * ITEMS_ESTIMATE)
    expect(events.map((event) => event.requestedCost)).toEqual(Array(10).fill(ITEMS_ESTIMATE))
  })

  it('a plugin runs each operation with a copy of its context: settled, with extensions.cost and RateLimit', async () => {
    const copying: Plugin = {
      onParams({ paramsHandler, setParamsHandler }) {
        setParamsHandler((payload) => paramsHandler({ ...payload, context: { ...payload.context } }))
      },
    }
    const { yoga, remaining, events } = yogaWithBudget([copying])

    const first = await post(yoga)
    const second = await post(yoga)

    for (const [response, left] of [
      [first, CAPACITY - ITEMS_ACTUAL],
      [second, CAPACITY - 2 * ITEMS_ACTUAL],
    ] as const) {
      expect(response.status).toBe(200)
      expect(await response.json()).toMatchObject({
        data: { items: [{ id: 'a' }, { id: 'b' }] },
        extensions: { cost: { requestedQueryCost: ITEMS_ESTIMATE, actualQueryCost: ITEMS_ACTUAL } },
      })
      // The fields are written once the operation is settled: what is left after the unused estimate came back.
      expect(response.headers.get('ratelimit')).toMatch(new RegExp(`;r=${left};`))
    }
    expect(await remaining()).toBe(CAPACITY - 2 * ITEMS_ACTUAL)
    expect(events).toHaveLength(2)
  })

  it('an adapter passes one server context object to every request: 50 in parallel are each settled on their own', async () => {
    const { yoga, remaining, events } = yogaWithBudget([])
    // Yoga runs a single operation with the server context it is given, not a copy of it.
    const shared = {}
    // Half ask for one item (estimated 1, costs 1), half for the default (estimated 10, costs 2).
    const firsts = Array.from({ length: 50 }, (_, i) => (i % 2 === 0 ? 1 : 10))

    const replies = await Promise.all(
      firsts.map((first) =>
        Promise.resolve(
          yoga.fetch(
            'http://localhost/graphql',
            {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify({ query: `{ items(first: ${first}) { id } }` }),
            },
            shared,
          ),
        ).then(async (response) => ({ first, status: response.status, body: await response.json() })),
      ),
    )

    for (const { first, status, body } of replies) {
      const cost = Math.min(first, ITEMS_ACTUAL)
      expect(status).toBe(200)
      expect(body.data.items).toHaveLength(cost)
      expect(body.extensions.cost).toMatchObject({ requestedQueryCost: first, actualQueryCost: cost })
    }
    expect(await remaining()).toBe(CAPACITY - 25 * 1 - 25 * ITEMS_ACTUAL)
    expect(events.map((event) => event.requestedCost).sort((a, b) => a - b)).toEqual([
      ...Array(25).fill(1),
      ...Array(25).fill(ITEMS_ESTIMATE),
    ])
  })

  it('a result processor answers with a Response whose headers cannot change: it goes out as it is, charged', async () => {
    const redirecting: Plugin = {
      onResultProcess({ setResultProcessor }) {
        setResultProcessor(() => Response.redirect('http://localhost/elsewhere', 302), 'application/json')
      },
    }
    const { yoga, remaining } = yogaWithBudget([redirecting])

    const response = await post(yoga)

    expect(response.status).toBe(302)
    expect(response.headers.get('location')).toBe('http://localhost/elsewhere')
    expect(response.headers.get('ratelimit')).toBeNull()
    expect(await remaining()).toBe(CAPACITY - ITEMS_ACTUAL)
  })
})
