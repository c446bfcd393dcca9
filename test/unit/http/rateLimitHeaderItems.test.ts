import { IncomingMessage, ServerResponse } from 'node:http'
import { Socket } from 'node:net'
import { describe, expect, it } from 'vitest'
import type { Decision } from '../../../src/core/decision.js'
import { addRateLimitHeaders, setRateLimitHeaders } from '../../../src/http/refusal.js'

function response(): ServerResponse {
  return new ServerResponse(new IncomingMessage(new Socket()))
}

function decision(remaining: number, allowed = true): Decision {
  return {
    allowed,
    limit: 5,
    remaining,
    resetMs: 4000,
    retryAfterMs: allowed ? 0 : 3000,
    delayMs: 0,
    neverAllowed: false,
    source: 'store',
  }
}

const api = { name: 'api', quota: 5, windowSeconds: 10 }
const uploads = { name: 'uploads, bytes', quota: 5, windowSeconds: 10 }

describe('RateLimit fields set by several guards on one response', () => {
  it('the same policy set twice keeps one item, the later', () => {
    const res = response()
    setRateLimitHeaders(res, decision(4), api)
    setRateLimitHeaders(res, decision(3), api)
    expect(res.getHeader('ratelimit')).toBe('"api";r=3;t=4')
    expect(res.getHeader('ratelimit-policy')).toBe('"api";q=5;w=10')
  })

  it("another policy's item joins the list, and replacing the first keeps its place", () => {
    const res = response()
    setRateLimitHeaders(res, decision(4), api)
    setRateLimitHeaders(res, decision(2), uploads)
    // Denied: its `t` is the Retry-After, 3 s.
    setRateLimitHeaders(res, decision(1, false), api)
    expect(res.getHeader('ratelimit')).toBe('"api";r=1;t=3, "uploads, bytes";r=2;t=4')
    expect(res.getHeader('ratelimit-policy')).toBe('"api";q=5;w=10, "uploads, bytes";q=5;w=10')
    expect(res.getHeader('retry-after')).toBe('3')
  })

  it('names holding ";" or an escaped quote are told apart by the whole quoted name', () => {
    const res = response()
    setRateLimitHeaders(res, decision(4), { name: 'api;read', quota: 5, windowSeconds: 10 })
    setRateLimitHeaders(res, decision(3), { name: 'api;write', quota: 5, windowSeconds: 10 })
    setRateLimitHeaders(res, decision(2), { name: 'say "hi"', quota: 5, windowSeconds: 10 })
    setRateLimitHeaders(res, decision(1), { name: 'api;read', quota: 5, windowSeconds: 10 })
    expect(res.getHeader('ratelimit')).toBe('"api;read";r=1;t=4, "api;write";r=3;t=4, "say \\"hi\\"";r=2;t=4')
  })

  it("a Retry-After the app set as an HTTP-date gives way to the refusal's seconds", () => {
    const res = response()
    res.setHeader('Retry-After', 'Wed, 21 Oct 2026 07:28:00 GMT')
    addRateLimitHeaders(res, { 'Retry-After': '7' })
    expect(res.getHeader('retry-after')).toBe('7')
  })

  it('Retry-After keeps the longer wait; other headers are set', () => {
    const res = response()
    addRateLimitHeaders(res, { 'Retry-After': '30', 'X-Other': 'a' })
    addRateLimitHeaders(res, { 'Retry-After': '7', 'X-Other': 'b' })
    expect([res.getHeader('retry-after'), res.getHeader('x-other')]).toEqual(['30', 'b'])
  })
})
