import {
  type FieldNode,
  type GraphQLCompositeType,
  type GraphQLField,
  type GraphQLNamedType,
  type GraphQLObjectType,
  type GraphQLType,
  getArgumentValues,
  getNamedType,
  isCompositeType,
  isInterfaceType,
  isListType,
  isNonNullType,
  isObjectType,
  type SelectionSetNode,
} from 'graphql'
import { readPath } from '../documentParts.js'
import type { CostModel, FieldCost, ResolvedListSize, WeightedInput } from './costModel.js'
import type { DocumentPlan, SizingParent } from './documentPlan.js'
import { describeField, type FieldExplanation } from './explain.js'
import {
  type CollectionInput,
  collectFields,
  type FieldGroup,
  type FieldOccurrence,
  subSelectionsOf,
} from './fieldCollection.js'
import { introspectionPrice } from './introspectionCost.js'

/** Settings of the cost model that are not in the schema. */
export interface CostSettings {
  /** Size of a list with no slicing argument given and no `assumedSize`. */
  readonly defaultListSize: number
  /** Added for each root mutation field. */
  readonly mutationCost: number
  /** Weight of a `__schema` or `__type` field itself; what it returns is priced from the schema. */
  readonly introspectionCost: number
}

/** How one field was priced: the numbers behind `(weight + children) × multiplier + arguments + mutation`. */
export interface FieldPricing {
  readonly childrenCost: number
  readonly argumentsCost: number
  readonly mutationCost: number
  readonly multiplier: number
  /** Where the multiplier came from, in words ("slicing argument first = 10", "assumedSize", …); none for 1. */
  readonly sizeSource: string | undefined
  readonly weight: number
  readonly total: number
}

/** State of one estimate. */
export interface EstimateRun extends CollectionInput {
  readonly model: CostModel
  readonly plan: DocumentPlan
  readonly settings: CostSettings
  readonly mutationType: GraphQLObjectType | null | undefined
  /** Size given by each sizing parent, computed once per estimate. */
  readonly parentSizes: Map<SizingParent, ListSize>
}

/** A list size and where it came from. */
interface ListSize {
  readonly size: number
  readonly source: string
}

const NO_ARGUMENTS: Record<string, unknown> = Object.freeze({})

/**
 * The cost-directive model: `(weight + children) × list size + weighted arguments`, plus `mutationCost` on root
 * mutation fields, over the fields as graphql-js executes them (see fieldCollection.ts): a response key selected
 * twice under one parent is one field, priced once with its sub-selections merged. A selection of an interface or
 * union costs as its most expensive possible type, each type with its own merged fields.
 *
 * `sets` are the selection sets of the nodes of one merged field (or the operation's); with `explained`, each priced
 * field is appended to it, with its own priced children.
 */
export function estimateSelection(
  run: EstimateRun,
  sets: readonly SelectionSetNode[],
  staticType: GraphQLCompositeType,
  explained?: FieldExplanation[],
): number {
  const { possibleTypes, groups } = collectFields(run, sets, staticType)
  if (possibleTypes.length <= 1) {
    let total = 0
    for (const group of groups) total += priceGroup(run, group, possibleTypes, explained)
    return total
  }
  const totals = new Array<number>(possibleTypes.length).fill(0)
  for (const group of groups) {
    const price = priceGroup(run, group, possibleTypes, explained)
    for (const type of group.types) totals[type] = (totals[type] as number) + price
  }
  return Math.max(0, ...totals)
}

/** The price of one field as it executes: its merged occurrences, for the possible types it applies to. */
function priceGroup(
  run: EstimateRun,
  group: FieldGroup,
  possibleTypes: readonly GraphQLObjectType[],
  explained: FieldExplanation[] | undefined,
): number {
  // graphql-js runs the first node's field with the first node's arguments (validation makes the others equal).
  const first = group.occurrences[0] as FieldOccurrence
  const name = first.node.name.value
  if (name === '__typename') {
    explained?.push(explanation(group, possibleTypes, name, FREE, []))
    return 0
  }
  if (name === '__schema' || name === '__type') {
    // Priced by what it returns on this schema (its depth and count are guarded separately).
    const weight = run.settings.introspectionCost
    const total = introspectionPrice(run, group)
    const pricing = { ...FREE, weight, childrenCost: total - weight, total }
    explained?.push(explanation(group, possibleTypes, name, pricing, []))
    return total
  }
  const field = fieldOf(first.context, name)
  // Unknown to the schema: validation refuses it, nothing runs.
  if (field === undefined) return 0
  const children: FieldExplanation[] | undefined = explained === undefined ? undefined : []
  const childrenCost = mergedChildrenCost(run, group, field, children)
  let pricing = priceDefinition(run, group, first.context, field, childrenCost)
  // On an object of one of `types` the field runs as that type's, and it may have been selected on other types
  // too (fragments on an interface and on one of its implementations): priced as the dearest of those definitions,
  // each with its own weights, list size and argument defaults.
  const dearest = (type: GraphQLCompositeType): void => {
    const definition = fieldOf(type, name)
    if (definition === undefined || definition === field) return
    const priced = priceDefinition(run, group, type, definition, childrenCost)
    if (priced.total > pricing.total) pricing = priced
  }
  for (let index = 1; index < group.occurrences.length; index++) {
    dearest((group.occurrences[index] as FieldOccurrence).context)
  }
  for (const type of group.types) dearest(possibleTypes[type] as GraphQLObjectType)
  explained?.push(explanation(group, possibleTypes, field.name, pricing, children ?? []))
  return pricing.total
}

