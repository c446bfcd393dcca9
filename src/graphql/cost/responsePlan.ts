import {
  type DocumentNode,
  type FieldNode,
  type GraphQLCompositeType,
  type GraphQLField,
  type GraphQLObjectType,
  getArgumentValues,
  getNamedType,
  isCompositeType,
  type OperationDefinitionNode,
  type SelectionSetNode,
} from 'graphql'
import { fragmentsOf } from '../documentParts.js'
import type { CostModel } from './costModel.js'
import { type CostSettings, weightedInputCost } from './estimator.js'
import {
  type CollectionInput,
  collectFields,
  type FieldGroup,
  type FieldOccurrence,
  MergedSelectionKeys,
  subSelectionsOf,
} from './fieldCollection.js'
import { FieldVisitBudget } from './fieldVisits.js'
import { metaFieldOf, objectTypeOf } from './introspectionCost.js'

/** What a field adds on an object of one concrete type: `fixed + weight × values it holds` (objects or leaves). */
interface Price {
  /** Weighted arguments and `mutationCost`: added when the key is in the response, even with a null value. */
  readonly fixed: number
  /** Per object (or leaf) of the value; an empty list counts once. */
  readonly weight: number
}

/**
 * One field of a compiled selection: the value under its response key. Its items are counted once per object,
 * whatever the number of concrete types it is priced for.
 */
interface CountedField {
  readonly responseKey: string
  /** The selection of the objects the value holds; undefined for leaves and flat-priced introspection. */
  readonly child: ChildSelection | undefined
}

/** The merged sub-selections of a field and the type of its value, compiled when a response first reaches them. */
interface ChildSelection {
  readonly sets: readonly SelectionSetNode[]
  readonly type: GraphQLCompositeType
  /** Set on first need (present from the start, so that every ChildSelection has one shape). */
  compiled: CompiledSelection | undefined
}

/** A field with the prices that apply (several when definitions differ and none is dearest whatever the count). */
interface PricedField extends CountedField {
  readonly prices: readonly Price[]
  /** One price (the usual case), `fixed` and `weight`: the value is then walked once, for its count and objects. */
  readonly single: boolean
  readonly fixed: number
  readonly weight: number
}

/** A field priced for some concrete types on their own: `slot` indexes `CompiledSelection.typesApart`. */
interface PricedApart {
  readonly field: CountedField
  readonly byType: readonly { readonly slot: number; readonly prices: readonly Price[] }[]
}

/** A selection set (the merged sets of one field, or the operation's) compiled for a value of one static type. */
interface CompiledSelection {
  /** Response keys that hold `__typename` for every type that selects them (aliases included). */
  readonly typenameKeys: readonly string[]
  /** The index of each possible type by name, to read `__typename` (only when it can be read). */
  readonly typeIndex: ReadonlyMap<string, number> | undefined
  /** Fields priced alike for every possible type: counted whatever the object's concrete type. */
  readonly common: readonly PricedField[]
  /** Per possible type, its fields priced apart (applying to some types only, or priced differently per type). */
  readonly ownByType: readonly (readonly PricedField[])[]
  /** The same fields, per field, for an object whose concrete type is unknown. */
  readonly apart: readonly PricedApart[]
  /** How many possible types have fields priced apart (the slots of `apart`). */
  readonly typesApart: number
  /** Nothing to count in an object: its cost is its field's weight alone. */
  readonly empty: boolean
  /**
   * Two of its fields with objects below share a response key (a key that runs differently per type, or that a
   * deferred fragment selects again): the objects below are counted through more than one selection.
   */
  readonly sharesValues: boolean
}

/** A group of fields as the walk counts it: its prices per possible type, and the selection of its objects. */
interface PlannedGroup {
  readonly child: ChildSelection | undefined
  /** The prices when they are the same for every possible type. */
  readonly alike: readonly Price[] | undefined
  /** Otherwise, per possible type it applies to. */
  readonly byType: readonly (readonly Price[] | undefined)[]
}

/** Per selection, what each object already counted through it cost (only below a shared response key). */
type Memo = Map<CompiledSelection, Map<object, number>>

