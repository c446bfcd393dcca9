export type { QuotaExceededProblem } from './problemJson.js'
export {
  PROBLEM_JSON_CONTENT_TYPE,
  QUOTA_EXCEEDED_TITLE,
  QUOTA_EXCEEDED_TYPE,
  quotaExceededProblem,
} from './problemJson.js'
export type { QuotaRestore, QuotaUnit, RateLimitHeadersOptions, RateLimitPolicy } from './rateLimitHeaders.js'
export { mergeRateLimitHeaders, rateLimitHeaders } from './rateLimitHeaders.js'
