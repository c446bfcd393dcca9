/**
 * Small pieces for the tests of tollbooth/http: a Node server on a free loopback port, and the headers a test
 * compares exactly. A guarded route on node:http, Express or Fastify is test/helpers/guardedServers.ts.
 */
import { request as httpRequest, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

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

/** Sends a GET with `x-user` to `url`; resolves with the response once its first body chunk arrived. */
export function startRequest(url: string, user: string) {
  return new Promise<{ res: IncomingMessage; req: ReturnType<typeof httpRequest>; first: string }>(
    (resolve, reject) => {
      const req = httpRequest(url, { headers: { 'x-user': user }, agent: false })
      req.on('error', () => {})
      req.on('response', (res) => {
        res.once('data', (chunk: Buffer) => resolve({ res, req, first: chunk.toString() }))
        res.once('error', () => {})
      })
      req.once('error', reject)
      req.end()
    },
  )
}
