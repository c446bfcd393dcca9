import {
  type DocumentNode,
  GraphQLError,
  type GraphQLObjectType,
  type GraphQLSchema,
  getOperationAST,
  getVariableValues,
  type OperationDefinitionNode,
} from 'graphql'
import { invalidOption } from '../../core/errors.js'
import { checkOptionKeys, type OptionKeys, optionNames } from '../../core/knownOptions.js'
import { isOptionsObject, nonNegativeInteger, positiveInteger } from '../../core/validate.js'
import { GRAPHQL_OPTIONS_OWNER } from '../optionsOwner.js'
import { type ComplexityEstimator, checkEstimators } from './complexityEstimators.js'
import { checkPricableByEstimators, fieldsAnnotatedForEstimators } from './costDirectiveEstimator.js'
import { type CostMap, CostModel, checkCostMapKeys } from './costModel.js'
import { type DocumentPlan, planDocument } from './documentPlan.js'
import { type CostSettings, type EstimateRun, estimateSelection } from './estimator.js'
import { EstimatedIncrementalCount, EstimatorPricing, estimatorCacheKey } from './estimatorPricing.js'
import type { CostExplanation, FieldExplanation } from './explain.js'
import { checkExpandedSize, FieldVisitBudget } from './fieldVisits.js'
import { IncrementalCount } from './incrementalCount.js'
import { ResponsePlan } from './responsePlan.js'
import { ownValue, withValueKey } from './valueKey.js'

export { TooLargeToPriceError } from './fieldVisits.js'

export interface CostAnalysisOptions {
  /** Weights and list sizes by schema coordinate, for schemas you cannot annotate with `@cost`/`@listSize`. */
  costs?: CostMap
  /** Size of a list with no slicing argument given and no `assumedSize`. @default 10 */
  defaultListSize?: number
  /** Added for each root mutation field. @default 10 */
  mutationCost?: number
  /**
   * Weight of a `__schema` or `__type` field itself. What it returns (types, fields, arguments, enum values) is
   * priced from the schema, as a response is counted. @default 1
   */
  introspectionCost?: number
  /**
   * Most fields the estimate visits, counting a fragment again at every spread and a field again at every
   * occurrence (as if nothing merged). Above it the operation is not priced but refused (fragment explosion).
   * @default 10000
   */
  maxFieldVisits?: number
  /**
   * graphql-query-complexity estimators (`fieldExtensionsEstimator()`, `simpleEstimator()`, ...; graphql-query-complexity
   * 1 or 2 must be installed) for a schema annotated the way code-first frameworks document complexity. An operation
   * is then priced as graphql-query-complexity's `getComplexity` prices it, with tollbooth's cost directives first in
   * the chain for the fields they annotate. Its price is final: nothing is refunded, nothing billed above it. See
   * docs/graphql.md, "Code-first schemas".
   */
  estimators?: readonly ComplexityEstimator[]
}

/** The keys of `CostAnalysisOptions`; `useTollbooth`'s options add theirs to these. */
export const costAnalysisOptionKeys: OptionKeys<CostAnalysisOptions> = {
  costs: true,
  defaultListSize: true,
  mutationCost: true,
  introspectionCost: true,
  maxFieldVisits: true,
  estimators: true,
}

const OPTIONS = optionNames(costAnalysisOptionKeys)

/**
 * The cost analysis options out of a larger options object: a CostAnalyzer refuses keys that are not its own, so
 * `useTollbooth` and `tollbooth cost`, which check the other keys of their options themselves, hand it only these.
 */
export function costAnalysisOptions(options: CostAnalysisOptions): CostAnalysisOptions {
  const picked: Record<string, unknown> = {}
  for (const key of OPTIONS) {
    const value = options[key as keyof CostAnalysisOptions]
    if (value !== undefined) picked[key] = value
  }
  return picked
}

/** An operation, as the executor sees it. `variables` are the raw values the client sent. */
export interface OperationInput {
  schema: GraphQLSchema
  document: DocumentNode
  operationName?: string | null | undefined
  variables?: Readonly<Record<string, unknown>> | null | undefined
}

/** An operation's estimate, and how to count its response after execution. */
export interface PricedOperation {
  readonly cost: number
  actual(data: unknown): number
  /** A count of an incremental response (`@defer`, `@stream`), part by part. */
  incremental(): Pick<IncrementalCount, 'add'>
}

/**
 * An operation priced by its cost directives: the estimate, and the count of its response from the same cache
 * slot. One object rather than a closure per method: one is made for every operation.
 */
