import type { Decision } from './decision.js'
import { invalidOption } from './errors.js'

const OWNER = 'quotaExceededProblem'

/** Media type of an RFC 9457 problem document. */
export const PROBLEM_JSON_CONTENT_TYPE = 'application/problem+json'

/** Problem type defined by draft-ietf-httpapi-ratelimit-headers §5.1. */
export const QUOTA_EXCEEDED_TYPE = 'https://iana.org/assignments/http-problem-types#quota-exceeded'
export const QUOTA_EXCEEDED_TITLE = 'Request cannot be satisfied as assigned quota has been exceeded'

/** An RFC 9457 problem details object for a 429 answer. */
export interface QuotaExceededProblem {
  type: typeof QUOTA_EXCEEDED_TYPE
  title: typeof QUOTA_EXCEEDED_TITLE
  status: 429
  /** Names of the policies whose quota was exceeded (extension member defined by the draft). */
  'violated-policies': string[]
  /** Whole seconds until the request may be retried (same value as the `Retry-After` header); at least 1. */
  retryAfter: number
}

/**
 * The body of a 429 response (serve it with `Content-Type: application/problem+json`).
 * `retryAfter` is `decision.retryAfterMs` in seconds, rounded up, at least 1 — the value `rateLimitHeaders` puts
 * in `Retry-After`. `policyName` may be one name or several (when more than one policy denied the request).
 * Throws `TOLLBOOTH_ERR_INVALID_OPTION` when a policy name is not a non-empty string.
 */
export function quotaExceededProblem(
  decision: Decision,
  policyName: string | readonly string[],
): QuotaExceededProblem {
  const names =
    typeof policyName === 'string' ? [policyName] : Array.isArray(policyName) ? [...policyName] : null
  if (names === null || names.length === 0) {
    throw invalidOption(OWNER, 'policyName', 'a policy name or a non-empty list of them', policyName)
  }
  for (const name of names) {
    if (typeof name !== 'string' || name.length === 0) {
      throw invalidOption(OWNER, 'policyName', 'a non-empty string', name)
    }
  }
  const seconds = Math.ceil(decision.retryAfterMs / 1000)
  return {
    type: QUOTA_EXCEEDED_TYPE,
    title: QUOTA_EXCEEDED_TITLE,
    status: 429,
    'violated-policies': names,
    retryAfter: Number.isNaN(seconds) || seconds < 1 ? 1 : Math.min(seconds, 999_999_999_999_999),
  }
}
