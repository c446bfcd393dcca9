/**
 * Every error tollbooth throws carries a stable `code`; match on `.code`, not on `instanceof` (two copies of the
 * package in one tree would break `instanceof`). All codes are listed in docs/core.md.
 */
export const ErrorCodes = {
  /** An option given to a constructor or factory is missing, of the wrong type or out of range. */
  INVALID_OPTION: 'TOLLBOOTH_ERR_INVALID_OPTION',
  /** An argument of a call (key, cost, amount) is invalid. */
  INVALID_ARGUMENT: 'TOLLBOOTH_ERR_INVALID_ARGUMENT',
  /** The store did not answer within its deadline (`timeoutMs`). */
  STORE_TIMEOUT: 'TOLLBOOTH_ERR_STORE_TIMEOUT',
  /** The store's circuit breaker is open: the store is not called until the cooldown ends. */
  STORE_UNAVAILABLE: 'TOLLBOOTH_ERR_STORE_UNAVAILABLE',
  /** The store answered with an error (connection lost, script error, cluster redirection failure, ...). */
  STORE_ERROR: 'TOLLBOOTH_ERR_STORE_ERROR',
  /** tollbooth/graphql: the operation could not be priced within `maxFieldVisits` (fragment explosion). */
  TOO_LARGE_TO_PRICE: 'TOLLBOOTH_ERR_TOO_LARGE_TO_PRICE',
  /** A server library tollbooth plugs into is older than the version it needs (thrown as the server starts). */
  UNSUPPORTED_PEER: 'TOLLBOOTH_ERR_UNSUPPORTED_PEER',
} as const

export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes]

export class TollboothError extends Error {
  readonly code: ErrorCode

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'TollboothError'
    this.code = code
  }
}

export function invalidOption(owner: string, option: string, expected: string, got: unknown): TollboothError {
  return new TollboothError(
    ErrorCodes.INVALID_OPTION,
    `${owner}: "${option}" must be ${expected}, got ${describe(got)}`,
  )
}

export function invalidArgument(
  owner: string,
  argument: string,
  expected: string,
  got: unknown,
): TollboothError {
  return new TollboothError(
    ErrorCodes.INVALID_ARGUMENT,
    `${owner}: "${argument}" must be ${expected}, got ${describe(got)}`,
  )
}

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)
  if (typeof value === 'number' || typeof value === 'boolean' || value == null) return String(value)
  if (Array.isArray(value)) return 'an array'
  if (typeof value === 'object') {
    try {
      // A limiter of the wrong kind (a leakyBucket where a tokenBucket goes) is told by its algorithm and name.
      const { algorithm, name } = value as { algorithm?: unknown; name?: unknown }
      if (typeof algorithm === 'string' && typeof name === 'string')
        return `a ${algorithm} limiter ("${name}")`
      const kind = (value as object).constructor?.name
      return typeof kind === 'string' && kind !== 'Object' ? `a ${kind}` : 'an object'
    } catch {
      // A getter that throws (a Proxy): the error about the option must still be made.
      return 'an object'
    }
  }
  return typeof value
}