class PricedByDirectives implements PricedOperation {
  constructor(
    readonly cost: number,
    private readonly analyzer: CostAnalyzer,
    private readonly model: CostModel,
    private readonly cached: VariablesEntry,
    private readonly input: OperationInput,
  ) {}

  actual(data: unknown): number {
    return this.analyzer.countResponse(this.model, this.cached, this.input, data)
  }

  incremental(): IncrementalCount {
    return new IncrementalCount(this.analyzer.responsePlan(this.model, this.cached, this.input))
  }
}

const OWNER = GRAPHQL_OPTIONS_OWNER
/** Cost cache entries per document: one per distinct value of the variables the cost depends on. */
const MAX_COSTS_PER_DOCUMENT = 64
/** Variable values longer than this (as JSON) are not cached on: the key would cost more than the estimate. */
const MAX_CACHE_KEY_LENGTH = 1024

interface DocumentEntry {
  readonly plan: DocumentPlan
  /** Per value of the cost variables: the estimate and the compiled response walk, each made on first need. */
  readonly byVariables: Map<string, VariablesEntry>
}

interface VariablesEntry {
  cost?: number
  responsePlan?: ResponsePlan
}

/** A document's cache and the key of one request's cost variables in it (undefined: too long to key on). */
interface CacheSlot {
  readonly entry: DocumentEntry
  readonly key: string | undefined
  readonly cached: VariablesEntry | undefined
}

/**
 * Keeps a slot's new entry, once computing into it succeeded, within the per-document cap. Nothing to do when the
 * slot already held an entry (filled in place) or its key was too long.
 */
function keep(slot: CacheSlot, computed: VariablesEntry): void {
  if (slot.cached !== undefined || slot.key === undefined) return
  const byVariables = slot.entry.byVariables
  if (byVariables.size >= MAX_COSTS_PER_DOCUMENT) byVariables.clear()
  byVariables.set(slot.key, computed)
}

/**
 * Prices operations in the cost-directive model, over the fields as graphql-js executes them (one response key
 * under one parent is one field; a `@defer`red fragment is one more selection), and counts what responses really
 * cost. Estimates are cached per document and per value of the variables that matter (slicing and weighted
 * arguments, `@skip`/`@include`/`@defer`), so a persisted query costs one map lookup.
 */
export class CostAnalyzer {
  readonly settings: CostSettings
  private readonly costs: CostMap
  private readonly maxFieldVisits: number
  /** Set when the options give estimators: operations are priced by them, not by the cost-directive walk. */
  private readonly byEstimators: EstimatorPricing | undefined
  private readonly models = new WeakMap<GraphQLSchema, CostModel>()
  private readonly documents = new WeakMap<CostModel, WeakMap<DocumentNode, DocumentEntry>>()

  constructor(options: CostAnalysisOptions = {}) {
    checkOptionKeys(OWNER, options, OPTIONS)
    if (options.costs !== undefined && !isOptionsObject(options.costs)) {
      throw invalidOption(OWNER, 'costs', 'an object keyed by schema coordinate', options.costs)
    }
    this.costs = options.costs ?? {}
    checkCostMapKeys(this.costs)
    this.settings = Object.freeze({
      defaultListSize: nonNegativeInteger(OWNER, 'defaultListSize', options.defaultListSize ?? 10),
      mutationCost: nonNegativeInteger(OWNER, 'mutationCost', options.mutationCost ?? 10),
      introspectionCost: nonNegativeInteger(OWNER, 'introspectionCost', options.introspectionCost ?? 1),
    })
    this.maxFieldVisits = positiveInteger(OWNER, 'maxFieldVisits', options.maxFieldVisits ?? 10_000)
    this.byEstimators =
      options.estimators === undefined
        ? undefined
        : new EstimatorPricing(checkEstimators(options.estimators), this.settings, this.maxFieldVisits)
  }

  /** Whether operations are priced by estimators: their price is final, and no resolver reports work. */
  get pricedByEstimators(): boolean {
    return this.byEstimators !== undefined
  }

  /** The cost model of a schema; throws if a `costs` coordinate names nothing in it. */
  model(schema: GraphQLSchema): CostModel {
    let model = this.models.get(schema)
    if (model === undefined) {
      model = new CostModel(schema, this.costs)
      if (this.byEstimators !== undefined) checkPricableByEstimators(model)
      else warnOfUnreadComplexity(model)
      this.models.set(schema, model)
    }
    return model
  }

  /**
   * The operation's cost before execution: a sound upper bound of `actual()` when list sizes are right.
   * Throws `TooLargeToPriceError` past `maxFieldVisits`, the GraphQLErrors of invalid variables, and a GraphQLError
   * for what cannot be priced otherwise (a cost that is not a finite number, a null `@include` condition, a null for
   * a non-null argument).
   */
  estimate(input: OperationInput): number {
    return this.priceOperation(input).cost
  }

