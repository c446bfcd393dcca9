import type { IncomingMessage, ServerResponse } from 'node:http'
import type { GraphQLSchema } from 'graphql'
import type { TollboothGraphQLOptions } from '../src/graphql/index.js'
import type { DemoContext, DemoUser } from './demo-api.js'

/** The example's GraphQL context, whichever server builds it (HTTP and graphql-ws alike). */
export interface ServerContext extends DemoContext {
  readonly req?: IncomingMessage
}

/** What both GraphQL servers of the example are built from. */
export interface GraphQLSetup {
  readonly schema: GraphQLSchema
  /** tollbooth's options: the same for Yoga (`useTollbooth`) and Apollo Server (`tollboothApolloPlugin`). */
  readonly tollbooth: TollboothGraphQLOptions<ServerContext>
  /** The demo user of an `authorization` value (`Bearer <token>`), if any. */
  userOf(authorization: unknown): DemoUser | undefined
}

/** graphql-ws `useServer` options, as far as the example adds to them. */
export interface GraphqlWsHooks {
  onConnect(ctx: {
    connectionParams?: Readonly<Record<string, unknown>>
    extra: { socket: unknown }
  }): Promise<boolean>
}

/** One GraphQL server of the example, at `path`: HTTP through `handle`, WebSocket through `useServer` options. */
export interface GraphQLEndpoint {
  readonly path: string
  /** What the banner says the endpoint serves. */
  readonly serves: string
  /** What a `curl -G` (a GET) needs besides the query, e.g. the header Apollo's CSRF prevention asks for. */
  readonly curlFlags: string
  handle(req: IncomingMessage, res: ServerResponse): void
  /** The options to pass to graphql-ws' `useServer`. */
  graphqlWsOptions(hooks: GraphqlWsHooks): object
  stop(): Promise<void>
}
