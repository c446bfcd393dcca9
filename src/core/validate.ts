import { invalidArgument, invalidOption } from './errors.js'

/** An options object: not null, and not an array (an array of options is a mistake, not an object of them). */
export function isOptionsObject<T>(value: T): value is T & object {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** Checks used by every factory; each throws a `TOLLBOOTH_ERR_INVALID_OPTION` naming the owner and the option. */
export function positiveNumber(owner: string, option: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw invalidOption(owner, option, 'a positive finite number', value)
  }
  return value
}

export function positiveInteger(owner: string, option: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
    throw invalidOption(owner, option, 'a positive integer', value)
  }
  return value
}

export function nonNegativeInteger(owner: string, option: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw invalidOption(owner, option, 'a non-negative integer', value)
  }
  return value
}

/**
 * Longest delay a timer honours in Node and browsers (2^31 − 1 ms, about 24.8 days): beyond it Node warns and fires
 * the timer after 1 ms, so an interval meant to be rare runs a thousand times a second (rate-limiter-flexible #71).
 */
export const MAX_TIMER_MS = 2 ** 31 - 1

/** An option that becomes a timer's delay: a positive integer no longer than a timer honours. */
export function timerMs(owner: string, option: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value <= 0 || value > MAX_TIMER_MS) {
    throw invalidOption(
      owner,
      option,
      `a positive integer of at most ${MAX_TIMER_MS} (2^31 - 1, the longest timer)`,
      value,
    )
  }
  return value
}

/** A delay for a timer computed at run time: whole, at least 1 ms, and never past what a timer honours. */
export function timerDelay(ms: number): number {
  return Math.min(MAX_TIMER_MS, Math.max(1, Math.floor(ms)))
}

export function nonEmptyString(owner: string, option: string, value: unknown): string {
  if (typeof value !== 'string' || value.length === 0) {
    throw invalidOption(owner, option, 'a non-empty string', value)
  }
  return value
}

export function oneOf<T extends string>(
  owner: string,
  option: string,
  value: unknown,
  allowed: readonly T[],
): T {
  if (typeof value !== 'string' || !(allowed as readonly string[]).includes(value)) {
    throw invalidOption(owner, option, `one of ${allowed.map((a) => `'${a}'`).join(', ')}`, value)
  }
  return value as T
}

/** Longest identity accepted as a key: longer strings are almost certainly a bug or an attack. */
export const MAX_KEY_LENGTH = 1024

/** Call-time check of a key (an identity). */
export function validKey(owner: string, key: unknown): string {
  if (typeof key !== 'string' || key.length === 0 || key.length > MAX_KEY_LENGTH) {
    throw invalidArgument(owner, 'key', `a non-empty string of at most ${MAX_KEY_LENGTH} characters`, key)
  }
  return key
}

/** Call-time check of a cost or refund amount. */
export function validAmount(owner: string, argument: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw invalidArgument(owner, argument, 'a positive finite number', value)
  }
  return value
}

/** An option's value, or `fallback` when it is not given: `null` is a value (and refused by the checks that follow). */
export function orDefault<T, F>(value: T | undefined, fallback: F): T | F {
  return value === undefined ? fallback : value
}
