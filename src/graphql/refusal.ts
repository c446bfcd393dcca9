import { GraphQLError } from 'graphql'

/**
 * Every `extensions.code` a refused operation can carry (listed in docs/graphql.md). A refusal is a well-formed GraphQL
 * response; no resolver of the refused operation runs.
 */
export const RefusalCodes = {
  /** The query text is longer than `limits.maxCharacters`. HTTP 413. */
  QUERY_TOO_LARGE: 'QUERY_TOO_LARGE',
  /** The query has more than `limits.maxTokens` tokens; parsing stopped there. HTTP 400. */
  TOO_MANY_TOKENS: 'TOO_MANY_TOKENS',
  /** Fields nest deeper than `limits.maxDepth` (or an introspection subtree than `maxIntrospectionDepth`). 400. */
  MAX_DEPTH_EXCEEDED: 'MAX_DEPTH_EXCEEDED',
  /** More than `limits.maxAliases` aliases. HTTP 400. */
  MAX_ALIASES_EXCEEDED: 'MAX_ALIASES_EXCEEDED',
  /** More than `limits.maxDirectives` directives. HTTP 400. */
  MAX_DIRECTIVES_EXCEEDED: 'MAX_DIRECTIVES_EXCEEDED',
  /** More than `limits.maxRootFields` root fields. HTTP 400. */
  MAX_ROOT_FIELDS_EXCEEDED: 'MAX_ROOT_FIELDS_EXCEEDED',
  /** More than `limits.maxIntrospectionFields` `__schema` / `__type` selections. HTTP 400. */
  MAX_INTROSPECTION_FIELDS_EXCEEDED: 'MAX_INTROSPECTION_FIELDS_EXCEEDED',
  /** A selection set spreads more than `limits.maxFragmentsPerSelection` distinct fragments. HTTP 400. */
  MAX_FRAGMENTS_EXCEEDED: 'MAX_FRAGMENTS_EXCEEDED',
  /** An HTTP batch holds more than `limits.maxBatchSize` operations. HTTP 413. */
  BATCH_TOO_LARGE: 'BATCH_TOO_LARGE',
  /** The operation (or the batch's sum) costs more than `maxCost`, or is too large to price. HTTP 400. */
  COST_LIMIT_EXCEEDED: 'COST_LIMIT_EXCEEDED',
  /** The caller's budget (or a sensitive field's limit, or the per-event budget) is spent. HTTP 429. */
  RATE_LIMITED: 'RATE_LIMITED',
  /** The caller already holds `subscriptions.maxPerIdentity` subscriptions. HTTP 429. */
  SUBSCRIPTION_LIMIT_EXCEEDED: 'SUBSCRIPTION_LIMIT_EXCEEDED',
} as const

export type RefusalCode = (typeof RefusalCodes)[keyof typeof RefusalCodes]

const REFUSAL_CODES: ReadonlySet<unknown> = new Set(Object.values(RefusalCodes))

/** Whether `value` is one of tollbooth's refusals (a GraphQLError with one of the codes above). */
export function isRefusal(value: unknown): value is GraphQLError {
  return value instanceof GraphQLError && REFUSAL_CODES.has(value.extensions.code)
}

/**
 * A refusal as Yoga understands it: `extensions.http.status` and `extensions.http.headers` set the response's
 * status and headers (Yoga ignores `statusCode`); over graphql-ws the same `code` and `retryAfter` reach the client.
 */
export function refusal(
  code: RefusalCode,
  message: string,
  status: number,
  details: Record<string, unknown> = {},
  headers?: Record<string, string>,
): GraphQLError {
  return new GraphQLError(message, {
    extensions: {
      code,
      ...details,
      http: headers === undefined ? { status } : { status, headers },
    },
  })
}

/** Whether refusals may name the limits (the `exposeLimits` option). */
export interface LimitExposure {
  readonly exposeLimits: boolean
}

/** The default: refusals name their limits. */
export const EXPOSE_LIMITS: LimitExposure = Object.freeze({ exposeLimits: true })

/** The limit details a refusal carries in its extensions: none with `exposeLimits: false`. */
export function limitDetails(
  settings: LimitExposure,
  details: Record<string, unknown>,
): Record<string, unknown> {
  return settings.exposeLimits ? details : {}
}

/** A refusal's message: `exact` names the limit; with `exposeLimits: false`, `generic` says the same without it. */
export function limitMessage(settings: LimitExposure, exact: string, generic: string): string {
  return settings.exposeLimits ? exact : generic
}

/** A refusal for going past `limit`, which its message (`exact`) and its `limit` extension name unless hidden. */
export function limitRefusal(
  settings: LimitExposure,
  code: RefusalCode,
  status: number,
  limit: number,
  exact: string,
  generic: string,
): GraphQLError {
  return refusal(code, limitMessage(settings, exact, generic), status, limitDetails(settings, { limit }))
}