const NO_FIELDS: readonly PricedField[] = []

/**
 * The cost of what a response really holds, in the same model as the estimate: each object returned costs its
 * weight, lists count their real items (an empty one its weight once), leaves their weight, weighted arguments
 * what was given, root mutation fields `mutationCost`. A field whose key is in the response ran its resolver, and
 * pays its weight whatever it answered: a value, null, or an error of its own (a null in a list counts as an item).
 * What never ran is absent from the response (below a null, under `@skip`) and costs nothing. An error that nulled
 * more than its own field hides work that ran: `hidesWork` tells the engine to charge that anyway. Used to settle
 * `actual − estimate`: a refund, or a debit for a response that cost more than its estimate.
 *
 * Fields merge as the estimate merges them (fieldCollection.ts). Each field is priced with the definition of the
 * object's concrete type, known from `__typename` or from a single possible type, and with the definitions it was
 * selected on (an interface's), the dearest: a fragment on an interface does not lower the weight of what ran.
 * When the concrete type is unknown the object costs as its dearest possible type, so a client cannot earn a
 * refund by leaving `__typename` out; each value below it is still counted once, not once per possible type.
 *
 * A plan is built once per document, operation and value of the cost variables (the analyzer caches it next to
 * the estimate), and compiles each selection once, when a response first reaches it: the walk of each response
 * then only reads values, skipping every field that cannot cost anything.
 */
export class ResponsePlan {
  /** What the plan did so far: compiled selections, and objects counted (each at most once per selection). */
  readonly work = { compiledSelections: 0, countedObjects: 0 }
  private readonly collection: CollectionInput
  private readonly root: ChildSelection | undefined
  private readonly compiledByKey = new Map<string, CompiledSelection>()
  /** Selection sets by a number of their own, to key compiled selections on (node identity, not text). */
  private readonly selectionKeys = new MergedSelectionKeys()

  constructor(
    private readonly model: CostModel,
    private readonly settings: CostSettings,
    document: DocumentNode,
    private readonly operation: OperationDefinitionNode,
    private readonly variables: Readonly<Record<string, unknown>>,
  ) {
    this.collection = {
      schema: model.schema,
      fragments: fragmentsOf(document),
      variables,
      // Not bounded again: the estimate walked these merges within maxFieldVisits, and this compiles each of those
      // a response reaches once.
      budget: new FieldVisitBudget(Number.POSITIVE_INFINITY),
    }
    const rootType = model.schema.getRootType(operation.operation)
    this.root =
      rootType == null ? undefined : { sets: [operation.selectionSet], type: rootType, compiled: undefined }
  }

  cost(data: unknown): number {
    if (this.root === undefined || data === null || typeof data !== 'object') return 0
    return this.countObject(this.selectionOf(this.root), data as Record<string, unknown>, undefined)
  }

  /**
   * What the fields `data` brings to the object at `path` of the response `merged` cost (a deferred fragment's part
   * of an incremental response). `merged` is the response as the client has it so far, read to find the object.
   */
  deferredCost(merged: unknown, path: readonly (string | number)[], data: unknown): number {
    const target = this.reach(merged, path)
    if (target?.selection === undefined || data === null || typeof data !== 'object') return 0
    return this.countObject(target.selection, data as Record<string, unknown>, undefined)
  }

  /**
   * What list items cost that a stream appends to the list at `listPath` of the response `merged` (a streamed
   * part of an incremental response).
   */
  streamedCost(merged: unknown, listPath: readonly (string | number)[], items: readonly unknown[]): number {
    const key = listPath.at(-1)
    const parent = this.reach(merged, listPath.slice(0, -1))
    if (typeof key !== 'string' || parent?.selection === undefined) return 0
    const field = fieldAt(parent.selection, parent.object, key, (selection, object) =>
      this.concreteTypeOf(selection, object),
    )
    if (field === undefined) return 0
    let total = 0
    for (const item of items) total += this.valueCost(field.child, field.weight, item, undefined)
    return total
  }

