/**
 * Traffic patterns for `tollbooth simulate`: the built-in ones, and the JSON pattern file format.
 *
 * A pattern is only arrival times (and who sent them); whether a request is admitted is the replay's business.
 * Times are milliseconds since the start of the simulation, and the start is always a window boundary (see
 * replay.ts), so a pattern can aim at a boundary by aiming at a multiple of the window.
 */
import { readFile } from 'node:fs/promises'
import { basename, extname } from 'node:path'
import { closestName } from '../../core/knownOptions.js'
import { InputError } from '../errors.js'
import { formatTime } from './format.js'

/** One request: when it arrives and which key (client) it is counted against. */
export interface SimRequest {
  readonly atMs: number
  readonly key: string
}

/** The limit every algorithm is configured for: `limit` requests per `windowMs`. */
export interface PolicyOverrides {
  readonly limit?: number
  readonly windowMs?: number
}

export interface Pattern {
  readonly name: string
  readonly description: string
  /** Length of the timeline shown (at least past the last request). */
  readonly durationMs: number
  /** Sorted by arrival; requests at the same millisecond keep their order. */
  readonly requests: readonly SimRequest[]
  /** A pattern file may name the policy it was meant for; command-line flags still win. */
  readonly policy: PolicyOverrides
}

/** The key of requests that do not name one: every request of a built-in pattern is one client's. */
export const DEFAULT_KEY = 'client'

/** Beyond this a replay takes long enough to look hung (four algorithms, one decision each per request). */
export const MAX_REQUESTS = 1_000_000

export interface BuiltIn {
  readonly summary: string
  /** Built from the policy: the boundary burst aims at the policy's own window boundary. */
  build(policy: { readonly limit: number; readonly windowMs: number }): Pattern
}

/**
 * The built-in patterns, each chosen to expose one way algorithms differ:
 * - boundary-burst: the fixed window's known flaw, a full limit just before a boundary and another just after;
 * - bursty-screen: legitimate traffic well under the limit on average, but in bursts (a screen firing six calls);
 * - abuser: one client far over the limit for a long time, where steady-state admission rates show.
 */
export const BUILT_IN_PATTERNS: Readonly<Record<string, BuiltIn>> = {
  'boundary-burst': {
    summary: '`limit` requests 1 s before a window boundary and `limit` more 1 s after it',
    build({ limit, windowMs }) {
      // 1 s either side of the first boundary (less for windows under 4 s, so both bursts stay within a window).
      const offset = Math.min(1000, Math.floor(windowMs / 4))
      const before = windowMs - offset
      const after = windowMs + offset
      return {
        name: 'boundary-burst',
        description: `${limit} request${limit === 1 ? '' : 's'} at t = ${formatTime(before)} and ${limit} at t = ${formatTime(after)}, either side of the window boundary at ${formatTime(windowMs)}`,
        durationMs: 2 * windowMs,
        requests: [...burst(before, limit), ...burst(after, limit)],
        policy: {},
      }
    },
  },
  'bursty-screen': {
    summary: 'one request every 2 s for 5 minutes, plus a burst of 6 simultaneous calls every 30 s',
    build() {
      const requests: SimRequest[] = []
      for (let at = 0; at < 300_000; at += 2000) requests.push({ atMs: at, key: DEFAULT_KEY })
      // At odd seconds (15 s, 45 s, ...), so a burst never coincides with a steady call: six at once, exactly.
      for (let at = 15_000; at < 300_000; at += 30_000) requests.push(...burst(at, 6))
      return {
        name: 'bursty-screen',
        description:
          'one request every 2 s for 5 min, plus 6 simultaneous calls every 30 s (t = 15 s, 45 s, ...)',
        durationMs: 300_000,
        requests: sortByArrival(requests),
        policy: {},
      }
    },
  },
  abuser: {
    summary: 'one client sending 10 requests per second for 3 minutes',
    build() {
      const requests: SimRequest[] = []
      for (let i = 0; i < 1800; i++) requests.push({ atMs: i * 100, key: 'abuser' })
      return {
        name: 'abuser',
        description: 'one client sending 10 requests per second (one every 100 ms) for 3 min',
        durationMs: 180_000,
        requests,
        policy: {},
      }
    },
  },
}

export const BUILT_IN_NAMES = Object.keys(BUILT_IN_PATTERNS)

function burst(atMs: number, count: number): SimRequest[] {
  return Array.from({ length: count }, () => ({ atMs, key: DEFAULT_KEY }))
}

/** Stable: requests at the same millisecond are replayed in the order they were listed. */
function sortByArrival(requests: SimRequest[]): SimRequest[] {
  return requests.sort((a, b) => a.atMs - b.atMs)
}

/** A pattern file that cannot be used (bad input, exit code 1); the message names the file and what is wrong. */
export class PatternFileError extends InputError {
  override name = 'PatternFileError'
}

