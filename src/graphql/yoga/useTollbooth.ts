import type { ExecutionArgs, ExecutionResult } from 'graphql'
import { AdmissionEngine } from '../engine/admissionEngine.js'
import type { AdmittedOperation } from '../engine/admittedOperation.js'
import { chargedEvents } from '../engine/chargedEvents.js'
import { callerRefusalResult } from '../engine/deliberateError.js'
import { newRequestState, type RequestState } from '../engine/requestState.js'
import type { GraphQLContext, TollboothGraphQLOptions, TollboothPlugin } from '../optionTypes.js'
import { isRefusal } from '../refusal.js'

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
  // The callbacks get the context the server built, which is the TContext they were typed for. Over graphql-ws,
  // Yoga's context has no `request`: a refusal's status and headers would only reach the client as data.
  const overHttp = (context: GraphQLContext | undefined) => context?.request !== undefined
  const engine = new AdmissionEngine(options as unknown as TollboothGraphQLOptions, { overHttp })
  /**
   * Each HTTP request's state is kept on Yoga's server context (per request; a batch's operations each get a
   * context whose prototype is it) under a symbol of the plugin's own, not in a WeakMap keyed by the request:
   * setting a WeakMap entry for a fresh key costs about 0.9 µs (a tight loop), as much as the rest of admission.
   */
  const requestStateKey = Symbol('tollbooth request state')
  const requestState = (context: unknown): RequestState | undefined =>
    (context as Record<symbol, RequestState | undefined> | undefined)?.[requestStateKey]
  /** The same hook for every request: a document refused at parse time (a guard, a rule, its syntax) spends minCost. */
  const chargeParseRefusal = ({ result, context }: { result: unknown; context: unknown }) => {
    if (result instanceof Error) engine.chargeRefusal(result, context)
  }
  /** The same for graphql-js' validation: an invalid document spends minCost. */
  const chargeInvalid = ({
    valid,
    result,
    context,
  }: {
    valid: boolean
    result: readonly Error[]
    context: unknown
  }) => {
    const [first] = result
    if (!valid && first !== undefined) engine.chargeRefusal(first, context)
  }
  /** The same hook object for every request: refuses HTTP batches over `maxBatchSize`. */
  const batchGuard = {
    onRequestParseDone({ requestParserResult }: { requestParserResult: unknown }) {
      if (Array.isArray(requestParserResult)) engine.checkBatchSize(requestParserResult.length)
    },
  }

  /**
   * Admits one operation. Over HTTP, what `identify` or `limiter` throw is Yoga's to answer (a GraphQLError with its
   * status: a 401, say). Without an HTTP request in the context (graphql-ws, Envelop on its own), a GraphQLError
   * they raise on purpose is the operation's result, as a refusal is, rather than an error graphql-ws closes the
   * socket for (4500). Anything else is left to the server, which masks and logs it.
   */
  const admit = (args: ExecutionArgs, stop: (result: ExecutionResult) => void) => {
    if (overHttp(args.contextValue as GraphQLContext | undefined)) {
      return engine.admit(args, requestState(args.contextValue), stop)
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

  /** What `onExecute` answers for an admitted operation: settle its result once executed. */
  const settleAfterExecution = (admission: AdmittedOperation | undefined) => {
    if (admission === undefined) return undefined
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

  return {
    onSchemaChange({ schema }) {
      // createYoga throws here for a schema the options do not fit, rather than answering 500 to every request.
      engine.schemaChanged(schema)
    },

    onRequestParse({ serverContext }) {
      if (typeof serverContext === 'object' && serverContext !== null) {
        ;(serverContext as Record<symbol, RequestState>)[requestStateKey] = newRequestState()
      }
      return batchGuard
    },

    onParse({ params, context, parseFn, setParseFn }) {
      try {
        engine.checkLength(typeof params.source === 'string' ? params.source : params.source.body)
      } catch (error) {
        if (isRefusal(error)) engine.chargeRefusal(error, context)
        throw error
      }
      if (!engine.wrapsParse) return undefined
      setParseFn(engine.guardedParse(parseFn))
      return chargeParseRefusal
    },

    onValidate({ params, context, setResult }) {
      // Before graphql-js' rules, which cost far more on a hostile document: a refusal replaces validation.
      const refused = engine.structuralRefusal(params.documentAST)
      if (refused === undefined) return chargeInvalid
      engine.chargeRefusal(refused, context)
      setResult([refused])
      return undefined
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
      const subscription = await engine.subscriptions.open(admission, setResultAndStopExecution)
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
    },

    onExecutionResult({ result, setResult, request, context }) {
      // Yoga's response cache answers a hit from the request's parameters, before any hook of the operation runs.
      if (!servedFromResponseCache(result)) return undefined
      // The server's context, which Yoga gives the request only once it runs the operation.
      const httpContext: GraphQLContext = Object.assign(Object.create(context as object), { request })
      const served = engine.admitServedResult(result as ExecutionResult, httpContext, requestState(context))
      if (!(served instanceof Promise)) return setResult(served)
      return served.then(setResult)
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

/** The mark `@graphql-yoga/plugin-response-cache` puts on the results it serves from its cache. */
const SERVED_FROM_RESPONSE_CACHE = Symbol.for('servedFromResponseCache')

function servedFromResponseCache(result: unknown): boolean {
  return (result as Record<symbol, unknown> | undefined)?.[SERVED_FROM_RESPONSE_CACHE] === true
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === 'object' && value !== null && Symbol.asyncIterator in value
}
