import {
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLCompositeType,
  type GraphQLField,
  GraphQLIncludeDirective,
  type GraphQLNamedType,
  type GraphQLObjectType,
  type GraphQLSchema,
  GraphQLSkipDirective,
  getArgumentValues,
  getDirectiveValues,
  getNamedType,
  isAbstractType,
  isCompositeType,
  isInterfaceType,
  isObjectType,
  Kind,
  type OperationDefinitionNode,
  type SelectionSetNode,
} from 'graphql'
import type { CostModel } from './costModel.js'
import { type CostSettings, weightedInputCost } from './estimator.js'

interface CollectedField {
  readonly node: FieldNode
  readonly field: GraphQLField<unknown, unknown>
  readonly parentType: GraphQLNamedType
  /** Selection sets of every node with this response key, merged (graphql-js executes them as one field). */
  readonly subSets: readonly SelectionSetNode[]
}

/**
 * The cost of what a response really holds, in the same model as the estimate: each object returned costs its
 * weight, lists count their real items, leaves their weight, weighted arguments what was given, root mutation
 * fields `mutationCost`. Nulls cost nothing. Used to refund `estimate − actual` after execution.
 */
export function actualCost(
  model: CostModel,
  settings: CostSettings,
  document: DocumentNode,
  operation: OperationDefinitionNode,
  variables: Readonly<Record<string, unknown>>,
  data: unknown,
): number {
  const schema = model.schema
  const rootType =
    operation.operation === 'query'
      ? schema.getQueryType()
      : operation.operation === 'mutation'
        ? schema.getMutationType()
        : schema.getSubscriptionType()
  if (rootType == null || data === null || typeof data !== 'object') return 0
  const walker = new ResponseWalker(model, settings, document, variables, operation.operation === 'mutation')
  return walker.objectCost(rootType, [operation.selectionSet], data as Record<string, unknown>, true)
}

class ResponseWalker {
  private readonly fragments = new Map<string, FragmentDefinitionNode>()
  private readonly collected = new WeakMap<
    readonly SelectionSetNode[],
    Map<string, Map<string, CollectedField>>
  >()

  constructor(
    private readonly model: CostModel,
    private readonly settings: CostSettings,
    document: DocumentNode,
    private readonly variables: Readonly<Record<string, unknown>>,
    private readonly isMutation: boolean,
  ) {
    for (const definition of document.definitions) {
      if (definition.kind === Kind.FRAGMENT_DEFINITION) this.fragments.set(definition.name.value, definition)
    }
  }

  objectCost(
    staticType: GraphQLCompositeType,
    sets: readonly SelectionSetNode[],
    value: Record<string, unknown>,
    isRoot = false,
  ): number {
    if (!isAbstractType(staticType)) return this.concreteCost(staticType, sets, value, isRoot)
    const concrete = this.typenameOf(staticType, sets, value)
    if (concrete !== undefined) return this.concreteCost(concrete, sets, value, isRoot)
    // Without __typename the concrete type is unknown: price every possible type and keep the highest, as the
    // estimate does, so a client cannot earn a refund by ordering fragments.
    let highest = 0
    for (const possible of this.model.schema.getPossibleTypes(staticType)) {
      highest = Math.max(highest, this.concreteCost(possible, sets, value, isRoot))
    }
    return highest
  }

  private concreteCost(
    runtimeType: GraphQLCompositeType,
    sets: readonly SelectionSetNode[],
    value: Record<string, unknown>,
    isRoot: boolean,
  ): number {
    let total = 0
    for (const [responseKey, entry] of this.collect(sets, runtimeType)) {
      const fieldValue = value[responseKey]
      if (fieldValue === undefined) continue
      const name = entry.field.name
      if (name === '__typename') continue
      if (name === '__schema' || name === '__type') {
        if (fieldValue !== null) total += this.settings.introspectionCost
        continue
      }
      const cost = this.model.field(entry.parentType, entry.field)
      if (cost.weightedArguments.length > 0) {
        total += weightedInputCost(
          cost.weightedArguments,
          getArgumentValues(entry.field, entry.node, this.variables),
        )
      }
      if (isRoot && this.isMutation) total += this.settings.mutationCost
      total += this.valueCost(cost.weight, getNamedType(entry.field.type), entry.subSets, fieldValue)
    }
    return total
  }

