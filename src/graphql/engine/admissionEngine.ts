import {
  type DocumentNode,
  type ExecutionResult,
  GraphQLError,
  type GraphQLSchema,
  getVariableValues,
  type OperationDefinitionNode,
  type ValidationRule,
} from 'graphql'
import type { Decision } from '../../core/decision.js'
import { untilMoreQuotaMs } from '../../core/quotaRestore.js'
import type { RateLimiter } from '../../core/rateLimiter.js'
import { rateLimitField, rateLimitPolicyField } from '../../core/rateLimitHeaders.js'
import {
  CostAnalyzer,
  costAnalysisOptions,
  selectOperation,
  TooLargeToPriceError,
} from '../cost/costAnalyzer.js'
import type { IncrementalPayload } from '../cost/incrementalCount.js'
import { instrumentResolvers } from '../cost/resolverWeights.js'
import { FieldLimitExecutions } from '../fieldLimits/fieldLimitExecutions.js'
import { FieldLimits } from '../fieldLimits/fieldLimits.js'
import type { FieldLimitDenial } from '../fieldLimits/limitedField.js'
import type { GraphQLContext, MaybePromise, ParseFunction, TollboothGraphQLOptions } from '../optionTypes.js'
import {
  limitDetails,
  limitMessage,
  limitRefusal,
  type RefusalCode,
  RefusalCodes,
  refusal,
} from '../refusal.js'
import { maxAliasesRule } from '../rules/maxAliases.js'
import { maxDepthRule } from '../rules/maxDepth.js'
import { maxDirectivesRule } from '../rules/maxDirectives.js'
import { maxFragmentsPerSelectionRule } from '../rules/maxFragmentsPerSelection.js'
import { maxIntrospectionFieldsRule } from '../rules/maxIntrospectionFields.js'
import { maxRootFieldsRule } from '../rules/maxRootFields.js'
import { checkSourceBeforeParse, guardParse } from '../rules/parseGuard.js'
import { firstStructuralError } from '../rules/structuralCheck.js'
import type {
  AdmittedOperation,
  DoorCharge,
  OperationArgs,
  PendingOperation,
  Stop,
} from './admittedOperation.js'
import { decide } from './budgetDecision.js'
import { contextIp } from './contextIdentity.js'
import { settledParts } from './incrementalSettlement.js'
import {
  budgetRefusal,
  type CostExtension,
  fieldRefusal,
  operationEvent,
  refusedResult,
  retryAfterSeconds,
  withCostExtension,
  withoutHttp,
} from './operationResults.js'
import type { RequestState } from './requestState.js'
import { type ResolvedConfig, resolveConfig } from './resolveOptions.js'
import { actualCost, type MeteredWork, settleCharge } from './settlement.js'
import { SubscriptionAdmission } from './subscriptionAdmission.js'
import { WorkMeter } from './workMeter.js'

/** What a server tells the engine about itself. */
export interface ServerAdapter {
  /**
   * Whether the operation of this context is answered over HTTP, where a refusal's `extensions.http` (status,
   * headers) becomes the status line: over graphql-ws it would only reach the client as data.
   */
  overHttp(context: GraphQLContext): boolean
}

/** What a context holds of its operations' work meters: the one, or a map of several (see `keepMeter`). */
type MetersHeld = WorkMeter | Map<OperationDefinitionNode, WorkMeter> | undefined

const EXHAUSTED = 'The budget cannot pay for more of this operation; the rest of it did not run.'

/**
 * Everything tollbooth does for a GraphQL operation, independent of the server that runs it: the parse-time guards,
 * the structural rules, the price, the sensitive-field limits, the charge to the caller's budget, and after
 * execution the refund, the report and `extensions.cost`. A server adapter (`useTollbooth` for Yoga/Envelop,
 * `tollboothApolloPlugin` for Apollo Server) calls these steps from its own hooks.
 *
 * The steps after pricing are methods taking a `PendingOperation`, not closures made per operation: a step runs directly, or
 * after the promise it waits for, and admission is synchronous when nothing needs to wait (a memory store, a fixed
 * limiter, a synchronous `identify`, no sensitive field): most requests then pay no promise for it.
 */
