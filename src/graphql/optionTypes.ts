import type {
  DocumentNode,
  ExecutionArgs,
  ExecutionResult,
  GraphQLError,
  GraphQLSchema,
  ParseOptions,
  Source,
} from 'graphql'
import type { FailPolicy } from '../core/failPolicy.js'
import type { LimiterHooks } from '../core/hooks.js'
import type { RateLimiter } from '../core/rateLimiter.js'
import type { Store } from '../core/stores/store.js'
import type { TrustProxy } from '../identity/clientIp.js'
import type { CostAnalysisOptions } from './cost/costAnalyzer.js'
import type { RefusalCode } from './refusal.js'
import type { YogaServerSurface } from './yoga/yogaServer.js'

/**
 * The context `useTollbooth`'s callbacks get when nothing says more: Yoga's context, or any Envelop context. The
 * plugin itself reads `request`, `req` and `extra.request` if present. Give your server's context type as
 * `useTollbooth<MyContext>(…)` to read your own fields in `limiter` and `identify`; Yoga does not check it against
 * the context it builds.
 */
export type GraphQLContext = Record<string, unknown>

export type MaybePromise<T> = T | Promise<T>

/** Parse-time and structural guards. Each is checked before execution; `false` turns one off. */
export interface GuardLimits {
  /** Characters of query text; checked before parsing. @default 100000 */
  maxCharacters?: number | false
  /** Tokens of query text; graphql-js stops parsing there. @default 5000 */
  maxTokens?: number | false
  /**
   * Nesting of `{`, `[`, `(` in the query text, checked by a linear scan before parsing: graphql-js's parser is
   * recursive and overflows the stack on a few thousand levels, before `maxTokens` is reached. @default 100
   */
  maxNesting?: number | false
  /** Field nesting, fragments followed. @default 15 */
  maxDepth?: number | false
  /** Nesting inside one `__schema` / `__type` field. @default 15 */
  maxIntrospectionDepth?: number
  /** Aliases per operation, fragments counted at every spread. @default 30 */
  maxAliases?: number | false
  /** Directives per operation, fragments counted at every spread. @default 50 */
  maxDirectives?: number | false
  /** Root fields per operation. @default 20 */
  maxRootFields?: number | false
  /**
   * `__schema` and `__type` selections per operation (aliases and fragments counted at every spread): each returns
   * a part of the schema, priced by what it returns. @default 1
   */
  maxIntrospectionFields?: number | false
  /**
   * Distinct fragments spread into one selection set: graphql-js' validation compares them pairwise, without a
   * budget. @default 50
   */
  maxFragmentsPerSelection?: number | false
  /** Operations per HTTP batch (when Yoga's `batching` is on); the batch's costs are summed. @default 10 */
  maxBatchSize?: number
}

/** A sensitive field's own limit (like `@rateLimit`): `limit` calls per `windowMs` per client IP and `by` values. */
export interface FieldLimitConfig {
  limit: number
  windowMs: number
  /** Arguments (dotted paths into input objects allowed) whose normalized value is part of the key. */
  by?: readonly string[]
  /** @default 'closed' — a login limit that fails open is no limit during a Redis outage. */
  failPolicy?: FailPolicy
  /**
   * IPv6 client addresses are counted per network of this prefix (1..128). @default the plugin's `ipv6Prefix`
   */
  ipv6Prefix?: number
  /** IPv4 client addresses are counted per network of this prefix (1..32). @default the plugin's `ipv4Prefix` */
  ipv4Prefix?: number
}

export interface SubscriptionOptions<TContext extends object = GraphQLContext> {
  /**
   * The budget a subscription's events draw from: each event is charged what its result costs, to the subscriber.
   * Give the operations' `limiter` to have events and operations share one budget.
   * @default a budget of the same algorithm and size as the operation's, kept apart (its name + `-events`)
   */
  limiter?: RateLimiter | ((context: TContext) => MaybePromise<RateLimiter>)
  /** Least charge of an event: each is charged what its result costs in the cost model, and at least this. @default 0 */
  costPerEvent?: number
  /** Concurrent subscriptions per identity, held as concurrency leases in `store`. @default unlimited */
  maxPerIdentity?: number
  /** Lease lifetime; renewed every third of it while the subscription lives. @default 60000 */
  leaseMs?: number
}

/** Reported for every operation priced (allowed, refused or dry-run): feed metrics from here. */
export interface OperationEvent {
  readonly operationName: string | undefined
  readonly operationType: 'query' | 'mutation' | 'subscription'
  /** The estimate charged before execution (at least `minCost`). */
  readonly requestedCost: number
  /**
   * Set after execution: what the response really cost (`extensions.cost.actualQueryCost`). Above `requestedCost`
   * when the estimate was too low; the operation still paid only `requestedCost`.
   */
  readonly actualCost?: number
  /** The refusal's code, or undefined when the operation ran. In dry-run mode: the refusal that would have been. */
  readonly refused: RefusalCode | undefined
  readonly dryRun: boolean
  /** Where the budget decision came from (store, cache, fail-open, …) when one was made. */
  readonly decisionSource?: string
  /** For a refusal by a sensitive field's limit: the field (`'Mutation.login'`). */
  readonly field?: string
}

/**
 * `useTollbooth`'s options. `TContext` is the server's GraphQL context, as the `limiter` and `identify` callbacks
 * receive it.
 */
