/**
 * A Yoga server on a real listening `node:http` server, and a client that posts GraphQL to it as JSON (for the
 * tests that replay attacks through HTTP).
 */
import { createServer, type RequestListener } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { CostExtension } from '../../src/graphql/index.js'

export interface GraphQLBody {
  // biome-ignore lint/suspicious/noExplicitAny: response data is indexed freely and checked by `expect`
  data?: any
  errors?: { message: string; path?: (string | number)[]; extensions?: Record<string, unknown> }[]
  extensions?: { cost?: CostExtension }
}

export interface GraphQLReply {
  readonly status: number
  readonly headers: Headers
  readonly body: GraphQLBody
}

export interface ListeningServer {
  /** `http://127.0.0.1:<port>/graphql` */
  readonly url: string
  close(): Promise<void>
}

/** Serves `handler` (a Yoga instance) on a free loopback port. */
export async function listen(handler: RequestListener): Promise<ListeningServer> {
  const server = createServer(handler)
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => resolve())
  })
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

/** POSTs one operation; `headers` may carry `x-forwarded-for` and `authorization`. */
export async function postGraphQL(
  url: string,
  query: string,
  options: { variables?: Record<string, unknown>; headers?: Record<string, string> } = {},
): Promise<GraphQLReply> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', ...options.headers },
    body: JSON.stringify({ query, variables: options.variables }),
  })
  const text = await response.text()
  try {
    return { status: response.status, headers: response.headers, body: JSON.parse(text) as GraphQLBody }
  } catch {
    throw new Error(`HTTP ${response.status}, not JSON: ${text}`)
  }
}

/** An SSE subscription held open until `abort()`; `status` is known once the plugin admitted or refused it. */
export async function openSse(
  url: string,
  query: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string | undefined; abort(): void }> {
  const controller = new AbortController()
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...headers },
    body: JSON.stringify({ query }),
    signal: controller.signal,
  })
  // A refusal is a short body that ends; an admitted stream stays open and is not read.
  const body = response.status === 200 ? undefined : await response.text()
  return { status: response.status, body, abort: () => controller.abort() }
}
