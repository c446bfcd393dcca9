import {
  type ExecutionArgs,
  type ExecutionResult,
  GraphQLError,
  getVariableValues,
  type OperationDefinitionNode,
  type ValidationRule,
} from 'graphql'
import type { Decision } from '../core/decision.js'
import { type ConcurrencyLimiter, concurrencyLimit, type Lease } from '../core/limiters/concurrencyLimit.js'
import type { RateLimiter } from '../core/rateLimiter.js'
import { rateLimitHeaders } from '../http/rateLimitHeaders.js'
import { type ResolvedConfig, resolveConfig } from './config.js'
import {
  CostAnalyzer,
  costAnalysisOptions,
  type PricedOperation,
  selectOperation,
  TooLargeToPriceError,
} from './cost/costAnalyzer.js'
import { hidesWork } from './cost/hiddenWork.js'
import { FieldLimitExecutions } from './fieldLimitExecutions.js'
import { type FieldLimitDenial, FieldLimits } from './fieldLimits.js'
import { contextIp } from './identity.js'
import type {
  GraphQLContext,
  MaybePromise,
  OperationEvent,
  TollboothGraphQLOptions,
  TollboothPlugin,
} from './options.js'
import { guardParse } from './parseGuard.js'
import {
  limitDetails,
  limitMessage,
  limitRefusal,
  type RefusalCode,
  RefusalCodes,
  refusal,
} from './refusal.js'
import { maxAliasesRule } from './rules/maxAliases.js'
import { maxDepthRule } from './rules/maxDepth.js'
import { maxDirectivesRule } from './rules/maxDirectives.js'
import { maxRootFieldsRule } from './rules/maxRootFields.js'

/** `extensions.cost` of a result, in Shopify's shape. */
export interface CostExtension {
  requestedQueryCost: number
  actualQueryCost?: number
  throttleStatus?: { maximumAvailable: number; currentlyAvailable: number; restoreRate: number }
  /** Dry-run mode: the refusal that enforcement would have answered. */
  wouldRefuse?: RefusalCode
}

type Stop = (result: ExecutionResult) => void

/** An operation on its way through admission: what each step reads, and the refusal dry-run noted so far. */
interface Pending {
  /** The operation's context: where the request's state is found. */
  readonly context: GraphQLContext
  readonly operation: OperationDefinitionNode
  readonly stop: Stop
  /** Undefined when the operation was too large to price (dry-run lets it run). */
  priced: PricedOperation | undefined
  cost: number
  /** Dry-run: the first refusal enforcement would have answered. */
  wouldRefuse: RefusalCode | undefined
}

/** What admission decided for one operation, kept to refund and report after execution. */
interface Admission extends Readonly<Omit<Pending, 'stop'>> {
  readonly limiter: RateLimiter
  readonly identity: string
  readonly decision: Decision
}

/**
 * What one HTTP request carries from hook to hook: the running cost of its batch and the RateLimit headers to send.
 * Kept on Yoga's server context (per request; a batch's operations each get a context whose prototype is it) under
 * a symbol of the plugin's own, not in a WeakMap keyed by the request: setting a WeakMap entry for a fresh key
 * costs about 0.9 µs (a tight loop), as much as the rest of admission, and each request needed two.
 */
interface RequestState {
  batchCost: number
  /** The `RateLimit` and `RateLimit-Policy` field values of the request's last settled operation. */
  rateLimit: string | undefined
  rateLimitPolicy: string | undefined
}

/** The budget decision: synchronous on a memory store, a `consume` (or a `peek` for a free operation) otherwise. */
function decide(limiter: RateLimiter, identity: string, cost: number): MaybePromise<Decision> {
  const now = typeof limiter.decideNow === 'function' ? limiter.decideNow(identity, cost) : undefined
  if (now !== undefined) return now
  return cost > 0 ? limiter.consume(identity, cost) : limiter.peek(identity)
}

/**
 * The Yoga/Envelop plugin: parse-time guards, structural rules, cost, per-identity budget, sensitive-field limits,
 * refund of what the response did not use, `extensions.cost` and RateLimit headers. `TContext` is the server's
 * context, as `limiter` and `identify` receive it: `useTollbooth<MyContext>(…)`, or inferred from a callback whose
 * parameter is annotated.
 */