/** The merged sub-selections of a group's nodes, as a value of the field's type. */
function mergedChildrenCost(
  run: EstimateRun,
  group: FieldGroup,
  field: GraphQLField<unknown, unknown>,
  explained: FieldExplanation[] | undefined,
): number {
  const type = getNamedType(field.type)
  if (!isCompositeType(type)) return 0
  const sets = subSelectionsOf(group)
  return sets.length === 0 ? 0 : estimateSelection(run, sets, type, explained)
}

const FREE: FieldPricing = {
  childrenCost: 0,
  argumentsCost: 0,
  mutationCost: 0,
  multiplier: 1,
  sizeSource: undefined,
  weight: 0,
  total: 0,
}

function explanation(
  group: FieldGroup,
  possibleTypes: readonly GraphQLObjectType[],
  fieldName: string,
  pricing: FieldPricing,
  children: readonly FieldExplanation[],
): FieldExplanation {
  const first = group.occurrences[0] as FieldOccurrence
  return {
    parentType: parentTypeName(group, possibleTypes),
    fieldName,
    childrenCost: pricing.childrenCost,
    argumentsCost: pricing.argumentsCost,
    mutationCost: pricing.mutationCost,
    multiplier: pricing.multiplier,
    sizeSource: pricing.sizeSource,
    weight: pricing.weight,
    total: pricing.total,
    field: describeField(first.node),
    children,
  }
}

/**
 * The type a field was selected on (a fragment's condition, or its parent's type). When it runs as one type only and
 * that type is not the whole story (its occurrences were selected on different types, or other types run other
 * occurrences of its response key), that type.
 */
function parentTypeName(group: FieldGroup, possibleTypes: readonly GraphQLObjectType[]): string {
  const context = (group.occurrences[0] as FieldOccurrence).context
  const single = group.types.length === 1 ? possibleTypes[group.types[0] as number] : undefined
  if (single === undefined) return context.name
  const mixedContexts = group.occurrences.some((occurrence) => occurrence.context !== context)
  return group.split || mixedContexts ? single.name : context.name
}

/** The price of one definition of the field (`parentType.field`) with the first node's argument values. */
function priceDefinition(
  run: EstimateRun,
  group: FieldGroup,
  parentType: GraphQLNamedType,
  field: GraphQLField<unknown, unknown>,
  childrenCost: number,
): FieldPricing {
  const node = (group.occurrences[0] as FieldOccurrence).node
  // Arguments are read even when nothing is priced by them: a null for a non-null argument cannot be priced.
  const values = field.args.length === 0 ? NO_ARGUMENTS : getArgumentValues(field, node, run.variables)
  const cost = run.model.field(parentType, field)
  const size = groupListSize(run, group, ownListSize(run.settings, cost, field, values))
  const multiplier = size?.size ?? 1
  const argumentsCost = weightedInputCost(cost.weightedArguments, values)
  const mutationCost = parentType === run.mutationType ? run.settings.mutationCost : 0
  const valueCost = sizedValueCost(cost.weight, childrenCost, multiplier)
  return {
    childrenCost,
    argumentsCost,
    mutationCost,
    multiplier,
    sizeSource: size?.source,
    weight: cost.weight,
    total: valueCost + argumentsCost + mutationCost,
  }
}

/**
 * `(weight + children) × size`. A list of size 0 still ran its resolver: the field's own weight is charged once. A
 * size of Infinity (a Float slicing argument of 1e309) costs Infinity, even for weightless items (where the product
 * would be NaN).
 */
export function sizedValueCost(weight: number, childrenCost: number, size: number): number {
  if (size === 0) return weight
  return size === Number.POSITIVE_INFINITY ? size : (weight + childrenCost) * size
}

/** The largest size any node of the group gets (merged nodes have the same arguments, but may sit under other parents). */
function groupListSize(run: EstimateRun, group: FieldGroup, own: ListSize | undefined): ListSize | undefined {
  let largest: ListSize | undefined
  for (const occurrence of group.occurrences) {
    const size = listSize(run, occurrence.node, own)
    if (size !== undefined && (largest === undefined || size.size > largest.size)) largest = size
  }
  return largest
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
      const own = listSizeOf(run.settings, parent.cost.listSize, parentArgs)
      size = { size: own.size, source: `sizedFields of ${parent.field.name}: ${own.source}` }
      run.parentSizes.set(parent, size)
    }
    if (largest === undefined || size.size > largest.size) largest = size
  }
  // A node is only planned as sized when some parent sizes it.
  return largest as ListSize
}

/** The size of a list field from its own `@listSize` and arguments; none for a field that is not a list. */
export function ownListSize(
  settings: CostSettings,
  cost: FieldCost,
  field: GraphQLField<unknown, unknown>,
  args: Record<string, unknown>,
): ListSize | undefined {
  const depth = listDepth(field.type)
  // A connection (sizedFields) is one object; the size goes to its children.
  if (depth === 0 || cost.listSize?.sizedFields !== undefined) return undefined
  const size = listSizeOf(settings, cost.listSize, args)
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
  settings: CostSettings,
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
  return { size: settings.defaultListSize, source: 'defaultListSize' }
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

/**
 * Weights of the arguments and input fields the client provided (each list item of an input list counts). The walk
 * follows the value, so a recursive input type is priced as deep as the given value nests, no deeper.
 */
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

function fieldOf(type: GraphQLCompositeType, name: string): GraphQLField<unknown, unknown> | undefined {
  if (isObjectType(type) || isInterfaceType(type)) return type.getFields()[name]
  return undefined
}
