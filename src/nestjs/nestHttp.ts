import type { IncomingMessage, ServerResponse } from 'node:http'
import { invalidArgument } from '../core/errors.js'
import { PROBLEM_JSON_CONTENT_TYPE } from '../core/problemJson.js'
import { addRateLimitHeaders, type HeaderTarget, type Refusal } from '../http/refusal.js'

/** What Nest's Fastify adapter hands a guard as the response: Fastify's reply (only what is used here). */
interface FastifyReplyLike {
  readonly sent: boolean
  getHeader(name: string): unknown
  header(name: string, value: string): unknown
}

/** One request and its response as the guard sees them, on either of Nest's HTTP platforms. */
export interface NestExchange {
  /** The Node request, which the default identity (the client address, `X-Forwarded-For`) is read from. */
  readonly raw: IncomingMessage
  /** Adds the RateLimit fields (and `Retry-After`) of an admission or a refusal to the response. */
  addHeaders(headers: Readonly<Record<string, string>>): void
  /** Sets the headers of `refusal` on the response, for Nest's exception layer to send with its body. */
  prepareRefusal(refusal: Refusal): void
}

/**
 * The exchange of Nest's HTTP request and response: Express gives the Node request and response themselves (with
 * Express' additions), Fastify its request (the Node one is `.raw`) and its reply (headers through `.header()`).
 */
export function exchangeOf(owner: string, request: unknown, response: unknown): NestExchange {
  if (isNodeResponse(response)) return expressExchange(request as IncomingMessage, response)
  if (isFastifyReply(response)) return fastifyExchange((request as { raw: IncomingMessage }).raw, response)
  throw invalidArgument(
    owner,
    'response',
    'a Node response (Express) or a Fastify reply (the platforms Nest ships)',
    response,
  )
}

function isNodeResponse(response: unknown): response is ServerResponse {
  return typeof (response as Partial<ServerResponse> | null)?.setHeader === 'function'
}

function isFastifyReply(response: unknown): response is FastifyReplyLike {
  const reply = response as Partial<FastifyReplyLike> | null
  return typeof reply?.header === 'function' && typeof reply.getHeader === 'function'
}

function expressExchange(raw: IncomingMessage, res: ServerResponse): NestExchange {
  return {
    raw,
    addHeaders: (headers) => addRateLimitHeaders(res, headers),
    prepareRefusal: (refusal) => {
      const { 'content-type': contentType, ...fields } = refusal.headers
      addRateLimitHeaders(res, fields)
      labelBodyWhenSent(res as JsonResponse, refusal.body, contentType ?? PROBLEM_JSON_CONTENT_TYPE)
    },
  }
}

/** Express' response, which Nest's Express adapter sends an exception's body with (`res.json(body)`). */
type JsonResponse = ServerResponse & { json?: (body: unknown) => unknown }

/**
 * Gives the response `contentType` when `body` is the one sent. Not set now: NestJS 11's Express adapter replaces a
 * Content-Type that does not start with application/json by application/json (with a warning) before it calls
 * `res.json`, and the one form its check lets by, a one-item list, Express 5.3 replaces by text/html. So this
 * response's own `json` sets it as the body goes out, for the refusal's body alone: a filter of the application
 * that sends a body of its own keeps its own type.
 */
function labelBodyWhenSent(res: JsonResponse, body: unknown, contentType: string): void {
  const { json } = res
  if (typeof json !== 'function') {
    res.setHeader('content-type', contentType)
    return
  }
  res.json = function (this: JsonResponse, sent: unknown) {
    if (sent === body && !this.headersSent) this.setHeader('content-type', contentType)
    return json.call(this, sent)
  }
}

function fastifyExchange(raw: IncomingMessage, reply: FastifyReplyLike): NestExchange {
  const target: HeaderTarget = {
    get headersSent() {
      return reply.sent
    },
    getHeader: (name) => reply.getHeader(name),
    setHeader: (name, value) => reply.header(name, value),
  }
  return {
    raw,
    addHeaders: (headers) => addRateLimitHeaders(target, headers),
    // Fastify serializes the problem+json body as JSON (its type is a JSON type) and keeps this Content-Type.
    prepareRefusal: (refusal) => addRateLimitHeaders(target, refusal.headers),
  }
}
