/**
 * Small pieces for the tests of tollbooth/http: a Node server on a free loopback port, and the headers a test
 * compares exactly. A guarded route on node:http, Express or Fastify is test/helpers/guardedServers.ts.
 */
import type { Server } from 'node:http'
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
