import { type ClientIpRequest, type ClientIpResolver, UNKNOWN_IP } from '../identity/clientIp.js'
import { ipKey } from '../identity/ipKey.js'
import type { GraphQLContext } from './options.js'

/**
 * The Node request behind a GraphQL context: Yoga on Node passes it as `req`; the graphql-ws recipe passes
 * `ctx.extra.request` (as `req`, or inside `extra`). Absent under a bare `fetch` (tests, edge runtimes).
 */
function nodeRequest(context: GraphQLContext): ClientIpRequest | undefined {
  const req = context.req as ClientIpRequest | undefined
  if (req?.headers !== undefined) return req
  const extra = context.extra as { request?: ClientIpRequest } | undefined
  if (extra?.request?.headers !== undefined) return extra.request
  return undefined
}

/** The client address of a GraphQL context, or `'unknown'` (all such requests then share one budget). */
export function contextIp(context: GraphQLContext, resolve: ClientIpResolver): string {
  const req = nodeRequest(context)
  return req === undefined ? UNKNOWN_IP : resolve(req)
}

/** The default identity: the client IP, IPv6 grouped by /64 (one host owns a whole /64). */
export function ipIdentity(resolve: ClientIpResolver): (context: GraphQLContext) => string {
  return (context) => `ip:${ipKey(contextIp(context, resolve))}`
}
