/**
 * The cost of a response counted without tollbooth, to check the analyzer against: shared by the cost analyzer's
 * tests, the GitHub corpus tests and the servers' tests.
 */
import {
  type DocumentNode,
  type FragmentDefinitionNode,
  type GraphQLNamedType,
  type GraphQLSchema,
  getNamedType,
  isCompositeType,
  Kind,
  type OperationDefinitionNode,
  SchemaMetaFieldDef,
  type SelectionSetNode,
  TypeMetaFieldDef,
} from 'graphql'

/**
 * Independent of the analyzer: every object field in the response costs 1 for each value it holds (each list item),
 * a null among them (its resolver ran and answered null), scalars 0, and an empty list 1 (its resolver ran: the
 * field's weight once, which is 1 for a list of objects in this schema; an empty list of scalars would weigh 0, and
 * would show here as a mismatch). The selection tells which response key is which field, and so which values are
 * objects: a null scalar costs nothing.
 */
export function realCost(
  schema: GraphQLSchema,
  document: DocumentNode,
  data: Record<string, unknown>,
): number {
  const fragments = new Map<string, FragmentDefinitionNode>()
  let operation: OperationDefinitionNode | undefined
  for (const definition of document.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition)
    if (definition.kind === Kind.OPERATION_DEFINITION) operation ??= definition
  }
  const root = schema.getQueryType()
  if (operation === undefined || root == null) throw new Error('no operation or no query type')

  /** The field names and sub-selections of each response key under `sets`, fragments followed. */
  const keysOf = (sets: readonly SelectionSetNode[]) => {
    const keys = new Map<string, { name: string; sets: SelectionSetNode[] }>()
    const visit = (set: SelectionSetNode): void => {
      for (const selection of set.selections) {
        if (selection.kind === Kind.FIELD) {
          const key = selection.alias?.value ?? selection.name.value
          const entry = keys.get(key) ?? { name: selection.name.value, sets: [] }
          if (selection.selectionSet !== undefined) entry.sets.push(selection.selectionSet)
          keys.set(key, entry)
        } else {
          const fragment =
            selection.kind === Kind.INLINE_FRAGMENT ? selection : fragments.get(selection.name.value)
          if (fragment !== undefined) visit(fragment.selectionSet)
        }
      }
    }
    for (const set of sets) visit(set)
    return keys
  }
  const objectCost = (type: GraphQLNamedType, sets: readonly SelectionSetNode[], object: object): number => {
    const record = object as Record<string, unknown>
    const concrete = typeof record.__typename === 'string' ? schema.getType(record.__typename) : type
    let sum = 0
    for (const [key, { name, sets: childSets }] of keysOf(sets)) {
      if (name === '__typename' || !(key in record)) continue
      const owner = concrete !== undefined && 'getFields' in concrete ? concrete : type
      const field =
        name === '__schema'
          ? SchemaMetaFieldDef
          : name === '__type'
            ? TypeMetaFieldDef
            : 'getFields' in owner
              ? owner.getFields()[name]
              : undefined
      if (field === undefined) throw new Error(`no field ${name} on ${owner.name}`)
      const named = getNamedType(field.type)
      if (isCompositeType(named)) sum += valueCost(named, childSets, record[key])
    }
    return sum
  }
  const valueCost = (type: GraphQLNamedType, sets: readonly SelectionSetNode[], value: unknown): number => {
    if (value === null) return 1
    if (Array.isArray(value)) {
      if (value.length === 0) return 1
      return value.reduce((sum: number, item) => sum + valueCost(type, sets, item), 0)
    }
    return 1 + objectCost(type, sets, value as object)
  }
  // The root object is the operation's root type, not a returned object: only what is below it counts.
  return objectCost(root, [operation.selectionSet], data)
}