export function useTollbooth<TContext extends object = GraphQLContext>(
  options: TollboothGraphQLOptions<TContext>,
): TollboothPlugin {
  // The callbacks get the context the server built, which is the TContext they were typed for.
  const config = resolveConfig(options as unknown as TollboothGraphQLOptions)
  // resolveConfig has refused keys unknown to useTollbooth; the analyzer gets its own and refuses any other.
  const analyzer = new CostAnalyzer(costAnalysisOptions(options))
  const fieldLimits = new FieldLimits({
    configs: options.fieldLimits ?? {},
    store: config.store,
    prefix: config.name,
    hooks: options.hooks,
    ipKeyOptions: config.ipKeyOptions,
    executions: new FieldLimitExecutions(
      (context) => contextIp(context, config.resolveIp),
      // In dry-run a run past the limit goes ahead (its decision is still reported to the hooks).
      (denial) => (config.dryRun ? undefined : fieldRefusal(config, denial)),
    ),
  })
  const subscriptionLeases =
    config.maxSubscriptionsPerIdentity === undefined
      ? undefined
      : concurrencyLimit({
          name: `${config.name}:subscriptions`,
          store: config.store,
          max: config.maxSubscriptionsPerIdentity,
          leaseMs: config.subscriptionLeaseMs,
          ...(options.hooks === undefined ? {} : { hooks: options.hooks }),
        })
  const rules = validationRules(config)
  const requestStateKey = Symbol('tollbooth request state')
  const requestState = (context: unknown): RequestState | undefined =>
    (context as Record<symbol, RequestState | undefined> | undefined)?.[requestStateKey]
  /** The same hook object for every request: refuses HTTP batches over `maxBatchSize`. */
  const batchGuard = {
    onRequestParseDone({ requestParserResult }: { requestParserResult: unknown }) {
      if (Array.isArray(requestParserResult) && requestParserResult.length > config.maxBatchSize) {
        throw limitRefusal(
          config,
          RefusalCodes.BATCH_TOO_LARGE,
          413,
          config.maxBatchSize,
          `A batch may hold at most ${config.maxBatchSize} operations.`,
          'The batch holds too many operations.',
        )
      }
    },
  }
  const guardedParsers = new WeakMap<object, ReturnType<typeof guardParse>>()

  /**
   * Prices, checks and charges one operation. Synchronous when nothing needs to wait (a memory store, a fixed
   * limiter, a synchronous `identify`, no sensitive field): most requests then pay no promise for admission.
   * The steps after pricing are functions of the plugin taking a `Pending`, not closures made per operation: a
   * step runs directly, or after the promise it waits for.
   */
  const admit = (args: ExecutionArgs, stop: Stop): MaybePromise<Admission | undefined> => {
    const context = (args.contextValue ?? {}) as unknown as GraphQLContext
    const operation = selectOperation(args.document, args.operationName)
    if (operation === undefined) return undefined // the executor reports the missing or ambiguous operation
    const pending: Pending = { context, operation, stop, priced: undefined, cost: 0, wouldRefuse: undefined }

    try {
      pending.priced = analyzer.priceOperation({
        schema: args.schema,
        document: args.document,
        operationName: args.operationName,
        variables: args.variableValues as Record<string, unknown> | null | undefined,
      })
      // Every operation pays at least minCost, so a spent budget refuses even a free-looking one.
      pending.cost = Math.max(pending.priced.cost, config.minCost)
    } catch (error) {
      if (!(error instanceof TooLargeToPriceError || error instanceof GraphQLError)) throw error
      // Invalid variables: the executor refuses them before any resolver runs.
      if (error instanceof GraphQLError && variablesInvalid(args, operation)) return undefined
      // Whatever else stops the estimate (a null `@include` condition, a null for a non-null argument, which
      // graphql-js reports only as a field error if ever reached, a cost that is not a finite number): what cannot
      // be priced does not run. Refused at cost 0; in dry-run it runs, counted at the cap.
      const message =
        error instanceof TooLargeToPriceError
          ? limitMessage(config, error.message, 'The operation is too large to price.')
          : `The operation cannot be priced: ${error.message}`
      if (refuse(pending, refusal(RefusalCodes.COST_LIMIT_EXCEEDED, message, 400))) return undefined
      pending.cost = config.maxCost
    }

    // An HTTP batch is judged by the sum of its operations' costs.
    const { cost } = pending
    const state = requestState(context)
    const judgedCost = state === undefined ? cost : state.batchCost + cost
    if (judgedCost > config.maxCost) {
      const what = judgedCost === cost ? 'operation' : 'batch'
      const message = limitMessage(
        config,
        `The ${what} costs ${judgedCost}, more than the maximum of ${config.maxCost}.`,
        `The ${what} costs more than allowed.`,
      )
      const error = refusal(
        RefusalCodes.COST_LIMIT_EXCEEDED,
        message,
        400,
        limitDetails(config, { cost: judgedCost, maxCost: config.maxCost }),
      )
      if (refuse(pending, error)) return undefined
    } else if (state !== undefined) {
      state.batchCost = judgedCost // a refused operation does not count toward its batch
    }

    fieldLimits.countRuns(args.schema, context)
    const selected = fieldLimits.selected(args.schema, args.document, operation)
    if (selected.length === 0) return chooseLimiter(pending)
    const variables = coercedVariables(args, operation)
    return fieldLimits
      .spend(selected, variables, contextIp(context, config.resolveIp), context)
      .then((denial) => afterFieldLimits(pending, denial))
  }

  /**
   * A sensitive field's denial refuses the operation before its budget is charged. (A limited field that then runs
   * more often than it occurs, under a list, pays for each further run as it runs: see FieldLimitExecutions.)
   */
  const afterFieldLimits = (
    pending: Pending,
    denial: FieldLimitDenial | undefined,
  ): MaybePromise<Admission | undefined> => {
    if (denial !== undefined && refuse(pending, fieldRefusal(config, denial), denial.decision))
      return undefined
    return chooseLimiter(pending)
  }

  /** The budget this operation is charged to: the `limiter` option, or what it picks for the request. */
  const chooseLimiter = (pending: Pending): MaybePromise<Admission | undefined> => {
    const limiter = config.limiter(pending.context)
    if (limiter instanceof Promise) return limiter.then((chosen) => identifyCaller(pending, chosen))
    return identifyCaller(pending, limiter)
  }

  /** Whose budget: the `identify` option (the client IP by default). */
  const identifyCaller = (pending: Pending, limiter: RateLimiter): MaybePromise<Admission | undefined> => {
    const identity = config.identify(pending.context)
    if (identity instanceof Promise) return identity.then((known) => charge(pending, limiter, known))
    return charge(pending, limiter, identity)
  }

  /** Spends the operation's cost from the caller's budget (a free operation only peeks at it). */
  const charge = (
    pending: Pending,
    limiter: RateLimiter,
    identity: string,
  ): MaybePromise<Admission | undefined> => {
    const decision = decide(limiter, identity, pending.cost)
    if (decision instanceof Promise)
      return decision.then((decided) => judge(pending, limiter, identity, decided))
    return judge(pending, limiter, identity, decision)
  }

  /**
   * A cost the budget can never hold is the client's error (400, no Retry-After: waiting would not help); a spent
   * budget is a 429. A free operation (only with `minCost: 0`) is never refused; its peek only feeds the headers.
   */
  const judge = (
    pending: Pending,
    limiter: RateLimiter,
    identity: string,
    decision: Decision,
  ): Admission | undefined => {
    const { cost } = pending
    if (!decision.allowed && cost > 0) {
      const retry = `retry in ${Math.ceil(decision.retryAfterMs / 1000)} s.`
      const error = budgetRefusal(
        config,
        decision,
        limiter,
        cost,
        'The operation',
        decision.remaining === 0
          ? `The budget is spent; ${retry}`
          : limitMessage(
              config,
              `The operation costs ${cost}, more than the ${decision.remaining} left in the budget; ${retry}`,
              `The budget cannot pay for the operation now; ${retry}`,
            ),
      )
      if (refuse(pending, error, decision)) return undefined
    }
    const { priced, operation, wouldRefuse, context } = pending
    return { priced, operation, cost, limiter, identity, decision, wouldRefuse, context }
  }

  /** Refuses the operation (or, in dry-run, notes the refusal); answers whether admission stops here. */
  const refuse = (pending: Pending, error: GraphQLError, decision?: Decision): boolean => {
    const code = error.extensions.code as RefusalCode
    if (config.dryRun) {
      pending.wouldRefuse ??= code
      return false
    }
    const field = error.extensions.field as string | undefined
    config.onOperation?.(
      operationEvent(
        config,
        pending.operation,
        pending.cost,
        code,
        decision,
        field === undefined ? {} : { field },
      ),
    )
    pending.stop(refusedResult(config, error, pending.cost, pending.context))
    return true
  }

  /**
   * After execution: refund what the response did not use, report, add `extensions.cost` and the headers. An
   * operation pays its actual cost but never more than it was charged: the estimate is what admission checked
   * against the budget, so an estimate that was too low is reported (`actualQueryCost` above it, the metrics),
   * not billed afterwards.
   */
  const settle = (admission: Admission, result: ExecutionResult): ExecutionResult => {
    const { cost, decision, limiter } = admission
    const actual = actualCost(admission, result, config.minCost)
    const refund = charged(decision) ? cost - Math.min(cost, actual) : 0
    if (refund > 0 && limiter.refundNow?.(admission.identity, refund) === undefined) {
      // Not awaited: the response need not wait for the store; a failed refund only leaves the charge in place.
      limiter.refund(admission.identity, refund).catch(() => {})
    }
    const currentlyAvailable = Math.min(limiter.limit, decision.remaining + refund)
    config.onOperation?.(
      operationEvent(config, admission.operation, cost, admission.wouldRefuse, decision, {
        actualCost: actual,
      }),
    )
    const state = requestState(admission.context)
    if (state !== undefined && config.headers) {
      // The headers describe the budget after the refund; a bucket refilled by `refund` is full that much sooner.
      // In dry-run the operation ran: no Retry-After, whatever the decision.
      const resetMs =
        limiter.algorithm === 'tokenBucket'
          ? Math.max(0, decision.resetMs - Math.floor((refund * 1000) / limiter.restorePerSecond))
          : decision.resetMs
      // Written out rather than spread from `decision`: a literal of fixed shape costs a fraction of a copy.
      const after: Decision = {
        allowed: true,
        limit: decision.limit,
        remaining: Math.floor(currentlyAvailable),
        resetMs,
        retryAfterMs: 0,
        delayMs: decision.delayMs,
        neverAllowed: false,
        source: decision.source,
      }
      const fields = rateLimitHeaders(after, limiter.policy)
      state.rateLimit = fields.RateLimit
      state.rateLimitPolicy = fields['RateLimit-Policy']
    }
    if (!config.costExtension) return result
    const extension: CostExtension = { requestedQueryCost: cost, actualQueryCost: actual }
    if (config.exposeLimits) {
      extension.throttleStatus = {
        maximumAvailable: limiter.limit,
        currentlyAvailable: Math.floor(currentlyAvailable),
        restoreRate: limiter.restorePerSecond,
      }
    }
    if (admission.wouldRefuse !== undefined) extension.wouldRefuse = admission.wouldRefuse
    return withCostExtension(result, extension)
  }

  /** What `onExecute` answers for an admitted operation: settle its result once executed. */
  const settleAfterExecution = (admission: Admission | undefined) => {
    if (admission === undefined) return undefined
    return {
      onExecuteDone({
        result,
        setResult,
      }: {
        result: unknown
        setResult: (result: ExecutionResult) => void
      }) {
        // Incremental delivery (@defer/@stream) is charged its estimate and not refunded.
        if (!isAsyncIterable(result)) setResult(settle(admission, result as ExecutionResult))
      },
    }
  }

  return {
    onSchemaChange({ schema }) {
      // A `costs` coordinate or an @rateLimit that is wrong for this schema fails here, at startup (createYoga
      // throws), rather than as a 500 on every request.
      analyzer.model(schema)
      fieldLimits.validate(schema)
    },

    onRequestParse({ serverContext }) {
      if (typeof serverContext === 'object' && serverContext !== null) {
        const states = serverContext as Record<symbol, RequestState>
        states[requestStateKey] = { batchCost: 0, rateLimit: undefined, rateLimitPolicy: undefined }
      }
      return batchGuard
    },

    onParse({ params, parseFn, setParseFn }) {
      const source = typeof params.source === 'string' ? params.source : params.source.body
      if (config.maxCharacters !== undefined && source.length > config.maxCharacters) {
        throw limitRefusal(
          config,
          RefusalCodes.QUERY_TOO_LARGE,
          413,
          config.maxCharacters,
          `The query is longer than ${config.maxCharacters} characters.`,
          'The query is too long.',
        )
      }
      if (config.maxTokens === undefined && config.maxNesting === undefined) return
      // One wrapper per parse function (Yoga's is the same every request), not one per request.
      let guarded = guardedParsers.get(parseFn)
      if (guarded === undefined) {
        guarded = guardParse(parseFn, config)
        guardedParsers.set(parseFn, guarded)
      }
      setParseFn(guarded)
    },

    onValidate({ addValidationRule }) {
      for (const rule of rules) addValidationRule(rule)
    },

    onExecute({ args, setResultAndStopExecution }) {
      const admitted = admit(args, setResultAndStopExecution)
      return admitted instanceof Promise
        ? admitted.then(settleAfterExecution)
        : settleAfterExecution(admitted)
    },

    async onSubscribe({ args, setResultAndStopExecution }) {
      const admission = await admit(args, setResultAndStopExecution)
      if (admission === undefined) return undefined
      let lease: Lease | undefined
      let wouldRefuse = admission.wouldRefuse
      const report = (refused: RefusalCode | undefined) =>
        config.onOperation?.(
          operationEvent(config, admission.operation, admission.cost, refused, admission.decision),
        )
      if (subscriptionLeases !== undefined) {
        lease = await subscriptionLeases.acquire(admission.identity)
        if (!lease.allowed && config.dryRun) wouldRefuse ??= RefusalCodes.SUBSCRIPTION_LIMIT_EXCEEDED
        if (!lease.allowed && !config.dryRun) {
          // The subscription does not run: give back what admission charged, as every other refusal spends nothing.
          const { cost, decision, limiter, identity } = admission
          if (cost > 0 && charged(decision)) {
            await limiter.refund(identity, cost).catch(() => {})
          }
          report(RefusalCodes.SUBSCRIPTION_LIMIT_EXCEEDED)
          const retryAfter = retryAfterSeconds(lease.retryAfterMs)
          const error = refusal(
            RefusalCodes.SUBSCRIPTION_LIMIT_EXCEEDED,
            limitMessage(
              config,
              `At most ${subscriptionLeases.limit} subscriptions may be open at once.`,
              'Too many subscriptions are open.',
            ),
            429,
            { retryAfter, ...limitDetails(config, { limit: subscriptionLeases.limit }) },
            { 'Retry-After': String(retryAfter) },
          )
          setResultAndStopExecution(refusedResult(config, error, admission.cost, admission.context))
          return undefined
        }
      }
      report(wouldRefuse)
      return {
        onSubscribeResult({ result }) {
          if (!isAsyncIterable(result)) {
            void lease?.release()
            return undefined
          }
          const stopRenewing = keepLeaseAlive(lease, subscriptionLeases)
          return {
            onNext: config.costPerEvent === 0 ? undefined : eventCharger(admission, config),
            onEnd() {
              stopRenewing()
              void lease?.release()
            },
          }
        },
        onSubscribeError() {
          void lease?.release()
        },
      }
    },

    onResponse({ response, serverContext }) {
      const state = requestState(serverContext)
      if (state?.rateLimit === undefined || state.rateLimitPolicy === undefined) return
      // Lowercase names: whatwg-node's Headers lowercase every name on `has` and `set`, and a mixed-case one then
      // becomes a new string that is looked up the slow way; a lowercase one comes back as itself (this hook: 3.6
      // → 0.7 µs per request in a perf profile).
      const headers = response.headers
      // Fields the application already set (in a plugin listed before this one) stay, and none of these is mixed in
      // with them: the fields of one response describe one decision.
      if (headers.has('ratelimit') || headers.has('ratelimit-policy')) return
      headers.set('ratelimit-policy', state.rateLimitPolicy)
      headers.set('ratelimit', state.rateLimit)
    },
  }
}

