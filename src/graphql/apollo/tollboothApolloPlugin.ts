import {
  type ApolloServerPlugin,
  type BaseContext,
  type GraphQLRequestContext,
  type GraphQLRequestListener,
  type GraphQLResponse,
  HeaderMap,
  type HTTPGraphQLHead,
} from '@apollo/server'
import {
  type DocumentNode,
  type ExecutionResult,
  GraphQLError,
  type GraphQLSchema,
  Kind,
  parse,
} from 'graphql'
import { TollboothError } from '../../core/errors.js'
import { AdmissionEngine } from '../engine/admissionEngine.js'
import type { AdmittedOperation } from '../engine/admittedOperation.js'
import { isDeliberateGraphQLError } from '../engine/deliberateError.js'
import { hasNodeRequest } from '../engine/identity.js'
import { newRequestState, type RequestState } from '../engine/requestState.js'
import type { GraphQLContext, TollboothGraphQLOptions } from '../optionTypes.js'
import { RefusalCodes } from '../refusal.js'
import { apolloError, apolloRefusal, fitRefusalForApollo } from './apolloHttp.js'
import { type GraphqlWsServerOptions, graphqlWsOptions } from './graphqlWs.js'

/** `tollboothApolloPlugin`'s plugin: Apollo's hooks, and the graphql-ws options for subscriptions. */
export interface TollboothApolloPlugin<TContext extends BaseContext = BaseContext>
  extends ApolloServerPlugin<TContext> {
  /**
   * graphql-ws `useServer` options that run every operation over WebSocket through the same admission (Apollo
   * Server does not see them): `useServer(tollbooth.graphqlWs({ schema, context }), wsServer)`. Give the context the
   * Node request (`context: (ctx) => ({ req: ctx.extra.request })`) for the default IP identity and field limits.
   */
  graphqlWs<TOptions extends GraphqlWsServerOptions>(options: TOptions): TOptions
}

/** Where the plugin's warning goes: Apollo's logger has this method, and so has `console`. */
interface WarningLogger {
  warn(message: string): void
}

/** One HTTP request as Apollo runs it: its operations (several in a batch) share this. */
interface ApolloRequest {
  readonly state: RequestState
  operations: number
  /** Whether this plugin set the response's RateLimit fields (it may replace them for a later operation). */
  ownsHeaders: boolean
}

/**
 * The Apollo Server 5 plugin: the same options and the same admission as `useTollbooth` (parse-time guards,
 * structural rules, cost, per-identity budget, sensitive-field limits, refund, `extensions.cost`, RateLimit headers,
 * 429 with Retry-After). `TContext` is the server's context, as `limiter` and `identify` receive it. Apollo does not
 * let a plugin replace its parser: `maxTokens` and `maxNesting` are checked on the query text just before Apollo
 * parses it, and a document Apollo hands back from its cache is checked only if it has not passed them before.
 */
