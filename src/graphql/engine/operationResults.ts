import { type ExecutionResult, GraphQLError, type OperationDefinitionNode } from 'graphql'
import type { Decision } from '../../core/decision.js'
import type { RateLimiter } from '../../core/rateLimiter.js'
import { rateLimitHeaders } from '../../core/rateLimitHeaders.js'
import type { FieldLimitDenial } from '../fieldLimits/limitedField.js'
import type { OperationEvent } from '../optionTypes.js'
import { limitDetails, limitMessage, type RefusalCode, RefusalCodes, refusal } from '../refusal.js'
import type { ResolvedConfig } from './resolveOptions.js'

/** `extensions.cost` of a result, in Shopify's shape. */
export interface CostExtension {
  requestedQueryCost: number
  actualQueryCost?: number
  throttleStatus?: { maximumAvailable: number; currentlyAvailable: number; restoreRate: number }
  /** Dry-run mode: the refusal that enforcement would have answered. */
  wouldRefuse?: RefusalCode
}

/** The result that answers a refused operation; `overHttp` false drops the error's `http` (status, headers). */
export function refusedResult(
  config: ResolvedConfig,
  error: GraphQLError,
  cost: number,
  overHttp: boolean,
): ExecutionResult {
  // Over graphql-ws there is no HTTP response: results go out as they are, so keep `http` (status, headers,
  // the limiter's name) to HTTP, where the server turns it into the status line and strips it.
  const sent = overHttp ? error : withoutHttp(error)
  return config.costExtension
    ? { errors: [sent], extensions: { cost: { requestedQueryCost: cost } } }
    : { errors: [sent] }
}

/**
 * `error` without its `extensions.http` (the same error when it has none), where it was raised kept. Exported for
 * graphql-ws recipes: Yoga marks parse and validation errors (tollbooth's refusals among them) with the HTTP status
 * and headers they would get, which graphql-ws would send to the client as data.
 */
export function withoutHttp(error: GraphQLError): GraphQLError {
  if (error.extensions.http === undefined) return error
  const { http: _http, ...extensions } = error.extensions
  return new GraphQLError(error.message, {
    nodes: error.nodes,
    source: error.source,
    positions: error.positions,
    path: error.path,
    originalError: error.originalError,
    extensions,
  })
}

/** `result` with no `extensions.http` in its errors: over graphql-ws there is no status line for them. */
export function withoutHttpErrors(result: ExecutionResult): ExecutionResult {
  if (result.errors === undefined || !result.errors.some((error) => error.extensions.http !== undefined)) {
    return result
  }
  return { ...result, errors: result.errors.map(withoutHttp) }
}

/**
 * `result` with `extensions.cost` added (or, `cost` undefined, without any it carried). Copied key by key: on Node
 * 20, `{ ...result, extensions }` on an executor's result takes about 30 times as long (half a microsecond), a cost
 * paid on every response.
 */
export function withCostExtension(result: ExecutionResult, cost: CostExtension | undefined): ExecutionResult {
  const copy: Record<string, unknown> = {}
  for (const key in result) copy[key] = result[key as keyof ExecutionResult]
  if (cost !== undefined) {
    copy.extensions = result.extensions === undefined ? { cost } : { ...result.extensions, cost }
  } else if (result.extensions?.cost !== undefined) {
    // A copy's cost (a cached response's) is not this request's: left out.
    const { cost: _copied, ...others } = result.extensions
    copy.extensions = others
  }
  return copy as ExecutionResult
}

/** The `onOperation` event of one operation. */
export function operationEvent(
  config: ResolvedConfig,
  operation: OperationDefinitionNode,
  requestedCost: number,
  refused: RefusalCode | undefined,
  decision: Decision | undefined,
  more: Pick<OperationEvent, 'actualCost' | 'field'> = {},
): OperationEvent {
  return {
    operationName: operation.name?.value,
    operationType: operation.operation,
    requestedCost,
    refused,
    dryRun: config.dryRun,
    decisionSource: decision?.source,
    ...more,
  }
}

function rateLimited(
  config: ResolvedConfig,
  message: string,
  decision: Decision,
  limiter: RateLimiter,
  details: Record<string, unknown>,
): GraphQLError {
  const retryAfter = retryAfterSeconds(decision.retryAfterMs)
  const headers = config.headers
    ? rateLimitHeaders(decision, limiter.policy)
    : { 'Retry-After': String(retryAfter) }
  return refusal(RefusalCodes.RATE_LIMITED, message, 429, { retryAfter, ...details }, headers)
}

/**
 * The refusal of a budget's denial: a 429 with Retry-After (`spentMessage`), or, for a cost above what the budget
 * can ever hold, a client error without one: waiting would not help.
 */
export function budgetRefusal(
  config: ResolvedConfig,
  decision: Decision,
  limiter: RateLimiter,
  cost: number,
  what: string,
  spentMessage: string,
): GraphQLError {
  if (!decision.neverAllowed) {
    return rateLimited(config, spentMessage, decision, limiter, limitDetails(config, { cost }))
  }
  return refusal(
    RefusalCodes.COST_LIMIT_EXCEEDED,
    limitMessage(
      config,
      `${what} costs ${cost}, more than the budget can ever hold (${limiter.maxCost}).`,
      `${what} costs more than the budget can ever hold.`,
    ),
    400,
    limitDetails(config, { cost, budget: limiter.maxCost }),
    // The budget's fields, as on every answer; a never-allowed decision gets no Retry-After.
    config.headers ? rateLimitHeaders(decision, limiter.policy) : undefined,
  )
}

/** The refusal of a call to a sensitive field past its limit. */
export function fieldRefusal(
  config: ResolvedConfig,
  { coordinate, decision, limiter }: FieldLimitDenial,
): GraphQLError {
  return rateLimited(
    config,
    `Too many calls to ${coordinate}; retry in ${Math.ceil(decision.retryAfterMs / 1000)} s.`,
    decision,
    limiter,
    { field: coordinate },
  )
}

/** Retry-After in whole seconds, at least 1 (as `rateLimitHeaders` sends it). */
export function retryAfterSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000))
}
