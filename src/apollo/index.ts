/**
 * tollbooth/apollo — the Apollo Server 5 plugin: the same options and the same admission as `useTollbooth`
 * (tollbooth/graphql), and graphql-ws options for subscriptions served next to Apollo.
 */
export type { GraphqlWsServerOptions } from '../graphql/apollo/graphqlWs.js'
export { type TollboothApolloPlugin, tollboothApolloPlugin } from '../graphql/apollo/tollboothApolloPlugin.js'
export type { CostExtension } from '../graphql/engine/operationResults.js'
export type {
  FieldLimitConfig,
  GuardLimits,
  OperationEvent,
  SubscriptionOptions,
  TollboothGraphQLOptions,
} from '../graphql/options.js'
export { type RefusalCode, RefusalCodes } from '../graphql/refusal.js'
