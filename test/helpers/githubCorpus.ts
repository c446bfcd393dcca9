/**
 * The GitHub corpus of Cha et al. (ESEC/FSE 2020, ASE 2021; test/fixtures/github-corpus): its entries and its list
 * sizes as tollbooth's `costs`. Shared by the analyzer's test (test/unit/graphql/cost/githubCorpus.test.ts) and the
 * servers' one (test/integration/graphql/githubCorpusServers.test.ts).
 */
import { fileURLToPath } from 'node:url'
import { type GraphQLField, type GraphQLSchema, getNamedType, isInterfaceType, isObjectType } from 'graphql'
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
