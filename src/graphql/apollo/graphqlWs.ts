import {
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
  execute,
  GraphQLError,
  GraphQLSchema,
  parse,
  specifiedRules,
  subscribe,
  type ValidationRule,
  validate,
} from 'graphql'
import { invalidOption } from '../../core/errors.js'
import { checkOptionKeys } from '../../core/knownOptions.js'
import { isOptionsObject } from '../../core/validate.js'
import { isAsyncIterable } from '../asyncIterable.js'
import type { AdmissionEngine } from '../engine/admissionEngine.js'
import { chargedEvents } from '../engine/chargedEvents.js'
import { callerRefusalResult } from '../engine/deliberateError.js'
import { withoutHttp, withoutHttpErrors } from '../engine/operationResults.js'
import type { ParseFunction } from '../optionTypes.js'

/**
 * The graphql-ws `useServer` options tollbooth reads and replaces, spelled out without graphql-ws' types (so the
 * published declarations need graphql-ws only where it is used). Every other option passes through untouched.
 */
export interface GraphqlWsServerOptions {
  schema?: unknown
  parse?: unknown
  validate?: unknown
  execute?: unknown
  subscribe?: unknown
  onSubscribe?: unknown
}

interface SubscribePayload {
  readonly query: string
  readonly operationName?: string | null
  readonly variables?: Record<string, unknown> | null
}

const OWNER = 'tollboothApolloPlugin.graphqlWs'
/** The options of graphql-ws 6's `useServer` (its `ServerOptions`). */
const GRAPHQL_WS_OPTIONS: readonly string[] = [
  'schema',
  'context',
  'roots',
  'parse',
  'validate',
  'execute',
  'subscribe',
  'connectionInitWaitTimeout',
  'onConnect',
  'onDisconnect',
  'onPing',
  'onPong',
  'onClose',
  'onSubscribe',
  'onOperation',
  'onError',
  'onNext',
  'onComplete',
  'jsonMessageReviver',
  'jsonMessageReplacer',
]

type SchemaOption =
  | GraphQLSchema
  | ((...args: unknown[]) => GraphQLSchema | Promise<GraphQLSchema>)
  | undefined
type Validate = (
  schema: GraphQLSchema,
  document: DocumentNode,
  rules?: readonly ValidationRule[],
) => readonly GraphQLError[]
type Run = (args: ExecutionArgs) => unknown
type OnSubscribe = (ctx: unknown, id: string, payload: SubscribePayload) => unknown

/**
 * `options` with every operation over graphql-ws admitted as over HTTP: `onSubscribe` parses with the parse-time
 * guards and validates with the structural rules. The application's own `onSubscribe`, if any, runs first, once
 * the parse-time guards have read the text (it may parse it itself); it may answer instead, and ExecutionArgs it
 * returns still get the structural rules. `execute` and `subscribe` price, charge, settle, hold a subscription's
 * lease and charge its events. A refusal is sent as the operation's result or `error` message, without the HTTP
 * status and headers.
 */
export function graphqlWsOptions<TOptions extends GraphqlWsServerOptions>(
  engine: AdmissionEngine,
  options: TOptions,
  /** Called with each operation's schema and context before admission (the plugin warns once without `req`). */
  checkContext: (schema: GraphQLSchema, context: unknown) => void,
): TOptions {
  // A misspelt `context` would leave every WebSocket client without its request, sharing one budget: refused.
  if (!isOptionsObject(options)) throw invalidOption(OWNER, 'options', 'an object', options)
  checkOptionKeys(OWNER, options, GRAPHQL_WS_OPTIONS)
  const schema = options.schema as SchemaOption
  if (schema instanceof GraphQLSchema) engine.schemaChanged(schema)
  const admission = new WebSocketAdmission(engine, checkContext, {
    schema,
    onSubscribe: options.onSubscribe as OnSubscribe | undefined,
    parse: (options.parse as ParseFunction | undefined) ?? parse,
    validate: (options.validate as Validate | undefined) ?? validate,
    execute: (options.execute as Run | undefined) ?? execute,
    subscribe: (options.subscribe as Run | undefined) ?? subscribe,
  })
  return {
    ...options,
    onSubscribe: (ctx: unknown, id: string, payload: SubscribePayload) =>
      admission.onSubscribe(ctx, id, payload),
    execute: (args: ExecutionArgs) => admission.execute(args),
    subscribe: (args: ExecutionArgs) => admission.subscribe(args),
  }
}

/** The application's own graphql-ws functions, or graphql-js' where it gave none. */
interface ApplicationFunctions {
  readonly schema: SchemaOption
  readonly onSubscribe: OnSubscribe | undefined
  readonly parse: ParseFunction
  readonly validate: Validate
  readonly execute: Run
  readonly subscribe: Run
}

