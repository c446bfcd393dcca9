import { type ExecutionResult, GraphQLError } from 'graphql'
import { withoutHttp } from './operationResults.js'

/**
 * Whether `error` is a GraphQLError the application raised on purpose: one that wraps no other error, or wraps only
 * such errors. That is the line Yoga's and Envelop's error masking draw (Yoga by class, Envelop by the name
 * `GraphQLError`; both must hold here): such an error is the client's to read, while anything else (an unexpected
 * failure, even wrapped in a GraphQLError) is the server's to mask and log.
 */
export function isDeliberateGraphQLError(error: unknown): error is GraphQLError {
  let current: unknown = error
  // graphql-js builds each GraphQLError once, so this chain ends; the cap only guards a hand-made cycle, and a
  // chain past it counts as unexpected.
  for (let depth = 0; depth < 16; depth++) {
    if (!(current instanceof GraphQLError) || current.name !== 'GraphQLError') return false
    if (current.originalError === undefined || current.originalError === null) return true
    current = current.originalError
  }
  return false
}

/**
 * The result that answers an operation `identify` or `limiter` refused with `error`, where there is no HTTP response
 * to carry its status (graphql-ws, Envelop on its own): the error, without `extensions.http`. Throws `error` itself
 * when it is not deliberate, for the server to handle as any unexpected failure.
 */
export function callerRefusalResult(error: unknown): ExecutionResult {
  if (!isDeliberateGraphQLError(error)) throw error
  return { errors: [withoutHttp(error)] }
}