  /** The object at `path` of `merged` and its compiled selection; undefined where the path leads nowhere. */
  private reach(
    merged: unknown,
    path: readonly (string | number)[],
  ): { object: Record<string, unknown>; selection: CompiledSelection | undefined } | undefined {
    if (this.root === undefined || merged === null || typeof merged !== 'object') return undefined
    let object = merged as Record<string, unknown>
    let selection: CompiledSelection | undefined = this.selectionOf(this.root)
    let value: unknown = object
    let child: ChildSelection | undefined
    for (const key of path) {
      if (typeof key === 'number') {
        value = Array.isArray(value) ? value[key] : undefined
      } else {
        if (selection === undefined) return undefined
        child = fieldAt(selection, object, key, (compiled, at) => this.concreteTypeOf(compiled, at))?.child
        value = object[key]
      }
      if (value === null || typeof value !== 'object' || Array.isArray(value)) continue
      object = value as Record<string, unknown>
      selection = child === undefined ? undefined : this.selectionOf(child)
    }
    return value === object ? { object, selection } : undefined
  }

  /** What an object's fields cost (its own weight is its field's). */
  private countObject(
    selection: CompiledSelection,
    object: Record<string, unknown>,
    memo: Memo | undefined,
  ): number {
    this.work.countedObjects++
    // Below a key counted through several selections, one object may be reached again through the same selection:
    // from here down, each is counted once per selection.
    const below = selection.sharesValues && memo === undefined ? new Map() : memo
    const total = this.fieldsCost(selection.common, object, below)
    if (selection.typesApart === 0) return total
    const concrete = this.concreteTypeOf(selection, object)
    if (concrete !== undefined) {
      return total + this.fieldsCost(selection.ownByType[concrete] as readonly PricedField[], object, below)
    }
    return total + this.dearestTypeCost(selection, object, below)
  }

  private fieldsCost(
    fields: readonly PricedField[],
    object: Record<string, unknown>,
    memo: Memo | undefined,
  ): number {
    let total = 0
    for (const field of fields) {
      const value = object[field.responseKey]
      // Absent: it never ran. Present, it ran: its fixed part and its weight, even for a null.
      if (value === undefined) continue
      if (field.single) {
        total += field.fixed + this.valueCost(field.child, field.weight, value, memo)
      } else {
        const values = countValues(value, field.child !== undefined)
        total += dearest(field.prices, values) + this.valueCost(field.child, 0, value, memo)
      }
    }
    return total
  }

  /**
   * The fields priced apart of an object whose concrete type is unknown, at its dearest possible type. Each value
   * is counted once and priced for every type it applies to; a type with none of these fields adds nothing.
   */
  private dearestTypeCost(
    selection: CompiledSelection,
    object: Record<string, unknown>,
    memo: Memo | undefined,
  ): number {
    const ownTotals = new Float64Array(selection.typesApart)
    for (const { field, byType } of selection.apart) {
      const value = object[field.responseKey]
      if (value === undefined) continue
      const values = countValues(value, field.child !== undefined)
      const childrenCost = this.valueCost(field.child, 0, value, memo)
      for (const { slot, prices } of byType) {
        ownTotals[slot] = (ownTotals[slot] as number) + dearest(prices, values) + childrenCost
      }
    }
    let dearestOwn = 0
    for (const own of ownTotals) if (own > dearestOwn) dearestOwn = own
    return dearestOwn
  }

  /** `weight` for each object (or leaf) the value holds, an empty list counting once, plus what the objects hold. */
  private valueCost(
    child: ChildSelection | undefined,
    weight: number,
    value: unknown,
    memo: Memo | undefined,
  ): number {
    // A null in the response ran its resolver all the same (it answered null, or raised its own error): its weight.
    if (value === null) return weight
    if (Array.isArray(value)) {
      // An empty list still ran its resolver: its own weight, as the estimate of a list of size 0.
      if (value.length === 0) return weight
      let sum = 0
      for (const item of value) sum += this.valueCost(child, weight, item, memo)
      return sum
    }
    if (child === undefined) return weight
    if (typeof value !== 'object') return 0
    const selection = child.compiled ?? this.selectionOf(child)
    // Objects whose selection counts nothing further (the usual leaves of a list) weigh just their weight.
    if (selection.empty) return weight
    const object = value as Record<string, unknown>
    return (
      weight +
      (memo === undefined
        ? this.countObject(selection, object, undefined)
        : this.memoized(selection, object, memo))
    )
  }

