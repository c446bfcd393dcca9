import {
  type FieldNode,
  type GraphQLField,
  type GraphQLNamedType,
  type GraphQLObjectType,
  type GraphQLType,
  getArgumentValues,
  isInterfaceType,
  isListType,
  isNonNullType,
} from 'graphql'
import type { ComplexityEstimator, ComplexityEstimatorArgs } from 'graphql-query-complexity'
import { readPath } from '../documentParts.js'
import type { CostModel, FieldCost, ResolvedListSize, WeightedInput } from './costModel.js'
import type { DocumentPlan, SizingParent } from './documentPlan.js'

/** Settings of the cost model that are not in the schema. */
export interface CostSettings {
  /** Size of a list with no slicing argument given and no `assumedSize`. */
  readonly defaultListSize: number
  /** Added for each root mutation field. */
  readonly mutationCost: number
  /** Flat price of a `__schema` or `__type` field, whatever it selects (introspection reads no data). */
  readonly introspectionCost: number
}

/** How one field was priced: the numbers behind `(weight + children) × multiplier + arguments + mutation`. */
export interface FieldPricing {
  readonly node: FieldNode
  /** The parent type as graphql-query-complexity walked it (a fragment's type condition, or the field's parent). */
  readonly parentType: string
  readonly fieldName: string
  readonly weight: number
  readonly childrenCost: number
  readonly multiplier: number
  /** Where the multiplier came from, in words ("slicing argument first = 10", "assumedSize", …); none for 1. */
  readonly sizeSource: string | undefined
  readonly argumentsCost: number
  readonly mutationCost: number
  readonly total: number
}

/** State of one estimate, passed to the estimator as graphql-query-complexity's `context`. */
export interface EstimateRun {
  readonly model: CostModel
  readonly plan: DocumentPlan
  readonly settings: CostSettings
  readonly mutationType: GraphQLObjectType | null | undefined
  /** Coerced variable values, to read a sizing parent's arguments. */
  readonly variables: Readonly<Record<string, unknown>>
  /** Size given by each sizing parent, computed once per estimate. */
  readonly parentSizes: Map<SizingParent, ListSize>
  /** When set, every priced field is recorded here in the order priced (children before their parent). */
  readonly trace?: FieldPricing[]
}

/** A list size and where it came from. */
interface ListSize {
  readonly size: number
  readonly source: string
}

/**
 * The cost-directive model as a graphql-query-complexity estimator (it always returns a number, so it is the
 * only estimator needed): `(weight + children) × list size + weighted arguments`, plus `mutationCost` on root
 * mutation fields. graphql-query-complexity already follows fragments, honours `@skip`/`@include` and takes the
 * most expensive possible type of an abstract selection.
 */
export const costEstimator: ComplexityEstimator = (args: ComplexityEstimatorArgs): number => {
  const run = args.context as EstimateRun
  const pricing = priceField(run, args)
  run.trace?.push(pricing)
  return pricing.total
}

function priceField(run: EstimateRun, args: ComplexityEstimatorArgs): FieldPricing {
  const { field, node } = args
  const base = {
    node,
    parentType: args.type.name,
    fieldName: field.name,
    childrenCost: args.childComplexity,
    argumentsCost: 0,
    mutationCost: 0,
    multiplier: 1,
    sizeSource: undefined,
  }
  if (field.name === '__typename') return { ...base, weight: 0, total: 0 }
  if (field.name === '__schema' || field.name === '__type') {
    // A flat price: introspection reads the in-memory schema, and its depth is guarded separately.
    const flat = run.settings.introspectionCost
    return { ...base, weight: flat, childrenCost: 0, total: flat }
  }
  let pricing = priceDefinition(run, args, base, args.type, field, args.args)
  // Selected on an interface, the field runs as one of its implementations': priced as the dearest of them, each
  // with its own weights, list size and argument defaults (the arguments are read again against its definition).
  if (isInterfaceType(args.type)) {
    for (const type of run.model.schema.getPossibleTypes(args.type)) {
      const implementation = type.getFields()[field.name]
      if (implementation === undefined) continue
      const values = getArgumentValues(implementation, node, run.variables)
      const priced = priceDefinition(run, args, base, type, implementation, values)
      if (priced.total > pricing.total) pricing = priced
    }
  }
  return pricing
}

