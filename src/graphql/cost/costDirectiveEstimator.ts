import { type GraphQLSchema, isInterfaceType, isObjectType, isSchema } from 'graphql'
import { ErrorCodes, invalidOption, TollboothError } from '../../core/errors.js'
import { checkOptionKeys, optionNames } from '../../core/knownOptions.js'
import { isOptionsObject, nonNegativeInteger } from '../../core/validate.js'
import { GRAPHQL_OPTIONS_OWNER } from '../optionsOwner.js'
import type { ComplexityEstimator } from './complexityEstimators.js'
import { type CostMap, CostModel, checkCostMapKeys } from './costModel.js'
import { type CostSettings, ownListSize, sizedValueCost, weightedInputCost } from './estimator.js'
import { type IntrospectionRun, introspectionPrice } from './introspectionCost.js'

/**
 * The cost-directive model as a graphql-query-complexity estimator, for the fields it has something to say about
 * (`annotated`: a weight of the field's own or of its type, a `@listSize`, a weighted argument):
 * `(weight + children) × list size + weighted arguments`, plus `mutationCost` on root mutation fields, as the model
 * prices a field. Other fields are left to the next estimator. `sizedFields` have no equivalent here (an estimator
 * sees a field without its parent's arguments): a schema using them is refused before this is made.
 */
export function directiveModelEstimator(model: CostModel, settings: CostSettings): ComplexityEstimator {
  const mutationType = model.schema.getMutationType()
  return ({ type, field, args, childComplexity }) => {
    if (!isObjectType(type) && !isInterfaceType(type)) return undefined
    const cost = model.field(type, field)
    if (!cost.annotated) return undefined
    const size = ownListSize(settings, cost, field, args)?.size ?? 1
    const mutation = type === mutationType ? settings.mutationCost : 0
    return (
      sizedValueCost(cost.weight, childComplexity, size) +
      weightedInputCost(cost.weightedArguments, args) +
      mutation
    )
  }
}

/**
 * `__schema` and `__type` priced as the cost model prices them, by what they return on this schema (see
 * introspectionCost.ts), not by a count of their selections: an estimator's `1 + children` would price the
 * introspection of a schema of 200 types as a few points. First in the chain, whatever the estimators say; the
 * fields of the introspection types are in that price, and cost nothing of their own.
 */
export function introspectionEstimator(run: IntrospectionRun): ComplexityEstimator {
  return ({ type, node }) => {
    // The fields below are in the price of the field above them.
    if (type.name.startsWith('__')) return 0
    const name = node.name.value
    if (name !== '__schema' && name !== '__type') return undefined
    return introspectionPrice(run, {
      occurrences: [{ node, context: type, types: NO_TYPES }],
      types: NO_TYPES,
      split: false,
    })
  }
}

const NO_TYPES: readonly number[] = Object.freeze([])

/** Refuses a schema the estimator chain cannot price as the model does: one with `sizedFields`. */
export function checkPricableByEstimators(model: CostModel): void {
  const sizing = model.fieldsSizingChildren()
  if (sizing.length === 0) return
  throw new TollboothError(
    ErrorCodes.INVALID_OPTION,
    `${GRAPHQL_OPTIONS_OWNER}: "estimators" cannot price @listSize(sizedFields:), found on ${sizing.join(', ')}: an estimator sees a field without its parent's arguments. Give those lists a slicing argument of their own, or price the schema without estimators.`,
  )
}

/**
 * The fields annotated for graphql-query-complexity (`extensions.complexity`, as `@Field({ complexity })` of NestJS
 * sets it) that the cost-directive model prices by its own defaults instead: a schema priced without `estimators`.
 */
export function fieldsAnnotatedForEstimators(model: CostModel): string[] {
  const found: string[] = []
  for (const type of Object.values(model.schema.getTypeMap())) {
    if (!isObjectType(type) && !isInterfaceType(type)) continue
    for (const field of Object.values(type.getFields())) {
      if (field.extensions?.complexity !== undefined) found.push(`${type.name}.${field.name}`)
    }
  }
  return found
}

/** Options of `costDirectiveEstimator`: those of the cost model (see `CostAnalysisOptions`). */
export interface CostDirectiveEstimatorOptions {
  /** The schema whose `@cost` / `@listSize` (SDL, field extensions) are read. */
  schema: GraphQLSchema
  costs?: CostMap
  /** @default 10 */
  defaultListSize?: number
  /** @default 10 */
  mutationCost?: number
}

const OPTIONS = optionNames<CostDirectiveEstimatorOptions>({
  schema: true,
  costs: true,
  defaultListSize: true,
  mutationCost: true,
})

/**
 * The estimator `useTollbooth` puts first when given `estimators`, for use with graphql-query-complexity's own
 * `getComplexity` or `createComplexityRule`: `getComplexity({ estimators: [costDirectiveEstimator({ schema }),
 * ...yours], ... })` gives the price tollbooth charges.
 */
export function costDirectiveEstimator(options: CostDirectiveEstimatorOptions): ComplexityEstimator {
  const owner = 'costDirectiveEstimator'
  if (!isOptionsObject(options)) throw invalidOption(owner, 'options', 'an object', options)
  checkOptionKeys(owner, options, OPTIONS)
  if (!isSchema(options.schema)) throw invalidOption(owner, 'schema', 'a GraphQLSchema', options.schema)
  const costs = options.costs ?? {}
  checkCostMapKeys(costs)
  const model = new CostModel(options.schema, costs)
  checkPricableByEstimators(model)
  return directiveModelEstimator(model, {
    defaultListSize: nonNegativeInteger(owner, 'defaultListSize', options.defaultListSize ?? 10),
    mutationCost: nonNegativeInteger(owner, 'mutationCost', options.mutationCost ?? 10),
    introspectionCost: 1,
  })
}