  /** The object's concrete type, when `__typename` was selected (under any alias). */
  private typenameOf(
    abstractType: GraphQLCompositeType,
    sets: readonly SelectionSetNode[],
    value: Record<string, unknown>,
  ): GraphQLObjectType | undefined {
    for (const [responseKey, entry] of this.collect(sets, abstractType)) {
      if (entry.field.name !== '__typename') continue
      const concrete = this.model.schema.getType(String(value[responseKey]))
      if (isObjectType(concrete)) return concrete
    }
    return undefined
  }

  private valueCost(
    weight: number,
    type: GraphQLNamedType,
    subSets: readonly SelectionSetNode[],
    value: unknown,
  ): number {
    if (Array.isArray(value)) {
      let sum = 0
      for (const item of value) sum += this.valueCost(weight, type, subSets, item)
      return sum
    }
    if (value === null) return 0
    if (!isCompositeType(type)) return weight
    if (typeof value !== 'object') return 0
    return weight + this.objectCost(type, subSets, value as Record<string, unknown>)
  }

  private collect(sets: readonly SelectionSetNode[], runtimeType: GraphQLCompositeType) {
    let byType = this.collected.get(sets)
    if (byType === undefined) {
      byType = new Map()
      this.collected.set(sets, byType)
    }
    let fields = byType.get(runtimeType.name)
    if (fields === undefined) {
      const nodes = new Map<
        string,
        { node: FieldNode; parentType: GraphQLCompositeType; sets: SelectionSetNode[] }
      >()
      const seenFragments = new Set<string>()
      for (const set of sets) this.collectInto(set, runtimeType, runtimeType, nodes, seenFragments)
      fields = new Map()
      for (const [key, entry] of nodes) {
        const field = fieldOf(entry.parentType, entry.node.name.value)
        if (field !== undefined) {
          fields.set(key, { node: entry.node, field, parentType: entry.parentType, subSets: entry.sets })
        }
      }
      byType.set(runtimeType.name, fields)
    }
    return fields
  }

  private collectInto(
    set: SelectionSetNode,
    runtimeType: GraphQLCompositeType,
    contextType: GraphQLCompositeType,
    into: Map<string, { node: FieldNode; parentType: GraphQLCompositeType; sets: SelectionSetNode[] }>,
    seenFragments: Set<string>,
  ): void {
    for (const selection of set.selections) {
      if (!this.included(selection)) continue
      if (selection.kind === Kind.FIELD) {
        const key = selection.alias?.value ?? selection.name.value
        let entry = into.get(key)
        if (entry === undefined) {
          entry = { node: selection, parentType: contextType, sets: [] }
          into.set(key, entry)
        }
        if (selection.selectionSet !== undefined) entry.sets.push(selection.selectionSet)
        continue
      }
      const fragment =
        selection.kind === Kind.INLINE_FRAGMENT ? selection : this.fragments.get(selection.name.value)
      if (fragment === undefined) continue
      if (selection.kind === Kind.FRAGMENT_SPREAD) {
        if (seenFragments.has(selection.name.value)) continue
        seenFragments.add(selection.name.value)
      }
      const condition = fragment.typeCondition
        ? this.model.schema.getType(fragment.typeCondition.name.value)
        : contextType
      if (!isCompositeType(condition) || !this.applies(condition, runtimeType)) continue
      this.collectInto(fragment.selectionSet, runtimeType, condition, into, seenFragments)
    }
  }

  /** Whether a fragment on `condition` can apply to an object of `runtimeType` (unknown concrete: any overlap). */
  private applies(condition: GraphQLCompositeType, runtimeType: GraphQLCompositeType): boolean {
    if (condition === runtimeType) return true
    const schema: GraphQLSchema = this.model.schema
    if (isObjectType(runtimeType))
      return isAbstractType(condition) && schema.isSubType(condition, runtimeType)
    if (isObjectType(condition)) return schema.isSubType(runtimeType, condition)
    return true
  }

  private included(selection: { directives?: readonly unknown[] | undefined }): boolean {
    if (selection.directives === undefined || selection.directives.length === 0) return true
    const node = selection as Parameters<typeof getDirectiveValues>[1]
    if (getDirectiveValues(GraphQLSkipDirective, node, this.variables)?.if === true) return false
    return getDirectiveValues(GraphQLIncludeDirective, node, this.variables)?.if !== false
  }
}

function fieldOf(type: GraphQLCompositeType, name: string): GraphQLField<unknown, unknown> | undefined {
  if (name === '__typename' || name === '__schema' || name === '__type') {
    return { name, type: type, args: [] } as unknown as GraphQLField<unknown, unknown>
  }
  if (isObjectType(type) || isInterfaceType(type)) return type.getFields()[name]
  return undefined
}
