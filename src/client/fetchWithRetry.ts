import { invalidOption } from '../core/errors.js'
import { checkOptionKeys, optionNames } from '../core/knownOptions.js'
import { orDefault, positiveInteger, positiveNumber } from '../core/validate.js'
import { type BackoffOptions, checkOptionsObject, jitteredBackoffMs, resolveBackoff } from './backoff.js'
import { serverWaitMs } from './serverWait.js'
import { sleep as defaultSleep, type Sleep } from './sleep.js'

const OWNER = 'fetchWithRetry'

/** A `fetch`: the global one, undici's, or any with its signature. */
export type FetchLike = (input: string | URL | Request, init?: RequestInit) => Promise<Response>

export interface FetchWithRetryOptions extends BackoffOptions {
  /** Cap of the first retry's delay, in ms; each retry doubles it. @default 500 */
  baseMs?: number
  /** Largest cap of the backoff, in ms (a server's longer `Retry-After` is still honoured). @default 30000 */
  maxMs?: number
  /** Attempts in all, the first one included: the response of the last one is returned whatever it is. @default 3 */
  maxAttempts?: number
  /**
   * Time from the first attempt after which no retry starts, in ms: a retry whose wait would end later is not
   * made, and the refused response is returned at once (a `Retry-After: 3600` is not slept on). @default 60000
   */
  maxElapsedMs?: number
  /** How to wait between attempts; give one that records the delays in tests. @default a timer, abortable */
  sleep?: Sleep
  /** The current time, in ms since the epoch (elapsed time, and an HTTP-date `Retry-After`). @default Date.now */
  now?: () => number
}

const OPTIONS = optionNames<FetchWithRetryOptions>({
  baseMs: true,
  maxMs: true,
  random: true,
  maxAttempts: true,
  maxElapsedMs: true,
  sleep: true,
  now: true,
})

/** Answers worth retrying later: the server asked the client to slow down, or is briefly unable to serve. */
const RETRY_STATUSES: ReadonlySet<number> = new Set([429, 503])

/**
 * Methods whose repetition has the effect of one request (RFC 9110 §9.2.2), and so may be sent again after a 429 or
 * 503 that the server may or may not have acted upon.
 */
const IDEMPOTENT_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE'])

/**
 * Wraps `fetch` in one that retries answers 429 and 503 after `retryDelay`'s wait (exponential backoff with full
 * jitter, never sooner than the server's `Retry-After` or RateLimit `t`). Only requests that are safe to repeat are
 * retried: idempotent methods, and any request carrying an `Idempotency-Key` header. It gives up after
 * `maxAttempts` attempts or once `maxElapsedMs` would be passed, and returns the last response; network errors are
 * not retried (they are thrown as `fetch` throws them). The request's AbortSignal also stops a wait between attempts.
 *
 * ```ts
 * const fetchRetrying = fetchWithRetry(fetch, { maxAttempts: 4 })
 * const response = await fetchRetrying('https://api.example.com/items')
 * ```
 */
export function fetchWithRetry(fetch: FetchLike, options: FetchWithRetryOptions = {}): FetchLike {
  if (typeof fetch !== 'function') throw invalidOption(OWNER, 'fetch', 'a function', fetch)
  checkOptionsObject(OWNER, options)
  checkOptionKeys(OWNER, options, OPTIONS)
  const backoff = resolveBackoff(OWNER, options, { baseMs: 500, maxMs: 30_000 })
  const maxAttempts = positiveInteger(OWNER, 'maxAttempts', orDefault(options.maxAttempts, 3))
  const maxElapsedMs = positiveNumber(OWNER, 'maxElapsedMs', orDefault(options.maxElapsedMs, 60_000))
  const sleep = orDefault(options.sleep, defaultSleep)
  if (typeof sleep !== 'function') throw invalidOption(OWNER, 'sleep', 'a function', sleep)
  const now = orDefault(options.now, Date.now)
  if (typeof now !== 'function') throw invalidOption(OWNER, 'now', 'a function', now)

  return async (input, init) => {
    const request = isRequest(input) ? input : undefined
    const retryable = mayRepeat(request, init)
    const signal = init?.signal ?? request?.signal ?? undefined
    const started = now()
    for (let attempt = 1; ; attempt++) {
      // A Request's body can be read once: each attempt sends a copy, and the original stays whole for the next.
      const response = await fetch(request !== undefined && retryable ? request.clone() : input, init)
      if (!retryable || !RETRY_STATUSES.has(response.status) || attempt >= maxAttempts) return response
      const at = now()
      const jittered = jitteredBackoffMs(attempt - 1, backoff)
      const delay = Math.max(jittered, serverWaitMs(response, at) ?? 0)
      if (at - started + delay > maxElapsedMs) return response
      // An unread body holds its connection until it is collected: give it back now.
      response.body?.cancel().catch(() => {})
      await sleep(delay, signal ?? undefined)
    }
  }
}

function isRequest(input: unknown): input is Request {
  return (
    typeof input === 'object' &&
    input !== null &&
    typeof (input as Request).clone === 'function' &&
    typeof (input as Request).method === 'string'
  )
}

/** Whether the request may be sent again: an idempotent method or an `Idempotency-Key`, and a body that can be. */
function mayRepeat(request: Request | undefined, init: RequestInit | undefined): boolean {
  // Only a body that can be sent again as it was is repeatable; a stream, an async iterable or anything else is read
  // by the first attempt (a retry would send it empty).
  if (!repeatableBody(init?.body)) return false
  const method = (init?.method ?? request?.method ?? 'GET').toUpperCase()
  if (IDEMPOTENT_METHODS.has(method)) return true
  // As fetch does, headers given in `init` replace the Request's own.
  const headers = new Headers(init?.headers ?? request?.headers)
  return headers.has('idempotency-key')
}

/** Bodies fetch can send twice: none, text, bytes, a Blob, form data or URL parameters. */
function repeatableBody(body: unknown): boolean {
  if (body === undefined || body === null || typeof body === 'string') return true
  if (ArrayBuffer.isView(body) || body instanceof ArrayBuffer) return true
  if (typeof Blob !== 'undefined' && body instanceof Blob) return true
  if (typeof FormData !== 'undefined' && body instanceof FormData) return true
  return typeof URLSearchParams !== 'undefined' && body instanceof URLSearchParams
}
