import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import {
  buildSchema,
  type DocumentNode,
  type GraphQLField,
  type GraphQLNamedType,
  type GraphQLSchema,
  getArgumentValues,
  getNamedType,
  getVariableValues,
  isCompositeType,
  isInterfaceType,
  isListType,
  isNonNullType,
  isObjectType,
  Kind,
  type OperationDefinitionNode,
  parse,
  type SelectionSetNode,
  validate,
} from 'graphql'
import { describe, expect, it } from 'vitest'
import { CostAnalyzer } from '../../../../src/graphql/cost/costAnalyzer.js'
import type { CostMap, ListSizeConfig } from '../../../../src/graphql/cost/costModel.js'
import { type CorpusEntry, corpusDir, translateListSizes } from '../../../helpers/githubCorpus.js'
import { realCost } from '../../../helpers/responseCost.js'

/**
 * The GitHub corpus of Cha et al. (ESEC/FSE 2020, ASE 2021): 151 real GitHub queries with their real responses,
 * and the authors' list sizes for GitHub. A static estimate is only safe to charge if it bounds the real cost:
 * no estimate may be below what the response really holds. See test/fixtures/github-corpus/README.md.
 *
 * defaultListSize stays at the library default (10): neither the README nor list-sizes.yaml gives one, and the
 * test "no estimate depends on defaultListSize" shows that no object list of this corpus falls back to it.
 */
function theOperation(document: DocumentNode): OperationDefinitionNode {
  const operations = document.definitions.filter((d) => d.kind === Kind.OPERATION_DEFINITION)
  if (operations.length !== 1) throw new Error(`expected one operation, got ${operations.length}`)
  return operations[0] as OperationDefinitionNode
}

function listDepth(field: GraphQLField<unknown, unknown>): number {
  let depth = 0
  let type = field.type
  for (;;) {
    if (isNonNullType(type)) type = type.ofType
    else if (isListType(type)) {
      depth++
      type = type.ofType
    } else return depth
  }
}

/**
 * Every list in a response that holds more items than list-sizes.yaml allows for it, found without the analyzer:
 * the size of a list is the largest limit argument given (schema defaults count), else its defaultLimit, else
 * `defaultListSize`; edges/nodes of a connection take the connection's size. A non-empty result pinpoints the
 * list that makes an estimate fall below the real cost.
 */
function listOverruns(
  schema: GraphQLSchema,
  costs: CostMap,
  defaultListSize: number,
  document: DocumentNode,
  variables: Record<string, unknown>,
  data: Record<string, unknown>,
): string[] {
  const operation = theOperation(document)
  const coerced = getVariableValues(schema, operation.variableDefinitions ?? [], variables)
  if (coerced.errors !== undefined) throw coerced.errors[0]
  const fragments = new Map(
    document.definitions.flatMap((d) =>
      d.kind === Kind.FRAGMENT_DEFINITION ? [[d.name.value, d] as const] : [],
    ),
  )
  const found: string[] = []
  const sizeOf = (listSize: ListSizeConfig | undefined, args: Record<string, unknown>) => {
    const given = (listSize?.slicingArguments ?? [])
      .map((name) => args[name])
      .filter((v) => typeof v === 'number')
    return given.length > 0 ? Math.max(...(given as number[])) : (listSize?.assumedSize ?? defaultListSize)
  }
  const walk = (
    type: GraphQLNamedType,
    set: SelectionSetNode,
    value: Record<string, unknown>,
    path: string,
    sized: { names: readonly string[]; size: number; by: string } | undefined,
  ): void => {
    for (const selection of set.selections) {
      if (selection.kind !== Kind.FIELD) {
        const fragment =
          selection.kind === Kind.INLINE_FRAGMENT ? selection : fragments.get(selection.name.value)
        if (fragment !== undefined) walk(type, fragment.selectionSet, value, path, sized)
        continue
      }
      const key = selection.alias?.value ?? selection.name.value
      const fieldValue = value[key]
      if (selection.name.value === '__typename' || fieldValue === undefined || fieldValue === null) continue
      const concrete = typeof value.__typename === 'string' ? schema.getType(value.__typename) : type
      if (!(isObjectType(concrete) || isInterfaceType(concrete))) continue
      const field = concrete.getFields()[selection.name.value]
      if (field === undefined)
        throw new Error(`${path}.${key}: no field ${selection.name.value} on ${concrete.name}`)
      const coordinate = `${concrete.name}.${field.name}`
      const listSize = (costs[coordinate] ?? costs[`*.${field.name}`])?.listSize
      const args = getArgumentValues(field, selection, coerced.coerced)
      const here = `${path}.${key}`
      const named = getNamedType(field.type)
      let childSized: typeof sized
      if (listSize?.sizedFields !== undefined) {
        childSized = { names: listSize.sizedFields, size: sizeOf(listSize, args), by: coordinate }
      }
      const items = Array.isArray(fieldValue) ? fieldValue : [fieldValue]
      // A list of scalars or enums costs 0 whatever its length (GitHubMetadata.gitIpAddresses holds 35).
      if (Array.isArray(fieldValue) && isCompositeType(named)) {
        if (listDepth(field) !== 1) throw new Error(`${here}: nested list types are not handled here`)
        const bySized = sized?.names.includes(field.name) === true
        const size = bySized ? (sized?.size ?? 0) : sizeOf(listSize, args)
        if (fieldValue.length > size) {
          const from = bySized
            ? `sized by ${sized?.by}`
            : listSize === undefined
              ? 'defaultListSize'
              : 'its listSize'
          found.push(`${here} (${coordinate}): ${fieldValue.length} items > configured ${size} (${from})`)
        }
      }
      if (selection.selectionSet === undefined) continue
      for (const item of items) {
        if (item !== null && typeof item === 'object') {
          walk(named, selection.selectionSet, item as Record<string, unknown>, here, childSized)
        }
      }
    }
  }
  const root = schema.getQueryType()
  if (root == null) throw new Error('no query type')
  walk(root, operation.selectionSet, data, '', undefined)
  return found
}

