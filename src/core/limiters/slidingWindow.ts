import type { RateLimiter } from '../rateLimiter.js'
import { type WindowOptions, windowLimiter } from './fixedWindow.js'

/**
 * Sliding window counter: the current window's count plus the previous one's, weighted by its overlap. Smooth at
 * window boundaries, two numbers per key. Rejects before incrementing, so a denial spends nothing.
 */
export function slidingWindow(options: WindowOptions): RateLimiter {
  return windowLimiter('slidingWindow', options)
}