/** The price of one definition of the field (`parentType.field`) with these argument values. */
function priceDefinition(
  run: EstimateRun,
  args: ComplexityEstimatorArgs,
  base: Omit<FieldPricing, 'weight' | 'total'>,
  parentType: GraphQLNamedType,
  field: GraphQLField<unknown, unknown>,
  values: Record<string, unknown>,
): FieldPricing {
  const { node } = args
  const cost = run.model.field(parentType, field)
  const size = listSize(run, node, ownListSize(run, cost, field, values))
  const multiplier = size?.size ?? 1
  const argumentsCost = weightedInputCost(cost.weightedArguments, values)
  const mutationCost = parentType === run.mutationType ? run.settings.mutationCost : 0
  // A list of size 0 still ran its resolver: the field's own weight is charged once. A size of Infinity (a Float
  // slicing argument of 1e309) costs Infinity, even for weightless items (where the product would be NaN).
  const valueCost =
    multiplier === 0
      ? cost.weight
      : multiplier === Number.POSITIVE_INFINITY
        ? multiplier
        : (cost.weight + args.childComplexity) * multiplier
  return {
    ...base,
    weight: cost.weight,
    multiplier,
    sizeSource: size?.source,
    argumentsCost,
    mutationCost,
    total: valueCost + argumentsCost + mutationCost,
  }
}

/**
 * A field named in a parent's `sizedFields` takes the parent's size (the largest, when several parents), or its own
 * when that is larger and the same node is also selected where no parent sizes it. Others have their own size.
 */
function listSize(run: EstimateRun, node: FieldNode, own: ListSize | undefined): ListSize | undefined {
  const sizing = run.plan.sizing.get(node)
  if (sizing === undefined) return own
  const sized = sizedByParents(run, sizing.parents)
  return sizing.alsoOwnSize && own !== undefined && own.size > sized.size ? own : sized
}

function sizedByParents(run: EstimateRun, parents: readonly SizingParent[]): ListSize {
  let largest: ListSize | undefined
  for (const parent of parents) {
    let size = run.parentSizes.get(parent)
    if (size === undefined) {
      const parentArgs = getArgumentValues(parent.field, parent.node, run.variables)
      const own = listSizeOf(run, parent.cost.listSize, parentArgs)
      size = { size: own.size, source: `sizedFields of ${parent.field.name}: ${own.source}` }
      run.parentSizes.set(parent, size)
    }
    if (largest === undefined || size.size > largest.size) largest = size
  }
  // A node is only planned as sized when some parent sizes it.
  return largest as ListSize
}

function ownListSize(
  run: EstimateRun,
  cost: FieldCost,
  field: GraphQLField<unknown, unknown>,
  args: Record<string, unknown>,
): ListSize | undefined {
  const depth = listDepth(field.type)
  // A connection (sizedFields) is one object; the size goes to its children.
  if (depth === 0 || cost.listSize?.sizedFields !== undefined) return undefined
  const size = listSizeOf(run, cost.listSize, args)
  // [[T]] without a slicing argument: every level may hold that many items.
  return depth === 1 ? size : { size: size.size ** depth, source: `${size.source}, ^${depth} (nested lists)` }
}

/**
 * The largest slicing argument given (schema defaults count as given), else `assumedSize`, else the default.
 * A slicing argument below 1 counts as not given: what `first: 0` or `last: -1` returns is the resolver's choice
 * (nothing, a default page, or everything), and `search(first: 0)` may scan all the same, so it cannot be priced
 * as an empty list. Priced as an unsliced call, it is refunded down to what the response really held.
 */
function listSizeOf(
  run: EstimateRun,
  listSize: ResolvedListSize | undefined,
  args: Readonly<Record<string, unknown>>,
): ListSize {
  let largest: ListSize | undefined
  for (const path of listSize?.slicingArguments ?? []) {
    const value = readPath(args, path)
    if (typeof value === 'number' && value >= 1 && (largest === undefined || value > largest.size)) {
      // Finite: an Int argument. A Float one is rounded up, as a page of 2.5 items holds 3.
      largest = { size: Math.ceil(value), source: `slicing argument ${path.join('.')} = ${value}` }
    }
  }
  if (largest !== undefined) return largest
  if (listSize?.assumedSize !== undefined) return { size: listSize.assumedSize, source: 'assumedSize' }
  return { size: run.settings.defaultListSize, source: 'defaultListSize' }
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
