import {
  type BaseContext,
  type GraphQLRequestContext,
  type GraphQLRequestContextDidResolveOperation,
  type GraphQLRequestContextParsingDidStart,
  type GraphQLRequestContextResponseForOperation,
  type GraphQLRequestContextWillSendResponse,
  type GraphQLRequestListener,
  type GraphQLResponse,
  HeaderMap,
  type HTTPGraphQLHead,
} from '@apollo/server'
import { type DocumentNode, type ExecutionResult, GraphQLError, parse } from 'graphql'
import type { AdmissionEngine } from '../engine/admissionEngine.js'
import type { AdmittedOperation } from '../engine/admittedOperation.js'
import { isDeliberateGraphQLError } from '../engine/deliberateError.js'
import type { RequestState } from '../engine/requestState.js'
import type { GraphQLContext } from '../optionTypes.js'
import { RefusalCodes } from '../refusal.js'
import { answerRefusal, apolloError, apolloRefusal, fitRefusalForApollo } from './apolloHttp.js'
import {
  isRefusedDocumentStandIn,
  REFUSED_DOCUMENT_STAND_IN,
  REFUSED_TEXT_STAND_IN,
  STAND_IN_PASSES,
  setDocument,
} from './standIn.js'

/** One HTTP request as Apollo runs it, its request state included: its operations (several in a batch) share this. */
export interface ApolloRequest extends RequestState {
  operations: number
  /** Whether this plugin set the response's RateLimit fields (it may replace them for a later operation). */
  ownsHeaders: boolean
}

/** A request's state as `newRequestState` makes it, with the fields Apollo's adapter adds, in one object. */
export function newApolloRequest(operations: number): ApolloRequest {
  return { batchCost: 0, rateLimit: undefined, rateLimitPolicy: undefined, operations, ownsHeaders: false }
}

/** What every operation's lifecycle shares with the plugin that made it. */
export interface PluginState {
  readonly engine: AdmissionEngine
  /**
   * Documents whose text passed `maxTokens` and `maxNesting`. Apollo caches a document once it has parsed and
   * validated, before any plugin resolves the operation, so text the guards refused is cached too and is not parsed
   * again: a document from the cache that is not in this set has its text checked. (An external document store
   * hands back a new object each time: its documents are checked every time.)
   */
  readonly passedParseGuards: WeakSet<DocumentNode>
}

/**
 * One operation through Apollo's request pipeline, hook by hook: the guards on its text and shape (whose refusal
 * Apollo must be made to answer at the right moment), admission once Apollo has resolved it, and settlement and the
 * RateLimit fields as the response goes out.
 */
export class OperationLifecycle<TContext extends BaseContext> implements GraphQLRequestListener<TContext> {
  private admission: AdmittedOperation | undefined
  /**
   * A parse-time guard's refusal. Apollo answers 500 to an error thrown before it has parsed and validated, so the
   * refusal is noted here, thrown once the operation is resolved, and answered in place of Apollo's own error if
   * parsing or validation fails first.
   */
  private sourceRefusal: GraphQLError | undefined
  /** Whether `sourceRefusal` was thrown from `didResolveOperation` (the text parsed and validated). */
  private refusalThrown = false
  /** Hooks set on the requests that need them (see `start`): each hook Apollo awaits costs a promise or two. */
  declare didResolveSource?: GraphQLRequestListener<TContext>['didResolveSource']
  declare didEncounterErrors?: GraphQLRequestListener<TContext>['didEncounterErrors']
  /** Whether Apollo parsed the text for this request (it did not if its cache held the document). */
  private parsed = false

  constructor(
    private readonly plugin: PluginState,
    private readonly requestContext: GraphQLRequestContext<TContext>,
    private readonly request: ApolloRequest,
  ) {}

