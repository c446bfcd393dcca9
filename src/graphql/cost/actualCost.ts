import {
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLAbstractType,
  type GraphQLCompositeType,
  type GraphQLField,
  type GraphQLObjectType,
  getArgumentValues,
  getNamedType,
  isAbstractType,
  isCompositeType,
  isInterfaceType,
  isObjectType,
  Kind,
  type OperationDefinitionNode,
  type SelectionSetNode,
} from 'graphql'
import { fragmentsOf, isIncluded } from '../documentParts.js'
import type { CostModel } from './costModel.js'
import { type CostSettings, weightedInputCost } from './estimator.js'

/** One response key of a selection set, with everything its cost needs worked out in advance. */
interface PlannedField {
  readonly responseKey: string
  /** Added when the key is in the response: weighted arguments, `mutationCost`, or an introspection's flat price. */
  readonly fixed: number
  /** What each object (or leaf) of the value weighs; 0 for a flat-priced introspection field. */
  readonly weight: number
  /** The value's type when it holds objects to walk into; undefined for leaves and flat-priced fields. */
  readonly objectType: GraphQLCompositeType | undefined
  /** `objectType` when it is an interface or a union: then each object's concrete type is looked for. */
  readonly abstractType: GraphQLAbstractType | undefined
  /** Selection sets of every node with this response key, merged (graphql-js executes them as one field). */
  readonly subSets: readonly SelectionSetNode[]
  /** The plan of `subSets` when `objectType` is an object type, found once instead of once per item of a list. */
  objectPlan?: PlannedSelection
}

/** The fields of a selection set as planned for one concrete (or unknown abstract) type. */
interface PlannedSelection {
  readonly fields: readonly PlannedField[]
  /** Response keys under which `__typename` was selected (aliases included). */
  readonly typenameKeys: readonly string[]
}

/**
 * The cost of what a response really holds, in the same model as the estimate: each object returned costs its
 * weight, lists count their real items (an empty one its weight once), leaves their weight, weighted arguments
 * what was given, root mutation fields `mutationCost`. Nulls cost nothing: work an error nulled is not in the
 * response, and `hidesWork` tells the plugin when to charge it anyway. Used to refund `estimate − actual`.
 *
 * A plan is built once per document, operation and value of the cost variables (the analyzer caches it next to
 * the estimate): the walk of each response then only reads values, skipping every field that cannot cost anything.
 */
export class ResponsePlan {
  private readonly fragments: ReadonlyMap<string, FragmentDefinitionNode>
  private readonly planned = new WeakMap<readonly SelectionSetNode[], Map<string, PlannedSelection>>()
  private readonly rootType: GraphQLObjectType | null | undefined
  private readonly rootSets: readonly SelectionSetNode[]
  private rootPlan: PlannedSelection | undefined

  constructor(
    private readonly model: CostModel,
    private readonly settings: CostSettings,
    document: DocumentNode,
    private readonly operation: OperationDefinitionNode,
    private readonly variables: Readonly<Record<string, unknown>>,
  ) {
    this.fragments = fragmentsOf(document)
    this.rootType = model.schema.getRootType(operation.operation)
    this.rootSets = [operation.selectionSet]
  }

  cost(data: unknown): number {
    if (this.rootType == null || data === null || typeof data !== 'object') return 0
    // A root type is an object type: its plan is found once, not looked up on every response.
    this.rootPlan ??= this.plan(this.rootSets, this.rootType)
    return this.fieldsCost(this.rootPlan, data as Record<string, unknown>)
  }

  /** An object whose field's type is an interface or a union: priced as its concrete type when that is known. */
  private abstractObjectCost(
    staticType: GraphQLAbstractType,
    sets: readonly SelectionSetNode[],
    value: Record<string, unknown>,
  ): number {
    const concrete = this.typenameOf(staticType, sets, value)
    if (concrete !== undefined) return this.fieldsCost(this.plan(sets, concrete), value)
    // Without __typename the concrete type is unknown: price every possible type and keep the highest, as the
    // estimate does, so a client cannot earn a refund by ordering fragments.
    let highest = 0
    for (const possible of this.model.schema.getPossibleTypes(staticType)) {
      highest = Math.max(highest, this.fieldsCost(this.plan(sets, possible), value))
    }
    return highest
  }

  private fieldsCost(selection: PlannedSelection, value: Record<string, unknown>): number {
    let total = 0
    for (const field of selection.fields) {
      const fieldValue = value[field.responseKey]
      if (fieldValue === undefined) continue
      // A field that ran keeps its fixed part (a mutation that answered null still ran); its null value is free.
      total += field.fixed + this.valueCost(field, fieldValue)
    }
    return total
  }

