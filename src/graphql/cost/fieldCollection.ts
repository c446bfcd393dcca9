import {
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLAbstractType,
  type GraphQLCompositeType,
  type GraphQLObjectType,
  type GraphQLSchema,
  isCompositeType,
  isObjectType,
  Kind,
  type SelectionSetNode,
} from 'graphql'
import { isIncluded } from '../documentParts.js'
import { isDeferred } from './deferDirective.js'
import type { FieldVisitBudget } from './fieldVisits.js'

/**
 * Field collection as graphql-js executes it (the spec's CollectFields), for every possible type of a selection at
 * once: the fields with the same response name under one parent run as one field, whose sub-selections are merged.
 * Fragments and inline fragments only apply to the types their condition allows, and a fragment is collected once
 * per type however often it is spread, so the merge is worked out per concrete type: `... on A { f { x } }` and
 * `... on Iface { f { y } }` are one field `f { x y }` for an A, and `f { y }` for the other implementations.
 *
 * A fragment spread or inline fragment with `@defer` (not `if: false`) is the exception, as executors that defer
 * run it: its fields are collected on their own, merged with neither the fields around it nor another deferred
 * fragment, and a deferred spread of a fragment already collected is collected again.
 */

/** Indices into the possible types of the selection being collected, ascending. */
export type TypeSet = readonly number[]

/** One field node, where it was found. */
export interface FieldOccurrence {
  readonly node: FieldNode
  /** The type the field is selected on: the selection's own type, or the condition of the fragment around it. */
  readonly context: GraphQLCompositeType
  /** The possible types this occurrence applies to. */
  readonly types: TypeSet
}

/** The occurrences of one response key that run as one field for each of `types`, in document order. */
export interface FieldGroup {
  readonly occurrences: readonly FieldOccurrence[]
  readonly types: TypeSet
  /** The response key runs as other groups for other types (its occurrences apply to different types). */
  readonly split: boolean
}

/** A selection's fields, grouped as they execute. */
export interface CollectedFields {
  /** The object types a value of the selection's type can have (the type itself when it is an object type). */
  readonly possibleTypes: readonly GraphQLObjectType[]
  /**
   * In the order of their first occurrence, each deferred fragment's after the others. One response key may give
   * several groups under an abstract type, and one more per deferred fragment that selects it.
   */
  readonly groups: readonly FieldGroup[]
}

/** What collecting needs besides the selection: the document's fragments, the variables, the visit budget. */
export interface CollectionInput {
  readonly schema: GraphQLSchema
  readonly fragments: ReadonlyMap<string, FragmentDefinitionNode>
  readonly variables: Readonly<Record<string, unknown>>
  readonly budget: FieldVisitBudget
}

interface MutableGroup {
  readonly occurrences: FieldOccurrence[]
  readonly types: TypeSet
  readonly split: false
  /** Some occurrence applies to other types than the first: the group is split per type at the end. */
  mixed: boolean
}

interface Collection {
  readonly input: CollectionInput
  readonly staticType: GraphQLCompositeType
  readonly possibleTypes: readonly GraphQLObjectType[]
  readonly byKey: Map<string, MutableGroup>
  /** Per fragment, the types it was already collected for. */
  readonly visitedFragments: Map<string, TypeSet>
  /** The deferred fragments of the selection, nested ones included, each collected on its own (one shared list). */
  readonly patches: Collection[]
}

const NO_TYPES: TypeSet = []
/** `[0, 1, …, n − 1]` by n: the set of all possible types, shared. */
const allTypesBySize: TypeSet[] = []

function allTypes(size: number): TypeSet {
  let all = allTypesBySize[size]
  if (all === undefined) {
    all = Array.from({ length: size }, (_, index) => index)
    allTypesBySize[size] = all
  }
  return all
}

/**
 * Collects `sets` (the selection sets of every node of one merged field, or the operation's) for a value of
 * `staticType`. Every selection looked at, excluded or not, is spent from the budget.
 */
