/**
 * NestJS GraphQL (code-first, `autoSchemaFile: true`) on the Apollo driver with `tollboothApolloPlugin` and on the
 * Yoga driver with `useTollbooth`, on Express: an operation is priced from the schema Nest built, charged to the
 * caller's budget, and refused over it with HTTP 429, `Retry-After`, the RateLimit fields and a `RATE_LIMITED`
 * error. A global TollboothGuard with a budget of 1 sits in the same app: it lets resolvers through (GraphQL is the
 * plugins' to price), so only the plugins' counts show.
 *
 * Each pricing case is a schema and the cost its operation is expected to have; the budget holds exactly two such
 * operations. A case for another pricing model adds its resolvers, its plugin options and its cost.
 */
import { randomUUID } from 'node:crypto'
import { YogaDriver, type YogaDriverConfig } from '@graphql-yoga/nestjs'
import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo'
import { type DynamicModule, Module, type Type } from '@nestjs/common'
import { APP_GUARD } from '@nestjs/core'
import {
  Args,
  type ComplexityEstimatorArgs,
  Extensions,
  Field,
  GraphQLModule,
  Int,
  ObjectType,
  Query,
  Resolver,
} from '@nestjs/graphql'
import { fieldExtensionsEstimator, simpleEstimator } from 'graphql-query-complexity'
import { afterEach, describe, expect, it } from 'vitest'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import type { RateLimiter } from '../../../src/core/rateLimiter.js'
import { tollboothApolloPlugin } from '../../../src/graphql/apollo/index.js'
import { type TollboothGraphQLOptions, useTollbooth } from '../../../src/graphql/index.js'
import { RateLimit, TollboothGuard } from '../../../src/nestjs/index.js'
import { type NestServer, startNest } from '../../helpers/nestApps.js'

type ApolloPlugin = NonNullable<ApolloDriverConfig['plugins']>[number]

/** The options a pricing case may add to the plugin's (never the budget). */
type PricingOptions = Omit<TollboothGraphQLOptions, 'limiter'>

interface PricingCase {
  readonly name: string
  /** The resolvers of the code-first schema. */
  readonly resolvers: readonly Type<unknown>[]
  readonly options: PricingOptions
  readonly query: string
  /** What the operation costs under this pricing. */
  readonly cost: number
}

@ObjectType()
class Report {
  @Field(() => String)
  @Extensions({ cost: 5 })
  summary!: string
}

@Resolver(() => Report)
class ReportResolver {
  @Query(() => Report)
  report(): Report {
    return { summary: 'quarterly' }
  }
}

@ObjectType()
class Recipe {
  @Field(() => String)
  title!: string

  @Field(() => String, { complexity: 3 })
  ingredients!: string
}

@Resolver(() => Recipe)
class RecipeResolver {
  @Query(() => [Recipe], {
    complexity: (options: ComplexityEstimatorArgs) => options.args.count * options.childComplexity,
  })
  recipes(@Args('count', { type: () => Int }) count: number): Recipe[] {
    return Array.from({ length: count }, (_, index) => ({ title: `r${index}`, ingredients: 'flour' }))
  }
}

const pricings: readonly PricingCase[] = [
  {
    name: 'field extensions (@Extensions({ cost: 5 }))',
    resolvers: [ReportResolver],
    options: {},
    query: '{ report { summary } }',
    // The object field 1, its scalar 5.
    cost: 6,
  },
  {
    name: 'graphql-query-complexity estimators (@Field({ complexity: 3 }), a complexity function on @Query)',
    resolvers: [RecipeResolver],
    options: { estimators: [fieldExtensionsEstimator(), simpleEstimator({ defaultComplexity: 1 })] },
    query: '{ recipes(count: 4) { title ingredients } }',
    // count 4 × (title 1 + ingredients 3).
    cost: 16,
  },
]

interface Driver {
  readonly name: string
  graphqlModule(limiter: RateLimiter, options: PricingOptions): DynamicModule
}

const drivers: readonly Driver[] = [
  {
    name: 'Apollo (tollboothApolloPlugin)',
    graphqlModule: (limiter, options) =>
      GraphQLModule.forRoot<ApolloDriverConfig>({
        driver: ApolloDriver,
        autoSchemaFile: true,
        playground: false,
        // @nestjs/apollo's types see @apollo/server's CommonJS declarations, tollbooth's its ES module ones (Apollo's
        // HeaderMap has a private field, so the two are different types to TypeScript): one object, cast once.
        plugins: [tollboothApolloPlugin({ ...options, limiter }) as ApolloPlugin],
      }),
  },
  {
    name: 'Yoga (useTollbooth)',
    graphqlModule: (limiter, options) =>
      GraphQLModule.forRoot<YogaDriverConfig>({
        driver: YogaDriver,
        autoSchemaFile: true,
        graphiql: false,
        logging: false,
        plugins: [useTollbooth({ ...options, limiter })],
      }),
  },
]

