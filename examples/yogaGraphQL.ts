import type { IncomingMessage } from 'node:http'
import { type DocumentNode, type ExecutionArgs, GraphQLError } from 'graphql'
import type { ExecutionResult } from 'graphql-ws'
import { createYoga } from 'graphql-yoga'
import { useTollbooth, withoutHttp } from '../src/graphql/index.js'
import type { GraphQLEndpoint, GraphQLSetup, GraphqlWsHooks, ServerContext } from './graphqlEndpoint.js'

interface EnvelopedRoot {
  execute(args: ExecutionArgs): Promise<ExecutionResult> | ExecutionResult
  subscribe(args: ExecutionArgs): Promise<unknown>
}

/** The example's GraphQL on Yoga (the default): HTTP GET/POST, SSE and graphql-ws; GraphiQL in a browser. */
export function createYogaGraphQL({ schema, tollbooth, userOf }: GraphQLSetup): GraphQLEndpoint {
  const yoga = createYoga({
    schema,
    logging: 'warn',
    graphiql: {
      title: 'tollbooth example',
      headers: JSON.stringify({ authorization: 'Bearer alice-token' }),
      defaultQuery: /* GraphQL */ `# Signed in as Alice (see the headers below). The response's extensions.cost
# shows the price: requested before execution, actual after (the rest is refunded).
{
  me { name }
  search(text: "limit", first: 10) { title author { name } }
}
`,
    },
    context: (initial): ServerContext => {
      // HTTP and SSE: the Fetch request's header. graphql-ws: connectionParams, else the upgrade request.
      const { request, connectionParams, req } = initial as {
        request?: Request
        connectionParams?: Record<string, unknown>
        req?: IncomingMessage
      }
      const user =
        userOf(request?.headers.get('authorization')) ??
        userOf(connectionParams?.authorization) ??
        userOf(req?.headers.authorization)
      return { user }
    },
    plugins: [useTollbooth(tollbooth)],
  })

  return {
    path: yoga.graphqlEndpoint,
    serves: 'Yoga: HTTP GET/POST, SSE; GraphiQL: open it in a browser',
    curlFlags: '',
    handle: (req, res) => void yoga(req, res),
    // The README's recipe ("Subscriptions and graphql-ws").
    graphqlWsOptions: ({ onConnect }: GraphqlWsHooks) => ({
      execute: (args: ExecutionArgs) => (args.rootValue as EnvelopedRoot).execute(args),
      subscribe: (args: ExecutionArgs) => (args.rootValue as EnvelopedRoot).subscribe(args) as never,
      onConnect,
      onSubscribe: async (
        ctx: { extra: { request: IncomingMessage; socket: unknown } },
        _id: string,
        params: { query: string; operationName?: string | null; variables?: Record<string, unknown> | null },
      ) => {
        const { schema, execute, subscribe, contextFactory, parse, validate } = yoga.getEnveloped({
          ...ctx,
          req: ctx.extra.request,
          socket: ctx.extra.socket,
          params,
        })
        let document: DocumentNode
        try {
          document = parse(params.query)
        } catch (error) {
          // A document that does not parse, or that tollbooth's parse guards refuse, is the client's error: answer
          // it (graphql-ws would log a throw here as the server's own, with its stack, for any client to repeat).
          return [withoutHttp(error instanceof GraphQLError ? error : new GraphQLError(String(error)))]
        }
        const args = {
          schema,
          operationName: params.operationName,
          document,
          variableValues: params.variables,
          contextValue: await contextFactory(),
          rootValue: { execute, subscribe },
        }
        const errors = validate(args.schema, args.document)
        return errors.length > 0 ? errors.map(withoutHttp) : args
      },
    }),
    stop: async () => {},
  }
}
