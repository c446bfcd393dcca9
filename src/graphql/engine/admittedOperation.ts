import type { DocumentNode, ExecutionResult, GraphQLSchema, OperationDefinitionNode } from 'graphql'
import type { Decision } from '../../core/decision.js'
import type { RateLimiter } from '../../core/rateLimiter.js'
import type { PricedOperation } from '../cost/costAnalyzer.js'
import type { GraphQLContext } from '../optionTypes.js'
import type { RefusalCode } from '../refusal.js'
import type { RequestState } from './requestState.js'
import type { WorkMeter } from './workMeter.js'

/**
 * An operation as admission sees it: what the executor will run, the state it carries through the steps, and what
 * admission decided, kept to settle and report after execution.
 */

/** One operation as the executor will run it: graphql-js' `ExecutionArgs` has this shape. */
export interface OperationArgs {
  readonly schema: GraphQLSchema
  readonly document: DocumentNode
  readonly operationName?: string | null | undefined
  /** The raw variables the client sent. */
  readonly variableValues?: Readonly<Record<string, unknown>> | null | undefined
  readonly contextValue?: unknown
}

/** Answers the operation with `result` instead of running it. */
export type Stop = (result: ExecutionResult) => void

/** An operation on its way through admission: what each step reads, and the refusal dry-run noted so far. */
export interface PendingOperation {
  /** The operation's context: where the request's state is found. */
  readonly context: GraphQLContext
  readonly schema: GraphQLSchema
  readonly operation: OperationDefinitionNode
  readonly state: RequestState | undefined
  readonly stop: Stop
  /** Undefined when the operation was too large to price (dry-run lets it run). */
  priced: PricedOperation | undefined
  cost: number
  /** Dry-run: the first refusal enforcement would have answered. */
  wouldRefuse: RefusalCode | undefined
}

/** What admission decided for one operation, kept to refund and report after execution. */
export interface AdmittedOperation extends Readonly<Omit<PendingOperation, 'stop'>> {
  readonly limiter: RateLimiter
  readonly identity: string
  readonly decision: Decision
  /** What the operation's resolvers report of their work, and what it paid so far. */
  readonly meter: WorkMeter
  /** Whether the resolvers report to `meter` (the schema was instrumented). */
  readonly metered: boolean
}

/** A charge made at the door, as headers and `extensions.cost` describe it. */
export type DoorCharge = Pick<AdmittedOperation, 'cost' | 'decision' | 'limiter' | 'state' | 'wouldRefuse'>
