/**
 * tollbooth/apollo — the Apollo Server 5 plugin: the same options and the same admission as `useTollbooth`
 * (tollbooth/graphql), and graphql-ws options for subscriptions served next to Apollo.
 */

export type { CostExtension } from '../engine/operationResults.js'
export type {
  FieldLimitConfig,
  GuardLimits,
  OperationEvent,
  SubscriptionOptions,
  TollboothGraphQLOptions,
} from '../optionTypes.js'
export { type RefusalCode, RefusalCodes } from '../refusal.js'
export type { GraphqlWsServerOptions } from './graphqlWs.js'
export { type TollboothApolloPlugin, tollboothApolloPlugin } from './tollboothApolloPlugin.js'