export function tollboothApolloPlugin<TContext extends BaseContext = BaseContext>(
  options: TollboothGraphQLOptions<TContext & GraphQLContext>,
): TollboothApolloPlugin<TContext> {
  /** The contexts of operations run by the graphql-ws options: every other operation is Apollo's, over HTTP. */
  const overWebSocket = new WeakSet<object>()
  const engine = renamedErrors(
    () =>
      new AdmissionEngine(options as unknown as TollboothGraphQLOptions, {
        overHttp: (context) => !overWebSocket.has(context),
      }),
  )
  /** A batch's operations share the response head (Apollo Server ≥ 4.1): their request is found from it. */
  const batches = new WeakMap<object, ApolloRequest>()
  /**
   * Documents whose text passed `maxTokens` and `maxNesting`. Apollo caches a document once it has parsed and
   * validated, before any plugin resolves the operation, so text the guards refused is cached too and is not parsed
   * again: a document from the cache that is not in this set has its text checked. (An external document store
   * hands back a new object each time: its documents are checked every time.)
   */
  const passedParseGuards = new WeakSet<DocumentNode>()
  let warnedNoRequest = false
  /** Apollo's logger, once the server starts; graphql-ws operations may come before. */
  let logger: WarningLogger = console
  /** Warns once when the default identity (the client's address) meets a context without the Node request. */
  const checkContext = (schema: GraphQLSchema, context: unknown, log: WarningLogger = logger) => {
    if (warnedNoRequest || hasNodeRequest((context ?? {}) as GraphQLContext)) return
    if (!engine.readsClientAddress(schema)) return
    warnedNoRequest = true
    log.warn(
      'tollbooth: the GraphQL context has no `req`: every caller counts as one unknown client (for the budget ' +
        'unless `identify` is given, and for every field limit). Pass the Node request in the context (HTTP: ' +
        '`context: async ({ req }) => ({ req })`; graphql-ws: `context: (ctx) => ({ req: ctx.extra.request })`).',
    )
  }

  /** A response a cache served in place of execution, as `admitServedResult` settles it (a refusal with its head). */
  const answerServedResult = async (
    response: GraphQLResponse,
    context: GraphQLContext,
    state: RequestState,
  ): Promise<void> => {
    if (response.body.kind !== 'single') return
    const served = await engine.admitServedResult(
      response.body.singleResult as ExecutionResult,
      context,
      state,
    )
    if (served.errors === undefined) {
      response.body.singleResult = served as typeof response.body.singleResult
      return
    }
    const head: HTTPGraphQLHead = { headers: new HeaderMap() }
    response.body.singleResult = apolloRefusal(served, head)
    response.http.status = head.status
    for (const [name, value] of head.headers) response.http.headers.set(name, value)
  }

  const requestOf = (requestContext: GraphQLRequestContext<TContext>): ApolloRequest => {
    if (!requestContext.requestIsBatched) {
      return { state: newRequestState(), operations: 1, ownsHeaders: false }
    }
    const head = requestContext.response.http
    let request = batches.get(head)
    if (request === undefined) {
      request = { state: newRequestState(), operations: 0, ownsHeaders: false }
      batches.set(head, request)
    }
    request.operations++
    return request
  }

  return {
    async serverWillStart({ schema, logger: serverLogger }) {
      logger = serverLogger
      // `server.start()` rejects with this error for a schema the options do not fit, rather than answering 500 to
      // every request. (Thrown from `schemaDidLoadOrUpdate`, it would reach `start()` wrapped in a plain Error.)
      renamedErrors(() => engine.schemaChanged(schema))
      return {
        schemaDidLoadOrUpdate({ apiSchema }) {
          // A gateway's later schemas; the first is the one checked above (the engine models each schema once).
          renamedErrors(() => engine.schemaChanged(apiSchema))
        },
      }
    },

    async requestDidStart(requestContext): Promise<GraphQLRequestListener<TContext>> {
      const request = requestOf(requestContext)
      const ordinal = request.operations
      checkContext(requestContext.schema, requestContext.contextValue, requestContext.logger)
      let admission: AdmittedOperation | undefined
      /**
       * A parse-time guard's refusal. Apollo answers 500 to an error thrown before it has parsed and validated, so
       * the refusal is noted here, thrown once the operation is resolved, and answered in place of Apollo's own
       * error if parsing or validation fails first.
       */
      let sourceRefusal: GraphQLError | undefined
      /** Whether `sourceRefusal` was thrown from `didResolveOperation` (the text parsed and validated). */
      let refusalThrown = false
      /** Whether Apollo parsed the text for this request (it did not if its cache held the document). */
      let parsed = false
      const guard = (check: () => void) => {
        try {
          check()
        } catch (error) {
          if (!(error instanceof GraphQLError)) throw error
          refuseSource(error)
        }
      }
      /** Notes a refusal of the text or the shape of the operation, and spends `minCost` from the caller's budget. */
      const refuseSource = (error: GraphQLError) => {
        sourceRefusal = error
        engine.chargeRefusal(error, requestContext.contextValue)
      }
      // Apollo reads the query text only once every plugin's `requestDidStart` has run: text refused by its length,
      // or an operation past the batch's cap, is swapped for a trivial document here, so that Apollo parses (and
      // caches) that rather than the attacker's text. The refusal is answered all the same, below.
      const { query } = requestContext.request
      guard(() => {
        engine.checkBatchSize(ordinal)
        if (typeof query === 'string') engine.checkLength(query)
      })
      if (sourceRefusal !== undefined) requestContext.request.query = REFUSED_TEXT_STAND_IN
      // Each hook Apollo awaits costs every request a promise or two: the two below are listened for only when
      // they have something to do.
      const listener: GraphQLRequestListener<TContext> = {
        async parsingDidStart({ source }) {
          parsed = true
          if (sourceRefusal === undefined && engine.guardsParse) guard(() => engine.checkBeforeParse(source))
          return async (parseError) => {
            const { document } = requestContext
            // Text that does not parse spends minCost, as a refusal does.
            if (parseError !== undefined && sourceRefusal === undefined) {
              engine.chargeRefusal(parseError, requestContext.contextValue)
            }
            if (parseError !== undefined || document === undefined) return
            // The structural rules before Apollo's validation, which costs far more on a hostile document.
            if (sourceRefusal === undefined) {
              const refused = engine.structuralRefusal(document)
              if (refused !== undefined) refuseSource(apolloError(refused))
            }
            // A document refused for its text or shape is not validated: Apollo validates (and caches, under the
            // text's hash) a stand-in, and the refusal is thrown once the operation is resolved. A batch's size
            // is no property of the text: that document is validated and cached as it is.
            if (
              sourceRefusal !== undefined &&
              sourceRefusal.extensions.code !== RefusalCodes.BATCH_TOO_LARGE
            ) {
              setDocument(requestContext, REFUSED_DOCUMENT_STAND_IN)
            }
          }
        },

        async validationDidStart() {
          return async (errors) => {
            // A document graphql-js' validation refuses spends minCost, as a refusal does (a stand-in never fails).
            const [first] = errors ?? []
            if (first !== undefined) engine.chargeRefusal(first, requestContext.contextValue)
          }
        },

        async didResolveOperation({ document, source }) {
          const standIn = isRefusedDocumentStandIn(document, source)
          if (sourceRefusal === undefined && engine.guardsParse && !passedParseGuards.has(document)) {
            // Parsed just now, the text has been checked; from Apollo's cache, it may be text the guards refused.
            if (!parsed) guard(() => engine.checkBeforeParse(source))
            if (sourceRefusal === undefined && !standIn) passedParseGuards.add(document)
          }
          if (sourceRefusal === undefined && !parsed) {
            // A document from Apollo's cache that this plugin did not see parsed: another instance's, or the stand-in
            // of a document refused before, which is parsed again to be refused again.
            guard(() => {
              const cached = standIn ? engine.guardedParse(parse)(source) : document
              const refused = engine.structuralRefusal(cached)
              if (refused !== undefined) throw refused
              // The client's own text, shaped as the stand-in is; or one cached by an instance whose limits refused
              // it, in a document store shared with this one.
              if (standIn && !isRefusedDocumentStandIn(cached, '')) throw new Error(STAND_IN_PASSES)
            })
          }
          if (sourceRefusal !== undefined) {
            // Apollo answers it, through the application's `formatError`: nothing to replace in willSendResponse.
            refusalThrown = true
            throw apolloError(sourceRefusal)
          }
        },

        async responseForOperation({ schema, document, request: graphqlRequest, contextValue }) {
          let refusal: ExecutionResult | undefined
          try {
            admission = await engine.admit(
              {
                schema,
                document,
                operationName: graphqlRequest.operationName,
                variableValues: graphqlRequest.variables,
                contextValue,
              },
              request.state,
              (result) => {
                refusal = result
              },
            )
          } catch (error) {
            // `identify` or `limiter` refusing the caller (a GraphQLError with `extensions.http.status: 401`, say):
            // its answer, as on Yoga; Apollo answers anything else thrown here with a 500, as an unexpected error.
            if (!isDeliberateGraphQLError(error)) throw error
            refusal = { errors: [error] }
          }
          if (refusal === undefined) return null
          const http: HTTPGraphQLHead = { headers: new HeaderMap() }
          // A batch's operations share one status line and one set of headers, which Apollo merges each answer
          // into. As in Yoga, a refused operation leaves them to the batch (its result still says why, with its
          // code and retryAfter): a 429 or a Retry-After would say the operations that ran had failed too.
          const head = requestContext.requestIsBatched ? { headers: new HeaderMap() } : http
          const singleResult = apolloRefusal(refusal, head)
          return { http, body: { kind: 'single', singleResult } }
        },

        async willSendResponse({ response, errors }) {
          if (sourceRefusal !== undefined) {
            if (!refusalThrown) answerWith(response, sourceRefusal)
            return
          }
          if (admission !== undefined && response.body.kind === 'single') {
            // Hidden work is judged from the errors as raised (`errors`), not as `formatError` left them.
            response.body.singleResult = engine.settle(
              admission,
              response.body.singleResult as ExecutionResult,
              errors ?? [],
            ) as typeof response.body.singleResult
          } else if (requestContext.metrics.responseCacheHit === true && response.body.kind === 'single') {
            // A response cache listed before this plugin answered before admission: the hit pays minCost.
            await answerServedResult(response, requestContext.contextValue as GraphQLContext, request.state)
          }
          const { rateLimit, rateLimitPolicy } = request.state
          if (rateLimit === undefined || rateLimitPolicy === undefined) return
          const { headers } = response.http
          // Fields the application set stay: the fields of one response describe one decision.
          if (!request.ownsHeaders && (headers.has('ratelimit') || headers.has('ratelimit-policy'))) return
          request.ownsHeaders = true
          headers.set('ratelimit-policy', rateLimitPolicy)
          headers.set('ratelimit', rateLimit)
        },
      }
      if (requestContext.requestIsBatched || query === undefined) {
        listener.didResolveSource = async ({ source }) => {
          // A batch's operations all start before any resolves its source: by now `operations` is the batch's size.
          // (And the length of text that came from the persisted-query cache.)
          if (sourceRefusal !== undefined) return
          guard(() => {
            engine.checkBatchSize(request.operations)
            engine.checkLength(source)
          })
        }
      }
      if (engine.limitsFields(requestContext.schema)) {
        listener.didEncounterErrors = async ({ errors }) => {
          // A sensitive field run past its limit while the operation ran: its refusal, made fit for Apollo before
          // Apollo formats the errors into the response.
          for (const error of errors) fitRefusalForApollo(error, !requestContext.requestIsBatched)
        }
      }
      return listener
    },

    graphqlWs: (serverOptions) =>
      renamedErrors(() =>
        graphqlWsOptions(engine, serverOptions, (schema, context) => {
          if (typeof context === 'object' && context !== null) overWebSocket.add(context)
          checkContext(schema, context)
        }),
      ),
  }
}