/**
 * Reads a pattern file. The format (JSON):
 *
 *   {
 *     "name": "login-storm",              optional; default: the file name without extension
 *     "description": "...",               optional
 *     "limit": 100, "windowMs": 60000,    optional policy; --limit / --window override it
 *     "durationMs": 120000,               optional; default: just past the last request
 *     "events": [                         required, at least one
 *       { "at": 59000, "count": 100, "key": "alice" }   at: ms since start; count default 1; key default "client"
 *     ]
 *   }
 *
 * Events with a `count` keep bursts short to write; unknown fields are refused, so a misspelt field is an error
 * instead of being silently ignored.
 */
export async function readPatternFile(file: string): Promise<Pattern> {
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : String(error)
    throw new PatternFileError(`${file}: cannot read the pattern file (${reason})`)
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (error) {
    throw new PatternFileError(`${file}: not valid JSON (${(error as Error).message})`)
  }
  return parsePattern(json, file)
}

const TOP_LEVEL_FIELDS = ['name', 'description', 'limit', 'windowMs', 'durationMs', 'events']
const EVENT_FIELDS = ['at', 'count', 'key']

/** Validates a parsed pattern file; `file` is only for messages and the default name. */
export function parsePattern(json: unknown, file: string): Pattern {
  // A declared `never` function, so TypeScript narrows after each check.
  function fail(what: string): never {
    throw new PatternFileError(`${file}: ${what}`)
  }
  if (!isObject(json)) {
    return fail(`expected an object like { "events": [{ "at": 0, "count": 1 }] }, got ${describeValue(json)}`)
  }
  for (const field of Object.keys(json)) {
    if (!TOP_LEVEL_FIELDS.includes(field)) fail(`unknown field "${field}" (${hint(field, TOP_LEVEL_FIELDS)})`)
  }
  const name = json.name ?? basename(file, extname(file))
  if (typeof name !== 'string' || !/^[\w.-]{1,64}$/.test(name)) {
    fail(
      `"name" must be 1 to 64 letters, digits, ".", "_" or "-" (it names the chart file), got ${describeValue(name)}`,
    )
  }
  const description = json.description ?? `pattern file ${basename(file)}`
  if (typeof description !== 'string')
    fail(`"description" must be a string, got ${describeValue(description)}`)
  const policy: { limit?: number; windowMs?: number } = {}
  if (json.limit !== undefined) policy.limit = positiveInteger(json.limit, '"limit"', fail)
  if (json.windowMs !== undefined) policy.windowMs = positiveInteger(json.windowMs, '"windowMs"', fail)

  const events = json.events
  if (!Array.isArray(events) || events.length === 0) {
    return fail(
      `"events" must be a non-empty array of { "at": ms, "count"?: n, "key"?: string }, got ${describeValue(events)}`,
    )
  }
  const requests: SimRequest[] = []
  for (const [index, event] of (events as unknown[]).entries()) {
    const where = `events[${index}]`
    if (!isObject(event)) fail(`${where} must be an object like { "at": 0 }, got ${describeValue(event)}`)
    for (const field of Object.keys(event)) {
      if (!EVENT_FIELDS.includes(field))
        fail(`${where}: unknown field "${field}" (${hint(field, EVENT_FIELDS)})`)
    }
    const at = event.at
    if (typeof at !== 'number' || !Number.isFinite(at) || at < 0) {
      fail(
        `${where}.at must be a time in milliseconds since the start (a number >= 0), got ${describeValue(at)}`,
      )
    }
    const count = event.count === undefined ? 1 : positiveInteger(event.count, `${where}.count`, fail)
    const key = event.key ?? DEFAULT_KEY
    if (typeof key !== 'string' || key.length === 0 || key.length > 256) {
      fail(`${where}.key must be a string of 1 to 256 characters, got ${describeValue(key)}`)
    }
    if (requests.length + count > MAX_REQUESTS) {
      fail(`more than ${MAX_REQUESTS} requests in all (at ${where}); simulate a shorter span`)
    }
    for (let i = 0; i < count; i++) requests.push({ atMs: at, key })
  }
  sortByArrival(requests)
  const last = requests[requests.length - 1]?.atMs ?? 0
  let durationMs = Math.floor(last) + 1
  if (json.durationMs !== undefined) {
    durationMs = positiveInteger(json.durationMs, '"durationMs"', fail)
    if (durationMs <= last) fail(`"durationMs" (${durationMs}) must be after the last event (at ${last})`)
  }
  return { name, description, durationMs, requests, policy }
}

/** What an unknown field was probably meant to be, else the fields allowed where it stands. */
function hint(field: string, allowed: readonly string[]): string {
  const closest = closestName(field, allowed)
  return closest === undefined ? `allowed: ${allowed.join(', ')}` : `did you mean "${closest}"?`
}

function positiveInteger(value: unknown, what: string, fail: (what: string) => never): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
    return fail(`${what} must be a positive integer, got ${describeValue(value)}`)
  }
  return value
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function describeValue(value: unknown): string {
  if (value === undefined) return 'nothing'
  if (Array.isArray(value)) return 'an array'
  if (value === null || typeof value !== 'object') {
    const text = JSON.stringify(value)
    return text.length > 40 ? `${text.slice(0, 40)}…` : text
  }
  return 'an object'
}
