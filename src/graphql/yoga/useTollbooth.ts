import type { ExecutionArgs, ExecutionResult, GraphQLSchema } from 'graphql'
import { isAsyncIterable } from '../asyncIterable.js'
import { AdmissionEngine } from '../engine/admissionEngine.js'
import type { AdmittedOperation } from '../engine/admittedOperation.js'
import { chargedEvents } from '../engine/chargedEvents.js'
import { callerRefusalResult } from '../engine/deliberateError.js'
import { newRequestState, type RequestState } from '../engine/requestState.js'
import type { GraphQLContext, TollboothGraphQLOptions, TollboothPlugin } from '../optionTypes.js'
import { isRefusal } from '../refusal.js'
import { aroundOperations, aroundResponses, checkYogaVersion, type YogaServerSurface } from './yogaServer.js'

export type { CostExtension } from '../engine/operationResults.js'

/**
 * The Yoga/Envelop plugin: parse-time guards, structural rules, cost, per-identity budget, sensitive-field limits,
 * refund of what the response did not use, `extensions.cost` and RateLimit headers — the admission engine's steps,
 * called from Envelop's and Yoga's hooks. `TContext` is the server's context, as `limiter` and `identify` receive
 * it: `useTollbooth<MyContext>(…)`, or inferred from a callback whose parameter is annotated.
 */
export function useTollbooth<TContext extends object = GraphQLContext>(
  options: TollboothGraphQLOptions<TContext>,
): TollboothPlugin {
  // The callbacks get the context the server built, which is the TContext they were typed for.
  const hooks = new YogaHooks(options as unknown as TollboothGraphQLOptions)
  // Envelop calls each hook as a plain function: the plugin's hooks are bound here, once. Yoga runs every hook a
  // plugin has, at a price per request even when it does nothing: `onRequestParse` is there only for tollbooth's
  // own batch size guard, asked for with `limits.maxBatchSize` (Yoga's `batching.limit` is Yoga's own guard).
  const batchGuard =
    options.limits?.maxBatchSize === undefined ? {} : { onRequestParse: () => hooks.batchGuard }
  return {
    onSchemaChange: (payload) => hooks.onSchemaChange(payload.schema),
    ...batchGuard,
    onParse: (payload) => hooks.onParse(payload),
    onValidate: (payload) => hooks.onValidate(payload),
    onExecute: ({ args, setResultAndStopExecution }) => hooks.onExecute(args, setResultAndStopExecution),
    onSubscribe: ({ args, setResultAndStopExecution }) => hooks.onSubscribe(args, setResultAndStopExecution),
    onYogaInit: ({ yoga }) => hooks.attachTo(yoga),
  }
}

type Hook<Name extends keyof TollboothPlugin> = Parameters<NonNullable<TollboothPlugin[Name]>>[0]
type HookResult<Name extends keyof TollboothPlugin> = ReturnType<NonNullable<TollboothPlugin[Name]>>
type Stop = (result: ExecutionResult) => void

/** What tollbooth does in each of Envelop's and Yoga's hooks: the admission engine's steps, in Yoga's order. */
class YogaHooks {
  /** Over graphql-ws, Yoga's context has no `request`: a refusal's status and headers would only reach it as data. */
  private readonly overHttp = (context: GraphQLContext | undefined) => context?.request !== undefined
  private readonly engine: AdmissionEngine
  /**
   * Each HTTP request's state is kept on its Fetch `Request` (which every operation of a batch and every hook has),
   * made by the first operation that needs it, under a symbol of the plugin's own: not in a WeakMap keyed by the
   * request, whose entry for a fresh key on every request would be work of the hottest path for nothing.
   */
  private readonly requestStateKey = Symbol('tollbooth request state')
  /**
   * Where the context of an operation Yoga's HTTP handler runs holds its `HttpOperation`, from the moment the handler
   * starts it. An operation run otherwise (graphql-ws, Yoga's own plugins calling `getEnveloped`, Envelop alone) has
   * none, and is settled in `onExecuteDone`.
   */
  private readonly httpOperationKey = Symbol('tollbooth HTTP operation')
  /** The same hook object for every request: refuses HTTP batches over `maxBatchSize`. */
  readonly batchGuard = {
    onRequestParseDone: ({ requestParserResult }: { requestParserResult: unknown }) => {
      if (Array.isArray(requestParserResult)) this.engine.checkBatchSize(requestParserResult.length)
    },
  }
  /** The same hook for every request: a document refused at parse time (a guard, a rule, its syntax) spends minCost. */
  private readonly chargeParseRefusal = ({ result, context }: { result: unknown; context: unknown }) => {
    if (result instanceof Error) this.engine.spendMinCostOnRefusal(result, context)
  }
  /** The same for graphql-js' validation: an invalid document spends minCost. */
  private readonly chargeInvalid = (done: { valid: boolean; result: readonly Error[]; context: unknown }) => {
    const [first] = done.result
    if (!done.valid && first !== undefined) this.engine.spendMinCostOnRefusal(first, done.context)
  }

