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

export function checkYogaVersion(version: unknown): void {
  const parts = String(version)
    .split('.')
    .map((part) => Number.parseInt(part, 10))
  for (const [i, oldest] of OLDEST_YOGA.entries()) {
    const part = parts[i] ?? Number.NaN
    if (part > oldest) return
    if (part === oldest) continue
    throw new TollboothError(
      ErrorCodes.UNSUPPORTED_PEER,
      `useTollbooth: graphql-yoga ${OLDEST_YOGA.join('.')} or newer is needed, got ${String(version)}`,
    )
  }
}

/** What runs around each operation Yoga answers over HTTP. */
export interface OperationSteps<Token> {
  /** Before Yoga answers it, with the context it will run with; what `answered` or `failed` get back. */
  start(context: Record<symbol, unknown>, request: unknown): Token
  /** Yoga's answer, which this one replaces. */
  answered(result: unknown, token: Token, context: Record<symbol, unknown>, request: unknown): unknown
  /** Yoga's answer threw instead (a plugin's `onExecutionResult` did, say); the error goes on to Yoga's handler. */
  failed(token: Token, context: Record<symbol, unknown>): void
}

export function aroundOperations<Token>(yoga: YogaServerSurface, steps: OperationSteps<Token>): void {
  const answer = yoga.getResultForParams.bind(yoga)
  yoga.getResultForParams = (payload, context) => {
    const held = context as Record<symbol, unknown>
    const token = steps.start(held, payload.request)
    let result: unknown
    try {
      result = answer(payload, context)
    } catch (error) {
      steps.failed(token, held)
      throw error
    }
    if (!isThenable(result)) return steps.answered(result, token, held, payload.request)
    return result.then(
      (answered) => steps.answered(answered, token, held, payload.request),
      (error: unknown) => {
        steps.failed(token, held)
        throw error
      },
    )
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