export class AdmissionEngine {
  readonly config: ResolvedConfig
  /**
   * The structural rules (depth, aliases, directives, root fields, introspection fields). Adapters do not add them
   * to graphql-js' validation: `structuralRefusal` runs them first, on their own.
   */
  readonly validationRules: readonly ValidationRule[]
  readonly subscriptions: SubscriptionAdmission
  private readonly analyzer: CostAnalyzer
  private readonly fieldLimits: FieldLimits
  private readonly guardedParsers = new WeakMap<object, ParseFunction>()
  /** Per document, the structural rules' first refusal (null: it passes). */
  private readonly structureVerdicts = new WeakMap<DocumentNode, GraphQLError | null>()
  /** Where each context holds the work meters of its admitted operations, by operation. */
  private readonly metersKey = Symbol('tollbooth work meters')
  /** Schemas whose resolvers report their work to this engine's meters. */
  private readonly instrumented = new WeakSet<GraphQLSchema>()
  /** Whether `identify` was given (else the identity is the client's address). */
  private readonly identifiesItself: boolean

  constructor(
    options: TollboothGraphQLOptions,
    private readonly server: ServerAdapter,
  ) {
    this.config = resolveConfig(options)
    this.identifiesItself = options.identify !== undefined
    const { config } = this
    // resolveConfig has refused keys unknown to the options; the analyzer gets its own and refuses any other.
    this.analyzer = new CostAnalyzer(costAnalysisOptions(options))
    this.fieldLimits = new FieldLimits({
      configs: options.fieldLimits ?? {},
      store: config.store,
      prefix: config.name,
      hooks: options.hooks,
      ipKeyOptions: config.ipKeyOptions,
      executions: new FieldLimitExecutions(
        (context) => contextIp(context, config.resolveIp),
        // In dry-run a run past the limit goes ahead (its decision is still reported to the hooks). Over graphql-ws
        // the field error goes out as data: without the status and headers meant for an HTTP response.
        (denial, context) => {
          if (config.dryRun) return undefined
          const error = fieldRefusal(config, denial)
          return server.overHttp(context) ? error : withoutHttp(error)
        },
      ),
    })
    this.validationRules = validationRules(config)
    this.subscriptions = new SubscriptionAdmission(config, options.hooks, (context) =>
      server.overHttp(context),
    )
  }

  /**
   * A schema the server will run: a `costs` coordinate or an @rateLimit that is wrong for it fails here, at startup,
   * rather than as a 500 on every request.
   */
  schemaChanged(schema: GraphQLSchema): void {
    const model = this.analyzer.model(schema)
    this.fieldLimits.validate(schema)
    // An operation priced by estimators pays its price, whatever ran: its resolvers have no work to report.
    if (this.instrumented.has(schema) || this.analyzer.pricedByEstimators) return
    instrumentResolvers(
      schema,
      model,
      this.analyzer.settings,
      (context, info, points) => this.meterOf(context, info.operation)?.report(points) ?? true,
      (context, info, counted) => this.exhaustedRefusal(context, info.operation, counted),
      this.metersKey,
    )
    this.instrumented.add(schema)
  }

  /** The work meter of an operation admitted in `context`, if any. */
  private meterOf(context: unknown, operation: OperationDefinitionNode): WorkMeter | undefined {
    const held = (context as Record<symbol, MetersHeld> | null)?.[this.metersKey]
    if (held instanceof WorkMeter) return held.operation === operation ? held : undefined
    return held?.get(operation)
  }

