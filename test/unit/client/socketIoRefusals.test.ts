import { describe, expect, it } from 'vitest'
import { socketIoRefusalOf } from '../../../src/client/index.js'

describe('socketIoRefusalOf', () => {
  it('reads an acknowledgement, a connect_error and a disconnect notice', () => {
    expect(
      socketIoRefusalOf({ error: { code: 'RATE_LIMITED', message: 'Too many events', retryAfter: 3 } }),
    ).toEqual({
      code: 'RATE_LIMITED',
      message: 'Too many events',
      retryAfterMs: 3000,
    })
    const connectError = Object.assign(new Error('Too many connections'), {
      data: { code: 'TOO_MANY_CONNECTIONS', message: 'Too many connections', retryAfter: 30 },
    })
    expect(socketIoRefusalOf(connectError)?.retryAfterMs).toBe(30_000)
    expect(socketIoRefusalOf({ code: 'ABUSE', message: 'Event rate abuse' })).toEqual({
      code: 'ABUSE',
      message: 'Event rate abuse',
      retryAfterMs: undefined,
    })
  })

  it('says not to retry what cannot change, even with a retryAfter', () => {
    expect(
      socketIoRefusalOf({ error: { code: 'EVENT_TOO_COSTLY', retryAfter: 5 } })?.retryAfterMs,
    ).toBeUndefined()
    expect(socketIoRefusalOf({ error: { code: 'UNAUTHORIZED' } })?.retryAfterMs).toBeUndefined()
  })

  it('waits 1 s for a retryable refusal with no valid retryAfter', () => {
    expect(socketIoRefusalOf({ error: { code: 'RATE_LIMITED', retryAfter: -4 } })?.retryAfterMs).toBe(1000)
    expect(socketIoRefusalOf({ error: { code: 'UNAVAILABLE', retryAfter: 'soon' } })?.retryAfterMs).toBe(1000)
  })

  it('finds nothing in what is not a tollbooth refusal', () => {
    for (const value of [
      undefined,
      null,
      'RATE_LIMITED',
      { ok: true },
      { error: 'nope' },
      { error: { code: 'E_APP' } },
      new Error('x'),
    ]) {
      expect(socketIoRefusalOf(value)).toBeUndefined()
    }
  })
})
