/**
 * useTollbooth in Envelop on its own (no Yoga, no HTTP request in the context), as docs/graphql.md's "Envelop
 * without Yoga" runs it: a GraphQLError `identify` raises on purpose is the operation's result, like a refusal;
 * an unexpected failure is thrown to the caller.
 */
import { envelop, type Plugin, useEngine, useSchema } from '@envelop/core'
import {
  buildSchema,
  type ExecutionResult,
  execute,
  GraphQLError,
  parse,
  specifiedRules,
  subscribe,
  validate,
} from 'graphql'
import { describe, expect, it } from 'vitest'
import { useTollbooth } from '../../../src/graphql/index.js'
import { tokenBucket } from '../../../src/index.js'

interface AppContext {
  user?: string
  /** What a server of one's own may put in the context: tollbooth then answers as over HTTP. */
  request?: Request
}

const engine = useEngine({ parse, validate, specifiedRules, execute, subscribe })
const schema = useSchema(buildSchema('type Query { hello: String }'))

/** An Envelop with `plugins` around tollbooth, and a counter of the resolver's runs. */
function app(identify: (context: AppContext) => string | Promise<string>, after: Plugin[] = []) {
  const limiter = tokenBucket({
    name: `envelop-alone-${Math.random()}`,
    capacity: 10,
    refillPerSecond: 0.001,
  })
  const getEnveloped = envelop({
    plugins: [engine, schema, useTollbooth<AppContext>({ limiter, identify }), ...after],
  })
  let runs = 0
  const rootValue = {
    hello: () => {
      runs++
      return 'world'
    },
  }
  const ask = async (context: AppContext) => {
    const enveloped = getEnveloped(context)
    const document = enveloped.parse('{ hello }')
    return (await enveloped.execute({
      schema: enveloped.schema,
      document,
      rootValue,
      contextValue: context,
    })) as ExecutionResult
  }
  return { ask, limiter, runs: () => runs }
}

const signInFirst = () =>
  new GraphQLError('Sign in first.', { extensions: { code: 'UNAUTHENTICATED', http: { status: 401 } } })

describe('Envelop without Yoga', () => {
  it.each(['synchronously', 'asynchronously'] as const)(
    'a GraphQLError identify throws (%s) is the result, without `extensions.http`; nothing runs or is charged',
    async (way) => {
      const { ask, limiter, runs } = app(
        way === 'synchronously'
          ? (context) => {
              if (context.user === undefined) throw signInFirst()
              return context.user
            }
          : async (context) => {
              if (context.user === undefined) throw signInFirst()
              return context.user
            },
      )

      const refused = await ask({})
      expect(refused.data ?? undefined).toBeUndefined()
      expect(refused.errors?.map((error) => [error.message, error.extensions])).toEqual([
        ['Sign in first.', { code: 'UNAUTHENTICATED' }],
      ])
      expect(runs()).toBe(0)

      const answered = await ask({ user: 'alice' })
      expect(answered.data).toEqual({ hello: 'world' })
      expect(runs()).toBe(1)
      // `hello` is a scalar on Query: minCost 1, charged to alice only.
      expect((await limiter.peek('alice')).remaining).toBe(9)
    },
  )

  it('a plugin listed after tollbooth that sets its own execute does not run the refused operation', async () => {
    const { ask, runs } = app(() => {
      throw signInFirst()
    }, [useEngine({ execute })])
    const refused = await ask({})
    expect(refused.errors?.map((error) => error.message)).toEqual(['Sign in first.'])
    expect(runs()).toBe(0)
  })

  it('an unexpected failure (a GraphQLError wrapping an Error) is thrown to the caller, not answered', async () => {
    const failure = new GraphQLError('session store: connect ECONNREFUSED', {
      originalError: new Error('connect ECONNREFUSED'),
    })
    const { ask, runs } = app(() => {
      throw failure
    })
    await expect(ask({})).rejects.toBe(failure)
    expect(runs()).toBe(0)
  })

  it('an operation is settled with a Fetch request in the context, which Yoga does not run', async () => {
    const { ask, limiter } = app((context) => context.user ?? 'anonymous')
    const answered = await ask({ user: 'alice', request: new Request('http://localhost/graphql') })
    expect(answered.data).toEqual({ hello: 'world' })
    // Settled in Envelop's onExecuteDone: Yoga's onExecutionResult, where Yoga settles it, never comes.
    expect(answered.extensions?.cost).toMatchObject({ requestedQueryCost: 1, actualQueryCost: 1 })
    expect((await limiter.peek('alice')).remaining).toBe(9)
  })
})
