/**
 * tollbooth/graphql — the Yoga/Envelop plugin that prices every operation and charges it to the caller's budget,
 * and its pieces: the cost analyzer, the guard rules, the cost-directive SDL.
 */
import { readFileSync } from 'node:fs'

export type { ComplexityEstimator, ComplexityEstimatorArgs } from './cost/complexityEstimators.js'
export {
  type CostAnalysisOptions,
  CostAnalyzer,
  type OperationInput,
  TooLargeToPriceError,
} from './cost/costAnalyzer.js'
export {
  type CostDirectiveEstimatorOptions,
  costDirectiveEstimator,
} from './cost/costDirectiveEstimator.js'
export type { CostConfig, CostMap, ListSizeConfig } from './cost/costModel.js'
export { withoutHttp } from './engine/operationResults.js'
export type {
  FieldLimitConfig,
  GraphQLContext,
  GuardLimits,
  OperationEvent,
  SubscriptionOptions,
  TollboothGraphQLOptions,
  TollboothPlugin,
} from './optionTypes.js'
export { type LimitExposure, type RefusalCode, RefusalCodes } from './refusal.js'
export { maxAliasesRule } from './rules/maxAliases.js'
export { maxDepthRule } from './rules/maxDepth.js'
export { maxDirectivesRule } from './rules/maxDirectives.js'
export { maxFragmentsPerSelectionRule } from './rules/maxFragmentsPerSelection.js'
export { maxIntrospectionFieldsRule } from './rules/maxIntrospectionFields.js'
export { maxRootFieldsRule } from './rules/maxRootFields.js'
export { type CostExtension, useTollbooth } from './yoga/useTollbooth.js'

/** SDL of `@cost`, `@listSize` and `@rateLimit`, to add to your type definitions (kept in `schema/`). */
export const costDirectivesTypeDefs: string = readFileSync(
  new URL('../../schema/cost-directives.graphql', import.meta.url),
  'utf8',
)
