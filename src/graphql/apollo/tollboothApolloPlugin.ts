import type {
  ApolloServerPlugin,
  BaseContext,
  GraphQLRequestContext,
  GraphQLRequestListener,
} from '@apollo/server'
import type { GraphQLSchema } from 'graphql'
import { TollboothError } from '../../core/errors.js'
import { AdmissionEngine } from '../engine/admissionEngine.js'
import { hasNodeRequest } from '../engine/contextIdentity.js'
import { GRAPHQL_OPTIONS_OWNER } from '../optionsOwner.js'
import type { GraphQLContext, TollboothGraphQLOptions } from '../optionTypes.js'
import { type GraphqlWsServerOptions, graphqlWsOptions } from './graphqlWs.js'
import {
  type ApolloRequest,
  newApolloRequest,
  OperationLifecycle,
  type PluginState,
} from './operationLifecycle.js'

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
  const shared: PluginState = { engine, passedParseGuards: new WeakSet() }
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

  const requestOf = (requestContext: GraphQLRequestContext<TContext>): ApolloRequest => {
    if (!requestContext.requestIsBatched) {
      return newApolloRequest(1)
    }
    const head = requestContext.response.http
    let request = batches.get(head)
    if (request === undefined) {
      request = newApolloRequest(0)
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
      checkContext(requestContext.schema, requestContext.contextValue, requestContext.logger)
      return new OperationLifecycle(shared, requestContext, request).start()
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

/** Option errors name this plugin, not `useTollbooth` (`GRAPHQL_OPTIONS_OWNER`), whose checks they come from. */
function renamedErrors<T>(build: () => T): T {
  try {
    return build()
  } catch (error) {
    if (error instanceof TollboothError && error.message.startsWith(GRAPHQL_OPTIONS_OWNER)) {
      error.message = `tollboothApolloPlugin${error.message.slice(GRAPHQL_OPTIONS_OWNER.length)}`
    }
    throw error
  }
}
