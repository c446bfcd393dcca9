/**
 * The admission engine on its own, without any GraphQL server: documents parsed with graphql-js, results written by
 * hand, budgets on a MemoryStore whose clock stands still (no refill between steps, so every count is exact).
 *
 * Costs by the cost-directive model (objects 1, scalars 0, a list its size times its items):
 * `{ users(first: 10) { id friends(first: 3) { id } } }` is 10 × (1 + 3) = 40; a response of 8 users with 2 friends
 * each really holds 8 × (1 + 2) = 24.
 */
import { buildSchema, type ExecutionResult, type GraphQLError, parse } from 'graphql'
import { describe, expect, it } from 'vitest'
import { AdmissionEngine } from '../../../../src/graphql/engine/admissionEngine.js'
import type { OperationArgs } from '../../../../src/graphql/engine/admittedOperation.js'
import { newRequestState } from '../../../../src/graphql/engine/requestState.js'
import type { OperationEvent, TollboothGraphQLOptions } from '../../../../src/graphql/optionTypes.js'
import { MemoryStore, type RateLimiter, tokenBucket } from '../../../../src/index.js'

const schema = buildSchema(/* GraphQL */ `
  type Query {
    users(first: Int = 10): [User!]!
    hello: String
  }
  type User {
    id: ID!
    friends(first: Int = 3): [User!]!
  }
  type Subscription {
    ticks: Int
  }
`)
const costs: TollboothGraphQLOptions['costs'] = {
  'Query.users': { listSize: { slicingArguments: ['first'] } },
  'User.friends': { listSize: { slicingArguments: ['first'] } },
}
const USERS_WITH_FRIENDS = '{ users(first: 10) { id friends(first: 3) { id } } }'
/** 8 users with 2 friends each, as an executor would answer USERS_WITH_FRIENDS. */
const eightUsers: ExecutionResult = {
  data: {
    users: Array.from({ length: 8 }, (_, i) => ({ id: String(i), friends: [{ id: 'a' }, { id: 'b' }] })),
  },
}

let serial = 0
function budget(capacity: number): RateLimiter {
  return tokenBucket({
    name: `engine-${++serial}`,
    capacity,
    refillPerSecond: 1,
    store: new MemoryStore({ clock: () => 0 }),
  })
}

function engineWith(options: Partial<TollboothGraphQLOptions> & Pick<TollboothGraphQLOptions, 'limiter'>) {
  const events: OperationEvent[] = []
  const engine = new AdmissionEngine(
    { costs, identify: () => 'caller', onOperation: (event) => events.push(event), ...options },
    { overHttp: (context) => context.http === true },
  )
  engine.schemaChanged(schema)
  return { engine, events }
}

function args(query: string, more: Partial<OperationArgs> = {}): OperationArgs {
  return { schema, document: parse(query), contextValue: { http: true }, ...more }
}

/** Runs admission; answers what it returned and the result it stopped with, if any. */
async function admit(engine: AdmissionEngine, operation: OperationArgs, state = newRequestState()) {
  let stopped: ExecutionResult | undefined
  const admission = await engine.admit(operation, state, (result) => {
    stopped = result
  })
  return { admission, stopped }
}

function defined<T>(value: T | undefined): T {
  if (value === undefined) throw new Error('undefined')
  return value
}

function firstError(result: ExecutionResult | undefined): GraphQLError {
  const error = result?.errors?.[0]
  if (error === undefined) throw new Error('no error')
  return error
}

