/**
 * A vitest setup file that records every operation the tests price on a schema annotated with `@cost` /
 * `@listSize` in SDL: the schema (as SDL), the analyzer's options, the operation, its variables, and the price (or
 * the error). test/unit/graphql/cost/extensionTwins.test.ts prices each of them again on the schema's code-first
 * twin. Run through recordCostVectors.config.ts, which says how.
 */
import { appendFileSync } from 'node:fs'
import {
  type DefinitionNode,
  type DocumentNode,
  GraphQLError,
  type GraphQLSchema,
  isSpecifiedDirective,
  Kind,
  print,
} from 'graphql'
import { expect } from 'vitest'
import { CostAnalyzer, type OperationInput } from '../../src/graphql/cost/costAnalyzer.js'

/** One recorded pricing. `expected` is a number, or the error it threw. */
export interface CostVector {
  readonly source: string
  readonly schema: string
  readonly options: Record<string, unknown>
  readonly kind: 'estimate' | 'actual' | 'explain'
  readonly query: string
  readonly operationName?: string
  readonly variables?: Record<string, unknown>
  readonly data?: unknown
  readonly expected: number | { readonly error: string; readonly code?: string }
}

const out = process.env.TOLLBOOTH_COST_VECTORS
const sdlOf = new WeakMap<GraphQLSchema, string | undefined>()

/** The schema's SDL from its AST, directives included, or undefined if it has no cost directive in it. */
function schemaSdl(schema: GraphQLSchema): string | undefined {
  if (sdlOf.has(schema)) return sdlOf.get(schema)
  const definitions: DefinitionNode[] = []
  let complete = true
  if (schema.astNode) definitions.push(schema.astNode)
  definitions.push(...schema.extensionASTNodes)
  for (const directive of schema.getDirectives()) {
    if (isSpecifiedDirective(directive)) continue
    if (directive.astNode) definitions.push(directive.astNode)
    else complete = false
  }
  for (const type of Object.values(schema.getTypeMap())) {
    if (type.name.startsWith('__') || ['String', 'Int', 'Float', 'Boolean', 'ID'].includes(type.name))
      continue
    if (type.astNode) definitions.push(type.astNode)
    else complete = false
    definitions.push(...type.extensionASTNodes)
  }
  const sdl = print({ kind: Kind.DOCUMENT, definitions })
  const annotated =
    complete &&
    schema.getDirective('cost') != null &&
    schema.getDirective('listSize') != null &&
    /@(cost|listSize)\(/.test(sdl)
  sdlOf.set(schema, annotated ? sdl : undefined)
  return annotated ? sdl : undefined
}

/** The analyzer's options, or undefined for one that prices with estimators (no cost-directive vector). */
function options(analyzer: CostAnalyzer): Record<string, unknown> | undefined {
  const { costs, maxFieldVisits, byEstimators } = analyzer as unknown as {
    costs: object
    maxFieldVisits: number
    byEstimators?: unknown
  }
  if (byEstimators !== undefined) return undefined
  const { defaultListSize, mutationCost, introspectionCost } = analyzer.settings
  return {
    ...(Object.keys(costs).length > 0 ? { costs } : {}),
    defaultListSize,
    mutationCost,
    introspectionCost,
    maxFieldVisits,
  }
}

/** JSON that reads back as the same value (a variable of 1e309 or undefined inside a list would not). */
function jsonSafe(value: unknown): boolean {
  try {
    const text = JSON.stringify(value)
    return text !== undefined && text.length < 20_000 && sameValue(JSON.parse(text), value)
  } catch {
    return false
  }
}

function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false
  if (Array.isArray(a) !== Array.isArray(b)) return false
  const keysA = Object.keys(a).filter((key) => (a as Record<string, unknown>)[key] !== undefined)
  const keysB = Object.keys(b).filter((key) => (b as Record<string, unknown>)[key] !== undefined)
  return (
    keysA.length === keysB.length &&
    keysA.every((key) => sameValue((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key]))
  )
}

function record(
  analyzer: CostAnalyzer,
  kind: CostVector['kind'],
  input: OperationInput,
  outcome: { value: number } | { error: unknown },
  data?: unknown,
): void {
  if (out === undefined) return
  const schema = schemaSdl(input.schema)
  const settings = options(analyzer)
  if (schema === undefined || settings === undefined) return
  const variables = input.variables ?? undefined
  if (variables != null && !jsonSafe(variables)) return
  if (kind === 'actual' && !jsonSafe(data)) return
  let expected: CostVector['expected']
  if ('value' in outcome) expected = outcome.value
  else {
    const error = outcome.error
    const code = (error as { code?: unknown }).code
    // A refusal (a GraphQLError, or a TollboothError with its code) is a vector; any other throw is a bug.
    if (!(error instanceof Error) || (!(error instanceof GraphQLError) && typeof code !== 'string')) return
    expected = { error: error.message, ...(typeof code === 'string' ? { code } : {}) }
  }
  const vector: CostVector = {
    source: expect.getState().testPath?.replace(`${process.cwd()}/`, '') ?? 'unknown',
    schema,
    options: settings,
    kind,
    query: print(input.document as DocumentNode),
    ...(input.operationName == null ? {} : { operationName: input.operationName }),
    ...(variables == null || Object.keys(variables).length === 0 ? {} : { variables: { ...variables } }),
    ...(kind === 'actual' ? { data } : {}),
    expected,
  }
  appendFileSync(out, `${JSON.stringify(vector)}\n`)
}

function recorded<T>(run: () => T, done: (outcome: { value: T } | { error: unknown }) => void): T {
  let value: T
  try {
    value = run()
  } catch (error) {
    done({ error })
    throw error
  }
  done({ value })
  return value
}

const prototype = CostAnalyzer.prototype
const { priceOperation, actual, explain } = prototype

prototype.priceOperation = function (this: CostAnalyzer, input) {
  const priced = recorded(
    () => priceOperation.call(this, input),
    (outcome) =>
      record(this, 'estimate', input, 'value' in outcome ? { value: outcome.value.cost } : outcome),
  )
  return {
    ...priced,
    actual: (data: unknown) =>
      recorded(
        () => priced.actual(data),
        (outcome) => record(this, 'actual', input, outcome, data),
      ),
  }
}

prototype.actual = function (this: CostAnalyzer, input, data) {
  return recorded(
    () => actual.call(this, input, data),
    (outcome) => record(this, 'actual', input, outcome, data),
  )
}

prototype.explain = function (this: CostAnalyzer, input) {
  return recorded(
    () => explain.call(this, input),
    (outcome) =>
      record(this, 'explain', input, 'value' in outcome ? { value: outcome.value.total } : outcome),
  )
}