/** What Apollo parses in place of text refused before parsing. */
const REFUSED_TEXT_STAND_IN = '{ __typename }'

/** The name of the operation Apollo validates and caches in place of a document refused before validation. */
const REFUSED_DOCUMENT_NAME = 'TollboothRefusedDocument'

/**
 * What Apollo validates in place of a document refused after parsing (its text, or its shape by the structural
 * rules): Apollo caches it under the refused text's hash, so the name tells it apart when it comes back from a
 * document store that hands back copies.
 */
const REFUSED_DOCUMENT_TEXT = `query ${REFUSED_DOCUMENT_NAME} { __typename }`
const REFUSED_DOCUMENT_STAND_IN: DocumentNode = parse(REFUSED_DOCUMENT_TEXT)

const STAND_IN_PASSES =
  'tollbooth: the document store holds the stand-in of a document another configuration refused, and this one ' +
  'admits it: clear the document store shared by instances with different limits.'

/**
 * Whether Apollo handed back the stand-in for `source`: the stand-in itself, or a copy of it, for text that is not
 * the stand-in's own (a client may send that, and name an operation so).
 */
function isRefusedDocumentStandIn(document: DocumentNode, source: string): boolean {
  if (source === REFUSED_DOCUMENT_TEXT) return false
  if (document === REFUSED_DOCUMENT_STAND_IN) return true
  const [only] = document.definitions
  const [selection] = only?.kind === Kind.OPERATION_DEFINITION ? only.selectionSet.selections : []
  return (
    document.definitions.length === 1 &&
    only?.kind === Kind.OPERATION_DEFINITION &&
    only.name?.value === REFUSED_DOCUMENT_NAME &&
    only.selectionSet.selections.length === 1 &&
    selection?.kind === Kind.FIELD &&
    selection.name.value === '__typename'
  )
}

/** Replaces the document Apollo is about to validate (its request context's field is read-only in its types). */
function setDocument(requestContext: { document?: DocumentNode }, document: DocumentNode): void {
  ;(requestContext as { document: DocumentNode }).document = document
}

/**
 * Answers a parse-time refusal for a document that failed to parse or validate before the refusal could be thrown:
 * the refusal, not Apollo's error about the text it was swapped for or that the guard refused.
 */
function answerWith(response: GraphQLResponse, refusal: GraphQLError): void {
  const head: HTTPGraphQLHead = { headers: new HeaderMap() }
  response.body = { kind: 'single', singleResult: apolloRefusal({ errors: [refusal] }, head) }
  response.http.status = head.status
  for (const [name, value] of head.headers) response.http.headers.set(name, value)
}

/** Option errors name this plugin, not `useTollbooth`, whose checks they come from. */
function renamedErrors<T>(build: () => T): T {
  try {
    return build()
  } catch (error) {
    if (error instanceof TollboothError && error.message.startsWith('useTollbooth')) {
      error.message = `tollboothApolloPlugin${error.message.slice('useTollbooth'.length)}`
    }
    throw error
  }
}