describe('AdmissionEngine', () => {
  it('charges the estimate, refunds what the result did not use, and reports both', async () => {
    const limiter = budget(100)
    const { engine, events } = engineWith({ limiter })
    const state = newRequestState()
    const { admission, stopped } = await admit(engine, args(USERS_WITH_FRIENDS), state)
    expect(stopped).toBeUndefined()
    expect(admission?.cost).toBe(40)
    expect((await limiter.peek('caller')).remaining).toBe(60)

    const settled = engine.settle(defined(admission), eightUsers)
    expect(settled.data).toBe(eightUsers.data)
    expect(settled.extensions?.cost).toEqual({
      requestedQueryCost: 40,
      actualQueryCost: 24,
      throttleStatus: { maximumAvailable: 100, currentlyAvailable: 76, restoreRate: 1 },
    })
    // 100 − 40 + (40 − 24) = 76 left, and the request's headers say so.
    expect((await limiter.peek('caller')).remaining).toBe(76)
    expect(state.rateLimit).toMatch(/;r=76;/)
    expect(state.rateLimitPolicy).toMatch(/;q=100;/)
    expect(events).toEqual([
      expect.objectContaining({
        requestedCost: 40,
        actualCost: 24,
        refused: undefined,
        operationType: 'query',
      }),
    ])
  })

  it('is synchronous on a memory store with a fixed limiter and identity', () => {
    const { engine } = engineWith({ limiter: budget(100) })
    const admitted = engine.admit(args('{ hello }'), undefined, () => {})
    expect(admitted).not.toBeInstanceOf(Promise)
    expect((admitted as { cost: number }).cost).toBe(1) // minCost
  })

  it('stops a spent budget with a 429 whose http part is kept over HTTP and dropped elsewhere', async () => {
    const limiter = budget(50)
    const { engine, events } = engineWith({ limiter })
    expect((await admit(engine, args(USERS_WITH_FRIENDS))).admission?.cost).toBe(40)
    expect((await limiter.peek('caller')).remaining).toBe(10)

    const overHttp = await admit(engine, args(USERS_WITH_FRIENDS))
    expect(overHttp.admission).toBeUndefined()
    const error = firstError(overHttp.stopped)
    expect(error.extensions.code).toBe('RATE_LIMITED')
    expect(error.extensions.http).toMatchObject({ status: 429, headers: { 'Retry-After': '30' } })
    expect(overHttp.stopped?.extensions).toEqual({ cost: { requestedQueryCost: 40 } })

    const overWs = await admit(engine, args(USERS_WITH_FRIENDS, { contextValue: { http: false } }))
    expect(firstError(overWs.stopped).extensions.code).toBe('RATE_LIMITED')
    expect(firstError(overWs.stopped).extensions.http).toBeUndefined()
    // Refusals spend nothing: still 10 left.
    expect((await limiter.peek('caller')).remaining).toBe(10)
    // An admitted operation is reported when settled (the first never was); refusals at once.
    expect(events.map((event) => event.refused)).toEqual(['RATE_LIMITED', 'RATE_LIMITED'])
  })

  it('judges the operations of one request by the sum of their costs', async () => {
    const { engine } = engineWith({ limiter: budget(1000), maxCost: 70 })
    const state = newRequestState()
    expect((await admit(engine, args(USERS_WITH_FRIENDS), state)).admission?.cost).toBe(40)
    const second = await admit(engine, args(USERS_WITH_FRIENDS), state)
    expect(second.admission).toBeUndefined()
    expect(firstError(second.stopped).message).toBe('The batch costs 80, more than the maximum of 70.')
    // Without a request state (graphql-ws), each operation stands alone.
    expect((await admit(engine, args(USERS_WITH_FRIENDS), undefined as never)).admission?.cost).toBe(40)
  })

  it('leaves invalid variables and unknown operations to the executor, charging nothing', async () => {
    const limiter = budget(100)
    const { engine } = engineWith({ limiter })
    const query = 'query Q($n: Int!) { users(first: $n) { id } }'
    const invalid = await admit(engine, args(query, { variableValues: { n: 'ten' } }))
    expect(invalid).toEqual({ admission: undefined, stopped: undefined })
    const unknown = await admit(engine, args(query, { operationName: 'Other' }))
    expect(unknown).toEqual({ admission: undefined, stopped: undefined })
    expect((await limiter.peek('caller')).remaining).toBe(100)
    const priced = await admit(engine, args(query, { variableValues: { n: 7 } }))
    expect(priced.admission?.cost).toBe(7)
  })

  it('in dry-run lets a refused operation through and notes the refusal', async () => {
    const limiter = budget(50)
    const { engine, events } = engineWith({ limiter, mode: 'dry-run' })
    await admit(engine, args(USERS_WITH_FRIENDS)) // 10 left: the next one would be refused
    const { admission, stopped } = await admit(engine, args(USERS_WITH_FRIENDS))
    expect(stopped).toBeUndefined()
    expect(admission?.wouldRefuse).toBe('RATE_LIMITED')
    const settled = engine.settle(defined(admission), eightUsers)
    expect(settled.extensions?.cost).toMatchObject({ requestedQueryCost: 40, wouldRefuse: 'RATE_LIMITED' })
    expect(events).toEqual([expect.objectContaining({ refused: 'RATE_LIMITED', dryRun: true })])
  })

  it('waits for a limiter chosen per context and an identity found asynchronously', async () => {
    const free = budget(100)
    const paid = budget(1000)
    const { engine } = engineWith({
      limiter: async (context) => ((context as { plan?: string }).plan === 'paid' ? paid : free),
      identify: async () => 'someone',
    })
    const admitted = engine.admit(args('{ hello }', { contextValue: { plan: 'paid' } }), undefined, () => {})
    expect(admitted).toBeInstanceOf(Promise)
    expect((await admitted)?.limiter).toBe(paid)
    expect((await paid.peek('someone')).remaining).toBe(999)
    expect((await free.peek('someone')).remaining).toBe(100)
  })

  it('caps subscriptions per identity and gives back the charge of a refused one', async () => {
    const limiter = budget(100)
    const { engine } = engineWith({ limiter, subscriptions: { maxPerIdentity: 1 } })
    const first = await admit(engine, args('subscription { ticks }'))
    expect(first.admission?.cost).toBe(1)
    const open = defined(await engine.subscriptions.open(defined(first.admission), () => {}))
    const hooks = defined(open.started((async function* () {})()))
    expect(Object.keys(hooks).sort()).toEqual(['charge', 'onEnd'])

    const second = await admit(engine, args('subscription { ticks }'))
    let refused: ExecutionResult | undefined
    expect(
      await engine.subscriptions.open(defined(second.admission), (result) => {
        refused = result
      }),
    ).toBeUndefined()
    expect(firstError(refused).extensions.code).toBe('SUBSCRIPTION_LIMIT_EXCEEDED')
    // Two subscriptions of cost 1 charged, the refused one given back.
    expect((await limiter.peek('caller')).remaining).toBe(99)

    hooks.onEnd() // the first ends: its lease is free again (a memory store releases it at once)
    const third = await admit(engine, args('subscription { ticks }'))
    let stopped: ExecutionResult | undefined
    const reopened = await engine.subscriptions.open(defined(third.admission), (result) => {
      stopped = result
    })
    expect(stopped).toBeUndefined()
    expect(Object.keys(defined(reopened)).sort()).toEqual(['failed', 'started'])
    expect((await limiter.peek('caller')).remaining).toBe(98)
  })

  it('refuses what the parse-time guards refuse, with their codes', () => {
    const { engine } = engineWith({
      limiter: budget(100),
      limits: { maxCharacters: 50, maxTokens: 10, maxNesting: 3, maxBatchSize: 2 },
    })
    const codeOf = (check: () => void) => {
      try {
        check()
      } catch (error) {
        return (error as GraphQLError).extensions.code
      }
      return 'none'
    }
    expect(codeOf(() => engine.checkLength('{ hello }'.padEnd(51)))).toBe('QUERY_TOO_LARGE')
    expect(codeOf(() => engine.checkLength('{ hello }'.padEnd(50)))).toBe('none')
    // { a b c d e f g h i } is 11 tokens: two braces and nine names.
    expect(codeOf(() => engine.checkBeforeParse('{ a b c d e f g h i }'))).toBe('TOO_MANY_TOKENS')
    expect(codeOf(() => engine.checkBeforeParse('{ a b c d e f g h }'))).toBe('none')
    expect(codeOf(() => engine.checkBeforeParse('{ a { b { c { d } } } }'))).toBe('MAX_DEPTH_EXCEEDED')
    // Text the lexer cannot read is left to the parser.
    expect(codeOf(() => engine.checkBeforeParse('{ "unterminated }'))).toBe('none')
    expect(codeOf(() => engine.checkBatchSize(3))).toBe('BATCH_TOO_LARGE')
    expect(codeOf(() => engine.checkBatchSize(2))).toBe('none')
  })

  it('counts a sensitive field per account however the account is spelt (case, spaces, invisible characters)', async () => {
    const withLogin = buildSchema(`
      type Query { hello: String }
      type Mutation { login(email: String!): Boolean }
    `)
    const engine = new AdmissionEngine(
      {
        limiter: budget(1000),
        identify: () => 'caller',
        fieldLimits: { 'Mutation.login': { limit: 1, windowMs: 60_000, by: ['email'] } },
      },
      { overHttp: () => true },
    )
    engine.schemaChanged(withLogin)
    const login = (email: string) =>
      admit(engine, {
        schema: withLogin,
        document: parse('mutation ($email: String!) { login(email: $email) }'),
        variableValues: { email },
        contextValue: {},
      })
    const first = await login('alice@example.com')
    expect(first.stopped).toBeUndefined()
    expect(first.admission?.cost).toBe(10)
    for (const spelling of [' Alice@Example.COM ', 'al\u200bice@example.com', 'alice\u00ad@example.com']) {
      const { stopped } = await login(spelling)
      expect(firstError(stopped).extensions.code).toBe('RATE_LIMITED')
    }
    const bob = await login('bob@example.com')
    expect(bob.stopped).toBeUndefined()
    expect(bob.admission?.cost).toBe(10)
  })

  it('refuses a subscriptions.leaseMs past 2^31 - 1 ms (its renewal timer would fire every 1 ms)', () => {
    expect(
      () =>
        new AdmissionEngine(
          { limiter: budget(100), subscriptions: { leaseMs: 2 ** 33 } },
          { overHttp: () => true },
        ),
    ).toThrow(
      expect.objectContaining({
        code: 'TOLLBOOTH_ERR_INVALID_OPTION',
        message: expect.stringContaining('"subscriptions.leaseMs"'),
      }),
    )
  })

  it('refuses null for an option rather than taking it for the default (which could turn a limit off)', () => {
    const limiter = budget(100)
    for (const [options, option] of [
      [{ maxCost: null }, '"maxCost"'],
      [{ fieldLimits: null }, '"fieldLimits"'],
      [{ limits: { maxDepth: null } }, '"limits.maxDepth"'],
      [{ subscriptions: { maxPerIdentity: null } }, '"subscriptions.maxPerIdentity"'],
      [{ fieldLimits: { 'Mutation.login': { limit: 1, windowMs: 1000, failPolicy: null } } }, 'failPolicy"'],
    ] as const) {
      expect(
        () => new AdmissionEngine({ limiter, ...(options as object) }, { overHttp: () => true }),
      ).toThrow(
        expect.objectContaining({
          code: 'TOLLBOOTH_ERR_INVALID_OPTION',
          message: expect.stringContaining(option),
        }),
      )
    }
  })
})