  /**
   * The refusal of a field the operation cannot pay for: a list's items are not run, another field's resolver is
   * not called. A field error, without `http`: what ran is answered (200), and the caller's next operation is
   * refused with 429 until the debt is paid back. `counted` is what the response will count for its null.
   */
  private exhaustedRefusal(
    context: unknown,
    operation: OperationDefinitionNode,
    counted: number,
  ): GraphQLError {
    const meter = this.meterOf(context, operation)
    if (meter !== undefined) meter.uncounted += counted
    // The store's refusal tells when the budget can pay again; work refused at the ceiling waits for no answer.
    const decision = meter?.owesCapacity === true ? meter.lastDecision : undefined
    const error =
      meter === undefined || decision === undefined
        ? refusal(RefusalCodes.RATE_LIMITED, EXHAUSTED, 429)
        : budgetRefusal(this.config, decision, meter.limiter, meter.work, 'The operation', EXHAUSTED)
    return withoutHttp(error)
  }

  /**
   * Whether admission reads the client's address from the context's Node request for operations on `schema`: the
   * default identity does, and so does every field limit.
   */
  readsClientAddress(schema: GraphQLSchema): boolean {
    return !this.identifiesItself || this.fieldLimits.any(schema)
  }

  /** Whether any field of `schema` has a limit of its own (`fieldLimits`, `@rateLimit`). */
  limitsFields(schema: GraphQLSchema): boolean {
    return this.fieldLimits.any(schema)
  }

  /** Refuses query text longer than `limits.maxCharacters` (throws the refusal). */
  checkLength(source: string): void {
    const { maxCharacters } = this.config
    if (maxCharacters !== undefined && source.length > maxCharacters) {
      throw limitRefusal(
        this.config,
        RefusalCodes.QUERY_TOO_LARGE,
        413,
        maxCharacters,
        `The query is longer than ${maxCharacters} characters.`,
        'The query is too long.',
      )
    }
  }

  /** Whether the parse-time guards that need the parser (`maxTokens`, `maxNesting`) are on. */
  get guardsParse(): boolean {
    return this.config.maxTokens !== undefined || this.config.maxNesting !== undefined
  }

  /** Whether `guardedParse` has anything to do: the parse-time guards, or the structural rules. */
  get wrapsParse(): boolean {
    return this.guardsParse || this.validationRules.length > 0
  }

  /**
   * `parseFn` with `maxTokens` and `maxNesting` enforced, and the structural rules run on what it parsed: a document
   * they refuse is a parse error, so that a server's parse cache keeps the small refusal rather than the AST (a
   * document of 5,000 tokens parses to about 2 MB). One wrapper per parse function, not one per request.
   */
  guardedParse(parseFn: ParseFunction): ParseFunction {
    let guarded = this.guardedParsers.get(parseFn)
    if (guarded === undefined) {
      const parseGuarded = this.guardsParse ? guardParse(parseFn, this.config) : parseFn
      guarded =
        this.validationRules.length === 0
          ? parseGuarded
          : (source, options) => {
              const document = parseGuarded(source, options)
              const refused = this.structuralRefusal(document)
              if (refused !== undefined) throw refused
              return document
            }
      this.guardedParsers.set(parseFn, guarded)
    }
    return guarded
  }

  /**
   * `maxNesting` and `maxTokens` on query text about to be parsed by a parser that cannot be replaced (throws the
   * refusal): the text is scanned and its tokens counted, without building the AST.
   */
  checkBeforeParse(source: string): void {
    checkSourceBeforeParse(source, this.config)
  }

  /**
   * The first refusal of the structural rules for `document`, or undefined; worked out once per document. Adapters
   * ask it on the parsed document before graphql-js' validation runs, and answer the refusal in its place: graphql-js'
   * rules cost far more on a hostile document (OverlappingFieldsCanBeMerged is quadratic in fields sharing a name)
   * than these linear ones, and a document they refuse is never validated further. Admission asks it again, so a
   * document whose validation was skipped (persisted operations) is held to the same limits.
   */
  structuralRefusal(document: DocumentNode): GraphQLError | undefined {
    if (this.validationRules.length === 0) return undefined
    let verdict = this.structureVerdicts.get(document)
    if (verdict === undefined) {
      verdict = firstStructuralError(document, this.validationRules) ?? null
      this.structureVerdicts.set(document, verdict)
    }
    // A copy each time: servers write into the errors they answer (Yoga marks validation errors in their `http`).
    return verdict === null ? undefined : copyRefusal(verdict)
  }

