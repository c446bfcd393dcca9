/**
 * GraphQL servers with graphql-ws next to HTTP, each in its own documented recipe, for the tests that run one
 * behaviour suite against both (test/integration/graphql/subscriptions.test.ts):
 * - Yoga: `createYoga` with `useTollbooth` on a `node:http` server, a `ws` WebSocketServer on the same server
 *   running graphql-ws' `useServer` with the onSubscribe of docs/graphql.md (Yoga's enveloped parse, validate,
 *   execute and subscribe, so tollbooth's Envelop hooks see every operation); the errors it answers itself go
 *   out without `extensions.http`.
 * - Apollo Server: Apollo's own subscription recipe: an Express 5 app with `expressMiddleware` on a `node:http`
 *   server, a `ws` WebSocketServer on the same server running `useServer(tollbooth.graphqlWs({ schema, context }))`,
 *   and `ApolloServerPluginDrainHttpServer` plus a drain hook that disposes of graphql-ws.
 * Both listen on 127.0.0.1, port 0, and serve HTTP and WebSocket at /graphql.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { ApolloServer, type ApolloServerPlugin, type BaseContext } from '@apollo/server'
import { ApolloServerPluginDrainHttpServer } from '@apollo/server/plugin/drainHttpServer'
import { expressMiddleware } from '@as-integrations/express5'
import express from 'express'
import { type DocumentNode, type ExecutionArgs, GraphQLError, type GraphQLSchema } from 'graphql'
import type { Context, SubscribePayload } from 'graphql-ws'
import { type Extra, useServer } from 'graphql-ws/use/ws'
import { createYoga } from 'graphql-yoga'
import { WebSocketServer } from 'ws'
import { tollboothApolloPlugin } from '../../src/graphql/apollo/index.js'
import { type TollboothGraphQLOptions, useTollbooth, withoutHttp } from '../../src/graphql/index.js'

const HOST = '127.0.0.1'
const PATH = '/graphql'

/** graphql-ws' `onSubscribe`, as an application writes it for `useServer`. */
export type OnSubscribe = (
  ctx: Context<Record<string, unknown> | undefined, Extra>,
  id: string,
  payload: SubscribePayload,
) =>
  | Promise<ExecutionArgs | readonly GraphQLError[] | undefined>
  | ExecutionArgs
  | readonly GraphQLError[]
  | undefined

export interface WsServerSetup {
  readonly schema: GraphQLSchema
  readonly tollbooth: TollboothGraphQLOptions
  /**
   * The application's own `onSubscribe`, handed to `tollbooth.graphqlWs` with the rest of its graphql-ws options
   * (Apollo's recipe). Yoga's recipe is itself an `onSubscribe`, and takes none.
   */
  readonly onSubscribe?: OnSubscribe
}

export interface RunningWsServer {
  /** `http://127.0.0.1:<port>/graphql` */
  readonly httpUrl: string
  /** `ws://127.0.0.1:<port>/graphql` */
  readonly wsUrl: string
  /** Closes every socket and the server. */
  close(): Promise<void>
}

export interface WsServerDriver {
  readonly name: 'Yoga' | 'Apollo Server'
  /** Whether the server itself serves subscriptions over HTTP as SSE (Yoga does; Apollo Server serves none). */
  readonly servesSse: boolean
  start(setup: WsServerSetup): Promise<RunningWsServer>
}

async function listening(server: Server): Promise<{ httpUrl: string; wsUrl: string }> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, HOST, () => resolve())
  })
  const { port } = server.address() as AddressInfo
  return { httpUrl: `http://${HOST}:${port}${PATH}`, wsUrl: `ws://${HOST}:${port}${PATH}` }
}

/** What Yoga's recipe puts in `rootValue`: Yoga's enveloped execute and subscribe, with tollbooth's hooks. */
interface EnvelopedRoot {
  execute(args: ExecutionArgs): unknown
  subscribe(args: ExecutionArgs): unknown
}

export const yogaDriver: WsServerDriver = {
  name: 'Yoga',
  servesSse: true,
  async start({ schema, tollbooth, onSubscribe }) {
    if (onSubscribe !== undefined) throw new Error("Yoga's recipe is its own onSubscribe")
    const yoga = createYoga({
      schema,
      logging: false,
      graphiql: false,
      plugins: [useTollbooth(tollbooth)],
    })
    const server = createServer(yoga)
    const wss = new WebSocketServer({ server, path: PATH })
    // The recipe of docs/graphql.md (graphql-ws 6: onSubscribe(ctx, id, payload)).
    useServer(
      {
        execute: (args) => (args.rootValue as EnvelopedRoot).execute(args) as never,
        subscribe: (args) => (args.rootValue as EnvelopedRoot).subscribe(args) as never,
        onSubscribe: async (ctx, _id, params) => {
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
            // The client's error (a syntax error, a parse guard's refusal): answered, not logged as the server's.
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
      },
      wss,
    )
    const urls = await listening(server)
    return {
      ...urls,
      async close() {
        for (const socket of wss.clients) socket.terminate()
        await new Promise((resolve) => wss.close(resolve))
        server.closeAllConnections()
        await new Promise((resolve) => server.close(resolve))
      },
    }
  },
}

export const apolloDriver: WsServerDriver = {
  name: 'Apollo Server',
  servesSse: false,
  async start({ schema, tollbooth, onSubscribe }) {
    const plugin = tollboothApolloPlugin(tollbooth)
    const app = express()
    const server = createServer(app)
    const wss = new WebSocketServer({ server, path: PATH })
    const graphqlWs = useServer(
      plugin.graphqlWs({
        schema,
        context: (ctx: { extra: { request: IncomingMessage } }) => ({ req: ctx.extra.request }),
        ...(onSubscribe === undefined ? {} : { onSubscribe }),
      }),
      wss,
    )
    /** Apollo's recipe: stopping the server disposes of graphql-ws (closing its sockets). */
    const disposeGraphqlWs: ApolloServerPlugin<BaseContext> = {
      async serverWillStart() {
        return {
          async drainServer() {
            await graphqlWs.dispose()
          },
        }
      },
    }
    const apollo = new ApolloServer<BaseContext>({
      schema,
      plugins: [plugin, ApolloServerPluginDrainHttpServer({ httpServer: server }), disposeGraphqlWs],
    })
    await apollo.start()
    app.use(
      PATH,
      express.json({ limit: '1mb' }),
      expressMiddleware(apollo, { context: async ({ req }) => ({ req }) }),
    )
    const urls = await listening(server)
    return {
      ...urls,
      async close() {
        for (const socket of wss.clients) socket.terminate()
        await apollo.stop()
      },
    }
  },
}

export const wsServerDrivers: readonly WsServerDriver[] = [yogaDriver, apolloDriver]