/**
 * What an executed operation really cost: its response counted in the cost model (above the estimate when that
 * was too low), or the whole estimate when an error hid work that ran (see `hidesWork`); never below `minCost`.
 */
function actualCost(admission: Admission, result: ExecutionResult, minCost: number): number {
  const { priced, cost } = admission
  // Too large to price (dry-run only): nothing to count against.
  if (priced === undefined) return cost
  const counted = priced.actual(result.data)
  return Math.max(hidesWork(result.data, result.errors) ? Math.max(counted, cost) : counted, minCost)
}

/** The result that answers a refused operation. */
function refusedResult(
  config: ResolvedConfig,
  error: GraphQLError,
  cost: number,
  context: GraphQLContext,
): ExecutionResult {
  // Over graphql-ws there is no HTTP response: results go out as they are, so keep `http` (status, headers,
  // the limiter's name) to HTTP, where Yoga turns it into the status line and strips it.
  const sent = context.request === undefined ? withoutHttp(error) : error
  return config.costExtension
    ? { errors: [sent], extensions: { cost: { requestedQueryCost: cost } } }
    : { errors: [sent] }
}

/**
 * `result` with `extensions.cost` added. Copied key by key: on Node 20, `{ ...result, extensions }` on an
 * executor's result takes about 30 times as long (half a microsecond), a cost paid on every response.
 */
