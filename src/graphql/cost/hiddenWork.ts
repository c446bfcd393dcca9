import type { GraphQLFormattedError } from 'graphql'

/** What an execution error carries that matters here: where it was raised. */
type ErrorWithPath = Pick<GraphQLFormattedError, 'path'>

/**
 * Whether an error in `errors` hid work that ran: whether the null it left in `data` covers more than the field
 * that raised it. A nullable field whose resolver threw is null itself, and nothing ran below it. But when a
 * non-null field fails, graphql-js nulls its parent (and further up, to the nearest nullable field, or `data`
 * itself): the siblings that had resolved, and what they resolved, are gone from the response, so counting the
 * response would refund work that was done.
 */
export function hidesWork(data: unknown, errors: readonly ErrorWithPath[] | undefined): boolean {
  if (errors === undefined) return false
  for (const error of errors) {
    const path = error.path
    // Errors without a path (invalid variables, a refusal) come before execution: nothing ran.
    if (path === undefined || path.length === 0) continue
    let value: unknown = data
    // The null propagated above the failed field when a proper prefix of its path already reads null.
    for (let depth = 0; depth < path.length; depth++) {
      if (value === null || typeof value !== 'object') return true
      value = (value as Record<string | number, unknown>)[path[depth] as string | number]
    }
  }
  return false
}