  /**
   * Spends `minCost` from the budget of the caller of an operation refused for its text or its shape (tollbooth's
   * guards, graphql-js' syntax and validation errors, a cost over `maxCost`), so that a flood of hostile documents
   * runs its budget dry like any flood. Only when `limiter` and `identify` can tell the
   * caller from `context` (the default identity, the client's address, always can); never throws, never waits,
   * and a spent budget spends nothing more (a denial consumes nothing). A batch refused for its size spends
   * nothing: none of its operations was read. Nor does a refusal over graphql-ws: there each operation is a
   * message, which the socket's own limits count (`tollbooth/ws`).
   */
  spendMinCostOnRefusal(refused: Error, context: unknown): void {
    const { config } = this
    if (config.minCost === 0 || typeof context !== 'object' || context === null) return
    if ((refused as GraphQLError).extensions?.code === RefusalCodes.BATCH_TOO_LARGE) return
    if (!this.server.overHttp(context as GraphQLContext)) return
    const spend = (limiter: RateLimiter, identity: string) => {
      if (limiter.decideNow?.(identity, config.minCost) === undefined) {
        limiter.consume(identity, config.minCost).catch(() => {})
      }
    }
    try {
      const limiter = config.limiter(context as GraphQLContext)
      const identity = config.identify(context as GraphQLContext)
      if (limiter instanceof Promise || identity instanceof Promise) {
        Promise.all([limiter, identity])
          .then(([chosen, known]) => spend(chosen, known))
          .catch(() => {})
      } else {
        spend(limiter, identity)
      }
    } catch {
      // The caller cannot be told from this context (an `identify` that needs what the application adds later).
    }
  }

  /** Refuses an HTTP batch of more than `limits.maxBatchSize` operations (throws the refusal). */
  checkBatchSize(size: number): void {
    const { maxBatchSize } = this.config
    if (size > maxBatchSize) {
      throw limitRefusal(
        this.config,
        RefusalCodes.BATCH_TOO_LARGE,
        413,
        maxBatchSize,
        `A batch may hold at most ${maxBatchSize} operations.`,
        'The batch holds too many operations.',
      )
    }
  }

