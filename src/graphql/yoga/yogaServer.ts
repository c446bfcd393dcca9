/**
 * What the Yoga plugin uses of Yoga's server object, which Yoga hands each plugin in `onYogaInit`: the function that
 * answers one operation's parameters, and the one that answers a request. The plugin runs its HTTP steps around
 * them rather than in Envelop's `onExecuteDone`, Yoga's `onExecutionResult` and the server adapter's `onResponse`:
 * each hook a plugin has costs every request its call (payload objects, closures, promise plumbing) whether it has
 * work to do or not, and these three cost about 4.5 kB allocated per light request together, more than the rest of
 * what tollbooth adds to it.
 */
import { ErrorCodes, TollboothError } from '../../core/errors.js'

/** Of Yoga's `YogaServer`; methods, so that Yoga's own, with narrower parameter types, are assignable. */
export interface YogaServerSurface {
  readonly version: string
  /** One operation's result from its parameters (an HTTP batch calls it for each, with a context of its own). */
  getResultForParams(payload: { request: unknown }, context: unknown): unknown
  /** A Fetch `Response` for a Fetch `Request`. */
  handle(request: unknown, serverContext: unknown): unknown
}

/**
 * The oldest Yoga whose `getResultForParams` gets the context the operation then runs with. (Before it, Yoga made
 * a batched operation's context inside, out of the request's.)
 */
export const OLDEST_YOGA = [5, 10, 2] as const

export function checkYogaVersion(version: string): void {
  const parts = version.split('.').map((part) => Number.parseInt(part, 10))
  for (const [i, oldest] of OLDEST_YOGA.entries()) {
    const part = parts[i] ?? Number.NaN
    if (part > oldest) return
    if (part === oldest) continue
    throw new TollboothError(
      ErrorCodes.UNSUPPORTED_PEER,
      `useTollbooth: graphql-yoga ${OLDEST_YOGA.join('.')} or newer is needed, got ${version}`,
    )
  }
}

/** Calls `after` with each operation's result as Yoga answers it over HTTP; `before` first, with its context. */
export function aroundOperations(
  yoga: YogaServerSurface,
  before: (context: Record<symbol, unknown>, request: unknown) => void,
  after: (result: unknown, context: Record<symbol, unknown>, request: unknown) => unknown,
): void {
  const answer = yoga.getResultForParams.bind(yoga)
  yoga.getResultForParams = (payload, context) => {
    const held = context as Record<symbol, unknown>
    before(held, payload.request)
    const result = answer(payload, context)
    return isThenable(result)
      ? result.then((answered) => after(answered, held, payload.request))
      : after(result, held, payload.request)
  }
}

/** Calls `after` with each response Yoga's handler makes, before the server adapter's `onResponse` hooks. */
export function aroundResponses(
  yoga: YogaServerSurface,
  after: (response: unknown, request: unknown) => void,
): void {
  const handle = yoga.handle.bind(yoga)
  yoga.handle = (request, serverContext) => {
    const response = handle(request, serverContext)
    if (!isThenable(response)) {
      after(response, request)
      return response
    }
    return response.then((made) => {
      after(made, request)
      return made
    })
  }
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | undefined)?.then === 'function'
}
