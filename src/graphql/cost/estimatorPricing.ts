import type { DocumentNode, OperationDefinitionNode } from 'graphql'
import { type ComplexityEstimator, guardedEstimator, loadGetComplexity } from './complexityEstimators.js'
import { directiveModelEstimator, introspectionEstimator } from './costDirectiveEstimator.js'
import type { CostModel } from './costModel.js'
import type { CostSettings } from './estimator.js'
import type { IncrementalPayload } from './incrementalCount.js'
import type { IntrospectionRun } from './introspectionCost.js'
import { ownValue, withValueKey } from './valueKey.js'

/** Prices per document: one per distinct operation name and values of its declared variables. */
const MAX_PRICES_PER_DOCUMENT = 16
/** Variables longer than this (as JSON) are not cached on: the key would cost more than the estimate. */
const MAX_CACHE_KEY_LENGTH = 256

/** What `CostAnalyzer` needs of an operation to price it with estimators. */
export interface EstimatedOperation {
  readonly document: DocumentNode
  readonly operation: OperationDefinitionNode
  readonly variables: Readonly<Record<string, unknown>>
}

/**
 * Operations priced by graphql-query-complexity's `getComplexity` over a chain of estimators: introspection fields
 * and the fields the cost directives annotate first, priced as the cost model prices them (see
 * costDirectiveEstimator.ts), then the user's, the first to answer a number pricing the field, as
 * graphql-query-complexity chains them. The number is the one `getComplexity`
 * gives with that chain, except that what cannot be a price refuses the operation: a user's estimator answering
 * below 0 for a field (a negative `count` in `count * childComplexity` would lower its siblings' sum) or throwing.
 * Prices are cached per document, operation name and values of the operation's declared variables (estimators are
 * handed no request context, so nothing else can change a price).
 */
export class EstimatorPricing {
  private readonly getComplexity = loadGetComplexity()
  private readonly chains = new WeakMap<CostModel, ComplexityEstimator[]>()
  private readonly prices = new WeakMap<CostModel, WeakMap<DocumentNode, Map<string, number>>>()

  constructor(
    private readonly estimators: readonly ComplexityEstimator[],
    private readonly settings: CostSettings,
    private readonly maxFieldVisits: number,
  ) {}

  /** The cached price of an operation, if any. */
  cached(model: CostModel, document: DocumentNode, key: string | undefined): number | undefined {
    return key === undefined ? undefined : this.prices.get(model)?.get(document)?.get(key)
  }

  keep(model: CostModel, document: DocumentNode, key: string | undefined, price: number): void {
    if (key === undefined) return
    let byDocument = this.prices.get(model)
    if (byDocument === undefined) {
      byDocument = new WeakMap()
      this.prices.set(model, byDocument)
    }
    let byKey = byDocument.get(document)
    if (byKey === undefined) {
      byKey = new Map()
      byDocument.set(document, byKey)
    }
    if (byKey.size >= MAX_PRICES_PER_DOCUMENT) byKey.clear()
    byKey.set(key, price)
  }

  /**
   * `getComplexity` of the operation with the chain; throws its GraphQLErrors (a field no estimator prices).
   * `introspection` is the operation's own: its fragments and variables.
   */
  price(model: CostModel, input: EstimatedOperation, introspection: IntrospectionRun): number {
    return this.getComplexity({
      estimators: [introspectionEstimator(introspection), ...this.chainOf(model)],
      schema: model.schema,
      query: input.document,
      variables: input.variables as Record<string, unknown>,
      operationName: input.operation.name?.value,
      maxQueryNodes: this.maxFieldVisits,
    })
  }

  private chainOf(model: CostModel): ComplexityEstimator[] {
    let chain = this.chains.get(model)
    if (chain === undefined) {
      chain = [directiveModelEstimator(model, this.settings), ...this.estimators.map(guardedEstimator)]
      this.chains.set(model, chain)
    }
    return chain
  }
}

/**
 * The cache key of an operation: its name and the raw values of the variables it declares (getComplexity coerces
 * no others); undefined when too long to key on, or holding what no JSON request holds (see valueKey.ts).
 */
export function estimatorCacheKey(
  operation: OperationDefinitionNode,
  variables: Readonly<Record<string, unknown>> | null | undefined,
): string | undefined {
  let key: string | undefined = operation.name?.value ?? ''
  for (const definition of operation.variableDefinitions ?? []) {
    key = withValueKey(
      `${key}\u0000`,
      ownValue(variables, definition.variable.name.value),
      MAX_CACHE_KEY_LENGTH,
    )
    if (key === undefined) return undefined
  }
  return key
}

/**
 * An incremental response to an operation priced by estimators: the whole price is counted with its first payload
 * that carries data, nothing after it.
 */
export class EstimatedIncrementalCount {
  private counted = false

  constructor(private readonly cost: number) {}

  add(payload: IncrementalPayload): number {
    if (this.counted || payload.data == null) return 0
    this.counted = true
    return this.cost
  }
}
