/**
 * One guarded route served by node:http, Express 5 or Fastify 5 on a free loopback port, for the HTTP-guard suites
 * (test/integration/httpGuards/) that run the same cases on the three servers, as test/contract/ runs one suite over
 * every store. A case describes the route once (an `Exchange`: answer, stream, hold, fail) and reads the same
 * observations whatever serves it: what reached the route, what got past the guard, what reached the error path.
 *
 * The servers differ only where the frameworks do, and the adapter says so rather than hiding it: a guard is a
 * tollbooth/http middleware on node:http and Express and a tollbooth/fastify plugin or preHandler on Fastify
 * (`Guard`), and Fastify gives JSON media types its default charset (`GuardedServer.jsonType`).
 */
import { EventEmitter, once } from 'node:events'
import {
  createServer,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type Server,
  type ServerOptions,
  type ServerResponse,
} from 'node:http'
import type { AddressInfo } from 'node:net'
import { PassThrough } from 'node:stream'
import express from 'express'
import Fastify, {
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type preHandlerHookHandler,
} from 'fastify'
import type { Middleware } from '../../src/http/middleware.js'

export type ServerKind = 'node:http' | 'express' | 'fastify'
export const serverKinds: readonly ServerKind[] = ['node:http', 'express', 'fastify']
/** The servers tollbooth/http's middleware runs on. */
export const middlewareKinds: readonly ServerKind[] = ['node:http', 'express']

/** The server after `kind` in `serverKinds`: a second app of another kind, sharing a budget with the first. */
export function partnerOf(kind: ServerKind): ServerKind {
  return serverKinds[(serverKinds.indexOf(kind) + 1) % serverKinds.length] as ServerKind
}

/** What stands in front of the route: a middleware (node:http, Express) or a Fastify plugin or route preHandler. */
export type Guard =
  | { readonly middleware: Middleware }
  | { readonly register: (app: FastifyInstance) => PromiseLike<unknown> }
  | { readonly preHandler: preHandlerHookHandler }

/**
 * How the route reads the body. 'json': parsed before the guard (a JSON parser on node:http and Express, Fastify's
 * own before its preHandler). 'buffer' and 'stream': after the guard, buffered (Express `express.raw`, a Fastify
 * content-type parser for every type) or handed to the route as a stream (the request, Fastify's parser stream).
 */
export type BodyReading = 'none' | 'json' | 'buffer' | 'stream'

/** A streamed 200 the route holds open. */
export interface HeldResponse {
  write(text: string): void
  end(text?: string): void
  /** The response Node writes (`reply.raw` on Fastify). */
  readonly raw: ServerResponse
  /** Resolves on the raw response's 'close'. */
  readonly closed: Promise<void>
}

/** One request as the route sees it, the same on every server. */
export interface Exchange {
  /** The server's own request: the IncomingMessage on node:http and Express, the FastifyRequest on Fastify. */
  readonly request: unknown
  /** The request Node parsed (`request.raw` on Fastify). */
  readonly req: IncomingMessage
  /** The response Node writes (`reply.raw` on Fastify). */
  readonly res: ServerResponse
  /** The path and query. */
  readonly path: string
  /** What the body reading gave: parsed JSON, a Buffer, or a readable stream. */
  readonly body: unknown
  /** Answers `status` with `body` and `headers` (a content type of text/plain unless they name one). */
  send(status: number, body?: string, headers?: OutgoingHttpHeaders): void
  /** Starts a 200 of `contentType` whose body the test writes and ends. */
  stream(contentType?: string): HeldResponse
  /** Hands `error` to the error path (as a route's failing body reader would). */
  fail(error: unknown): void
}

/** The route behind the guard; one that never answers holds the request open. */
export type Route = (exchange: Exchange) => void | Promise<void>

export interface ServeOptions {
  readonly body?: BodyReading
  /** node:http and Express only: options of the Node server (insecureHTTPParser…). */
  readonly serverOptions?: ServerOptions
}

