import { describe, expect, it } from 'vitest'
import { CircuitBreaker } from '../../../src/core/circuitBreaker.js'

describe('CircuitBreaker', () => {
  it('opens after the threshold, lets exactly one probe through after the cooldown, and recovers', () => {
    const changes: string[] = []
    const breaker = new CircuitBreaker('test', { failureThreshold: 3, cooldownMs: 100 }, (from, to) =>
      changes.push(`${from}->${to}`),
    )
    breaker.failed(0)
    breaker.failed(0)
    expect(breaker.tryCall(0)).toBe(true)
    breaker.failed(0)
    expect(breaker.state).toBe('open')
    expect(breaker.tryCall(50)).toBe(false)
    expect(breaker.remainingCooldownMs(50)).toBe(50)
    expect(breaker.tryCall(100)).toBe(true)
    expect(breaker.tryCall(100)).toBe(false)
    breaker.failed(100)
    expect(breaker.tryCall(150)).toBe(false)
    expect(breaker.tryCall(200)).toBe(true)
    breaker.succeeded()
    expect(breaker.tryCall(200)).toBe(true)
    expect(changes).toEqual([
      'closed->open',
      'open->half-open',
      'half-open->open',
      'open->half-open',
      'half-open->closed',
    ])
  })

  it('a success resets the count of consecutive failures', () => {
    const breaker = new CircuitBreaker('test', { failureThreshold: 2 }, () => {})
    breaker.failed(0)
    breaker.succeeded()
    breaker.failed(0)
    expect(breaker.state).toBe('closed')
  })
})