/** Nearest-rank percentile of sorted values. */
function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)] ?? Number.NaN
}

describe('GitHub corpus (Cha et al.): estimates bound the real cost', () => {
  const sdl = readFileSync(join(corpusDir, 'github.graphql'), 'utf8')
  const schema = buildSchema(sdl)
  const { costs, resolvers, matchedBy } = translateListSizes(
    schema,
    readFileSync(join(corpusDir, 'list-sizes.yaml'), 'utf8'),
  )
  const corpus: CorpusEntry[] = JSON.parse(readFileSync(join(corpusDir, 'github-queries.json'), 'utf8'))
  const entries = corpus.map((entry, index) => {
    const document = parse(entry.query)
    // Three entries (github-query-2020-07-22-3) store the data object itself, without the `data` wrapper.
    const wrapped = 'data' in entry.response
    const data = (wrapped ? entry.response.data : entry.response) as Record<string, unknown>
    return { ...entry, label: `#${index} ${entry.source}/${entry.id}`, document, data, wrapped }
  })

  it('the schema builds as is and carries no weights; the corpus holds 151 valid queries, no mutation', () => {
    expect(schema.getMutationType()?.name).toBe('Mutation')
    expect(schema.getDirective('cost')).toBeUndefined()
    expect(schema.getDirective('listSize')).toBeUndefined()
    expect(sdl).not.toMatch(/@(cost|listSize)\b/)
    expect(corpus).toHaveLength(151)
    const problems: string[] = []
    for (const entry of entries) {
      const errors = validate(schema, entry.document)
      if (errors.length > 0) problems.push(`${entry.label}: ${errors[0]?.message}`)
      const operation = theOperation(entry.document)
      if (operation.operation !== 'query') problems.push(`${entry.label}: a ${operation.operation}`)
      if ('errors' in entry.response) problems.push(`${entry.label}: the response has errors`)
      if (entry.data === null || typeof entry.data !== 'object') problems.push(`${entry.label}: no data`)
      // A response stored without the wrapper must be the data: its keys are root fields of the query.
      const rootKeys = operation.selectionSet.selections.map((s) =>
        s.kind === Kind.FIELD ? (s.alias?.value ?? s.name.value) : '',
      )
      const stray = Object.keys(entry.data ?? {}).filter((key) => !rootKeys.includes(key))
      if (stray.length > 0)
        problems.push(`${entry.label}: response keys ${stray.join(', ')} are not in the query`)
    }
    expect(problems).toEqual([])
    expect(entries.filter((entry) => !entry.wrapped).map((entry) => entry.label)).toEqual([
      '#148 github-query-2020-07-22-3/0',
      '#149 github-query-2020-07-22-3/1',
      '#150 github-query-2020-07-22-3/2',
    ])
  })

  it('translates list-sizes.yaml faithfully', () => {
    expect(Object.keys(resolvers)).toHaveLength(23)
    const coordinates = Object.keys(costs)
    // 200 connection fields + 31 fields named by the '*.name' and 'Gist.files' keys (reactionGroups on 9 types,
    // contexts on 3) + 4 '…ContributionsByRepository' fields − 1 field in two keys (StatusCheckRollup.contexts
    // returns a connection and is named by '*.contexts') = 234
    expect(coordinates.filter((c) => matchedBy.get(c)?.includes('/.+Connection$/'))).toHaveLength(200)
    expect(coordinates).toHaveLength(234)
    expect([...matchedBy].filter(([, keys]) => keys.length > 1)).toEqual([
      ['StatusCheckRollup.contexts', ['/.+Connection$/', '*.contexts']],
    ])
    expect(costs['Query.search']).toEqual({
      listSize: { slicingArguments: ['first', 'last'], sizedFields: ['edges', 'nodes'] },
    })
    expect(costs['Topic.relatedTopics']).toEqual({
      listSize: { assumedSize: 10, slicingArguments: ['first'] },
    })
    expect(costs['Query.licenses']).toEqual({ listSize: { assumedSize: 13 } })
    expect(costs['Reactable.reactionGroups']).toEqual({ listSize: { assumedSize: 8 } })
    expect(costs['ContributionsCollection.issueContributionsByRepository']).toEqual({
      listSize: { assumedSize: 25, slicingArguments: ['maxRepositories'] },
    })
    expect(costs['StatusCheckRollup.contexts']).toEqual({
      listSize: { slicingArguments: ['first', 'last'], sizedFields: ['edges', 'nodes'], assumedSize: 10 },
    })
    // every coordinate names something in the schema (the analyzer refuses unknown ones)
    expect(() => new CostAnalyzer({ costs }).model(schema)).not.toThrow()
  })

  it('no estimate is below the real cost of its response, and the bound is tight', () => {
    const analyzer = new CostAnalyzer({ costs })
    const rows = entries.map((entry) => {
      const input = { schema, document: entry.document, variables: entry.variables }
      return {
        entry,
        estimate: analyzer.estimate(input),
        real: realCost(schema, entry.document, entry.data),
        modelActual: analyzer.actual(input, entry.data),
      }
    })

    const actualMismatches = rows
      .filter((row) => row.modelActual !== row.real)
      .map((row) => `${row.entry.label}: analyzer.actual ${row.modelActual}, independent count ${row.real}`)
    const under = rows
      .filter((row) => row.estimate < row.real)
      .map((row) => {
        const lists = listOverruns(schema, costs, 10, row.entry.document, row.entry.variables, row.entry.data)
        return `${row.entry.label}: estimate ${row.estimate} < real ${row.real}; ${lists.join('; ') || 'no list overran'}`
      })
    const ratios = rows
      .filter((row) => row.real > 0)
      .map((row) => row.estimate / row.real)
      .sort((a, b) => a - b)
    const median = percentile(ratios, 0.5)
    const p90 = percentile(ratios, 0.9)
    console.log(
      `GitHub corpus: ${rows.length} queries, ${ratios.length} with actual > 0, ${under.length} under-estimates; ` +
        `estimate/actual median ${median.toFixed(3)}, p90 ${p90.toFixed(3)}, max ${ratios.at(-1)?.toFixed(3)}`,
    )

    expect(actualMismatches, actualMismatches.join('\n')).toEqual([])
    expect(under, `under-estimates:\n${under.join('\n')}`).toEqual([])
    expect(ratios).toHaveLength(151)
    expect(ratios[0]).toBeGreaterThanOrEqual(1)
    // The paper reports a median of about 1.16 for its type complexity on this corpus.
    expect(median).toBeLessThan(2)
  })

  it('response lists larger than list-sizes.yaml allows (checked without the analyzer): two, absorbed', () => {
    const overruns = entries.flatMap((entry) =>
      listOverruns(schema, costs, 10, entry.document, entry.variables, entry.data).map(
        (o) => `${entry.label} ${o}`,
      ),
    )
    // The yaml says '*.highlights: 3 # ranges from 1 - 3', but one text match of #70 and one of #73 hold 6
    // highlights. Their queries are still not under-estimated: search(first: 5) is priced
    // 5 × (edge 1 + 3 text matches × (1 + 3 highlights)), and the responses hold far fewer text matches.
    // Any other list overrunning its configured size fails here.
    expect(overruns, overruns.join('\n')).toEqual([
      '#70 github-query-alan-01/70 .search.edges.textMatches.highlights (TextMatch.highlights): 6 items > configured 3 (its listSize)',
      '#73 github-query-alan-01/73 .search.edges.textMatches.highlights (TextMatch.highlights): 6 items > configured 3 (its listSize)',
    ])
  })

  it('no estimate depends on defaultListSize: every object list of the corpus has a configured size', () => {
    const prices = (defaultListSize: number) => {
      const analyzer = new CostAnalyzer({ costs, defaultListSize })
      return entries.map((entry) =>
        analyzer.estimate({ schema, document: entry.document, variables: entry.variables }),
      )
    }
    const standard = prices(10)
    const differing = (other: number[]) =>
      entries.filter((_, i) => other[i] !== standard[i]).map((entry) => entry.label)
    expect(differing(prices(0))).toEqual([])
    expect(differing(prices(1000))).toEqual([])
  })

  it('the check can fail: without the yaml sizes and with defaultListSize 1, estimates fall below', () => {
    const analyzer = new CostAnalyzer({ defaultListSize: 1 })
    const under = entries.filter(
      (entry) =>
        analyzer.estimate({ schema, document: entry.document, variables: entry.variables }) <
        realCost(schema, entry.document, entry.data),
    )
    // Every query of the corpus but #62 is priced below what its response holds.
    expect(entries.filter((entry) => !under.includes(entry)).map((entry) => entry.label)).toEqual([
      '#62 github-query-alan-01/62',
    ])
    // and the independent list check names the lists that overran their (now default) size: in #0, 27 lists of 9
    // fields (licenses' permissions and conditions once per license)
    const first = under[0] as (typeof under)[number]
    expect(first.label).toBe('#0 github-query-alan-01/0')
    const overruns = listOverruns(schema, {}, 1, first.document, first.variables, first.data)
    expect(overruns).toHaveLength(27)
    expect(new Set(overruns.map((line) => line.slice(0, line.indexOf(':'))))).toEqual(
      new Set([
        '.securityAdvisories.edges (SecurityAdvisoryConnection.edges)',
        '.securityAdvisories.nodes (SecurityAdvisoryConnection.nodes)',
        '.licenses (Query.licenses)',
        '.licenses.permissions (License.permissions)',
        '.licenses.conditions (License.conditions)',
        '.marketplaceCategories (Query.marketplaceCategories)',
        '.marketplaceListings.edges (MarketplaceListingConnection.edges)',
        '.marketplaceListings.nodes (MarketplaceListingConnection.nodes)',
        '.securityVulnerabilities.edges (SecurityVulnerabilityConnection.edges)',
      ]),
    )
  })

  it('the independent counter counts objects, list items and null objects, not scalars', () => {
    const small = buildSchema(`
      type Query { a: O, b: [O], c: O, d: [Int], n: O, s: String, e: [O] }
      type O { x: Int, y: String, e: O, f: Int, c: [O] }
    `)
    const count = (query: string, data: Record<string, unknown>) => realCost(small, parse(query), data)
    // a 1 + b's three items (one null) 3 + c 1 + c.e 1 + d (scalars) 0 + n (a null object) 1 + s (a null scalar) 0
    expect(
      count('{ a { x } b { y } c { e { f } } d n { x } s }', {
        a: { x: 1 },
        b: [{ y: 'z' }, null, { y: null }],
        c: { e: { f: 2 } },
        d: [1, 2],
        n: null,
        s: null,
      }),
    ).toBe(7)
    // an empty list: 1 for the resolver that ran; an object holding one: 1 + 1; aliases and fragments followed
    expect(count('{ e { x } k: c { ... on O { c { x } } } }', { e: [], k: { c: [] } })).toBe(3)
  })
})
