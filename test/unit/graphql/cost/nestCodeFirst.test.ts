import 'reflect-metadata'
import type { INestApplicationContext } from '@nestjs/common'
import { NestFactory } from '@nestjs/core'
import {
  Args,
  Extensions,
  Field,
  type FieldOptions,
  GraphQLSchemaBuilderModule,
  GraphQLSchemaFactory,
  ID,
  InputType,
  Int,
  ObjectType,
  Parent,
  Query,
  ResolveField,
  Resolver,
} from '@nestjs/graphql'
import { buildSchema, type GraphQLObjectType, type GraphQLSchema, parse } from 'graphql'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CostAnalyzer } from '../../../../src/graphql/cost/costAnalyzer.js'
import { costDirectivesTypeDefs } from '../../../../src/graphql/index.js'

/**
 * A NestJS code-first schema (`@nestjs/graphql`'s GraphQLSchemaFactory, as the Apollo and Yoga drivers build it)
 * carries tollbooth's weights as `@Extensions({ cost, listSize })` on fields, resolver methods and object types, and
 * is priced as the same schema annotated with `@cost` / `@listSize` in SDL. Every number is worked out by hand: an
 * object 1 or its weight, a scalar 0 or its weight, a list size × (weight + children).
 */

@ObjectType()
class Ingredient {
  @Field(() => String)
  name!: string
}

@ObjectType()
@Extensions({ cost: { weight: 4 } })
class Author {
  @Field(() => String)
  name!: string
}

@InputType()
class RecipeFilter {
  @Field(() => String, { nullable: true })
  @Extensions({ cost: { weight: 6 } })
  text?: string
}

@ObjectType()
class Recipe {
  @Field(() => ID)
  id!: string

  @Field(() => Int)
  @Extensions({ cost: { weight: 3 } })
  rating!: number

  @Field(() => Int, { complexity: 3 })
  servings!: number

  // Not an option of @Field (FieldOptions has no `extensions`): what a user might try, checked below.
  @Field(() => Int, { extensions: { cost: { weight: 9 } } } as FieldOptions)
  calories!: number

  @Field(() => Author)
  author!: Author
}

@Resolver(() => Recipe)
class RecipesResolver {
  @Query(() => [Recipe])
  @Extensions({ cost: { weight: 2 }, listSize: { slicingArguments: ['first'] } })
  recipes(@Args('first', { type: () => Int, nullable: true }) _first?: number): Recipe[] {
    return []
  }

  @Query(() => [Recipe])
  @Extensions({ listSize: { assumedSize: 5 } })
  search(@Args('filter', { type: () => RecipeFilter, nullable: true }) _filter?: RecipeFilter): Recipe[] {
    return []
  }

  @ResolveField(() => [Ingredient])
  @Extensions({ listSize: { slicingArguments: ['first'], assumedSize: 4 } })
  ingredients(
    @Parent() _recipe: Recipe,
    @Args('first', { type: () => Int, nullable: true }) _first?: number,
  ): Ingredient[] {
    return []
  }
}

/** The same schema in SDL, with the directives where the decorators put extensions. */
const twinSdl = /* GraphQL */ `
  ${costDirectivesTypeDefs}
  type Ingredient { name: String! }
  type Author @cost(weight: 4) { name: String! }
  input RecipeFilter { text: String @cost(weight: 6) }
  type Recipe {
    id: ID!
    rating: Int! @cost(weight: 3)
    servings: Int!
    calories: Int!
    ingredients(first: Int): [Ingredient!]! @listSize(slicingArguments: ["first"], assumedSize: 4)
    author: Author!
  }
  type Query {
    recipes(first: Int): [Recipe!]! @cost(weight: 2) @listSize(slicingArguments: ["first"])
    search(filter: RecipeFilter): [Recipe!]! @listSize(assumedSize: 5)
  }
`