export interface TollboothGraphQLOptions<TContext extends object = GraphQLContext>
  extends CostAnalysisOptions {
  /**
   * The budget every operation's cost is drawn from: a core `RateLimiter` (a `tokenBucket` is the natural fit).
   * A function picks one per request, e.g. from the authenticated user's plan — never from a client header.
   */
  limiter: RateLimiter | ((context: TContext) => MaybePromise<RateLimiter>)
  /**
   * Whose budget pays: user id, API key, tenant. @default the client IP (`trustProxy` applies), IPv6 grouped by /56
   */
  identify?: (context: TContext) => MaybePromise<string>
  /** Proxies whose `X-Forwarded-For` is believed when the identity or a field limit uses the IP. @default false */
  trustProxy?: TrustProxy
  /**
   * IPv6 client addresses are counted per network of this prefix (1..128) in the default identity and the field
   * limits: one home line is usually delegated a /56, and per-address keys would let it rotate through it.
   * @default 56
   */
  ipv6Prefix?: number
  /** IPv4 client addresses are counted per network of this prefix (1..32). @default 32 (each address) */
  ipv4Prefix?: number
  /** Most cost one operation (or one HTTP batch) may have; above it, refused outright. @default 5000 */
  maxCost?: number
  /**
   * Least cost of any operation: one priced lower (`{ __typename }`, an empty selection of lists) is charged this
   * much, so a spent budget refuses every operation. `0` lets such operations through a spent budget. @default 1
   */
  minCost?: number
  /**
   * Name costs and limits in refusals' errors (messages and `cost`/`limit`/`maxCost` extensions) and put
   * `throttleStatus` in `extensions.cost`. With `false`, an error says what was exceeded without the numbers
   * (`extensions.cost.requestedQueryCost` is still reported, as on allowed results). @default true
   */
  exposeLimits?: boolean
  /** Add `extensions.cost` (Shopify's shape) to every result. @default true */
  costExtension?: boolean
  /** Add `RateLimit-Policy` / `RateLimit` headers to HTTP responses (denials always get `Retry-After`). @default true */
  headers?: boolean
  limits?: GuardLimits
  /** Sensitive fields by coordinate (`'Mutation.login'`); `@rateLimit` in SDL does the same. */
  fieldLimits?: Readonly<Record<string, FieldLimitConfig>>
  /** Where field limits and subscription leases live. @default a MemoryStore */
  store?: Store
  /** Prefix of the field-limit and subscription limiter names in `store`. @default 'gql' */
  name?: string
  /** Decision hooks of the plugin's own limiters (field limits, subscription leases), e.g. for metrics. */
  hooks?: LimiterHooks
  subscriptions?: SubscriptionOptions<TContext>
  /** `'dry-run'`: everything is computed, reported and counted, nothing is refused. @default 'enforce' */
  mode?: 'enforce' | 'dry-run'
  /** Called once per priced operation. Must not throw. */
  onOperation?: (event: OperationEvent) => void
}

/** A parse function, as graphql-js' `parse`. */
export type ParseFunction = (source: string | Source, options?: ParseOptions) => DocumentNode

/**
 * What `useTollbooth` returns: the Envelop hooks it uses and Yoga's `onYogaInit` and `onRequestParse` (Envelop
 * alone never calls them). Spelled out with graphql-js types alone, so that the published types need neither
 * graphql-yoga nor @envelop/core: `createYoga({ plugins })` and `envelop({ plugins })` both take it. Not generic on purpose: a context type here would be inferred from `createYoga`'s plugin list, which names
 * Yoga's own context (without the application's) when `createYoga` is not given its context types.
 */
export interface TollboothPlugin {
  onSchemaChange(payload: { schema: GraphQLSchema }): void
  /** Present only with `limits.maxBatchSize`: Yoga runs every hook a plugin has, whether it does anything or not. */
  onRequestParse?(payload: { serverContext: unknown }): {
    onRequestParseDone(payload: { requestParserResult: unknown }): void
  }
  onParse(payload: {
    params: { source: string | Source }
    context: unknown
    parseFn: ParseFunction
    setParseFn(parseFn: ParseFunction): void
  }): ((payload: { result: unknown; context: unknown }) => void) | undefined
  onValidate(payload: {
    params: { schema: GraphQLSchema; documentAST: DocumentNode }
    context: unknown
    setResult(errors: readonly GraphQLError[]): void
  }): ((payload: { valid: boolean; result: readonly Error[]; context: unknown }) => void) | undefined
  onExecute(payload: {
    args: ExecutionArgs
    setResultAndStopExecution(result: ExecutionResult): void
  }): MaybePromise<
    | {
        onExecuteDone(payload: {
          result: unknown
          setResult(result: ExecutionResult | AsyncIterableIterator<ExecutionResult>): void
        }): void
      }
    | undefined
  >
  onSubscribe(payload: {
    args: ExecutionArgs
    setResultAndStopExecution(result: ExecutionResult): void
  }): Promise<
    | {
        onSubscribeResult(payload: {
          result: unknown
          setResult(result: AsyncIterableIterator<ExecutionResult> | ExecutionResult): void
        }): void
        onSubscribeError(): void
      }
    | undefined
  >
  /** Yoga's: where the plugin attaches its HTTP steps to Yoga's server (src/graphql/yoga/yogaServer.ts). */
  onYogaInit(payload: { yoga: YogaServerSurface }): void
}
