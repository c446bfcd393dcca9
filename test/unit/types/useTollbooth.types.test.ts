/**
 * `useTollbooth` typed by the server's context: the callbacks that receive the context see the application's
 * fields (given as `useTollbooth<Context>`, or inferred from an annotated callback), and what it returns is a plugin
 * that Yoga's `createYoga({ plugins })` and Envelop's `envelop({ plugins })` take. The compile-time half is checked
 * by compiling this file (`typeErrors`); the run-time half serves a Yoga whose context carries the plan and user.
 */
import { fileURLToPath } from 'node:url'
import { createSchema, createYoga, envelop, type Plugin, type YogaInitialContext } from 'graphql-yoga'
import { describe, expect, expectTypeOf, it } from 'vitest'
import { type GraphQLContext, useTollbooth } from '../../../src/graphql/index.js'
import { tokenBucket } from '../../../src/index.js'
import { typeErrors } from './typecheck.js'

/** What the application's authentication puts in the context. */
interface AppContext {
  user?: { id: string }
  plan?: 'free' | 'pro'
}

type EnvelopPlugin = Parameters<typeof envelop>[0]['plugins'][number]

const schema = createSchema({
  typeDefs: 'type Query { hello: String }',
  resolvers: { Query: { hello: () => 'world' } },
})

function budgets(prefix: string) {
  return {
    free: tokenBucket({ name: `${prefix}-free`, capacity: 1, refillPerSecond: 0.001 }),
    pro: tokenBucket({ name: `${prefix}-pro`, capacity: 3, refillPerSecond: 0.001 }),
  }
}

/** A Yoga whose server context (the second argument of `fetch`) is the application's. */
function yogaWithPlans() {
  const { free, pro } = budgets('explicit')
  return createYoga<AppContext>({
    schema,
    logging: false,
    plugins: [
      useTollbooth<YogaInitialContext & AppContext>({
        limiter: (context) => (context.plan === 'pro' ? pro : free),
        identify: (context) => context.user?.id ?? 'anonymous',
      }),
    ],
  })
}

describe('useTollbooth typed by the server context', () => {
  it('types the callbacks by the context given as a type argument', () => {
    const { free } = budgets('given')
    const plugin = useTollbooth<AppContext>({
      limiter: (context) => {
        expectTypeOf(context).toEqualTypeOf<AppContext>()
        return free
      },
      // @ts-expect-error: the application's context has no `tenant`
      identify: (context) => context.tenant,
    })
    expect(typeof plugin.onExecute).toBe('function')
  })

  it('infers the context from an annotated callback', () => {
    const { free, pro } = budgets('inferred')
    const plugin = useTollbooth({
      identify: (context: AppContext) => context.user?.id ?? 'anonymous',
      limiter: (context) => {
        expectTypeOf(context).toEqualTypeOf<AppContext>()
        return context.plan === 'pro' ? pro : free
      },
    })
    expect(typeof plugin.onExecute).toBe('function')
  })

  it('gives an untyped server a record of unknowns, as before', () => {
    const { free } = budgets('default')
    const plugin = useTollbooth({
      limiter: free,
      identify: (context) => {
        expectTypeOf(context).toEqualTypeOf<GraphQLContext>()
        return String(context.tenant)
      },
    })
    expect(typeof plugin.onExecute).toBe('function')
  })

  it("returns a plugin that Yoga's and Envelop's plugin lists take", () => {
    const { free } = budgets('plugin')
    const plugin = useTollbooth<AppContext>({ limiter: free })
    expectTypeOf(plugin).toExtend<Plugin>()
    expectTypeOf(plugin).toExtend<Plugin<YogaInitialContext & AppContext>>()
    expectTypeOf(plugin).toExtend<EnvelopPlugin>()
    const getEnveloped = envelop({ plugins: [plugin] })
    expect(typeof getEnveloped).toBe('function')
  })

  it('reads the plan and the user from the context of a real Yoga server', async () => {
    const yoga = yogaWithPlans()
    const ask = async (context: AppContext): Promise<string> => {
      const response = await yoga.fetch(
        'http://yoga/graphql',
        { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"query":"{ hello }"}' },
        context,
      )
      const body = (await response.json()) as {
        data?: { hello: string }
        errors?: { extensions?: { code?: string } }[]
      }
      return `${response.status} ${body.errors?.[0]?.extensions?.code ?? body.data?.hello}`
    }
    const alice: AppContext = { user: { id: 'alice' }, plan: 'free' }
    const bob: AppContext = { user: { id: 'bob' }, plan: 'pro' }
    const answers: string[] = []
    for (let i = 0; i < 2; i++) answers.push(await ask(alice))
    for (let i = 0; i < 4; i++) answers.push(await ask(bob))
    // Cost 1 each: the free budget holds 1 operation, the pro one 3.
    expect(answers).toEqual([
      '200 world',
      '429 RATE_LIMITED',
      '200 world',
      '200 world',
      '200 world',
      '429 RATE_LIMITED',
    ])
  })

  it('compiles under the project compiler options (strict)', () => {
    expect(typeErrors(fileURLToPath(import.meta.url))).toEqual([])
  }, 60_000)
})