const operations: [string, Record<string, unknown> | undefined, number][] = [
  // recipes 3 × (weight 2 + rating 3) = 15
  ['query($n: Int) { recipes(first: $n) { id rating } }', { n: 3 }, 15],
  // 2 × (2 + ingredients(first: 5) 5 × 1 + author 4) = 2 × 11 = 22
  ['{ recipes(first: 2) { ingredients(first: 5) { name } author { name } } }', undefined, 22],
  // no first: defaultListSize 10 × (2 + ingredients' assumedSize 4 × 1) = 60
  ['{ recipes { ingredients { name } } }', undefined, 60],
  // search: assumedSize 5 × (1 + rating 3) + filter.text 6 = 26; servings (complexity 3) weighs 0
  ['{ search(filter: { text: "soup" }) { rating servings } }', undefined, 26],
]

describe('a NestJS code-first schema with @Extensions({ cost, listSize })', () => {
  let app: INestApplicationContext
  let schema: GraphQLSchema

  beforeAll(async () => {
    app = await NestFactory.createApplicationContext(GraphQLSchemaBuilderModule, { logger: false })
    schema = await app.get(GraphQLSchemaFactory).create([RecipesResolver])
  })
  afterAll(() => app?.close())

  it('puts the extensions on the built fields, resolver methods, object and input types', () => {
    const query = schema.getQueryType() as GraphQLObjectType
    const recipe = schema.getType('Recipe') as GraphQLObjectType
    expect(query.getFields().recipes?.extensions).toMatchObject({
      cost: { weight: 2 },
      listSize: { slicingArguments: ['first'] },
    })
    expect(query.getFields().search?.extensions).toMatchObject({ listSize: { assumedSize: 5 } })
    expect(recipe.getFields().rating?.extensions).toMatchObject({ cost: { weight: 3 } })
    expect(recipe.getFields().ingredients?.extensions).toMatchObject({
      listSize: { slicingArguments: ['first'], assumedSize: 4 },
    })
    expect(schema.getType('Author')?.extensions).toEqual({ cost: { weight: 4 } })
    const filter = schema.getType('RecipeFilter') as unknown as {
      getFields(): Record<string, { extensions: unknown }>
    }
    expect(filter.getFields().text?.extensions).toEqual({ cost: { weight: 6 } })
    // Nest writes no SDL: nothing there for the model to read.
    expect(recipe.getFields().rating?.astNode).toBeUndefined()
    expect(schema.getDirective('cost')).toBeUndefined()
  })

  it("@Field({ complexity: 3 }) is graphql-query-complexity's extensions.complexity, which the cost model does not read", () => {
    const servings = (schema.getType('Recipe') as GraphQLObjectType).getFields().servings
    expect(servings?.extensions).toEqual({ complexity: 3 })
    // Recipe 1 + servings 0: the complexity counts for nothing here
    expect(new CostAnalyzer().estimate({ schema, document: parse('{ search { servings } }') })).toBe(5)
  })

  it('@Field({ extensions }) is no option of @nestjs/graphql: the weight arrives nowhere, @Extensions is the way', () => {
    const calories = (schema.getType('Recipe') as GraphQLObjectType).getFields().calories
    expect(calories?.extensions).toEqual({ complexity: undefined })
    // Recipe 1 + calories 0 (not 9), 5 times
    expect(new CostAnalyzer().estimate({ schema, document: parse('{ search { calories } }') })).toBe(5)
  })

  it.each(operations)('prices %s as its SDL twin: %j → %i', (query, variables, expected) => {
    const document = parse(query)
    const sdl = buildSchema(twinSdl)
    expect(new CostAnalyzer().estimate({ schema, document, variables })).toBe(expected)
    expect(new CostAnalyzer().estimate({ schema: sdl, document, variables })).toBe(expected)
    expect(new CostAnalyzer().explain({ schema, document, variables })).toEqual(
      new CostAnalyzer().explain({ schema: sdl, document, variables }),
    )
  })
})