  private memoized(selection: CompiledSelection, object: Record<string, unknown>, memo: Memo): number {
    let counted = memo.get(selection)
    if (counted === undefined) {
      counted = new Map()
      memo.set(selection, counted)
    }
    let cost = counted.get(object)
    if (cost === undefined) {
      cost = this.countObject(selection, object, memo)
      counted.set(object, cost)
    }
    return cost
  }

  /**
   * The index of the object's concrete type among the possible ones, when `__typename` was selected (under any
   * alias) and names one of them. A key that another fragment uses for another field is no `__typename` key: its
   * value could be any string the data holds, a type name included.
   */
  private concreteTypeOf(selection: CompiledSelection, object: Record<string, unknown>): number | undefined {
    const typeIndex = selection.typeIndex
    if (typeIndex === undefined) return undefined
    for (const key of selection.typenameKeys) {
      const name = object[key]
      const index = typeof name === 'string' ? typeIndex.get(name) : undefined
      if (index !== undefined) return index
    }
    return undefined
  }

  /** The compiled selection, shared by every field whose merged sub-selections and type are the same. */
  private selectionOf(child: ChildSelection): CompiledSelection {
    if (child.compiled !== undefined) return child.compiled
    const key = this.selectionKeys.keyOf(child.type, child.sets)
    let compiled = this.compiledByKey.get(key)
    if (compiled === undefined) {
      compiled = this.compile(child.sets, child.type, child === this.root)
      this.compiledByKey.set(key, compiled)
    }
    child.compiled = compiled
    return compiled
  }

  private compile(
    sets: readonly SelectionSetNode[],
    staticType: GraphQLCompositeType,
    isRoot: boolean,
  ): CompiledSelection {
    this.work.compiledSelections++
    const { possibleTypes, groups } = collectFields(this.collection, sets, staticType)
    const typenameCandidates: string[] = []
    const keysOfOtherFields = new Set<string>()
    const keysWithObjects = new Set<string>()
    let sharesValues = false
    const common: PricedField[] = []
    const ownByType: PricedField[][] = []
    const apart: PricedApart[] = []
    /** Per possible type with fields priced apart, its slot in `apart`. */
    const slotOf: number[] = []
    let typesApart = 0
    for (const group of groups) {
      const first = group.occurrences[0] as FieldOccurrence
      const responseKey = first.node.alias?.value ?? first.node.name.value
      if (first.node.name.value === '__typename') {
        typenameCandidates.push(responseKey)
        continue
      }
      keysOfOtherFields.add(responseKey)
      const planned = this.planGroup(group, possibleTypes, isRoot)
      if (planned === undefined) continue
      const field: CountedField = { responseKey, child: planned.child }
      if (planned.child !== undefined) {
        sharesValues ||= keysWithObjects.has(responseKey)
        keysWithObjects.add(responseKey)
      }
      if (planned.alike !== undefined) {
        common.push(pricedField(field, planned.alike))
        continue
      }
      const byType: { slot: number; prices: readonly Price[] }[] = []
      for (const type of group.types) {
        const prices = planned.byType[type] as readonly Price[]
        let slot = slotOf[type]
        if (slot === undefined) {
          slot = typesApart++
          slotOf[type] = slot
        }
        byType.push({ slot, prices })
        const own = ownByType[type]
        if (own === undefined) ownByType[type] = [pricedField(field, prices)]
        else own.push(pricedField(field, prices))
      }
      apart.push({ field, byType })
    }
    const typenameKeys = typenameCandidates.filter((key) => !keysOfOtherFields.has(key))
    return {
      typenameKeys,
      // Read only to choose among the fields priced apart.
      typeIndex:
        typesApart === 0 || typenameKeys.length === 0
          ? undefined
          : new Map(possibleTypes.map((type, index) => [type.name, index])),
      common,
      ownByType: typesApart === 0 ? [] : possibleTypes.map((_, type) => ownByType[type] ?? NO_FIELDS),
      apart,
      typesApart,
      empty: common.length === 0 && apart.length === 0,
      sharesValues,
    }
  }