  /**
   * Checks what can be checked before Apollo reads the query text, and answers the hooks to listen with: this
   * object, whose hooks are its methods (no closures made per request). Apollo reads the text only once every
   * plugin's `requestDidStart` has run: text refused by its length, or an operation past the batch's cap, is swapped
   * for a trivial document here, so that Apollo parses (and caches) that rather than the attacker's text. The
   * refusal is answered all the same.
   */
  start(): GraphQLRequestListener<TContext> {
    const { engine } = this.plugin
    const { query } = this.requestContext.request
    const ordinal = this.request.operations
    this.guard(() => {
      engine.checkBatchSize(ordinal)
      if (typeof query === 'string') engine.checkLength(query)
    })
    if (this.sourceRefusal !== undefined) this.requestContext.request.query = REFUSED_TEXT_STAND_IN
    // Each hook Apollo awaits costs every request a promise or two: the two below are listened for only when they
    // have something to do.
    if (this.requestContext.requestIsBatched || query === undefined) {
      this.didResolveSource = async ({ source }) => this.resolvedSource(source)
    }
    if (engine.limitsFields(this.requestContext.schema)) {
      this.didEncounterErrors = async ({ errors }) => {
        // A sensitive field run past its limit while the operation ran: its refusal, made fit for Apollo before
        // Apollo formats the errors into the response.
        for (const error of errors) fitRefusalForApollo(error, !this.requestContext.requestIsBatched)
      }
    }
    return this
  }

  private guard(check: () => void): void {
    try {
      check()
    } catch (error) {
      if (!(error instanceof GraphQLError)) throw error
      this.refuseSource(error)
    }
  }

  /** Notes a refusal of the text or the shape of the operation, and spends `minCost` from the caller's budget. */
  private refuseSource(error: GraphQLError): void {
    this.sourceRefusal = error
    this.plugin.engine.spendMinCostOnRefusal(error, this.requestContext.contextValue)
  }

  async parsingDidStart({
    source,
  }: GraphQLRequestContextParsingDidStart<TContext>): Promise<(parseError?: Error) => Promise<void>> {
    const { engine } = this.plugin
    this.parsed = true
    if (this.sourceRefusal === undefined && engine.guardsParse)
      this.guard(() => engine.checkBeforeParse(source))
    return async (parseError) => this.parsingDidEnd(parseError)
  }

  private parsingDidEnd(parseError: Error | undefined): void {
    const { engine } = this.plugin
    const { document, contextValue } = this.requestContext
    // Text that does not parse spends minCost, as a refusal does.
    if (parseError !== undefined && this.sourceRefusal === undefined)
      engine.spendMinCostOnRefusal(parseError, contextValue)
    if (parseError !== undefined || document === undefined) return
    // The structural rules before Apollo's validation, which costs far more on a hostile document.
    if (this.sourceRefusal === undefined) {
      const refused = engine.structuralRefusal(document)
      if (refused !== undefined) this.refuseSource(apolloError(refused))
    }
    // A document refused for its text or shape is not validated: Apollo validates (and caches, under the text's
    // hash) a stand-in, and the refusal is thrown once the operation is resolved. A batch's size is no property of
    // the text: that document is validated and cached as it is.
    if (
      this.sourceRefusal !== undefined &&
      this.sourceRefusal.extensions.code !== RefusalCodes.BATCH_TOO_LARGE
    ) {
      setDocument(this.requestContext, REFUSED_DOCUMENT_STAND_IN)
    }
  }

  async validationDidStart(): Promise<(errors?: readonly Error[]) => Promise<void>> {
    return async (errors) => this.validated(errors)
  }

  /** A document graphql-js' validation refuses spends minCost, as a refusal does (a stand-in never fails). */
  private validated(errors: readonly Error[] | undefined): void {
    const [first] = errors ?? []
    if (first !== undefined) this.plugin.engine.spendMinCostOnRefusal(first, this.requestContext.contextValue)
  }

  async didResolveOperation({
    document,
    source,
  }: GraphQLRequestContextDidResolveOperation<TContext>): Promise<void> {
    this.resolved(document, source)
  }

  private resolved(document: DocumentNode, source: string): void {
    const { engine, passedParseGuards } = this.plugin
    const standIn = isRefusedDocumentStandIn(document, source)
    if (this.sourceRefusal === undefined && engine.guardsParse && !passedParseGuards.has(document)) {
      // Parsed just now, the text has been checked; from Apollo's cache, it may be text the guards refused.
      if (!this.parsed) this.guard(() => engine.checkBeforeParse(source))
      if (this.sourceRefusal === undefined && !standIn) passedParseGuards.add(document)
    }
    if (this.sourceRefusal === undefined && !this.parsed) {
      // A document from Apollo's cache that this plugin did not see parsed: another instance's, or the stand-in of
      // a document refused before, which is parsed again to be refused again.
      this.guard(() => {
        const cached = standIn ? engine.guardedParse(parse)(source) : document
        const refused = engine.structuralRefusal(cached)
        if (refused !== undefined) throw refused
        // The client's own text, shaped as the stand-in is; or one cached by an instance whose limits refused it,
        // in a document store shared with this one.
        if (standIn && !isRefusedDocumentStandIn(cached, '')) throw new Error(STAND_IN_PASSES)
      })
    }
    if (this.sourceRefusal !== undefined) {
      // Apollo answers it, through the application's `formatError`: nothing to replace in willSendResponse.
      this.refusalThrown = true
      throw apolloError(this.sourceRefusal)
    }
  }