  constructor(options: TollboothGraphQLOptions) {
    this.engine = new AdmissionEngine(options, { overHttp: this.overHttp })
  }

  onSchemaChange(schema: GraphQLSchema): void {
    // createYoga throws here for a schema the options do not fit, rather than answering 500 to every request.
    this.engine.schemaChanged(schema)
  }

  onParse({ params, context, parseFn, setParseFn }: Hook<'onParse'>): HookResult<'onParse'> {
    const { engine } = this
    try {
      engine.checkLength(typeof params.source === 'string' ? params.source : params.source.body)
    } catch (error) {
      if (isRefusal(error)) engine.spendMinCostOnRefusal(error, context)
      throw error
    }
    if (!engine.wrapsParse) return undefined
    setParseFn(engine.guardedParse(parseFn))
    return this.chargeParseRefusal
  }

  onValidate({ params, context, setResult }: Hook<'onValidate'>): HookResult<'onValidate'> {
    // Before graphql-js' rules, which cost far more on a hostile document: a refusal replaces validation.
    const refused = this.engine.structuralRefusal(params.documentAST)
    if (refused === undefined) return this.chargeInvalid
    this.engine.spendMinCostOnRefusal(refused, context)
    setResult([refused])
    return undefined
  }

  /**
   * Yoga's HTTP steps, run around its server's functions (see yogaServer.ts): each HTTP operation settled as Yoga's
   * handler returns its result, a response cache's hit charged, and the RateLimit fields written on the response as
   * the handler returns it (before the server adapter's `onResponse` hooks, where a plugin may replace them).
   */
  attachTo(yoga: YogaServerSurface): void {
    checkYogaVersion(yoga.version)
    const key = this.httpOperationKey
    const { engine } = this
    aroundOperations<HttpOperation>(yoga, {
      start(context, request) {
        const operation: HttpOperation = { request, admission: undefined }
        context[key] = operation
        return operation
      },
      answered: (result, operation, context, request) => {
        if (context[key] === operation) context[key] = undefined
        return this.settleHttp(result, operation, context, request)
      },
      failed(operation, context) {
        if (context[key] === operation) context[key] = undefined
        if (operation.admission !== undefined) engine.settleUnanswered(operation.admission)
      },
    })
    aroundResponses(yoga, (response, request) => this.writeHeaders(response, request))
  }

  onExecute(args: ExecutionArgs, stop: Stop): HookResult<'onExecute'> {
    const admitted = this.admit(args, stop)
    return admitted instanceof Promise
      ? admitted.then((admission) => this.settleAfterExecution(admission, args.contextValue))
      : this.settleAfterExecution(admitted, args.contextValue)
  }

  async onSubscribe(args: ExecutionArgs, stop: Stop): HookResult<'onSubscribe'> {
    const admission = await this.admit(args, stop)
    if (admission === undefined) return undefined
    const subscription = await this.engine.subscriptions.open(admission, stop)
    if (subscription === undefined) return undefined
    return {
      onSubscribeResult({ result, setResult }) {
        const hooks = subscription.started(result)
        // Each event charged before it is sent; one the budget cannot pay ends the subscription.
        if (hooks !== undefined) setResult(chargedEvents(result as AsyncIterable<ExecutionResult>, hooks))
      },
      onSubscribeError() {
        subscription.failed()
      },
    }
  }

  /**
   * The result of an operation Yoga's HTTP handler answered: settled if it was admitted. Yoga's response cache
   * answers a hit from the request's parameters, before any hook of the operation runs: the hit is charged here.
   */
  private settleHttp(
    result: unknown,
    { admission }: HttpOperation,
    context: Record<symbol, unknown>,
    request: unknown,
  ): unknown {
    if (admission !== undefined) {
      return isAsyncIterable(result)
        ? this.engine.settleIncremental(admission, result as AsyncIterable<ExecutionResult>)
        : this.engine.settle(admission, result as ExecutionResult)
    }
    if (!servedFromResponseCache(result)) return result
    // The server's context, which Yoga gives the request only once it runs the operation.
    const httpContext: GraphQLContext = Object.assign(Object.create(context), { request })
    return this.engine.admitServedResult(result as ExecutionResult, httpContext, this.requestState(request))
  }