  /**
   * The prices of one group for the possible types it applies to, and the selection of its value. Undefined when it
   * cannot cost anything: a weightless leaf without weighted arguments, a field the schema does not know.
   */
  private planGroup(
    group: FieldGroup,
    possibleTypes: readonly GraphQLObjectType[],
    isRoot: boolean,
  ): PlannedGroup | undefined {
    const first = group.occurrences[0] as FieldOccurrence
    const name = first.node.name.value
    const everyType = group.types.length === possibleTypes.length
    if (name === '__schema' || name === '__type') {
      // Its weight, and what it returned counted as any response is (introspection types are object types).
      const prices = [{ fixed: 0, weight: this.settings.introspectionCost }]
      const type = objectTypeOf(metaFieldOf(name)) as GraphQLObjectType
      return {
        child: { sets: subSelectionsOf(group), type, compiled: undefined },
        ...alikeOrByType(everyType, group.types, () => prices),
      }
    }
    const field = fieldOf(first.context, name)
    if (field === undefined) return undefined
    const mutationCost = isRoot && this.operation.operation === 'mutation' ? this.settings.mutationCost : 0
    // The definitions the field was selected on (an interface's among them) count for every type it runs on.
    const selectedOn: GraphQLField<unknown, unknown>[] = []
    const selectedOnPrices: Price[] = []
    for (const occurrence of group.occurrences) {
      const definition = fieldOf(occurrence.context, name)
      if (definition === undefined || selectedOn.includes(definition)) continue
      selectedOn.push(definition)
      selectedOnPrices.push(this.definitionPrice(occurrence.context, definition, first.node, mutationCost))
    }
    const selected = undominated(selectedOnPrices)
    let weighs = false
    const pricesOf = (type: number): readonly Price[] => {
      const parentType = possibleTypes[type] as GraphQLObjectType
      const own = parentType.getFields()[name]
      const prices =
        own === undefined || selectedOn.includes(own)
          ? selected
          : undominated([...selected, this.definitionPrice(parentType, own, first.node, mutationCost)])
      weighs ||= prices.some((price) => price.fixed > 0 || price.weight > 0)
      return prices
    }
    const priced = alikeOrByType(everyType, group.types, pricesOf)
    const namedType = compositeTypeOf(field)
    if (namedType === undefined) return weighs ? { child: undefined, ...priced } : undefined
    return { child: { sets: subSelectionsOf(group), type: namedType, compiled: undefined }, ...priced }
  }

  private definitionPrice(
    parentType: GraphQLCompositeType,
    definition: GraphQLField<unknown, unknown>,
    node: FieldNode,
    mutationCost: number,
  ): Price {
    const cost = this.model.field(parentType, definition)
    let fixed = mutationCost
    if (cost.weightedArguments.length > 0) {
      fixed += weightedInputCost(cost.weightedArguments, getArgumentValues(definition, node, this.variables))
    }
    return { fixed, weight: cost.weight }
  }
}

/**
 * The field under `key` in an object of `selection`, with its weight (the dearest where it is priced apart and the
 * object's concrete type is unknown).
 */
function fieldAt(
  selection: CompiledSelection,
  object: Record<string, unknown>,
  key: string,
  concreteTypeOf: (selection: CompiledSelection, object: Record<string, unknown>) => number | undefined,
): { child: ChildSelection | undefined; weight: number } | undefined {
  const byWeight = (field: PricedField) => ({
    child: field.child,
    weight: field.single ? field.weight : Math.max(...field.prices.map((price) => price.weight)),
  })
  const common = selection.common.find((field) => field.responseKey === key)
  if (common !== undefined) return byWeight(common)
  if (selection.typesApart === 0) return undefined
  const concrete = concreteTypeOf(selection, object)
  if (concrete !== undefined) {
    const own = selection.ownByType[concrete]?.find((field) => field.responseKey === key)
    return own === undefined ? undefined : byWeight(own)
  }
  const apart = selection.apart.find(({ field }) => field.responseKey === key)
  if (apart === undefined) return undefined
  let weight = 0
  for (const { prices } of apart.byType) for (const price of prices) weight = Math.max(weight, price.weight)
  return { child: apart.field.child, weight }
}

