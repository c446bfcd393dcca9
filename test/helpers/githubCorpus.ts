/**
 * The GitHub corpus of Cha et al. (ESEC/FSE 2020, ASE 2021; test/fixtures/github-corpus): its entries, its list
 * sizes as tollbooth's `costs`, and a count of a recorded response's real cost that does not use tollbooth. Shared by
 * the analyzer's test (test/unit/graphql/cost/githubCorpus.test.ts) and the servers' one
 * (test/integration/graphql/githubCorpusServers.test.ts).
 */
import { fileURLToPath } from 'node:url'
import {
  type DocumentNode,
  type FragmentDefinitionNode,
  type GraphQLField,
  type GraphQLNamedType,
  type GraphQLSchema,
  getNamedType,
  isCompositeType,
  isInterfaceType,
  isObjectType,
  Kind,
  type OperationDefinitionNode,
  type SelectionSetNode,
} from 'graphql'
import { parse as parseYaml } from 'yaml'
import type { CostMap, ListSizeConfig } from '../../src/graphql/cost/costModel.js'

export const corpusDir = fileURLToPath(new URL('../fixtures/github-corpus', import.meta.url))

export interface CorpusEntry {
  source: string
  id: number
  query: string
  variables: Record<string, unknown>
  response: Record<string, unknown>
}

/** One entry of list-sizes.yaml (`analysisConfigurations.resolvers`), in the authors' vocabulary. */
export interface ResolverConfig {
  /** Arguments whose value is the list size (slicing arguments). */
  limitArguments?: string[]
  /** Child fields the size applies to (sized fields). */
  limitedFields?: string[]
  /** Size when no limit argument is given (assumed size). */
  defaultLimit?: number
}

const REGEX_KEY = /^\/(.+)\/$/
const FIELD_KEY = /^(\*|[_A-Za-z][_0-9A-Za-z]*)\.(.+)$/

function outputFields(schema: GraphQLSchema): [typeName: string, field: GraphQLField<unknown, unknown>][] {
  const fields: [string, GraphQLField<unknown, unknown>][] = []
  for (const type of Object.values(schema.getTypeMap())) {
    if (type.name.startsWith('__') || !(isObjectType(type) || isInterfaceType(type))) continue
    for (const field of Object.values(type.getFields())) fields.push([type.name, field])
  }
  return fields
}

/**
 * list-sizes.yaml as a CostAnalyzer `costs` map, every key expanded to explicit `Type.field` coordinates:
 * - `/re/`: every field whose (named) return type matches `re` (`/.+Connection$/`: all connections);
 * - `Type.field`, `*.field`: that field on that type / on every type;
 * - `Type./re/`, `*./re/`: every field whose name matches `re`, on that type / on every type.
 * A field matched by two keys gets both configurations merged; two keys setting the same property differently
 * would be a contradiction of the yaml and throw.
 */
export function translateListSizes(schema: GraphQLSchema, yamlText: string) {
  const document = parseYaml(yamlText) as {
    analysisConfigurations: { resolvers: Record<string, ResolverConfig> }
  }
  const resolvers = document.analysisConfigurations.resolvers
  const fields = outputFields(schema)
  const costs: Record<string, { listSize: ListSizeConfig }> = {}
  const matchedBy = new Map<string, string[]>()
  for (const [key, config] of Object.entries(resolvers)) {
    const unknown = Object.keys(config).filter(
      (name) => !['limitArguments', 'limitedFields', 'defaultLimit'].includes(name),
    )
    if (unknown.length > 0) throw new Error(`list-sizes.yaml ${key}: unknown settings ${unknown.join(', ')}`)
    const listSize: ListSizeConfig = {
      ...(config.defaultLimit !== undefined && { assumedSize: config.defaultLimit }),
      ...(config.limitArguments !== undefined && { slicingArguments: config.limitArguments }),
      ...(config.limitedFields !== undefined && { sizedFields: config.limitedFields }),
    }
    const byType = REGEX_KEY.exec(key)
    const byField = FIELD_KEY.exec(key)
    let matches: [string, GraphQLField<unknown, unknown>][]
    if (byType !== null) {
      const pattern = new RegExp(byType[1] ?? '')
      matches = fields.filter(([, field]) => pattern.test(getNamedType(field.type).name))
    } else if (byField !== null) {
      const [, typeName, fieldPart = ''] = byField
      const fieldRegex = REGEX_KEY.exec(fieldPart)
      const pattern = fieldRegex === null ? undefined : new RegExp(fieldRegex[1] ?? '')
      matches = fields.filter(
        ([type, field]) =>
          (typeName === '*' || type === typeName) &&
          (pattern === undefined ? field.name === fieldPart : pattern.test(field.name)),
      )
    } else {
      throw new Error(`list-sizes.yaml: key ${key} is neither /regex/ nor Type.field`)
    }
    if (matches.length === 0) throw new Error(`list-sizes.yaml: key ${key} matches no field of the schema`)
    for (const [typeName, field] of matches) {
      const coordinate = `${typeName}.${field.name}`
      const previous = costs[coordinate]?.listSize ?? {}
      for (const name of ['assumedSize', 'slicingArguments', 'sizedFields'] as const) {
        if (previous[name] !== undefined && listSize[name] !== undefined) {
          throw new Error(`list-sizes.yaml: ${coordinate} gets ${name} from two keys`)
        }
      }
      costs[coordinate] = { listSize: { ...previous, ...listSize } }
      matchedBy.set(coordinate, [...(matchedBy.get(coordinate) ?? []), key])
    }
  }
  return { costs: costs as CostMap, resolvers, matchedBy }
}

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
      const field = 'getFields' in owner ? owner.getFields()[name] : undefined
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
