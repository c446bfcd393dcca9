import type { IncomingMessage } from 'node:http'
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction, RouteOptions } from 'fastify'
import { invalidOption, TollboothError } from '../core/errors.js'
import type { Refusal } from '../http/refusal.js'
import { type IdentityOptions, requestIdentity } from '../http/requestIdentity.js'

/**
 * The Fastify request of a raw one, for guards of tollbooth/http that see the raw request but call the user's
 * callbacks, which take the Fastify request. Set just before such a guard reads it; one symbol, not a WeakMap, on a
 * per-request hot path.
 */
const fastifyRequest = Symbol('tollbooth.fastifyRequest.guard')
export type RawRequest = IncomingMessage & { [fastifyRequest]?: FastifyRequest }

/** The raw request of `request`, carrying `request` for `requestOf`. */
export function bindRequest(request: FastifyRequest): RawRequest {
  const raw = request.raw as RawRequest
  raw[fastifyRequest] = request
  return raw
}

export function requestOf(raw: RawRequest): FastifyRequest {
  return raw[fastifyRequest] as FastifyRequest
}

/**
 * A callback of Fastify options, called with the Fastify request of the raw one a tollbooth/http guard sees;
 * anything but a function is passed as it is, for the guard's own checks to refuse.
 */
export function ofRaw<Args extends unknown[], Result>(
  callback: ((request: FastifyRequest, ...args: Args) => Result) | undefined,
): ((raw: RawRequest, ...args: Args) => Result) | undefined {
  if (typeof callback !== 'function') return callback
  return (raw, ...args) => callback(requestOf(raw), ...args)
}

/** The identity options of a Fastify guard: `identify` takes the Fastify request. */
export interface FastifyIdentityOptions extends Omit<IdentityOptions, 'identify'> {
  /**
   * The identity whose budget a request spends (may be async): a user id, API key or tenant. What it throws goes to
   * Fastify's error handler. Default: the client address through `trustProxy`, IPv6 grouped by `ipv6Prefix`.
   */
  identify?: (request: FastifyRequest) => string | Promise<string>
}

/** The identity of a Fastify request under `options`, checked at startup (`owner` names the guard in errors). */
export function fastifyIdentity(
  owner: string,
  options: FastifyIdentityOptions,
): (request: FastifyRequest) => string | Promise<string> {
  const { identify } = options
  if (identify !== undefined) {
    if (typeof identify !== 'function') throw invalidOption(owner, 'identify', 'a function', identify)
    return identify
  }
  const byAddress = requestIdentity(owner, {
    trustProxy: options.trustProxy,
    ipv6Prefix: options.ipv6Prefix,
    ipv4Prefix: options.ipv4Prefix,
  })
  return (request) => byAddress(request.raw)
}

/**
 * Runs `build`, rewording what it throws about an option of `from` to name `owner` and, for a route's config, the
 * option under `path` (`"limiter"` becomes `"config.tollboothConcurrency.limiter"`).
 */
export function namingOption<T>(owner: string, path: string | undefined, build: () => T, from = owner): T {
  try {
    return build()
  } catch (error) {
    const prefix = `${from}: `
    if (!(error instanceof TollboothError) || !error.message.startsWith(prefix)) throw error
    const rest = error.message.slice(prefix.length)
    const message = path === undefined ? rest : rest.replace(/^(unknown option )?"/, `$1"${path}.`)
    throw new TollboothError(error.code, `${owner}: ${message}`)
  }
}

/** A Fastify hook taking `(request, reply, done)`. */
export type RouteHook = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void

/** Adds `handler` to the route's own hooks of `stage`, after any the route already has (and after the app's). */
export function addRouteHook(
  route: RouteOptions,
  stage: 'onRequest' | 'preValidation' | 'preHandler',
  handler: RouteHook,
): void {
  const existing = route[stage]
  route[stage] =
    existing === undefined
      ? [handler]
      : Array.isArray(existing)
        ? [...existing, handler]
        : [existing, handler]
}

/** What a guard's `onLimited` option looks like under Fastify. */
export type FastifyOnLimited = (
  request: FastifyRequest,
  reply: FastifyReply,
  refusal: Refusal,
) => void | Promise<void>

/**
 * Answers a refusal through Fastify's reply: `onLimited` first when given, and the refusal's status, headers and
 * body when it sent nothing. A reply sent from a hook ends the request there: the handler never runs.
 */
export async function answerRefusal(
  request: FastifyRequest,
  reply: FastifyReply,
  refusal: Refusal,
  onLimited: FastifyOnLimited | undefined,
): Promise<void> {
  if (onLimited !== undefined) await onLimited(request, reply, refusal)
  if (!reply.sent) sendRefusalReply(reply, refusal)
}

export function sendRefusalReply(reply: FastifyReply, refusal: Refusal): void {
  addReplyHeaders(reply.code(refusal.status), refusal.headers)
  reply.send(refusal.body)
}

/** The fields that are lists (or, for `Retry-After`, a wait) several guards of one request each contribute to. */
const SHARED_FIELDS = new Set(['ratelimit', 'ratelimit-policy', 'retry-after'])

/**
 * Adds a guard's headers to the reply, next to those an earlier guard (the rate limit, another plugin) gave it:
 * `RateLimit` and `RateLimit-Policy` are Structured Field lists, so the items of both budgets are kept; `Retry-After`
 * keeps the longer wait; any other header is set.
 */
export function addReplyHeaders(reply: FastifyReply, headers: Readonly<Record<string, string>>): void {
  for (const name in headers) {
    const value = headers[name] as string
    const lower = name.toLowerCase()
    const existing = SHARED_FIELDS.has(lower) ? reply.getHeader(lower) : undefined
    if (typeof existing !== 'string' || existing === '') reply.header(lower, value)
    else if (lower === 'retry-after') reply.header(lower, String(Math.max(Number(existing), Number(value))))
    else reply.header(lower, `${existing}, ${value}`)
  }
}
