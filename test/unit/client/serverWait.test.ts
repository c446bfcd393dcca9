import { describe, expect, it } from 'vitest'
import { rateLimitWaitMs, retryAfterMs, serverWaitMs } from '../../../src/client/serverWait.js'

const NOW = Date.UTC(2025, 0, 15, 12, 0, 0) // Wed, 15 Jan 2025 12:00:00 GMT

describe('retryAfterMs', () => {
  it.each([
    ['0', 0],
    ['17', 17_000],
    [' 5 ', 5_000],
    ['Wed, 15 Jan 2025 12:00:30 GMT', 30_000],
    ['Wed, 15 Jan 2025 11:59:00 GMT', 0], // a date already past: no wait
    ['Wednesday, 15-Jan-25 12:01:00 GMT', 60_000], // the obsolete RFC 850 form
  ])('reads %j as %d ms', (value, expected) => {
    expect(retryAfterMs(value, NOW)).toBe(expected)
  })

  it.each([['-1'], ['1.5'], ['+3'], [''], ['soon'], ['2025-01-15']])('ignores the malformed %j', (value) => {
    expect(retryAfterMs(value, NOW)).toBeUndefined()
  })

  it('holds a wait longer than a timer can hold at the longest one (it would fire at once)', () => {
    expect(serverWaitMs(new Headers({ 'retry-after': '3000000' }))).toBe(2 ** 31 - 1)
    expect(serverWaitMs({ errors: [{ message: 'x', extensions: { retryAfter: 1e300 } }] })).toBe(2 ** 31 - 1)
    expect(serverWaitMs(new Headers({ 'retry-after': '2' }))).toBe(2000)
  })

  it('says nothing for a missing header', () => {
    expect(retryAfterMs(null)).toBeUndefined()
    expect(retryAfterMs(undefined)).toBeUndefined()
  })
})

describe('rateLimitWaitMs', () => {
  it.each([
    ['"api";r=0;t=17', 17_000],
    ['"api";r=5;t=17', undefined], // quota left: nothing to wait for
    ['"burst";r=3;t=1, "day";r=0;t=3600', 3_600_000],
    ['"a";r=0;t=4, "b";r=0;t=9', 9_000],
    ['"a,b;t=99";r=0;t=2', 2_000], // a quoted name may hold the delimiters
    ['"api";r=0;t=17;pk=:dXNlcg==:', 17_000],
    ['api;r=0;t=8', 8_000], // a token name
    ['"api";r=0', undefined],
    ['"api";r=0;t=-3', undefined],
    ['"api";r=0;t=1.5', undefined],
    ['"api";r=x;t=3', undefined],
    ['', undefined],
  ])('reads %j as %s ms', (value, expected) => {
    expect(rateLimitWaitMs(value)).toBe(expected)
  })
})

describe('serverWaitMs', () => {
  it('reads a fetch Response and a Headers, names in any case', () => {
    const response = new Response(null, { status: 429, headers: { 'Retry-After': '3' } })
    expect(serverWaitMs(response, NOW)).toBe(3_000)
    expect(serverWaitMs(new Headers({ ratelimit: '"api";r=0;t=6' }), NOW)).toBe(6_000)
  })

  it('takes the longest of Retry-After and the RateLimit items with r=0', () => {
    const headers = new Headers({ 'Retry-After': '4', RateLimit: '"a";r=0;t=2, "b";r=0;t=11, "c";r=9;t=50' })
    expect(serverWaitMs(headers, NOW)).toBe(11_000)
    expect(serverWaitMs(new Headers({ 'Retry-After': '12', RateLimit: '"a";r=0;t=2' }), NOW)).toBe(12_000)
  })

  it("reads a Node header record (lowercase names; a repeated field's values joined)", () => {
    expect(serverWaitMs({ 'retry-after': '7', 'content-type': 'text/plain' }, NOW)).toBe(7_000)
    expect(serverWaitMs({ ratelimit: ['"a";r=0;t=3', '"b";r=0;t=5'] }, NOW)).toBe(5_000)
  })

  it("reads tollbooth/graphql's extensions.retryAfter (seconds) from a result or an error list", () => {
    const result = {
      data: null,
      errors: [
        { message: 'other', extensions: { code: 'MAX_DEPTH_EXCEEDED' } },
        { message: 'Rate limited', extensions: { code: 'RATE_LIMITED', retryAfter: 3 } },
        { message: 'Too many', extensions: { code: 'SUBSCRIPTION_LIMIT_EXCEEDED', retryAfter: 8 } },
      ],
    }
    expect(serverWaitMs(result, NOW)).toBe(8_000)
    expect(serverWaitMs(result.errors.slice(0, 2), NOW)).toBe(3_000)
    expect(serverWaitMs({ errors: [{ message: 'x', extensions: { retryAfter: '3' } }] }, NOW)).toBeUndefined()
  })

  it('says nothing when the source carries no wait', () => {
    expect(serverWaitMs(new Response(null, { status: 503 }), NOW)).toBeUndefined()
    expect(serverWaitMs({ data: { hello: 'world' } }, NOW)).toBeUndefined()
    expect(serverWaitMs(undefined, NOW)).toBeUndefined()
    expect(serverWaitMs({ headers: 'not headers' }, NOW)).toBeUndefined()
  })
})