export interface GuardedServer {
  readonly kind: ServerKind
  /** `http://127.0.0.1:<port>` */
  readonly url: string
  readonly port: number
  /** Requests that reached the route. */
  readonly routeHits: number
  /** Requests that got past the guard, counted before the body is read (for guards that run before it). */
  readonly passed: number
  /**
   * Errors that reached the error path, in order: handed on by the guard (`next(error)`, Fastify's error
   * handling), by a body parser, or by the route (`fail`). Each is answered with its `status` / `statusCode`
   * (500 without) and `{"code": <its code or null>}`, unless the response had begun.
   */
  readonly errors: unknown[]
  /** The content type the server sends for a JSON media type: Fastify adds `; charset=utf-8`. */
  jsonType(mediaType: string): string
  /** Whether `request` is this server's own request object (what the guard's callbacks should be given). */
  isServerRequest(request: unknown): boolean
  waitForRouteHits(count: number): Promise<void>
  waitForPassed(count: number): Promise<void>
  waitForErrors(count: number): Promise<void>
  close(): Promise<void>
}

const defaultRoute: Route = (exchange) => exchange.send(200, 'ok')

function withContentType(headers: OutgoingHttpHeaders): OutgoingHttpHeaders {
  const named = Object.keys(headers).some((name) => name.toLowerCase() === 'content-type')
  return named ? headers : { 'content-type': 'text/plain', ...headers }
}

/** Serves `guard` then `route` on `kind`, listening on 127.0.0.1; `close` ends every connection. */
export async function serveGuarded(
  kind: ServerKind,
  guard: Guard,
  route: Route = defaultRoute,
  options: ServeOptions = {},
): Promise<GuardedServer> {
  const state = new ServerState(kind)
  const listening =
    kind === 'fastify'
      ? await serveFastify(state, guard, route, options.body ?? 'none')
      : await serveNode(kind, state, guard, route, options)
  return Object.assign(state, listening)
}

class ServerState extends EventEmitter {
  routeHits = 0
  passed = 0
  readonly errors: unknown[] = []

  constructor(readonly kind: ServerKind) {
    super()
  }

  jsonType(mediaType: string): string {
    return this.kind === 'fastify' ? `${mediaType}; charset=utf-8` : mediaType
  }

  isServerRequest(request: unknown): boolean {
    if (this.kind !== 'fastify') return isRaw(request)
    return !isRaw(request) && isRaw((request as { raw?: unknown } | undefined)?.raw)
  }

  count(what: 'routeHits' | 'passed'): void {
    this[what]++
    this.emit(what)
  }

  error(error: unknown): void {
    this.errors.push(error)
    this.emit('errors')
  }

  waitForRouteHits(count: number) {
    return this.until('routeHits', () => this.routeHits >= count)
  }

  waitForPassed(count: number) {
    return this.until('passed', () => this.passed >= count)
  }

  waitForErrors(count: number) {
    return this.until('errors', () => this.errors.length >= count)
  }

  /** The test's own timeout bounds the wait. */
  private async until(event: string, done: () => boolean): Promise<void> {
    while (!done()) await once(this, event)
  }
}

function isRaw(value: unknown): value is IncomingMessage {
  return typeof value === 'object' && value !== null && 'socket' in value && 'httpVersion' in value
}

function statusOf(error: unknown): number {
  const { status, statusCode } = (error ?? {}) as { status?: unknown; statusCode?: unknown }
  if (typeof status === 'number') return status
  return typeof statusCode === 'number' ? statusCode : 500
}

function errorBody(error: unknown): string {
  return JSON.stringify({ code: (error as { code?: unknown } | undefined)?.code ?? null })
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  return chunks.length === 0 ? undefined : JSON.parse(Buffer.concat(chunks).toString('utf8'))
}

async function readBuffer(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

/** Headers set one by one, not by writeHead: `end` then gives the body its Content-Length. */
function answer(res: ServerResponse, status: number, text: string, headers: OutgoingHttpHeaders): void {
  res.statusCode = status
  for (const [name, value] of Object.entries(withContentType(headers))) {
    if (value !== undefined) res.setHeader(name, value)
  }
  res.end(text)
}

function closedOf(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => res.once('close', () => resolve()))
}

