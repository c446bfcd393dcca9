import { createRequire } from 'node:module'
import {
  type DocumentNode,
  type FieldNode,
  type GraphQLCompositeType,
  GraphQLError,
  type GraphQLField,
  type GraphQLSchema,
} from 'graphql'
import { ErrorCodes, invalidOption, TollboothError } from '../../core/errors.js'
import { GRAPHQL_OPTIONS_OWNER } from '../optionsOwner.js'

/**
 * What graphql-query-complexity hands an estimator for one field (its `ComplexityEstimatorArgs`): declared here so
 * that tollbooth's types do not need the package installed.
 */
export interface ComplexityEstimatorArgs {
  type: GraphQLCompositeType
  // biome-ignore lint/suspicious/noExplicitAny: graphql-query-complexity's own declaration.
  field: GraphQLField<any, any>
  node: FieldNode
  // biome-ignore lint/suspicious/noExplicitAny: the field's coerced argument values.
  args: { [key: string]: any }
  childComplexity: number
  // biome-ignore lint/suspicious/noExplicitAny: graphql-query-complexity's own declaration.
  context?: Record<string, any>
}

/**
 * A graphql-query-complexity estimator (`fieldExtensionsEstimator()`, `simpleEstimator()`, `directiveEstimator()`,
 * or one of your own): a field's complexity, or nothing to let the next estimator answer.
 */
// biome-ignore lint/suspicious/noConfusingVoidType: graphql-query-complexity's own estimators return `number | void`.
export type ComplexityEstimator = (args: ComplexityEstimatorArgs) => number | void

type GetComplexity = (options: {
  estimators: ComplexityEstimator[]
  schema: GraphQLSchema
  query: DocumentNode
  variables?: Record<string, unknown>
  operationName?: string
  maxQueryNodes?: number
}) => number

const OWNER = GRAPHQL_OPTIONS_OWNER

/** The `estimators` option, checked: a non-empty list of functions. */
export function checkEstimators(value: unknown): readonly ComplexityEstimator[] {
  // By index: `every` skips the holes of a sparse array (`[, fieldExtensionsEstimator()]`).
  if (
    !Array.isArray(value) ||
    value.length === 0 ||
    !Array.from(value).every((item) => typeof item === 'function')
  ) {
    throw invalidOption(
      OWNER,
      'estimators',
      'a non-empty array of graphql-query-complexity estimators (functions)',
      value,
    )
  }
  return Object.freeze([...value])
}

/**
 * A user's estimator, held to what a price can be: a field it prices below 0 (`args.count * childComplexity` with a
 * negative `count`) would lower the sum of its siblings, so it refuses the operation, as does an estimator that
 * throws; both as GraphQLErrors, which the plugin answers as an operation it cannot price (400). What it throws as a
 * GraphQLError is kept as is; anything else is not shown to the client.
 */
export function guardedEstimator(estimator: ComplexityEstimator): ComplexityEstimator {
  return (args) => {
    let value: ReturnType<ComplexityEstimator>
    try {
      value = estimator(args)
    } catch (error) {
      if (error instanceof GraphQLError) throw error
      throw new GraphQLError(`an estimator failed on ${args.type.name}.${args.field.name}.`, {
        originalError: error as Error,
      })
    }
    if (typeof value === 'number' && value < 0) {
      throw new GraphQLError(`an estimator priced ${args.type.name}.${args.field.name} at ${value}, below 0.`)
    }
    return value
  }
}

/**
 * graphql-query-complexity's `getComplexity`, loaded when an option asks for estimators: the package is an optional
 * peer, so the entry point does not import it. Its CommonJS build is the one that loads the same graphql as Node's
 * `import 'graphql'` (graphql has no exports map: both resolve to its CommonJS `index.js`).
 */
export function loadGetComplexity(): GetComplexity {
  let loaded: { getComplexity?: unknown }
  try {
    loaded = createRequire(import.meta.url)('graphql-query-complexity') as { getComplexity?: unknown }
  } catch (error) {
    throw new TollboothError(
      ErrorCodes.INVALID_OPTION,
      `${OWNER}: "estimators" price operations with graphql-query-complexity, which is not installed (npm install graphql-query-complexity)`,
      { cause: error },
    )
  }
  if (typeof loaded.getComplexity !== 'function') {
    throw new TollboothError(
      ErrorCodes.INVALID_OPTION,
      `${OWNER}: "estimators" need graphql-query-complexity 1 or 2, whose getComplexity was not found`,
    )
  }
  return loaded.getComplexity as GetComplexity
}