function post(url: string, query: string): Promise<Response> {
  return fetch(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query }),
  })
}

const open: NestServer[] = []
afterEach(async () => {
  await Promise.all(open.splice(0).map((server) => server.close()))
})

describe.each(drivers)('NestJS GraphQL on the $name driver', (driver) => {
  it.each(pricings)(
    'priced by $name: exactly 2 operations admitted, the 3rd refused with 429',
    async (pricing) => {
      const name = `gql-${randomUUID().slice(0, 8)}`
      // Two operations' worth; one point back every 100 s, so nothing comes back within the test.
      const limiter = tokenBucket({ name, capacity: 2 * pricing.cost, refillPerSecond: 0.01 })
      @Module({
        imports: [driver.graphqlModule(limiter, pricing.options)],
        providers: [
          ...pricing.resolvers,
          {
            provide: APP_GUARD,
            useValue: new TollboothGuard({
              default: tokenBucket({ name: 'http', capacity: 1, refillPerSecond: 0.01 }),
            }),
          },
        ],
      })
      class AppModule {}
      const server = await startNest('express', AppModule)
      open.push(server)

      const responses: Response[] = []
      for (let i = 0; i < 3; i++) responses.push(await post(server.url, pricing.query))
      const bodies = await Promise.all(responses.map((response) => response.json()))

      expect(responses.map((response) => response.status)).toEqual([200, 200, 429])
      for (const [i, response] of responses.slice(0, 2).entries()) {
        expect(response.headers.get('ratelimit')).toBe(`"${name}";r=${pricing.cost * (1 - i)};t=100`)
        expect(bodies[i]).toMatchObject({ data: expect.any(Object) })
        expect(bodies[i].extensions?.cost).toMatchObject({ requestedQueryCost: pricing.cost })
      }
      const refused = responses[2] as Response
      expect(refused.headers.get('retry-after')).toBe(String(pricing.cost * 100))
      expect(refused.headers.get('ratelimit')).toBe(`"${name}";r=0;t=100`)
      expect(bodies[2].data).toBeUndefined()
      expect(bodies[2].errors).toHaveLength(1)
      expect(bodies[2].errors[0].extensions).toMatchObject({
        code: 'RATE_LIMITED',
        retryAfter: pricing.cost * 100,
      })
    },
  )
})

@Resolver(() => Report)
class LimitedReportResolver {
  @RateLimit('http')
  @Query(() => Report)
  report(): Report {
    return { summary: 'quarterly' }
  }
}

describe('a @RateLimit on a resolver, which TollboothGuard does not limit', () => {
  it('lets the resolver run and says so once, as a process warning', async () => {
    const warnings: Error[] = []
    const onWarning = (warning: Error) => warnings.push(warning)
    process.on('warning', onWarning)
    try {
      const http = tokenBucket({ name: 'http', capacity: 1, refillPerSecond: 0.01 })
      @Module({
        imports: [
          (drivers[1] as Driver).graphqlModule(
            tokenBucket({ name: 'gql', capacity: 100, refillPerSecond: 1 }),
            {},
          ),
        ],
        providers: [
          LimitedReportResolver,
          { provide: APP_GUARD, useValue: new TollboothGuard({ default: http, limiters: { http } }) },
        ],
      })
      class AppModule {}
      const server = await startNest('express', AppModule)
      open.push(server)
      const statuses: number[] = []
      for (let i = 0; i < 3; i++) {
        const response = await post(server.url, '{ report { summary } }')
        await response.arrayBuffer()
        statuses.push(response.status)
      }
      // The HTTP budget of 1 is not spent by the resolver: all three answered.
      expect(statuses).toEqual([200, 200, 200])
      await new Promise((resolve) => setImmediate(resolve))
      const ours = warnings.filter((w) => (w as { code?: string }).code === 'TOLLBOOTH_RATE_LIMIT_NOT_HTTP')
      expect(ours.map((w) => w.message)).toEqual([
        expect.stringContaining(
          '@RateLimit on LimitedReportResolver.report, a graphql handler, limits nothing',
        ),
      ])
    } finally {
      process.off('warning', onWarning)
    }
  })
})