async function serveNode(
  kind: ServerKind,
  state: ServerState,
  guard: Guard,
  route: Route,
  options: ServeOptions,
): Promise<{ url: string; port: number; close(): Promise<void> }> {
  if (!('middleware' in guard)) throw new Error(`${kind} serves a middleware guard`)
  const { middleware } = guard
  const body = options.body ?? 'none'
  const answerError = (res: ServerResponse, error: unknown) => {
    state.error(error)
    if (res.headersSent) return
    answer(res, statusOf(error), errorBody(error), { 'content-type': 'application/json' })
  }
  const exchange = (req: IncomingMessage & { body?: unknown }, res: ServerResponse): Exchange => ({
    request: req,
    req,
    res,
    path: req.url ?? '/',
    body: body === 'stream' ? req : req.body,
    send: (status, text = '', headers = {}) => answer(res, status, text, headers),
    stream: (contentType = 'text/plain') => {
      const closed = closedOf(res)
      res.writeHead(200, { 'content-type': contentType })
      return { write: (text) => void res.write(text), end: (text) => void res.end(text), raw: res, closed }
    },
    fail: (error) => answerError(res, error),
  })
  const reach = (req: IncomingMessage, res: ServerResponse) => {
    state.count('routeHits')
    void route(exchange(req, res))
  }

  let handler: (req: IncomingMessage & { body?: unknown }, res: ServerResponse) => void
  if (kind === 'express') {
    const app = express()
    if (body === 'json') app.use(express.json())
    app.use(middleware)
    app.use((_req: express.Request, _res: express.Response, next: express.NextFunction) => {
      state.count('passed')
      next()
    })
    if (body === 'buffer') app.use(express.raw({ type: () => true, limit: '1mb' }))
    app.use((req: express.Request, res: express.Response) => reach(req, res))
    app.use((error: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      answerError(res, error)
    })
    handler = app
  } else {
    handler = async (req, res) => {
      if (body === 'json') req.body = await readJson(req)
      middleware(req, res, (error) => {
        if (error !== undefined) return answerError(res, error)
        state.count('passed')
        if (body !== 'buffer') return reach(req, res)
        readBuffer(req).then(
          (buffer) => {
            req.body = buffer
            reach(req, res)
          },
          (failure: unknown) => answerError(res, failure),
        )
      })
    }
  }
  const server: Server = createServer(options.serverOptions ?? {}, handler)
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => resolve())
  })
  const port = (server.address() as AddressInfo).port
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

async function serveFastify(
  state: ServerState,
  guard: Guard,
  route: Route,
  body: BodyReading,
): Promise<{ url: string; port: number; close(): Promise<void> }> {
  if ('middleware' in guard) throw new Error('fastify serves a plugin or preHandler guard')
  const app = Fastify({ logger: false, forceCloseConnections: true })
  app.setErrorHandler((error, _request, reply) => {
    state.error(error)
    void reply.code(statusOf(error)).type('application/json').send(errorBody(error))
  })
  if (body === 'buffer' || body === 'stream') {
    app.removeAllContentTypeParsers()
    if (body === 'buffer') {
      app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, buffer, done) => done(null, buffer))
    } else {
      // The body stays a stream: the route reads it.
      app.addContentTypeParser('*', (_request, payload, done) => done(null, payload))
    }
  }
  if ('register' in guard) await guard.register(app)
  const exchange = (request: FastifyRequest, reply: FastifyReply): Exchange => ({
    request,
    req: request.raw,
    res: reply.raw,
    path: request.url,
    body: request.body,
    send: (status, text = '', headers = {}) => {
      void reply.code(status).headers(withContentType(headers)).send(text)
    },
    stream: (contentType = 'text/plain') => {
      const stream = new PassThrough()
      const closed = closedOf(reply.raw)
      void reply.code(200).header('content-type', contentType).send(stream)
      return {
        write: (text) => void stream.write(text),
        end: (text) => void stream.end(text),
        raw: reply.raw,
        closed,
      }
    },
    fail: (error) => {
      state.error(error)
      if (!reply.raw.headersSent)
        void reply.code(statusOf(error)).type('application/json').send(errorBody(error))
    },
  })
  app.route({
    method: ['GET', 'POST', 'PUT'],
    url: '/*',
    ...('preHandler' in guard ? { preHandler: guard.preHandler } : {}),
    // After a plugin guard's hook (onRequest), before the body is parsed: the request got past the guard.
    preParsing: async (_request, _reply, payload) => {
      state.count('passed')
      return payload
    },
    handler: async (request, reply) => {
      state.count('routeHits')
      await route(exchange(request, reply))
      // Returning the reply: it is answered by the route, now or later, or never (a request held open).
      return reply
    },
  })
  const url = await app.listen({ port: 0, host: '127.0.0.1' })
  return { url, port: Number(new URL(url).port), close: () => app.close() }
}