  /**
   * Prices, checks and charges one operation. Undefined: the operation is not this engine's to settle — refused
   * (`stop` has been called with the refusal), or left for the executor to reject (no such operation, invalid
   * variables). Its steps after pricing are the methods below; pricing and the checks that need no store stay
   * inline, so that a synchronous admission makes no promise.
   */
  admit(
    args: OperationArgs,
    state: RequestState | undefined,
    stop: Stop,
  ): MaybePromise<AdmittedOperation | undefined> {
    const { config } = this
    const context = (args.contextValue ?? {}) as GraphQLContext
    const operation = selectOperation(args.document, args.operationName)
    if (operation === undefined) return undefined // the executor reports the missing or ambiguous operation
    // Asked before validation by every adapter; here again for a document whose validation was skipped.
    const structural = this.structuralRefusal(args.document)
    if (structural !== undefined) {
      this.spendMinCostOnRefusal(structural, context)
      stop(refusedResult(config, structural, 0, this.server.overHttp(context)))
      return undefined
    }
    const pending: PendingOperation = {
      context,
      schema: args.schema,
      operation,
      state,
      stop,
      priced: undefined,
      cost: 0,
      wouldRefuse: undefined,
    }

    try {
      pending.priced = this.analyzer.priceOperation({
        schema: args.schema,
        document: args.document,
        operationName: args.operationName,
        variables: args.variableValues,
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
      if (this.refuse(pending, refusal(RefusalCodes.COST_LIMIT_EXCEEDED, message, 400))) return undefined
      pending.cost = config.maxCost
    }

    // An HTTP batch is judged by the sum of its operations' costs.
    const { cost } = pending
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
      if (this.refuse(pending, error)) return undefined
    } else if (state !== undefined) {
      state.batchCost = judgedCost // a refused operation does not count toward its batch
    }

    const { fieldLimits } = this
    fieldLimits.countRuns(args.schema, context)
    const selected = fieldLimits.selected(args.schema, args.document, operation)
    if (selected.length === 0) return this.chooseLimiter(pending)
    const variables = coercedVariables(args, operation)
    return fieldLimits
      .spend(selected, variables, contextIp(context, config.resolveIp), context)
      .then((denial) => this.afterFieldLimits(pending, denial))
  }

  /**
   * A sensitive field's denial refuses the operation before its budget is charged. (A limited field that then runs
   * more often than it occurs, under a list, pays for each further run as it runs: see FieldLimitExecutions.)
   */
  private afterFieldLimits(
    pending: PendingOperation,
    denial: FieldLimitDenial | undefined,
  ): MaybePromise<AdmittedOperation | undefined> {
    if (denial !== undefined && this.refuse(pending, fieldRefusal(this.config, denial), denial.decision))
      return undefined
    return this.chooseLimiter(pending)
  }

  /** The budget this operation is charged to: the `limiter` option, or what it picks for the request. */
  private chooseLimiter(pending: PendingOperation): MaybePromise<AdmittedOperation | undefined> {
    const limiter = this.config.limiter(pending.context)
    if (limiter instanceof Promise) return limiter.then((chosen) => this.identifyCaller(pending, chosen))
    return this.identifyCaller(pending, limiter)
  }

  /** Whose budget: the `identify` option (the client IP by default). */
  private identifyCaller(
    pending: PendingOperation,
    limiter: RateLimiter,
  ): MaybePromise<AdmittedOperation | undefined> {
    const identity = this.config.identify(pending.context)
    if (identity instanceof Promise) return identity.then((known) => this.charge(pending, limiter, known))
    return this.charge(pending, limiter, identity)
  }

  /** Spends the operation's cost from the caller's budget (a free operation only peeks at it). */
  private charge(
    pending: PendingOperation,
    limiter: RateLimiter,
    identity: string,
  ): MaybePromise<AdmittedOperation | undefined> {
    const decision = decide(limiter, identity, pending.cost)
    if (decision instanceof Promise)
      return decision.then((decided) => this.judge(pending, limiter, identity, decided))
    return this.judge(pending, limiter, identity, decision)
  }

  /**
   * A cost the budget can never hold is the client's error (400, no Retry-After: waiting would not help); a spent
   * budget is a 429. A free operation (only with `minCost: 0`) is never refused; its peek only feeds the headers.
   */
  private judge(
    pending: PendingOperation,
    limiter: RateLimiter,
    identity: string,
    decision: Decision,
  ): AdmittedOperation | undefined {
    const { config } = this
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
      if (this.refuse(pending, error, decision)) return undefined
    }
    const { priced, operation, wouldRefuse, context, state, schema } = pending
    // A subscription's events pay a budget of their own, event by event: its meter only counts.
    const meter = new WorkMeter(
      limiter,
      identity,
      cost,
      decision,
      operation,
      !config.dryRun,
      operation.operation !== 'subscription',
    )
    const metered = this.instrumented.has(schema)
    if (metered) this.keepMeter(context, meter)
    // Every field named: a spread of `pending` followed by more fields allocated some hundreds of bytes more per
    // operation (V8 builds such an object field by field).
    return {
      priced,
      cost,
      limiter,
      identity,
      decision,
      operation,
      wouldRefuse,
      context,
      state,
      schema,
      meter,
      metered,
    }
  }

