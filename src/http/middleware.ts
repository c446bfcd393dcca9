import type { IncomingMessage, ServerResponse } from 'node:http'

/** Express/Connect's `next`: called with nothing to go on to the route, with an error to hand it to the error path. */
export type Next = (error?: unknown) => void

/**
 * An Express/Connect middleware, also usable with plain `node:http`: call it with the request, the response and a
 * `next` that runs the route. A refusal answers the request itself and never calls `next`.
 */
export type Middleware<Req extends IncomingMessage = IncomingMessage> = (
  req: Req,
  res: ServerResponse,
  next: Next,
) => void

/**
 * Whether the client is gone before the guard ran (it reset the connection, e.g. while a body parser read): its
 * address can no longer be read, so it would be counted under one shared `unknown` identity, and no answer can reach
 * it. The guards drop such a request: it spends nothing and does not reach the route.
 */
export function clientGone(req: IncomingMessage): boolean {
  return req.socket?.destroyed === true
}
