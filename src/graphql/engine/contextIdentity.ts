import { type ClientIpRequest, type ClientIpResolver, UNKNOWN_IP } from '../../identity/clientIp.js'
import type { GraphQLContext } from '../optionTypes.js'

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

/**
 * The default identity: the client's network, as `keyOf` (an `ipKey` keyer) groups addresses: IPv6 by /56 unless
 * told otherwise, since one subscriber usually holds a whole /56.
 */
export function ipIdentity(
  resolve: ClientIpResolver,
  keyOf: (ip: string) => string,
): (context: GraphQLContext) => string {
  return (context) => `ip:${keyOf(contextIp(context, resolve))}`
}

/** Whether a GraphQL context carries the Node request the default identity reads the client address from. */
export function hasNodeRequest(context: GraphQLContext): boolean {
  return nodeRequest(context) !== undefined
}
