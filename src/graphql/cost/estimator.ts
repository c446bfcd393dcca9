import {
  type FieldNode,
  type GraphQLField,
  type GraphQLObjectType,
  type GraphQLType,
  getArgumentValues,
  isListType,
  isNonNullType,
} from 'graphql'
import type { ComplexityEstimator, ComplexityEstimatorArgs } from 'graphql-query-complexity'
import type { CostModel, FieldCost, ResolvedListSize, WeightedInput } from './costModel.js'
import type { DocumentPlan } from './documentPlan.js'

/** Settings of the cost model that are not in the schema. */
export interface CostSettings {
  /** Size of a list with no slicing argument given and no `assumedSize`. */
  readonly defaultListSize: number
  /** Added for each root mutation field. */
  readonly mutationCost: number
  /** Flat price of a `__schema` or `__type` field, whatever it selects (introspection reads no data). */
  readonly introspectionCost: number
}

/** State of one estimate, passed to the estimator as graphql-query-complexity's `context`. */
export interface EstimateRun {
  readonly model: CostModel
  readonly plan: DocumentPlan
  readonly settings: CostSettings
  readonly mutationType: GraphQLObjectType | null | undefined
  /** Coerced variable values, to read a sizing parent's arguments. */
  readonly variables: Readonly<Record<string, unknown>>
  /** Size given by each sizing parent node, computed once per estimate. */
  readonly parentSizes: Map<FieldNode, number>
}

/**
 * The cost-directive model as a graphql-query-complexity estimator (it always returns a number, so it is the
 * only estimator needed): `(weight + children) × list size + weighted arguments`, plus `mutationCost` on root
 * mutation fields. graphql-query-complexity already follows fragments, honours `@skip`/`@include` and takes the
 * most expensive possible type of an abstract selection.
 */
export const costEstimator: ComplexityEstimator = (args: ComplexityEstimatorArgs): number => {
  const run = args.context as EstimateRun
  const { field, node } = args
  if (field.name === '__typename') return 0
  if (field.name === '__schema' || field.name === '__type') return run.settings.introspectionCost
  const cost = run.model.field(args.type, field)
  const multiplier = sizedByParent(run, node) ?? ownListSize(run, cost, field, args.args)
  let total = (cost.weight + args.childComplexity) * multiplier
  total += weightedInputCost(cost.weightedArguments, args.args)
  if (args.type === run.mutationType) total += run.settings.mutationCost
  return total
}

/** A field named in a parent's `sizedFields` takes the parent's size (the largest, when several parents). */
function sizedByParent(run: EstimateRun, node: FieldNode): number | undefined {
  const parents = run.plan.sizingParents.get(node)
  if (parents === undefined) return undefined
  let largest = 0
  for (const parent of parents) {
    let size = run.parentSizes.get(parent.node)
    if (size === undefined) {
      const parentArgs = getArgumentValues(parent.field, parent.node, run.variables)
      size = sliceSize(parent.cost.listSize, parentArgs) ?? run.settings.defaultListSize
      run.parentSizes.set(parent.node, size)
    }
    largest = Math.max(largest, size)
  }
  return largest
}

function ownListSize(
  run: EstimateRun,
  cost: FieldCost,
  field: GraphQLField<unknown, unknown>,
  args: Record<string, unknown>,
): number {
  const depth = listDepth(field.type)
  // A connection (sizedFields) is one object; the size goes to its children.
  if (depth === 0 || cost.listSize?.sizedFields !== undefined) return 1
  const size = sliceSize(cost.listSize, args) ?? run.settings.defaultListSize
  // [[T]] without a slicing argument: every level may hold that many items.
  return depth === 1 ? size : size ** depth
}

/** The largest slicing argument given (schema defaults count as given), else `assumedSize`. */
export function sliceSize(
  listSize: ResolvedListSize | undefined,
  args: Readonly<Record<string, unknown>>,
): number | undefined {
  if (listSize === undefined) return undefined
  let largest: number | undefined
  for (const path of listSize.slicingArguments) {
    let value: unknown = args
    for (const key of path) value = (value as Record<string, unknown> | null | undefined)?.[key]
    // A negative slice returns nothing; a fraction cannot be given (Int).
    if (typeof value === 'number' && Number.isFinite(value)) largest = Math.max(largest ?? 0, value, 0)
  }
  return largest ?? listSize.assumedSize
}

function listDepth(type: GraphQLType): number {
  let depth = 0
  let current: GraphQLType = type
  for (;;) {
    if (isNonNullType(current)) current = current.ofType
    else if (isListType(current)) {
      depth++
      current = current.ofType
    } else return depth
  }
}

/** Weights of the arguments and input fields the client provided (each list item of an input list counts). */
export function weightedInputCost(inputs: readonly WeightedInput[], values: unknown): number {
  if (inputs.length === 0 || values === null || typeof values !== 'object') return 0
  if (Array.isArray(values)) {
    let sum = 0
    for (const item of values) sum += weightedInputCost(inputs, item)
    return sum
  }
  let total = 0
  for (const input of inputs) {
    const value = (values as Record<string, unknown>)[input.name]
    if (value === undefined || value === null) continue
    total += input.weight + weightedInputCost(input.children, value)
  }
  return total
}