  /** What the response `data` really costs in the same model. */
  actual(input: OperationInput, data: unknown): number {
    if (this.byEstimators !== undefined) return data == null ? 0 : this.estimate(input)
    const model = this.model(input.schema)
    const slot = this.cacheSlot(model, input)
    const cached = slot.cached ?? {}
    const cost = this.countResponse(model, cached, input, data)
    keep(slot, cached)
    return cost
  }

  /**
   * The estimate, and the counting of the response to come, from one cache lookup: what the plugin uses, once
   * before execution and once after. Throws as `estimate()` does.
   */
  priceOperation(input: OperationInput): PricedOperation {
    if (this.byEstimators !== undefined) return this.priceByEstimators(this.byEstimators, input)
    const model = this.model(input.schema)
    const slot = this.cacheSlot(model, input)
    const cached = slot.cached ?? {}
    cached.cost ??= this.price(model, slot.entry.plan, input)
    const cost = cached.cost
    // Kept only once priced: an operation that cannot be priced (invalid variables, too large) takes no slot.
    keep(slot, cached)
    return new PricedByDirectives(cost, this, model, cached, input)
  }

  /**
   * An operation priced by estimators pays its price whatever its response: an estimator prices a field from its
   * arguments and its children's complexity, so what a response holds tells nothing of what part of the price it used.
   * A result without data (refused variables: nothing ran) counts nothing, as in the cost-directive model.
   */
  private priceByEstimators(pricing: EstimatorPricing, input: OperationInput): PricedOperation {
    const model = this.model(input.schema)
    const operation = selectOperation(input.document, input.operationName)
    const key = operation === undefined ? undefined : estimatorCacheKey(operation, input.variables)
    let cost = pricing.cached(model, input.document, key)
    if (cost === undefined) {
      cost = this.price(model, this.documentEntry(model, input.document).plan, input)
      pricing.keep(model, input.document, key, cost)
    }
    const price = cost
    return {
      cost: price,
      actual: (data) => (data == null ? 0 : price),
      incremental: () => new EstimatedIncrementalCount(price),
    }
  }

  /** Where the operation's document and cost variables are cached, and what is cached there so far. */
  private cacheSlot(model: CostModel, input: OperationInput): CacheSlot {
    const entry = this.documentEntry(model, input.document)
    const key = costCacheKey(entry.plan, input.operationName, input.variables ?? {})
    return { entry, key, cached: key === undefined ? undefined : entry.byVariables.get(key) }
  }

  /**
   * Counts a response with the compiled walk of its document and cost variables (built on first use, into
   * `cached`). A result without data (the executor refused the variables, say) costs nothing and builds nothing.
   * @internal
   */
  countResponse(model: CostModel, cached: VariablesEntry, input: OperationInput, data: unknown): number {
    if (data == null) return 0
    return this.responsePlan(model, cached, input)?.cost(data) ?? 0
  }

  /** The compiled walk of responses to the operation, built on first use into `cached`. @internal */
  responsePlan(model: CostModel, cached: VariablesEntry, input: OperationInput): ResponsePlan | undefined {
    if (cached.responsePlan === undefined) {
      const operation = selectOperation(input.document, input.operationName)
      if (operation === undefined) return undefined
      const variables = coerceVariables(input.schema, operation, input.variables ?? {})
      cached.responsePlan = new ResponsePlan(model, this.settings, input.document, operation, variables)
    }
    return cached.responsePlan
  }

  private documentEntry(model: CostModel, document: DocumentNode): DocumentEntry {
    let byDocument = this.documents.get(model)
    if (byDocument === undefined) {
      byDocument = new WeakMap()
      this.documents.set(model, byDocument)
    }
    let entry = byDocument.get(document)
    if (entry === undefined) {
      entry = { plan: planDocument(model, document), byVariables: new Map() }
      byDocument.set(document, entry)
    }
    return entry
  }

  /**
   * The estimate with its per-field breakdown (what `tollbooth cost` prints): the same computation as
   * `estimate()`, explained, never cached.
   */
  explain(input: OperationInput): CostExplanation {
    const model = this.model(input.schema)
    const fields: FieldExplanation[] = []
    const total = this.price(model, this.documentEntry(model, input.document).plan, input, fields)
    return { total, fields }
  }