  private valueCost(field: PlannedField, value: unknown): number {
    if (value === null) return 0
    if (Array.isArray(value)) {
      // An empty list still ran its resolver: its own weight, as the estimate of a list of size 0.
      if (value.length === 0) return field.weight
      let sum = 0
      for (const item of value) sum += this.valueCost(field, item)
      return sum
    }
    const objectType = field.objectType
    if (objectType === undefined) return field.weight
    if (typeof value !== 'object') return 0
    const object = value as Record<string, unknown>
    if (field.abstractType !== undefined) {
      return field.weight + this.abstractObjectCost(field.abstractType, field.subSets, object)
    }
    field.objectPlan ??= this.plan(field.subSets, objectType)
    // Objects whose selection walks nothing further (the usual leaves of a list) weigh just their weight.
    if (field.objectPlan.fields.length === 0) return field.weight
    return field.weight + this.fieldsCost(field.objectPlan, object)
  }

  /**
   * The object's concrete type, when `__typename` was selected (under any alias) and names one of the abstract
   * type's possible types. A key that another fragment uses for another field is no `__typename` key (see
   * `collectInto`): its value could be any string the data holds, a type name included.
   */
  private typenameOf(
    abstractType: GraphQLAbstractType,
    sets: readonly SelectionSetNode[],
    value: Record<string, unknown>,
  ): GraphQLObjectType | undefined {
    const schema = this.model.schema
    for (const key of this.plan(sets, abstractType).typenameKeys) {
      const concrete = schema.getType(String(value[key]))
      if (isObjectType(concrete) && schema.isSubType(abstractType, concrete)) return concrete
    }
    return undefined
  }

  private plan(sets: readonly SelectionSetNode[], runtimeType: GraphQLCompositeType): PlannedSelection {
    let byType = this.planned.get(sets)
    if (byType === undefined) {
      byType = new Map()
      this.planned.set(sets, byType)
    }
    let selection = byType.get(runtimeType.name)
    if (selection === undefined) {
      selection = this.compile(sets, runtimeType)
      byType.set(runtimeType.name, selection)
    }
    return selection
  }

  private compile(sets: readonly SelectionSetNode[], runtimeType: GraphQLCompositeType): PlannedSelection {
    const collected = new Map<
      string,
      { node: FieldNode; parentType: GraphQLCompositeType; sets: SelectionSetNode[] }
    >()
    const seenFragments = new Set<string>()
    for (const set of sets) this.collectInto(set, runtimeType, runtimeType, collected, seenFragments)
    const isRoot = sets === this.rootSets
    const fields: PlannedField[] = []
    const typenameKeys: string[] = []
    for (const [responseKey, entry] of collected) {
      const name = entry.node.name.value
      if (name === '__typename') {
        typenameKeys.push(responseKey)
        continue
      }
      if (name === '__schema' || name === '__type') {
        // Flat-priced when it answered: `weight` carries the price so that a null answer costs nothing.
        const flat = this.settings.introspectionCost
        if (flat > 0) {
          fields.push({
            responseKey,
            fixed: 0,
            weight: flat,
            objectType: undefined,
            abstractType: undefined,
            subSets: [],
          })
        }
        continue
      }
      const field = fieldOf(entry.parentType, name)
      if (field === undefined) continue
      const cost = this.model.field(entry.parentType, field)
      let fixed = 0
      if (cost.weightedArguments.length > 0) {
        fixed += weightedInputCost(
          cost.weightedArguments,
          getArgumentValues(field, entry.node, this.variables),
        )
      }
      if (isRoot && this.operation.operation === 'mutation') fixed += this.settings.mutationCost
      const namedType = getNamedType(field.type)
      const objectType = isCompositeType(namedType) ? namedType : undefined
      // A leaf that weighs nothing and adds nothing cannot change the cost: leave it out of the walk.
      if (objectType === undefined && cost.weight === 0 && fixed === 0) continue
      const abstractType = objectType !== undefined && isAbstractType(objectType) ? objectType : undefined
      fields.push({ responseKey, fixed, weight: cost.weight, objectType, abstractType, subSets: entry.sets })
    }
    return { fields, typenameKeys }
  }

  private collectInto(
    set: SelectionSetNode,
    runtimeType: GraphQLCompositeType,
    contextType: GraphQLCompositeType,
    into: Map<string, { node: FieldNode; parentType: GraphQLCompositeType; sets: SelectionSetNode[] }>,
    seenFragments: Set<string>,
  ): void {
    for (const selection of set.selections) {
      if (!isIncluded(selection, this.variables)) continue
      if (selection.kind === Kind.FIELD) {
        const key = selection.alias?.value ?? selection.name.value
        let entry = into.get(key)
        if (entry === undefined) {
          entry = { node: selection, parentType: contextType, sets: [] }
          into.set(key, entry)
        } else if (entry.node.name.value === '__typename' && selection.name.value !== '__typename') {
          // Fragments on different types may put `__typename` and another leaf under one key: the key then holds
          // data, not a type name, and the other field is the one to price.
          entry.node = selection
          entry.parentType = contextType
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
    const schema = this.model.schema
    if (isObjectType(runtimeType))
      return isAbstractType(condition) && schema.isSubType(condition, runtimeType)
    if (isObjectType(condition)) return schema.isSubType(runtimeType, condition)
    return true
  }
}

function fieldOf(type: GraphQLCompositeType, name: string): GraphQLField<unknown, unknown> | undefined {
  if (isObjectType(type) || isInterfaceType(type)) return type.getFields()[name]
  return undefined
}