  /**
   * Keeps `meter` with its context, for the resolvers to report to. Yoga and Apollo give each operation of a batch a
   * context of its own, which then holds that one meter; but one object can still serve several operations
   * (graphql-ws' `context` given as an object, a caller of Envelop's `execute` passing the same `contextValue`
   * twice), and a context that does holds a map of them, by operation. Not a map for every operation: it was
   * a fifth of what admission allocates.
   */
  private keepMeter(context: GraphQLContext, meter: WorkMeter): void {
    const holder = context as Record<symbol, MetersHeld>
    const held = holder[this.metersKey]
    if (held === undefined || (held instanceof WorkMeter && held.operation === meter.operation)) {
      holder[this.metersKey] = meter
    } else if (held instanceof WorkMeter) {
      holder[this.metersKey] = new Map([
        [held.operation, held],
        [meter.operation, meter],
      ])
    } else {
      held.set(meter.operation, meter)
    }
  }

  /** Refuses the operation (or, in dry-run, notes the refusal); answers whether admission stops here. */
  private refuse(pending: PendingOperation, error: GraphQLError, decision?: Decision): boolean {
    const { config } = this
    const code = error.extensions.code as RefusalCode
    if (config.dryRun) {
      pending.wouldRefuse ??= code
      return false
    }
    // A refusal of the operation itself (its cost), not a budget's denial: it spends minCost, as a guard's does.
    if (code !== RefusalCodes.RATE_LIMITED && code !== RefusalCodes.SUBSCRIPTION_LIMIT_EXCEEDED) {
      this.spendMinCostOnRefusal(error, pending.context)
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
    pending.stop(refusedResult(config, error, pending.cost, this.server.overHttp(pending.context)))
    return true
  }

  /**
   * After execution: settle the charge at what the response really cost — a refund of what it did not use, or a
   * debit of what it cost above the estimate (into debt if need be: the caller's next operations wait until it is
   * paid back) — then report, add `extensions.cost` and note the headers in the request's state.
   */
  settle(
    admission: AdmittedOperation,
    result: ExecutionResult,
    /**
     * The errors as execution raised them, where the result's are already formatted (Apollo): a `formatError` that
     * drops an error's `path` must not make work an error hid look refundable.
     */
    executionErrors: ExecutionResult['errors'] = result.errors,
  ): ExecutionResult {
    const { config } = this
    const actual = actualCost(admission, result, executionErrors, config.minCost, this.workOf(admission))
    // The meter stays with the context: resolvers graphql-js left running when an error ended the response early
    // (a sibling's null reached the root) are still refused once the budget is spent, and their work debited.
    const { paid, balance } = this.settleMetered(admission, actual)
    this.report(admission, paid)
    this.noteHeaders(admission, balance)
    const extension = this.costExtension(admission, paid, balance)
    return extension === undefined ? result : withCostExtension(result, extension)
  }

  /**
   * An operation that ran but whose result never reached settlement (a plugin that ran after it threw, and the
   * server answered an error): it pays its estimate, or the work its resolvers reported if that was more. Nothing is
   * refunded for a response that could not be counted.
   */
  settleUnanswered(admission: AdmittedOperation): void {
    const { paid } = this.settleMetered(
      admission,
      Math.max(admission.cost, this.workOf(admission)?.work ?? 0),
    )
    this.report(admission, paid)
  }

  /**
   * An incremental response (`@defer`, `@stream`) settled as it is sent: each payload counted as it passes, what
   * the parts cost above the estimate debited as it is reached (a response the budget cannot pay for ends there,
   * its last payload carrying the refusal), and at the end what was not used refunded, the operation reported and
   * `extensions.cost` added to the last payload. The RateLimit fields are those of admission: the response's head
   * is sent before its first payload.
   */
  settleIncremental(
    admission: AdmittedOperation,
    source: AsyncIterable<ExecutionResult>,
  ): AsyncIterableIterator<ExecutionResult> {
    const { config } = this
    const { meter } = admission
    this.noteHeaders(admission, 0)
    const count = admission.priced?.incremental()
    let counted = 0
    /** What ran so far: the payloads sent, and the work the resolvers did (parts not sent yet included). */
    const work = () => Math.max(counted - meter.uncounted, meter.work)
    return settledParts(source, {
      count: (payload) => {
        counted += count?.add(payload as IncrementalPayload) ?? 0
        const covered = meter.cover(work())
        return covered instanceof Promise ? covered.then(() => !meter.stopped) : !meter.stopped
      },
      refusal: () =>
        budgetRefusal(
          config,
          meter.lastDecision ?? admission.decision,
          admission.limiter,
          work(),
          'The response',
          `The budget cannot pay for more of this response; it ends here. Retry in ${retryAfterSeconds((meter.lastDecision ?? admission.decision).retryAfterMs)} s.`,
        ),
      finish: () => {
        // Whatever was sent: the work that ran is paid, what did not run goes back. The meter stays: what the
        // resolvers still do after a client went away (a deferred part still running) is debited as it reports.
        const { paid, balance } = this.settleMetered(admission, Math.max(work(), config.minCost))
        this.report(admission, paid)
        return this.costExtension(admission, paid, balance)
      },
    })
  }

  /**
   * Settles an operation at `actual` from what it paid so far: the estimate, and what its meter debited while the
   * work outran it. An operation whose debit the store refused leaves the charge as the store took it (the budget
   * owes its whole quota, however much of the last debit it could take): nothing goes back.
   */
  private settleMetered(admission: AdmittedOperation, actual: number): { paid: number; balance: number } {
    const { meter } = admission
    if (meter.owesCapacity)
      return { paid: actual, balance: -(admission.decision.remaining + admission.limiter.limit) }
    const settled = settleCharge(
      admission.limiter,
      admission.identity,
      admission.decision,
      meter.paid,
      actual,
    )
    const balance = admission.cost - meter.paid + settled.balance
    meter.settle(settled.paid)
    return { paid: settled.paid, balance }
  }

  /** What the resolvers of an admitted operation reported, or undefined where they do not report. */
  private workOf(admission: AdmittedOperation): MeteredWork | undefined {
    return admission.metered ? admission.meter : undefined
  }

  /**
   * A result a response cache served before admission saw the operation (Yoga's response cache answers from the
   * request's parameters, before parsing): the hit pays `minCost` from the caller's budget, or is refused once the
   * budget is spent, and its `extensions.cost` and RateLimit fields are this request's, never the cached copy's.
   * A caller that `limiter` and `identify` cannot tell from `context` gets the hit without the copy's cost.
   */
  admitServedResult(
    result: ExecutionResult,
    context: GraphQLContext,
    state: RequestState | undefined,
  ): MaybePromise<ExecutionResult> {
    const { config } = this
    const cost = config.minCost
    const served = (limiter: RateLimiter, decision: Decision): ExecutionResult => {
      if (!decision.allowed && cost > 0 && !config.dryRun) {
        const error = budgetRefusal(config, decision, limiter, cost, 'The operation', 'The budget is spent.')
        return refusedResult(config, error, cost, this.server.overHttp(context))
      }
      const charge: DoorCharge = { cost, decision, limiter, state, wouldRefuse: undefined }
      this.noteHeaders(charge, 0)
      return withCostExtension(result, this.costExtension(charge, cost, 0))
    }
    const unknownCaller = () => withCostExtension(result, undefined)
    try {
      const limiter = config.limiter(context)
      const identity = config.identify(context)
      if (limiter instanceof Promise || identity instanceof Promise) {
        return Promise.all([limiter, identity]).then(([chosen, known]) => {
          const decision = decide(chosen, known, cost)
          return decision instanceof Promise
            ? decision.then((decided) => served(chosen, decided))
            : served(chosen, decision)
        }, unknownCaller)
      }
      const decision = decide(limiter, identity, cost)
      return decision instanceof Promise
        ? decision.then((decided) => served(limiter, decided), unknownCaller)
        : served(limiter, decision)
    } catch {
      return unknownCaller()
    }
  }

  /** The `onOperation` event of an operation that ran and paid `paid`. */
  private report(admission: AdmittedOperation, paid: number): void {
    this.config.onOperation?.(
      operationEvent(
        this.config,
        admission.operation,
        admission.cost,
        admission.wouldRefuse,
        admission.decision,
        {
          actualCost: paid,
        },
      ),
    )
  }

  /**
   * The RateLimit fields of the request's response, noted in its state: the budget after admission, and after
   * `balance` went back to it (negative: debited). In dry-run the operation ran: no Retry-After, whatever the
   * decision.
   */
  private noteHeaders(admission: DoorCharge, balance: number): void {
    const { decision, limiter, state } = admission
    if (state === undefined || !this.config.headers) return
    // A token bucket is full that much sooner or later.
    const resetMs =
      limiter.algorithm === 'tokenBucket'
        ? Math.max(0, decision.resetMs - Math.floor((balance * 1000) / limiter.restorePerSecond))
        : decision.resetMs
    // The fields of an allowed decision with what is left now, as rateLimitHeaders would send them. Admission's
    // `moreQuotaMs` is not the budget's once some went back: a sliding window's `t` is its lower bound then.
    const { policy } = limiter
    const remaining = Math.max(0, Math.floor(available(admission, balance)))
    state.rateLimit = rateLimitField(policy, remaining, untilMoreQuotaMs(resetMs, undefined, policy.restore))
    state.rateLimitPolicy = rateLimitPolicyField(policy)
  }

  /** `extensions.cost` of an operation that paid `paid`, `balance` having gone back to the budget. */
  private costExtension(admission: DoorCharge, paid: number, balance: number): CostExtension | undefined {
    const { config } = this
    if (!config.costExtension) return undefined
    const { limiter } = admission
    const extension: CostExtension = { requestedQueryCost: admission.cost, actualQueryCost: paid }
    if (config.exposeLimits) {
      extension.throttleStatus = {
        maximumAvailable: limiter.limit,
        // Below 0 while the caller owes for a response that cost more than its estimate.
        currentlyAvailable: Math.floor(available(admission, balance)),
        restoreRate: limiter.restorePerSecond,
      }
    }
    if (admission.wouldRefuse !== undefined) extension.wouldRefuse = admission.wouldRefuse
    return extension
  }
}

/** What the budget holds after admission and `balance` going back to it (never above its quota). */
function available(admission: DoorCharge, balance: number): number {
  return Math.min(admission.limiter.limit, admission.decision.remaining + balance)
}

function copyRefusal(refusal: GraphQLError): GraphQLError {
  const { http, ...extensions } = refusal.extensions as { http?: object }
  return new GraphQLError(refusal.message, {
    extensions: http === undefined ? extensions : { ...extensions, http: { ...http } },
  })
}

function validationRules(config: ResolvedConfig): ValidationRule[] {
  const rules: ValidationRule[] = []
  if (config.maxDepth !== undefined) {
    rules.push(maxDepthRule(config.maxDepth, config.maxIntrospectionDepth, config))
  }
  if (config.maxAliases !== undefined) rules.push(maxAliasesRule(config.maxAliases, config))
  if (config.maxDirectives !== undefined) rules.push(maxDirectivesRule(config.maxDirectives, config))
  if (config.maxRootFields !== undefined) rules.push(maxRootFieldsRule(config.maxRootFields, config))
  if (config.maxIntrospectionFields !== undefined) {
    rules.push(maxIntrospectionFieldsRule(config.maxIntrospectionFields, config))
  }
  if (config.maxFragmentsPerSelection !== undefined) {
    rules.push(maxFragmentsPerSelectionRule(config.maxFragmentsPerSelection, config))
  }
  return rules
}

/** Whether the executor will refuse the operation's variables (then no resolver runs, and nothing is charged). */
function variablesInvalid(args: OperationArgs, operation: OperationDefinitionNode): boolean {
  const raw = (args.variableValues ?? {}) as Record<string, unknown>
  return getVariableValues(args.schema, operation.variableDefinitions ?? [], raw).errors !== undefined
}

function coercedVariables(args: OperationArgs, operation: OperationDefinitionNode): Record<string, unknown> {
  const result = getVariableValues(
    args.schema,
    operation.variableDefinitions ?? [],
    (args.variableValues ?? {}) as Record<string, unknown>,
  )
  return result.coerced ?? {}
}