function pricedField(field: CountedField, prices: readonly Price[]): PricedField {
  const single = prices.length === 1 ? (prices[0] as Price) : undefined
  return {
    responseKey: field.responseKey,
    child: field.child,
    prices,
    single: single !== undefined,
    fixed: single?.fixed ?? 0,
    weight: single?.weight ?? 0,
  }
}

/** The number of values a field's value holds: objects (or leaves) at any list depth, an empty list counting once. */
function countValues(value: unknown, holdsObjects: boolean): number {
  // A null ran its resolver: it counts as one value, as an object that came back empty would.
  if (value === null) return 1
  if (!Array.isArray(value)) return !holdsObjects || typeof value === 'object' ? 1 : 0
  // An empty list still ran its resolver: its own weight, as the estimate of a list of size 0.
  if (value.length === 0) return 1
  let count = 0
  for (const item of value) count += countValues(item, holdsObjects)
  return count
}

/** The dearest of a field's prices for this many values. */
function dearest(prices: readonly Price[], values: number): number {
  let highest = 0
  for (const price of prices) {
    const cost = price.fixed + price.weight * values
    if (cost > highest) highest = cost
  }
  return highest
}

/** The prices that can be the dearest for some count: the others are at most one of them whatever the count. */
function undominated(prices: readonly Price[]): readonly Price[] {
  if (prices.length <= 1) return prices
  const kept: Price[] = []
  prices.forEach((price, index) => {
    const dominated = prices.some(
      (other, otherIndex) =>
        otherIndex !== index &&
        other.fixed >= price.fixed &&
        other.weight >= price.weight &&
        // Of equal prices, the first is kept.
        (other.fixed > price.fixed || other.weight > price.weight || otherIndex < index),
    )
    if (!dominated) kept.push(price)
  })
  return kept
}

/**
 * A group's prices for the types it applies to: `alike` when it applies to every possible type at the same prices
 * (counted whatever the concrete type), else `byType`, indexed by possible type.
 */
function alikeOrByType(
  everyType: boolean,
  types: readonly number[],
  pricesOf: (type: number) => readonly Price[],
): Pick<PlannedGroup, 'alike' | 'byType'> {
  const byType: (readonly Price[] | undefined)[] = []
  let alike: readonly Price[] | undefined
  for (const type of types) {
    const prices = pricesOf(type)
    byType[type] = prices
    if (type === types[0]) alike = prices
    else if (alike !== undefined && !samePrices(alike, prices)) alike = undefined
  }
  return everyType && alike !== undefined ? { alike, byType: [] } : { alike: undefined, byType }
}

function samePrices(a: readonly Price[], b: readonly Price[]): boolean {
  if (a === b) return true
  if (a.length !== b.length) return false
  return a.every((price, index) => price.fixed === b[index]?.fixed && price.weight === b[index]?.weight)
}

function fieldOf(type: GraphQLCompositeType, name: string): GraphQLField<unknown, unknown> | undefined {
  // A union has no fields of its own (`__typename` aside).
  return 'getFields' in type ? type.getFields()[name] : undefined
}

/** Per field definition, the object, interface or union type it returns (null for leaves), found once. */
const compositeTypes = new WeakMap<GraphQLField<unknown, unknown>, GraphQLCompositeType | null>()

function compositeTypeOf(field: GraphQLField<unknown, unknown>): GraphQLCompositeType | undefined {
  let type = compositeTypes.get(field)
  if (type === undefined) {
    const named = getNamedType(field.type)
    type = isCompositeType(named) ? named : null
    compositeTypes.set(field, type)
  }
  return type ?? undefined
}