/** Every operation over graphql-ws, from its text to its events, through the engine's steps. */
class WebSocketAdmission {
  private readonly guardedParse: ParseFunction

  constructor(
    private readonly engine: AdmissionEngine,
    private readonly checkContext: (schema: GraphQLSchema, context: unknown) => void,
    private readonly own: ApplicationFunctions,
  ) {
    this.guardedParse = engine.wrapsParse ? engine.guardedParse(own.parse) : own.parse
  }

  async onSubscribe(ctx: unknown, id: string, payload: SubscribePayload): Promise<unknown> {
    const { engine, own } = this
    if (own.onSubscribe !== undefined) {
      const refused = this.refuseText(payload.query)
      if (refused !== undefined) return refused
    }
    const answered = await own.onSubscribe?.(ctx, id, payload)
    if (Array.isArray(answered)) return answered
    if (answered !== undefined && answered !== null) {
      // The application built the arguments (and validated them as it saw fit): the structural rules still apply.
      const refused = engine.structuralRefusal((answered as ExecutionArgs).document)
      return refused === undefined ? answered : [withoutHttp(refused)]
    }
    let document: DocumentNode
    try {
      engine.checkLength(payload.query)
      document = this.guardedParse(payload.query)
    } catch (error) {
      if (error instanceof GraphQLError) return [withoutHttp(error)]
      throw error
    }
    const args = { operationName: payload.operationName, document, variableValues: payload.variables }
    const schema = typeof own.schema === 'function' ? await own.schema(ctx, id, payload, args) : own.schema
    if (schema === undefined) throw new Error('The GraphQL schema is not provided')
    // The structural rules first, on their own: graphql-js' rules cost far more on a hostile document.
    const refused = engine.structuralRefusal(document)
    if (refused !== undefined) return [withoutHttp(refused)]
    const errors = own.validate(schema, document, specifiedRules)
    return errors.length > 0 ? errors.map(withoutHttp) : { ...args, schema }
  }

  async execute(args: ExecutionArgs): Promise<unknown> {
    let refusal: ExecutionResult | undefined
    const admission = await this.admit(args, (result) => {
      refusal = result
    })
    if (refusal !== undefined) return withoutHttpErrors(refusal)
    const result = await this.own.execute(args)
    if (admission === undefined || isAsyncIterable(result)) return result
    // Refusals over the WebSocket are made without `http` already (the plugin marks these contexts); dropping it
    // here keeps an error built elsewhere for HTTP from carrying a status that would only reach the client as data.
    return withoutHttpErrors(this.engine.settle(admission, result as ExecutionResult))
  }

  async subscribe(args: ExecutionArgs): Promise<unknown> {
    let refusal: ExecutionResult | undefined
    const stop = (result: ExecutionResult) => {
      refusal = result
    }
    const admission = await this.admit(args, stop)
    if (refusal !== undefined) return withoutHttpErrors(refusal)
    if (admission === undefined) return this.own.subscribe(args)
    const subscription = await this.engine.subscriptions.open(admission, stop)
    if (subscription === undefined) return refusal === undefined ? undefined : withoutHttpErrors(refusal)
    let result: unknown
    try {
      result = await this.own.subscribe(args)
    } catch (error) {
      subscription.failed()
      throw error
    }
    const hooks = subscription.started(result)
    // The same for an event's refusal and a field limit's: no status or headers over the WebSocket.
    return hooks === undefined
      ? result
      : chargedEvents(result as AsyncIterable<ExecutionResult>, hooks, withoutHttpErrors)
  }

  /**
   * The parse-time guards on text the application's own `onSubscribe` may parse itself: its refusal, if any. The
   * nesting scan comes before any parser, which is recursive and overflows the stack on a few thousand levels.
   */
  private refuseText(query: string): GraphQLError[] | undefined {
    try {
      this.engine.checkLength(query)
      if (this.engine.guardsParse) this.engine.checkBeforeParse(query)
      return undefined
    } catch (error) {
      if (error instanceof GraphQLError) return [withoutHttp(error)]
      throw error
    }
  }

  /**
   * Admission over the WebSocket. A GraphQLError that `identify` or `limiter` raise on purpose (a 401, say) refuses
   * the operation as a refusal would, rather than closing the socket with 4500; anything else is graphql-ws' to
   * handle, as any unexpected error.
   */
  private async admit(args: ExecutionArgs, stop: (result: ExecutionResult) => void) {
    this.checkContext(args.schema, args.contextValue)
    try {
      return await this.engine.admit(args, undefined, stop)
    } catch (error) {
      stop(callerRefusalResult(error))
      return undefined
    }
  }
}