export function collectFields(
  input: CollectionInput,
  sets: readonly SelectionSetNode[],
  staticType: GraphQLCompositeType,
): CollectedFields {
  // Asked as isObjectType: graphql's type predicates are slow when they answer false, and objects are the usual case.
  const possibleTypes = isObjectType(staticType)
    ? [staticType]
    : input.schema.getPossibleTypes(staticType as GraphQLAbstractType)
  const collection: Collection = {
    input,
    staticType,
    possibleTypes,
    byKey: new Map(),
    visitedFragments: new Map(),
    patches: [],
  }
  const types = allTypes(possibleTypes.length)
  if (types.length > 0) for (const set of sets) collect(collection, set, staticType, types)
  const groups: FieldGroup[] = []
  for (const part of [collection, ...collection.patches]) {
    for (const group of part.byKey.values()) {
      if (group.mixed) groups.push(...splitByType(group))
      else groups.push(group)
    }
  }
  return { possibleTypes, groups }
}

function collect(
  collection: Collection,
  set: SelectionSetNode,
  context: GraphQLCompositeType,
  types: TypeSet,
): void {
  const { schema, fragments, variables, budget } = collection.input
  for (const selection of set.selections) {
    budget.spend()
    if (!isIncluded(selection, variables)) continue
    if (selection.kind === Kind.FIELD) {
      addOccurrence(collection, { node: selection, context, types })
    } else if (selection.kind === Kind.INLINE_FRAGMENT) {
      const condition =
        selection.typeCondition === undefined ? context : schema.getType(selection.typeCondition.name.value)
      if (!isCompositeType(condition)) continue
      const applying = narrow(collection, types, condition)
      if (applying.length > 0) {
        const deferred = isDeferred(selection, variables)
        collectFragment(collection, selection.selectionSet, condition, applying, deferred)
      }
    } else {
      // Spread again for a type it was collected for, a fragment adds nothing (graphql-js skips it), unless the
      // spread is deferred: executors that defer run it again, as a patch of its own.
      const name = selection.name.value
      const deferred = isDeferred(selection, variables)
      const visited = collection.visitedFragments.get(name)
      const fresh = deferred || visited === undefined ? types : without(types, visited)
      if (fresh.length === 0) continue
      if (!deferred) {
        collection.visitedFragments.set(name, visited === undefined ? fresh : union(visited, fresh))
      }
      const fragment = fragments.get(name)
      if (fragment === undefined) continue
      const condition = schema.getType(fragment.typeCondition.name.value)
      if (!isCompositeType(condition)) continue
      const applying = narrow(collection, fresh, condition)
      if (applying.length > 0) {
        collectFragment(collection, fragment.selectionSet, condition, applying, deferred)
      }
    }
  }
}

/**
 * The fields of a fragment: merged with the fields around it, or, when it is deferred, collected on their own as
 * the executor runs them (a deferred fragment's fields merge with each other only; the fragments it spreads are
 * visited for the whole selection, as the executor shares that record).
 */
function collectFragment(
  collection: Collection,
  set: SelectionSetNode,
  condition: GraphQLCompositeType,
  types: TypeSet,
  deferred: boolean,
): void {
  if (!deferred) {
    collect(collection, set, condition, types)
    return
  }
  const patch: Collection = { ...collection, byKey: new Map() }
  collection.patches.push(patch)
  collect(patch, set, condition, types)
}

function addOccurrence(collection: Collection, occurrence: FieldOccurrence): void {
  const node = occurrence.node
  const key = node.alias === undefined ? node.name.value : node.alias.value
  const group = collection.byKey.get(key)
  if (group === undefined) {
    collection.byKey.set(key, {
      occurrences: [occurrence],
      types: occurrence.types,
      split: false,
      mixed: false,
    })
    return
  }
  group.occurrences.push(occurrence)
  if (!group.mixed && !sameTypes(group.types, occurrence.types)) group.mixed = true
}

