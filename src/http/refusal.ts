import type { ServerResponse } from 'node:http'
import type { Decision } from '../core/decision.js'
import { PROBLEM_JSON_CONTENT_TYPE, quotaExceededProblem } from '../core/problemJson.js'
import { type RateLimitPolicy, rateLimitHeaders } from '../core/rateLimitHeaders.js'
import { splitOutsideQuotes } from '../core/structuredFields.js'

/**
 * How a guard answers a refused request, whatever the server: the status, the headers (RateLimit fields,
 * `Retry-After` when waiting helps, the problem+json content type) and the RFC 9457 body. The middlewares write it
 * to the Node response; the Fastify plugin hands it to Fastify's reply.
 */
export interface Refusal {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: Readonly<Record<string, unknown>>
  readonly decision: Decision
  readonly policy: RateLimitPolicy
}

/**
 * The refusal of `decision` under `policy`: 429 by default; a request no budget can ever hold is not one to retry
 * (400, or the guard's own status such as 413 for an upload too large), and gets no `Retry-After`.
 */
export function refusal(
  decision: Decision,
  policy: RateLimitPolicy,
  status = decision.neverAllowed ? 400 : 429,
): Refusal {
  const body =
    status === 429
      ? { ...quotaExceededProblem(decision, policy.name) }
      : { type: 'about:blank', title: STATUS_TITLES[status] ?? 'Request refused', status }
  return {
    status,
    headers: { ...rateLimitHeaders(decision, policy), 'content-type': PROBLEM_JSON_CONTENT_TYPE },
    body,
    decision,
    policy,
  }
}

/**
 * Sets the RateLimit fields (and `Retry-After` on a denial) of `decision` under `policy`, unless already sent. Set
 * again, the policy's items are replaced; another guard's items stay (see `addRateLimitHeaders`).
 */
export function setRateLimitHeaders(res: ServerResponse, decision: Decision, policy: RateLimitPolicy): void {
  addRateLimitHeaders(res, rateLimitHeaders(decision, policy))
}

/**
 * What `addRateLimitHeaders` writes to: a Node response, or a stand-in for another server's reply (tollbooth/nestjs
 * writes a Fastify reply through one).
 */
export interface HeaderTarget {
  readonly headersSent: boolean
  getHeader(name: string): unknown
  setHeader(name: string, value: string): unknown
}

/**
 * Adds `headers` to a response that an earlier guard may already have given its own: `RateLimit` and
 * `RateLimit-Policy` are Structured Field lists, so a second guard's items join the first's (a request spends from
 * both budgets, and the client should see both), and an item of a policy already listed replaces it (one item per
 * policy name); `Retry-After` keeps the longer wait; any other header is set.
 */
export function addRateLimitHeaders(res: HeaderTarget, headers: Readonly<Record<string, string>>): void {
  if (res.headersSent) return
  for (const name in headers) {
    const value = headers[name] as string
    const lower = name.toLowerCase()
    const existing =
      lower === 'ratelimit' || lower === 'ratelimit-policy' || lower === 'retry-after'
        ? res.getHeader(name)
        : undefined
    if (typeof existing !== 'string' || existing === '') res.setHeader(name, value)
    else if (lower === 'retry-after') {
      // An HTTP-date the app set is not a number of seconds to compare: the refusal's own wait is sent.
      const earlier = Number(existing)
      res.setHeader(name, Number.isFinite(earlier) ? String(Math.max(earlier, Number(value))) : value)
    } else res.setHeader(name, joinedItems(existing, value))
  }
}

/**
 * The list items of `existing` and then of `added`, one per policy name: an added item replaces its namesake in
 * place. Most often no name is shared (one guard, or guards of different policies): the lists are joined as they are.
 */
function joinedItems(existing: string, added: string): string {
  const addedItems = listItems(added)
  if (!addedItems.some((item) => existing.includes(itemName(item)))) return `${existing}, ${added}`
  const items = new Map<string, string>()
  // Map.set keeps a replaced item where it was.
  for (const item of [...listItems(existing), ...addedItems]) items.set(itemName(item), item)
  return [...items.values()].join(', ')
}

/** An item's name: its bare item, before its parameters (`"api;read"`, quoted, may hold a `;`). */
function itemName(item: string): string {
  return splitOutsideQuotes(item, ';')[0] as string
}

/** The items of a Structured Field list (`"name";k=v, …`). */
function listItems(list: string): string[] {
  return splitOutsideQuotes(list, ',').filter((item) => item !== '')
}

/** Writes `answer` to a Node response; a response already started is only ended. */
export function sendRefusal(res: ServerResponse, answer: Refusal): void {
  if (res.headersSent) {
    res.end()
    return
  }
  res.statusCode = answer.status
  addRateLimitHeaders(res, answer.headers)
  res.end(JSON.stringify(answer.body))
}

const STATUS_TITLES: Record<number, string> = {
  400: 'Request exceeds what the quota can ever admit',
  413: 'Content Too Large',
}
