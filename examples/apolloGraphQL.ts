import type { IncomingMessage } from 'node:http'
import { ApolloServer } from '@apollo/server'
import { expressMiddleware } from '@as-integrations/express5'
import express from 'express'
import { tollboothApolloPlugin } from '../src/graphql/apollo/index.js'
import type { GraphQLEndpoint, GraphQLSetup, GraphqlWsHooks, ServerContext } from './graphqlEndpoint.js'

/**
 * The example's GraphQL on Apollo Server 5 (`GRAPHQL_SERVER=apollo`): HTTP GET/POST through Apollo's Express
 * integration, graphql-ws next to it in Apollo's own subscription recipe. Apollo serves no SSE.
 */
export async function createApolloGraphQL({
  schema,
  tollbooth,
  userOf,
}: GraphQLSetup): Promise<GraphQLEndpoint> {
  const plugin = tollboothApolloPlugin<ServerContext>(tollbooth)
  const apollo = new ApolloServer<ServerContext>({ schema, plugins: [plugin] })
  await apollo.start()
  const path = '/graphql'
  const app = express()
  app.use(
    path,
    express.json({ limit: '100kb' }),
    expressMiddleware(apollo, {
      // The Node request rides in the context: the default identity and the field limits read the client IP there.
      context: async ({ req }) => ({ req, user: userOf(req.headers.authorization) }),
    }),
  )
  // A body over the limit, or one that is not JSON: a GraphQL-shaped error, not Express' HTML page with its stack.
  app.use(
    (
      error: { status?: number; message?: string },
      _req: express.Request,
      res: express.Response,
      _next: express.NextFunction,
    ) => {
      const status =
        typeof error.status === 'number' && error.status >= 400 && error.status < 500 ? error.status : 500
      res
        .status(status)
        .json({ errors: [{ message: status === 500 ? 'Internal server error' : String(error.message) }] })
    },
  )
  return {
    path,
    serves: 'Apollo Server: HTTP GET/POST; Apollo Sandbox: open it in a browser',
    // Apollo refuses a GET without a content type or this header (CSRF prevention).
    curlFlags: " -H 'apollo-require-preflight: true'",
    handle: (req, res) => app(req as express.Request, res as express.Response),
    graphqlWsOptions: ({ onConnect }: GraphqlWsHooks) =>
      plugin.graphqlWs({
        schema,
        onConnect,
        context: (ctx: {
          connectionParams?: Readonly<Record<string, unknown>>
          extra: { request: IncomingMessage }
        }): ServerContext => ({
          req: ctx.extra.request,
          user:
            userOf(ctx.connectionParams?.authorization) ?? userOf(ctx.extra.request.headers.authorization),
        }),
      }),
    stop: () => apollo.stop(),
  }
}