/**
 * The groups of one response key whose occurrences apply to different types: for each type, the occurrences that
 * apply to it; types with the same occurrences share a group.
 */
function splitByType(group: MutableGroup): FieldGroup[] {
  const applyingByType: number[][] = []
  group.occurrences.forEach((occurrence, index) => {
    for (const type of occurrence.types) {
      const applying = applyingByType[type]
      if (applying === undefined) applyingByType[type] = [index]
      else applying.push(index)
    }
  })
  const bySignature = new Map<string, { occurrences: FieldOccurrence[]; types: number[]; split: true }>()
  applyingByType.forEach((applying, type) => {
    const signature = applying.join(',')
    let split = bySignature.get(signature)
    if (split === undefined) {
      split = {
        occurrences: applying.map((index) => group.occurrences[index] as FieldOccurrence),
        types: [],
        split: true,
      }
      bySignature.set(signature, split)
    }
    split.types.push(type)
  })
  return [...bySignature.values()]
}

/** The types of `types` that a fragment on `condition` applies to. */
function narrow(collection: Collection, types: TypeSet, condition: GraphQLCompositeType): TypeSet {
  if (condition === collection.staticType) return types
  const { possibleTypes } = collection
  if (isObjectType(condition)) {
    for (const type of types) {
      if (possibleTypes[type] === condition) return types.length === 1 ? types : [type]
    }
    return NO_TYPES
  }
  const schema = collection.input.schema
  let kept: number[] | undefined
  for (let index = 0; index < types.length; index++) {
    const type = types[index] as number
    if (schema.isSubType(condition, possibleTypes[type] as GraphQLObjectType)) kept?.push(type)
    else kept ??= types.slice(0, index)
  }
  return kept ?? types
}

function sameTypes(a: TypeSet, b: TypeSet): boolean {
  if (a === b) return true
  if (a.length !== b.length) return false
  for (let index = 0; index < a.length; index++) if (a[index] !== b[index]) return false
  return true
}

/** `types` less `removed` (both ascending). */
function without(types: TypeSet, removed: TypeSet): TypeSet {
  if (types === removed) return NO_TYPES
  let kept: number[] | undefined
  let next = 0
  for (let index = 0; index < types.length; index++) {
    const type = types[index] as number
    while (next < removed.length && (removed[next] as number) < type) next++
    if (removed[next] !== type) kept?.push(type)
    else kept ??= types.slice(0, index)
  }
  return kept ?? types
}

/** The types in `a` or `b` (both ascending, `b` disjoint from `a`), ascending. */
function union(a: TypeSet, b: TypeSet): TypeSet {
  const merged: number[] = []
  let i = 0
  let j = 0
  while (i < a.length || j < b.length) {
    if (j === b.length || (i < a.length && (a[i] as number) < (b[j] as number))) merged.push(a[i++] as number)
    else merged.push(b[j++] as number)
  }
  return merged
}

/** The selection sets of a group's nodes: its merged sub-selection. */
export function subSelectionsOf(group: FieldGroup): SelectionSetNode[] {
  const sets: SelectionSetNode[] = []
  for (const occurrence of group.occurrences) {
    if (occurrence.node.selectionSet !== undefined) sets.push(occurrence.node.selectionSet)
  }
  return sets
}

/**
 * Keys for merged selections: a type and the selection sets merged under it, each set numbered once by identity,
 * so that fields whose merged sub-selections are the same share whatever is worked out for them.
 */
export class MergedSelectionKeys {
  private readonly ids = new WeakMap<SelectionSetNode, number>()
  private last = 0

  keyOf(type: { readonly name: string }, sets: readonly SelectionSetNode[]): string {
    let key = type.name
    for (const set of sets) key += `,${this.idOf(set)}`
    return key
  }

  private idOf(set: SelectionSetNode): number {
    let id = this.ids.get(set)
    if (id === undefined) {
      id = ++this.last
      this.ids.set(set, id)
    }
    return id
  }
}
