import type { FieldNode, GraphQLField } from 'graphql'
import type { Decision } from '../../core/decision.js'
import type { RateLimiter } from '../../core/rateLimiter.js'

/** A sensitive field's limit as admission and execution both count it, and its refusal. */

export interface LimitedField {
  readonly coordinate: string
  /** How the limit was given, for messages: `fieldLimits["Mutation.login"]` or `@rateLimit on Mutation.login`. */
  readonly option: string
  readonly limiter: RateLimiter
  readonly by: readonly (readonly string[])[]
  /**
   * The key one call spends from: the client's network (grouped as the plugin's identity is, unless the field says
   * otherwise) and the normalized `by` argument values, hashed.
   */
  keyOf(args: Readonly<Record<string, unknown>>, ip: string): string
}

/** One selection of a limited field in an operation. */
export interface Occurrence {
  readonly node: FieldNode
  readonly field: GraphQLField<unknown, unknown>
  readonly limit: LimitedField
}

/** A sensitive field's refusal: which field, and the limiter's decision. */
export interface FieldLimitDenial {
  readonly coordinate: string
  readonly decision: Decision
  readonly limiter: RateLimiter
}
