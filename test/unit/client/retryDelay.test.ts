import { describe, expect, it } from 'vitest'
import { retryDelay } from '../../../src/client/retryDelay.js'

const fixed = (u: number) => () => u

describe('retryDelay: exponential backoff with full jitter', () => {
  it('refuses null options instead of taking the defaults', () => {
    for (const option of ['baseMs', 'maxMs', 'random']) {
      expect(() => retryDelay(0, { baseMs: 100, maxMs: 1000, [option]: null })).toThrow(
        expect.objectContaining({
          code: 'TOLLBOOTH_ERR_INVALID_OPTION',
          message: expect.stringContaining(`"${option}"`),
        }),
      )
    }
  })

  it('draws uniformly in [0, min(maxMs, baseMs × 2^attempt))', () => {
    const base = { baseMs: 100, maxMs: 1_000 }
    // The cap doubles per attempt: 100, 200, 400, 800, then maxMs.
    expect([0, 1, 2, 3, 4, 5].map((n) => retryDelay(n, { ...base, random: fixed(0.5) }))).toEqual([
      50, 100, 200, 400, 500, 500,
    ])
    expect(retryDelay(3, { ...base, random: fixed(0) })).toBe(0)
    expect(retryDelay(3, { ...base, random: fixed(0.999) })).toBe(799)
    expect(retryDelay(60, { ...base, random: fixed(0.25) })).toBe(250) // 2^60 × 100 does not overflow the cap
  })

  it('stays within its range with Math.random', () => {
    for (let i = 0; i < 1_000; i++) {
      const delay = retryDelay(2, { baseMs: 100, maxMs: 1_000 })
      expect(delay).toBeGreaterThanOrEqual(0)
      expect(delay).toBeLessThan(400)
    }
  })

  it('clamps a random source outside [0, 1)', () => {
    expect(retryDelay(0, { baseMs: 100, maxMs: 100, random: fixed(-3) })).toBe(0)
    expect(retryDelay(0, { baseMs: 100, maxMs: 100, random: fixed(7) })).toBe(100)
    expect(retryDelay(0, { baseMs: 100, maxMs: 100, random: fixed(Number.NaN) })).toBe(0)
  })
})

describe("retryDelay: never sooner than the server's wait", () => {
  const options = { baseMs: 100, maxMs: 1_000, random: fixed(0.5) }

  it('waits for Retry-After in seconds, from a Response or its Headers', () => {
    const response = new Response(null, { status: 429, headers: { 'Retry-After': '17' } })
    expect(retryDelay(0, { ...options, retryAfter: response })).toBe(17_000)
    expect(retryDelay(0, { ...options, retryAfter: response.headers })).toBe(17_000)
  })

  it('waits for Retry-After as an HTTP date, measured against `now`', () => {
    const now = Date.UTC(2025, 0, 15, 12, 0, 0)
    const headers = new Headers({ 'Retry-After': 'Wed, 15 Jan 2025 12:00:09 GMT' })
    expect(retryDelay(0, { ...options, retryAfter: headers, now })).toBe(9_000)
  })

  it("waits for the RateLimit field's t= of the policy with r=0", () => {
    const headers = new Headers({ RateLimit: '"name";r=0;t=17' })
    expect(retryDelay(0, { ...options, retryAfter: headers })).toBe(17_000)
  })

  it("waits for a GraphQL RATE_LIMITED error's extensions.retryAfter", () => {
    const result = {
      errors: [{ message: 'Rate limited', extensions: { code: 'RATE_LIMITED', retryAfter: 4 } }],
    }
    expect(retryDelay(0, { ...options, retryAfter: result })).toBe(4_000)
  })

  it('keeps the backoff when it is the longer one', () => {
    const headers = new Headers({ 'Retry-After': '0' })
    expect(retryDelay(4, { ...options, retryAfter: headers })).toBe(500)
    expect(retryDelay(4, { ...options, retryAfter: undefined })).toBe(500)
  })
})

describe('retryDelay: options', () => {
  const code = 'TOLLBOOTH_ERR_INVALID_OPTION'

  it('refuses an unknown option with a did-you-mean', () => {
    expect(() => retryDelay(0, { baseMs: 1, maxMs: 2, retryAftr: 3 } as never)).toThrow(
      expect.objectContaining({ code, message: expect.stringContaining('did you mean "retryAfter"?') }),
    )
  })

  it.each([
    [{ baseMs: 0, maxMs: 10 }, '"baseMs" must be a positive finite number, got 0'],
    [{ baseMs: 10 } as never, '"maxMs" must be a positive finite number, got undefined'],
    [{ baseMs: '5', maxMs: 10 } as never, '"baseMs" must be a positive finite number, got "5"'],
    [{ baseMs: 10, maxMs: 5 }, '"maxMs" must be at least baseMs (10), got 5'],
    [{ baseMs: 10, maxMs: 50, random: 0.5 } as never, '"random" must be a function, got 0.5'],
    [{ baseMs: 10, maxMs: 50, now: Number.NaN }, '"now" must be a finite number, got NaN'],
  ])('refuses %j', (options, message) => {
    expect(() => retryDelay(0, options)).toThrow(
      expect.objectContaining({ code, message: `retryDelay: ${message}` }),
    )
  })

  it('refuses a non-object options', () => {
    expect(() => retryDelay(0, null as never)).toThrow(expect.objectContaining({ code }))
  })

  it.each([[-1], [1.5], [Number.NaN], ['2']])('refuses the attempt %j', (attempt) => {
    expect(() => retryDelay(attempt as number, { baseMs: 1, maxMs: 2 })).toThrow(
      expect.objectContaining({ code: 'TOLLBOOTH_ERR_INVALID_ARGUMENT' }),
    )
  })
})
