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
