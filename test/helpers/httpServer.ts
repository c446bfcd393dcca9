/**
 * Real HTTP servers on a free loopback port for the tollbooth/http tests: one middleware in front of a route, served
 * by Express 5 or by plain `node:http` (the middleware called with a `next` callback), with what reached the route
 * and what reached the error path recorded.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import express from 'express'
import type { Middleware } from '../../src/http/middleware.js'

export type Flavour = 'express' | 'node'
export const flavours: Flavour[] = ['express', 'node']

/** The route behind the middleware: answers the request (or holds it open). */
export type Route = (req: IncomingMessage, res: ServerResponse) => void

export interface GuardedApp {
  readonly flavour: Flavour
  /** `http://127.0.0.1:<port>` */
  readonly url: string
  readonly port: number
  readonly server: Server
  /** Requests that reached the route. */
  routeHits: number
  /** Errors the middleware handed to `next(error)`, in order. */
  readonly errors: unknown[]
  close(): Promise<void>
}

const defaultRoute: Route = (_req, res) => {
  res.setHeader('content-type', 'text/plain')
  res.end('ok')
}

/**
 * Serves `middleware` then `route` with Express or node:http. An error handed to `next` is answered 500 with
 * `{"code": <the error's code>}` on both.
 */
export async function serveGuarded(
  flavour: Flavour,
  middleware: Middleware,
  route: Route = defaultRoute,
): Promise<GuardedApp> {
  const errors: unknown[] = []
  let app: GuardedApp | undefined
  const reached: Route = (req, res) => {
    if (app !== undefined) app.routeHits++
    route(req, res)
  }
  const answerError = (error: unknown, res: ServerResponse) => {
    errors.push(error)
    res.statusCode = 500
    res.setHeader('content-type', 'application/json')
    res.end(JSON.stringify({ code: (error as { code?: unknown } | undefined)?.code ?? null }))
  }

  let server: Server
  if (flavour === 'express') {
    const expressApp = express()
    expressApp.use(middleware)
    expressApp.use((req: express.Request, res: express.Response) => reached(req, res))
    expressApp.use(
      (error: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
        answerError(error, res)
      },
    )
    server = createServer(expressApp)
  } else {
    server = createServer((req, res) => {
      middleware(req, res, (error) => {
        if (error !== undefined) answerError(error, res)
        else reached(req, res)
      })
    })
  }
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => resolve())
  })
  const port = (server.address() as AddressInfo).port
  app = {
    flavour,
    url: `http://127.0.0.1:${port}`,
    port,
    server,
    routeHits: 0,
    errors,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
  return app
}

/** Listens on 127.0.0.1, a free port; `close` ends every connection and the server. */
export async function listenOnLoopback(server: Server): Promise<{ port: number; close(): Promise<void> }> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => resolve())
  })
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

/** The headers tests compare exactly: the RateLimit fields, Retry-After and the content type. */
export function limitHeaders(response: Response): Record<string, string | null> {
  return {
    'ratelimit-policy': response.headers.get('ratelimit-policy'),
    ratelimit: response.headers.get('ratelimit'),
    'retry-after': response.headers.get('retry-after'),
    'content-type': response.headers.get('content-type'),
  }
}
