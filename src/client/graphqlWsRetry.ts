import { invalidOption } from '../core/errors.js'
import { checkOptionKeys, optionNames } from '../core/knownOptions.js'
import { nonNegativeInteger, orDefault } from '../core/validate.js'
import { type BackoffOptions, checkOptionsObject, jitteredBackoffMs, resolveBackoff } from './backoff.js'
import { serverWaitMs } from './serverWait.js'
import { sleep as defaultSleep, type Sleep } from './sleep.js'
import { refusedUpgradeOf } from './upgradeRefusals.js'

const OWNER = 'graphqlWsRetry'

export interface GraphqlWsRetryOptions extends BackoffOptions {
  /** Cap of the first reconnection's delay, in ms; each one in a row doubles it. @default 1000 */
  baseMs?: number
  /** Largest cap of the backoff, in ms (a refused upgrade's longer `Retry-After` is still honoured). @default 30000 */
  maxMs?: number
  /**
   * Reconnections in a row before giving up (graphql-ws `retryAttempts`; its count starts again at each successful
   * connection). 0: never reconnect. @default 5
   */
  maxAttempts?: number
  /** How to wait before a reconnection; give one that records the delays in tests. @default a timer */
  sleep?: Sleep
  /** The current time, in ms since the epoch, for an HTTP-date `Retry-After`. @default Date.now */
  now?: () => number
}

const OPTIONS = optionNames<GraphqlWsRetryOptions>({
  baseMs: true,
  maxMs: true,
  random: true,
  maxAttempts: true,
  sleep: true,
  now: true,
})

/** The graphql-ws `createClient` options `graphqlWsRetry` returns: spread them into the client's options. */
export interface GraphqlWsRetry {
  readonly retryAttempts: number
  readonly retryWait: (retries: number) => Promise<void>
  readonly shouldRetry: (errOrCloseEvent: unknown) => boolean
}

/**
 * Close codes after which reconnecting cannot help: 1008 (tollbooth/ws: message rate abuse) and 1009 (message too
 * big) would be earned again, and graphql-ws' own 4400 (bad request), 4401 (unauthorized), 4403 (forbidden: the
 * server refused the identity), 4406 (subprotocol), 4409 (subscriber exists), 4429 (too many inits) and 4500
 * (server error) are answers to what the client sends.
 */
const FINAL_CLOSE_CODES: ReadonlySet<number> = new Set([1008, 1009, 4400, 4401, 4403, 4406, 4409, 4429, 4500])

/**
 * 1xxx codes worth reconnecting after: going away (1001, a server shutting down), no status and abnormal closure
 * (1005, 1006: the network), service restart (1012), try again later (1013: tollbooth/ws over quota) and bad
 * gateway (1014). Any other 1xxx is a protocol error the next connection would repeat.
 */
const TRANSIENT_1XXX: ReadonlySet<number> = new Set([1001, 1005, 1006, 1012, 1013, 1014])

/** Refused upgrades a later one may pass: a limit (tollbooth/ws 429) or a full server (503). */
const RETRY_STATUSES: ReadonlySet<number> = new Set([429, 503])

/**
 * `retryAttempts`, `retryWait` and `shouldRetry` for graphql-ws `createClient`, matched to what tollbooth/ws sends:
 * a connection closed with 1013 (over quota) reconnects after an exponential backoff with full jitter; 1008, 1009
 * and graphql-ws' 4400, 4403, 4406 end it. A refused upgrade (HTTP 429 or 503 before the 101) reconnects no sooner
 * than its `Retry-After` when the client can read it — in Node, with `webSocketImpl: withUpgradeRefusals(WebSocket)`
 * — and any other refused status (401, 403) ends it. In browsers a refused upgrade is only an `error` event: it is
 * retried with the backoff alone, as a network error is.
 *
 * One pair per client: `shouldRetry` keeps the server's wait for the `retryWait` that follows it.
 *
 * ```ts
 * const client = createClient({ url, ...graphqlWsRetry({ baseMs: 500, maxMs: 30_000, maxAttempts: 8 }) })
 * ```
 */
export function graphqlWsRetry(options: GraphqlWsRetryOptions = {}): GraphqlWsRetry {
  checkOptionsObject(OWNER, options)
  checkOptionKeys(OWNER, options, OPTIONS)
  const backoff = resolveBackoff(OWNER, options, { baseMs: 1000, maxMs: 30_000 })
  const retryAttempts = nonNegativeInteger(OWNER, 'maxAttempts', orDefault(options.maxAttempts, 5))
  const sleep = orDefault(options.sleep, defaultSleep)
  if (typeof sleep !== 'function') throw invalidOption(OWNER, 'sleep', 'a function', sleep)
  const now = orDefault(options.now, Date.now)
  if (typeof now !== 'function') throw invalidOption(OWNER, 'now', 'a function', now)

  /** The wait the last refused upgrade asked for, until the reconnection it delays. */
  let serverWait: number | undefined

  return Object.freeze({
    retryAttempts,
    retryWait: (retries: number) => {
      const retry = Number.isSafeInteger(retries) && retries >= 0 ? retries : 0
      const delay = Math.max(jitteredBackoffMs(retry, backoff), serverWait ?? 0)
      serverWait = undefined
      return sleep(delay)
    },
    shouldRetry: (errOrCloseEvent: unknown) => {
      serverWait = undefined
      const refused = refusedUpgradeOf(errOrCloseEvent)
      if (refused !== undefined) {
        if (!RETRY_STATUSES.has(refused.status)) return false
        if (refused.headers !== undefined) serverWait = serverWaitMs(refused.headers, now())
        return true
      }
      const code = closeCode(errOrCloseEvent)
      if (code === undefined) return true // a network error, or a browser's refused upgrade: back off and retry
      if (FINAL_CLOSE_CODES.has(code)) return false
      if (code >= 1000 && code <= 1999) return TRANSIENT_1XXX.has(code)
      return true
    },
  })
}

function closeCode(event: unknown): number | undefined {
  if (typeof event !== 'object' || event === null) return undefined
  const { code, reason } = event as { code?: unknown; reason?: unknown }
  // A CloseEvent has both; an Error with a string `code` (ECONNREFUSED) is not one.
  return typeof code === 'number' && typeof reason === 'string' ? code : undefined
}