  /** Writes the request's RateLimit fields, if an operation noted them, on its Fetch `Response`. */
  private writeHeaders(response: unknown, request: unknown): void {
    const state = (request as Record<symbol, RequestState | undefined> | undefined)?.[this.requestStateKey]
    if (state?.rateLimit === undefined || state.rateLimitPolicy === undefined) return
    // Lowercase names: whatwg-node's Headers lowercase every name on `has` and `set`, and a mixed-case one then
    // becomes a new string that is looked up the slow way; a lowercase one comes back as itself.
    const { headers } = response as FetchResponse
    // Fields the application already set (in a result's `extensions.http.headers`) stay, and none of these is mixed
    // in with them: the fields of one response describe one decision.
    if (headers.has('ratelimit') || headers.has('ratelimit-policy')) return
    try {
      headers.set('ratelimit-policy', state.rateLimitPolicy)
      headers.set('ratelimit', state.rateLimit)
    } catch {
      // A response whose headers cannot change (`Response.redirect`, one fetched upstream) goes out as it is.
    }
  }

  /** The state of the HTTP request `request`, made on first use; none without one (graphql-ws, Envelop alone). */
  private requestState(request: unknown): RequestState | undefined {
    if (typeof request !== 'object' || request === null) return undefined
    const holder = request as Record<symbol, RequestState | undefined>
    let state = holder[this.requestStateKey]
    if (state === undefined) {
      state = newRequestState()
      holder[this.requestStateKey] = state
    }
    return state
  }

  /**
   * Admits one operation. Over HTTP, what `identify` or `limiter` throw is Yoga's to answer (a GraphQLError with its
   * status: a 401, say). Without an HTTP request in the context (graphql-ws, Envelop on its own), a GraphQLError
   * they raise on purpose is the operation's result, as a refusal is, rather than an error graphql-ws closes the
   * socket for (4500). Anything else is left to the server, which masks and logs it.
   */
  private admit(args: ExecutionArgs, stop: Stop) {
    const { engine } = this
    if (this.overHttp(args.contextValue as GraphQLContext | undefined)) {
      return engine.admit(args, this.requestState((args.contextValue as GraphQLContext).request), stop)
    }
    const refused = (error: unknown): undefined => {
      stop(callerRefusalResult(error))
      return undefined
    }
    try {
      const admitted = engine.admit(args, undefined, stop)
      return admitted instanceof Promise ? admitted.catch(refused) : admitted
    } catch (error) {
      return refused(error)
    }
  }

  /**
   * What `onExecute` answers for an admitted operation: settle its result once executed — nothing for an operation
   * Yoga's HTTP handler runs, which the handler settles (see `settleHttp`).
   */
  private settleAfterExecution(admission: AdmittedOperation | undefined, context: unknown) {
    if (admission === undefined) return undefined
    // Its context holds an operation of Yoga's handler (copied along with the context, if a plugin copied it), and
    // one not yet admitted: a context several requests share at once (Yoga's handler then mixes their requests up
    // too) lets an operation find another's; it is then settled in onExecuteDone instead.
    const http = (context as Record<symbol, HttpOperation | undefined>)[this.httpOperationKey]
    if (
      http !== undefined &&
      http.request === (context as GraphQLContext).request &&
      http.admission === undefined
    ) {
      http.admission = admission
      return undefined
    }
    const { engine } = this
    return {
      onExecuteDone({
        result,
        setResult,
      }: {
        result: unknown
        setResult: (result: ExecutionResult | AsyncIterableIterator<ExecutionResult>) => void
      }) {
        // Incremental delivery (@defer/@stream) is settled payload by payload, as it is sent.
        setResult(
          isAsyncIterable(result)
            ? engine.settleIncremental(admission, result as AsyncIterable<ExecutionResult>)
            : engine.settle(admission, result as ExecutionResult),
        )
      },
    }
  }
}

/** The mark `@graphql-yoga/plugin-response-cache` puts on the results it serves from its cache. */
const SERVED_FROM_RESPONSE_CACHE = Symbol.for('servedFromResponseCache')

/** An operation Yoga's HTTP handler runs: its request, and once admitted its admission, settled as Yoga answers. */
interface HttpOperation {
  readonly request: unknown
  admission: AdmittedOperation | undefined
}

/** What the RateLimit fields are written on: a Fetch `Response`. */
interface FetchResponse {
  readonly headers: { has(name: string): boolean; set(name: string, value: string): void }
}

function servedFromResponseCache(result: unknown): boolean {
  return (result as Record<symbol, unknown> | undefined)?.[SERVED_FROM_RESPONSE_CACHE] === true
}
