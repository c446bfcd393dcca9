import { describe, expect, it } from 'vitest'
import type { Decision } from '../../../src/core/decision.js'
import { PROBLEM_JSON_CONTENT_TYPE, quotaExceededProblem } from '../../../src/core/problemJson.js'

function denied(retryAfterMs: number): Decision {
  return {
    allowed: false,
    limit: 10,
    remaining: 0,
    resetMs: retryAfterMs,
    retryAfterMs,
    delayMs: 0,
    neverAllowed: false,
    source: 'store',
  }
}

describe('quotaExceededProblem', () => {
  it('builds the quota-exceeded problem of the ratelimit-headers draft', () => {
    expect(quotaExceededProblem(denied(2500), 'burst')).toEqual({
      type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
      title: 'Request cannot be satisfied as assigned quota has been exceeded',
      status: 429,
      'violated-policies': ['burst'],
      retryAfter: 3,
    })
  })

  it.each([
    [0, 1],
    [1, 1],
    [1000, 1],
    [1001, 2],
  ])('rounds retryAfter of %i ms to %i s', (ms, seconds) => {
    expect(quotaExceededProblem(denied(ms), 'p').retryAfter).toBe(seconds)
  })

  it('lists several violated policies', () => {
    expect(quotaExceededProblem(denied(1000), ['daily', 'bandwidth'])['violated-policies']).toEqual([
      'daily',
      'bandwidth',
    ])
  })

  it('serializes to JSON with the problem media type', () => {
    expect(PROBLEM_JSON_CONTENT_TYPE).toBe('application/problem+json')
    expect(JSON.parse(JSON.stringify(quotaExceededProblem(denied(1000), 'p')))).toEqual({
      type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
      title: 'Request cannot be satisfied as assigned quota has been exceeded',
      status: 429,
      'violated-policies': ['p'],
      retryAfter: 1,
    })
  })

  it('refuses an empty policy name', () => {
    let code: unknown
    try {
      quotaExceededProblem(denied(1000), '')
    } catch (error) {
      code = (error as { code?: unknown }).code
    }
    expect(code).toBe('TOLLBOOTH_ERR_INVALID_OPTION')
    expect(() => quotaExceededProblem(denied(1000), [])).toThrow('"policyName"')
  })
})
