import { splitOutsideQuotes } from '../core/structuredFields.js'
/**
 * What a refused answer carries about when to come back, in any of the shapes a client holds it: a fetch `Response`
 * (or anything with a `headers.get`), a `Headers`, a plain header record (Node's `res.headers`, lowercase names), a
 * GraphQL result (`{ errors }`) or the list of GraphQL errors a graphql-ws sink's `error` receives.
 */
export type RetryAfterSource =
  | { readonly headers: HeaderReader }
  | HeaderReader
  | Readonly<Record<string, unknown>>
  | GraphQLResultLike
  | readonly GraphQLErrorLike[]

/** The part of `Headers` read here. */
export interface HeaderReader {
  get(name: string): string | null
}

/** A GraphQL error as a client receives it: tollbooth/graphql puts `retryAfter` (whole seconds) in its extensions. */
export interface GraphQLErrorLike {
  readonly extensions?: { readonly retryAfter?: unknown } | null | undefined
}

export interface GraphQLResultLike {
  readonly errors?: readonly GraphQLErrorLike[] | null | undefined
}

/** Largest Structured Field Integer (RFC 9651 §3.3.1): a larger `t` is not a valid field. */
const SF_INTEGER_MAX = 999_999_999_999_999

/**
 * The wait the server asked for, in ms, or `undefined` when the source says nothing: the longest of `Retry-After`
 * (delay-seconds, or an HTTP date measured against `now`), the `t` of every RateLimit item whose `r` is 0
 * (draft-ietf-httpapi-ratelimit-headers: `RateLimit: "name";r=0;t=17`) and every GraphQL error's
 * `extensions.retryAfter`. A policy with quota left (`r` > 0) is not what the client waits for. Malformed values
 * are ignored rather than guessed at.
 */
export function serverWaitMs(
  source: RetryAfterSource | undefined,
  now: number = Date.now(),
): number | undefined {
  const wait = anyServerWaitMs(source, now)
  // A wait longer than a timer can hold would fire at once (and a client would hammer the server): it is held at
  // the longest one, about 24.8 days; a caller that will not wait that long gives up on its own bound.
  return wait === undefined ? undefined : Math.min(wait, MAX_WAIT_MS)
}

/** The longest wait `setTimeout` honours (2^31 − 1 ms). */
export const MAX_WAIT_MS = 2 ** 31 - 1

function anyServerWaitMs(source: RetryAfterSource | undefined, now: number): number | undefined {
  if (source === undefined || source === null || typeof source !== 'object') return undefined
  if (Array.isArray(source)) return graphqlWaitMs(source)
  if ('errors' in source && Array.isArray(source.errors)) return graphqlWaitMs(source.errors)
  const headers = headerReader(source)
  if (headers === undefined) return undefined
  return longest(retryAfterMs(headers.get('retry-after'), now), rateLimitWaitMs(headers.get('ratelimit')))
}

/** A `Retry-After` value in ms: delay-seconds (RFC 9110 §10.2.3) or an HTTP date, a past date being 0. */
export function retryAfterMs(value: string | null | undefined, now: number = Date.now()): number | undefined {
  if (value == null) return undefined
  const text = value.trim()
  if (/^\d+$/.test(text)) return Number(text) * 1000
  // An HTTP date always names its weekday and month in letters; a bare number with a sign or a fraction is
  // neither form, and Date.parse would read some of those as a year.
  if (!/[a-z]/i.test(text)) return undefined
  const at = Date.parse(text)
  if (Number.isNaN(at)) return undefined
  return Math.max(0, at - now)
}

/** The longest `t` (in ms) of the RateLimit items with no quota left (`r=0`), if any. */
export function rateLimitWaitMs(value: string | null | undefined): number | undefined {
  if (value == null) return undefined
  let wait: number | undefined
  for (const item of splitOutsideQuotes(value, ',')) {
    const params = itemParameters(item)
    const remaining = sfInteger(params.get('r'))
    const reset = sfInteger(params.get('t'))
    if (remaining === 0 && reset !== undefined) wait = longest(wait, reset * 1000)
  }
  return wait
}

function graphqlWaitMs(errors: readonly unknown[]): number | undefined {
  let wait: number | undefined
  for (const error of errors) {
    if (typeof error !== 'object' || error === null) continue
    const extensions = (error as GraphQLErrorLike).extensions
    const seconds = extensions?.retryAfter
    if (typeof seconds === 'number' && Number.isFinite(seconds) && seconds >= 0) {
      wait = longest(wait, seconds * 1000)
    }
  }
  return wait
}

function headerReader(source: object): HeaderReader | undefined {
  if (typeof (source as HeaderReader).get === 'function') return source as HeaderReader
  const headers = (source as { headers?: unknown }).headers
  if (
    typeof headers === 'object' &&
    headers !== null &&
    typeof (headers as HeaderReader).get === 'function'
  ) {
    return headers as HeaderReader
  }
  if ('headers' in source) return undefined
  // A plain record, as Node's `IncomingMessage.headers` (lowercase names, repeated fields as arrays).
  const record = source as Record<string, unknown>
  return {
    get(name) {
      const key = Object.keys(record).find((k) => k.toLowerCase() === name)
      const value = key === undefined ? undefined : record[key]
      if (typeof value === 'string') return value
      if (Array.isArray(value)) return value.filter((v) => typeof v === 'string').join(', ')
      return null
    },
  }
}

/** An item's parameters (`;key=value` after the bare item); a repeated key keeps its last value (RFC 9651 §4.2.3.2). */
function itemParameters(item: string): Map<string, string> {
  const params = new Map<string, string>()
  for (const part of splitOutsideQuotes(item, ';').slice(1)) {
    const eq = part.indexOf('=')
    const key = (eq === -1 ? part : part.slice(0, eq)).trim()
    if (key.length > 0) params.set(key, eq === -1 ? '?1' : part.slice(eq + 1).trim())
  }
  return params
}

function sfInteger(value: string | undefined): number | undefined {
  if (value === undefined || !/^\d{1,15}$/.test(value)) return undefined
  const n = Number(value)
  return n <= SF_INTEGER_MAX ? n : undefined
}

function longest(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return b
  if (b === undefined) return a
  return Math.max(a, b)
}
