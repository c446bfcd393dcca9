import { describe, expect, it, vi } from 'vitest'
import { sleep } from '../../../src/core/sleep.js'

describe('sleep', () => {
  it('waits delays beyond the 24.8-day timer limit instead of firing at once', async () => {
    vi.useFakeTimers()
    try {
      let done = false
      const thirtyDays = 30 * 24 * 3600 * 1000
      void sleep(thirtyDays).then(() => {
        done = true
      })
      await vi.advanceTimersByTimeAsync(2 ** 31)
      expect(done).toBe(false)
      await vi.advanceTimersByTimeAsync(thirtyDays - 2 ** 31)
      expect(done).toBe(true)
    } finally {
      vi.useRealTimers()
    }
  })

  it('rejects with the abort reason', async () => {
    const controller = new AbortController()
    const waiting = sleep(10_000, controller.signal)
    controller.abort(new Error('stop'))
    await expect(waiting).rejects.toThrow('stop')
  })
})
