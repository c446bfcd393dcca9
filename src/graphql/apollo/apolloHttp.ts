import { type GraphQLResponse, HeaderMap, type HTTPGraphQLHead } from '@apollo/server'
import { type ExecutionResult, GraphQLError, type GraphQLFormattedError } from 'graphql'
import { RefusalCodes } from '../refusal.js'

interface HttpExtension {
  status?: number
  headers?: Record<string, string>
}

/**
 * A refusal as Apollo Server understands a thrown error: it reads `extensions.http` as the response's status and
 * headers only when `headers` is a `Map` (else the whole `http` object would reach the client as data).
 */
export function apolloError(error: GraphQLError): GraphQLError {
  const http = error.extensions.http as HttpExtension | undefined
  if (http?.headers === undefined || http.headers instanceof Map) return error
  const headers = new HeaderMap(Object.entries(http.headers))
  const extensions: Record<string, unknown> = { ...error.extensions, http: { ...http, headers } }
  return new GraphQLError(error.message, { extensions })
}

/**
 * The refusal result the engine answered, as Apollo's response: the errors' `http` lifted into `head` (status and
 * headers) and dropped from the errors, which are sent formatted.
 */
export function apolloRefusal(
  result: ExecutionResult,
  head: HTTPGraphQLHead,
): { errors: GraphQLFormattedError[]; extensions?: Record<string, unknown> } {
  const errors: GraphQLFormattedError[] = []
  for (const error of result.errors ?? []) {
    const { http, ...extensions } = error.extensions as { http?: HttpExtension }
    if (http?.status !== undefined) head.status = http.status
    for (const [name, value] of Object.entries(http?.headers ?? {}))
      head.headers.set(name.toLowerCase(), value)
    errors.push({ ...error.toJSON(), extensions })
  }
  return result.extensions === undefined ? { errors } : { errors, extensions: { ...result.extensions } }
}

/** Answers `response` with the refusal `result`: its errors as `apolloRefusal` formats them, their status and headers. */
export function answerRefusal(response: GraphQLResponse, result: ExecutionResult): void {
  const head: HTTPGraphQLHead = { headers: new HeaderMap() }
  response.body = { kind: 'single', singleResult: apolloRefusal(result, head) }
  response.http.status = head.status
  for (const [name, value] of head.headers) response.http.headers.set(name, value)
}

const refusalCodes: ReadonlySet<unknown> = new Set(Object.values(RefusalCodes))

/**
 * A refusal raised while the operation runs (a sensitive field run past its limit under a list), made fit for Apollo
 * in place, before Apollo formats it: Apollo would send an `http` whose headers are not a `Map` to the client as
 * data (the limiter's name and all). With `toResponse`, its headers become a `HeaderMap`, so that Apollo sets them
 * and the status on the response, as Yoga does; without (in a batch, whose head the operations share), `http` is
 * dropped and the error keeps its code and retryAfter.
 */
export function fitRefusalForApollo(error: GraphQLError, toResponse: boolean): void {
  const extensions = error.extensions as Record<string, unknown>
  const http = extensions.http as HttpExtension | undefined
  // Refusals raised before execution went through `apolloError` already (and may be cached): left as they are.
  const { headers } = http ?? {}
  if (headers === undefined || headers instanceof Map || !refusalCodes.has(extensions.code)) return
  if (toResponse) extensions.http = { ...http, headers: new HeaderMap(Object.entries(headers)) }
  else delete extensions.http
}