  private price(
    model: CostModel,
    plan: DocumentPlan,
    input: OperationInput,
    explained?: FieldExplanation[],
  ): number {
    const operation = selectOperation(input.document, input.operationName)
    if (operation === undefined) return 0
    const variables = coerceVariables(input.schema, operation, input.variables ?? {})
    // Refused on the document's size with every fragment expanded and nothing merged (see fieldVisits.ts).
    checkExpandedSize(operation.selectionSet, plan.fragments, variables, this.maxFieldVisits)
    const rootType = input.schema.getRootType(operation.operation)
    if (rootType == null) return 0
    const cost =
      this.byEstimators === undefined
        ? this.estimateWithModel(model, plan, input.schema, operation, variables, rootType, explained)
        : this.byEstimators.price(
            model,
            { document: input.document, operation, variables: input.variables ?? {} },
            {
              schema: input.schema,
              fragments: plan.fragments,
              variables,
              budget: new FieldVisitBudget(this.maxFieldVisits),
              model,
              settings: this.settings,
            },
          )
    // A Float slicing argument of 1e309 is Infinity: its list costs Infinity, or NaN for a list of scalars.
    if (!Number.isFinite(cost)) {
      throw new GraphQLError(
        'its cost is not a finite number (a slicing argument or a weighted input too large).',
      )
    }
    return cost
  }

  /** The cost-directive walk over the merged fields. */
  private estimateWithModel(
    model: CostModel,
    plan: DocumentPlan,
    schema: GraphQLSchema,
    operation: OperationDefinitionNode,
    variables: Record<string, unknown>,
    rootType: GraphQLObjectType,
    explained: FieldExplanation[] | undefined,
  ): number {
    const run: EstimateRun = {
      schema,
      fragments: plan.fragments,
      variables,
      // The merged walk is bounded too: merging per type under an interface can walk a sub-selection once per
      // group of types it is merged into.
      budget: new FieldVisitBudget(this.maxFieldVisits),
      model,
      plan,
      settings: this.settings,
      mutationType: schema.getMutationType(),
      parentSizes: new Map(),
    }
    return estimateSelection(run, [operation.selectionSet], rootType, explained)
  }
}

/** The operation graphql-js would execute, or undefined when the name does not pick exactly one. */
export function selectOperation(
  document: DocumentNode,
  operationName: string | null | undefined,
): OperationDefinitionNode | undefined {
  return getOperationAST(document, operationName) ?? undefined
}

function coerceVariables(
  schema: GraphQLSchema,
  operation: OperationDefinitionNode,
  raw: Readonly<Record<string, unknown>>,
): Record<string, unknown> {
  const result = getVariableValues(
    schema,
    operation.variableDefinitions ?? [],
    raw as Record<string, unknown>,
  )
  if (result.errors !== undefined) throw result.errors[0]
  return result.coerced
}

function costCacheKey(
  plan: DocumentPlan,
  operationName: string | null | undefined,
  raw: Readonly<Record<string, unknown>>,
): string | undefined {
  let key: string | undefined = operationName ?? ''
  for (const name of plan.costVariables) {
    // Infinity (JSON.parse's 1e400) and NaN get keys of their own at any depth, not null's (see valueKey.ts).
    key = withValueKey(`${key}\u0000`, ownValue(raw, name), MAX_CACHE_KEY_LENGTH)
    if (key === undefined) return undefined
  }
  // A cursor or an id changes no cost: only whether it is absent, null or given (a null for a non-null argument
  // cannot be priced), so a page-through of many cursors shares one entry.
  for (const name of plan.presenceVariables) {
    const value = ownValue(raw, name)
    key += value === undefined ? '\u0001u' : value === null ? '\u0001n' : '\u0001v'
  }
  return key.length > MAX_CACHE_KEY_LENGTH ? undefined : key
}

/**
 * A schema annotated for graphql-query-complexity, priced without `estimators`: its `complexity` numbers are not
 * read, so it is priced by the cost model's defaults. Said once per schema (a model is built once per schema).
 */
function warnOfUnreadComplexity(model: CostModel): void {
  const fields = fieldsAnnotatedForEstimators(model)
  if (fields.length === 0) return
  const named =
    fields.length > 3 ? `${fields.slice(0, 3).join(', ')} and ${fields.length - 3} more` : fields.join(', ')
  process.emitWarning(
    `${GRAPHQL_OPTIONS_OWNER}: ${named} ${fields.length === 1 ? 'carries' : 'carry'} extensions.complexity (graphql-query-complexity's), which the cost directives do not read: these fields are priced by the defaults (1 per field, defaultListSize per list). Give "estimators" (tollbooth cost: a --config with them) to price them by it.`,
    { code: 'TOLLBOOTH_COMPLEXITY_NOT_READ' },
  )
}