  async responseForOperation({
    schema,
    document,
    request,
    contextValue,
  }: GraphQLRequestContextResponseForOperation<TContext>): Promise<GraphQLResponse | null> {
    const operation: Parameters<AdmissionEngine['admit']>[0] = {
      schema,
      document,
      operationName: request.operationName,
      variableValues: request.variables,
      contextValue,
    }
    let refusal: ExecutionResult | undefined
    try {
      this.admission = await this.plugin.engine.admit(operation, this.request, (result) => {
        refusal = result
      })
    } catch (error) {
      // `identify` or `limiter` refusing the caller (a GraphQLError with `extensions.http.status: 401`, say): its
      // answer, as on Yoga; Apollo answers anything else thrown here with a 500, as an unexpected error.
      if (!isDeliberateGraphQLError(error)) throw error
      refusal = { errors: [error] }
    }
    if (refusal === undefined) return null
    const http: HTTPGraphQLHead = { headers: new HeaderMap() }
    // A batch's operations share one status line and one set of headers, which Apollo merges each answer into. As
    // in Yoga, a refused operation leaves them to the batch (its result still says why, with its code and
    // retryAfter): a 429 or a Retry-After would say the operations that ran had failed too.
    const head = this.requestContext.requestIsBatched ? { headers: new HeaderMap() } : http
    return { http, body: { kind: 'single', singleResult: apolloRefusal(refusal, head) } }
  }

  async willSendResponse({
    response,
    errors,
  }: GraphQLRequestContextWillSendResponse<TContext>): Promise<void> {
    if (this.sourceRefusal !== undefined) {
      // The document failed to parse or validate before the refusal could be thrown: the refusal is the answer, not
      // Apollo's error about the text it was swapped for or that the guard refused.
      if (!this.refusalThrown) answerRefusal(response, { errors: [this.sourceRefusal] })
      return
    }
    const { engine } = this.plugin
    if (this.admission !== undefined && response.body.kind === 'single') {
      // Hidden work is judged from the errors as raised (`errors`), not as `formatError` left them.
      response.body.singleResult = engine.settle(
        this.admission,
        response.body.singleResult as ExecutionResult,
        errors ?? [],
      ) as typeof response.body.singleResult
    } else if (this.requestContext.metrics.responseCacheHit === true && response.body.kind === 'single') {
      // A response cache listed before this plugin answered before admission: the hit pays minCost.
      await this.answerServedResult(response)
    }
    this.writeRateLimitFields(response)
  }

  /** A response a cache served in place of execution, as `admitServedResult` settles it (a refusal with its head). */
  private async answerServedResult(response: GraphQLResponse): Promise<void> {
    if (response.body.kind !== 'single') return
    const served = await this.plugin.engine.admitServedResult(
      response.body.singleResult as ExecutionResult,
      this.requestContext.contextValue as GraphQLContext,
      this.request,
    )
    if (served.errors === undefined) {
      response.body.singleResult = served as typeof response.body.singleResult
      return
    }
    answerRefusal(response, served)
  }

  private writeRateLimitFields(response: GraphQLResponse): void {
    const { request } = this
    const { rateLimit, rateLimitPolicy } = request
    if (rateLimit === undefined || rateLimitPolicy === undefined) return
    const { headers } = response.http
    // Fields the application set stay: the fields of one response describe one decision.
    if (!request.ownsHeaders && (headers.has('ratelimit') || headers.has('ratelimit-policy'))) return
    request.ownsHeaders = true
    headers.set('ratelimit-policy', rateLimitPolicy)
    headers.set('ratelimit', rateLimit)
  }

  /**
   * A batch's operations all start before any resolves its source: by now `operations` is the batch's size. (And
   * the length of text that came from the persisted-query cache.)
   */
  private resolvedSource(source: string): void {
    if (this.sourceRefusal !== undefined) return
    const { engine } = this.plugin
    this.guard(() => {
      engine.checkBatchSize(this.request.operations)
      engine.checkLength(source)
    })
  }
}