function withCostExtension(result: ExecutionResult, cost: CostExtension): ExecutionResult {
  const copy: Record<string, unknown> = {}
  for (const key in result) copy[key] = result[key as keyof ExecutionResult]
  copy.extensions = result.extensions === undefined ? { cost } : { ...result.extensions, cost }
  return copy as ExecutionResult
}

/** The `onOperation` event of one operation. */
function operationEvent(
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

/** Whether a decision really spent from the store (not a fail-policy answer): only then is there anything to give back. */
function charged(decision: Decision): boolean {
  return decision.allowed && decision.source === 'store'
}

function withoutHttp(error: GraphQLError): GraphQLError {
  const { http: _http, ...extensions } = error.extensions
  return new GraphQLError(error.message, { extensions })
}

function validationRules(config: ResolvedConfig): ValidationRule[] {
  const rules: ValidationRule[] = []
  if (config.maxDepth !== undefined) {
    rules.push(maxDepthRule(config.maxDepth, config.maxIntrospectionDepth, config))
  }
  if (config.maxAliases !== undefined) rules.push(maxAliasesRule(config.maxAliases, config))
  if (config.maxDirectives !== undefined) rules.push(maxDirectivesRule(config.maxDirectives, config))
  if (config.maxRootFields !== undefined) rules.push(maxRootFieldsRule(config.maxRootFields, config))
  return rules
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
function budgetRefusal(
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
function fieldRefusal(
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
function retryAfterSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000))
}

/** Whether the executor will refuse the operation's variables (then no resolver runs, and nothing is charged). */
function variablesInvalid(args: ExecutionArgs, operation: OperationDefinitionNode): boolean {
  const raw = (args.variableValues ?? {}) as Record<string, unknown>
  return getVariableValues(args.schema, operation.variableDefinitions ?? [], raw).errors !== undefined
}

function coercedVariables(args: ExecutionArgs, operation: OperationDefinitionNode): Record<string, unknown> {
  const result = getVariableValues(
    args.schema,
    operation.variableDefinitions ?? [],
    (args.variableValues ?? {}) as Record<string, unknown>,
  )
  return result.coerced ?? {}
}

/** Charges `costPerEvent` for each event; an event the budget cannot pay is replaced by a RATE_LIMITED error. */
function eventCharger(admission: Admission, config: ResolvedConfig) {
  return async ({ setResult }: { setResult: (r: ExecutionResult) => void }) => {
    const decision = await admission.limiter.consume(admission.identity, config.costPerEvent)
    if (decision.allowed || config.dryRun) return
    setResult({
      errors: [
        budgetRefusal(
          config,
          decision,
          admission.limiter,
          config.costPerEvent,
          'An event',
          'The budget is spent; this event was not delivered.',
        ),
      ],
    })
  }
}

/** Renews a subscription's lease every third of its lifetime while it lives; returns the stop function. */
function keepLeaseAlive(lease: Lease | undefined, limiter: ConcurrencyLimiter | undefined): () => void {
  if (lease?.leaseId === undefined || limiter === undefined) return () => {}
  const timer = setInterval(
    () => void lease.renew().catch(() => {}),
    Math.max(1, Math.floor(limiter.leaseMs / 3)),
  )
  timer.unref()
  return () => clearInterval(timer)
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === 'object' && value !== null && Symbol.asyncIterator in value
}
