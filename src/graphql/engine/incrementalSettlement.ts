import type { ExecutionResult, GraphQLError } from 'graphql'
import type { MaybePromise } from '../optionTypes.js'
import type { CostExtension } from './operationResults.js'

/** What settling an incremental response does at each payload, and at its end. */
export interface PartSettlement {
  /** Counts a payload, paying for what ran so far; answers whether the response may go on. */
  count(payload: ExecutionResult): MaybePromise<boolean>
  /** The refusal that ends a response the budget cannot pay for. */
  refusal(): GraphQLError
  /** The response ended (its last payload, the source done, or the client gone): `extensions.cost`, if any. */
  finish(): CostExtension | undefined
}

/**
 * The payloads of `source`, each settled through `settlement` before it is sent. The last one (`hasNext: false`)
 * carries `extensions.cost`; one whose parts the budget cannot pay is sent as the last, with the refusal among its
 * errors, and the source is closed. A plain iterator, so that a `return()` from the server takes effect at once.
 */
export function settledParts(
  source: AsyncIterable<ExecutionResult>,
  settlement: PartSettlement,
): AsyncIterableIterator<ExecutionResult> {
  const iterator = source[Symbol.asyncIterator]()
  let finished = false
  let closing = false
  const finish = () => {
    if (finished) return undefined
    finished = true
    return settlement.finish()
  }
  return {
    [Symbol.asyncIterator]() {
      return this
    },
    async next() {
      if (closing) {
        await iterator.return?.()
        return { done: true, value: undefined }
      }
      const step = await iterator.next()
      if (step.done === true) {
        finish()
        return step
      }
      const payload = step.value as ExecutionResult & { hasNext?: boolean }
      const refusal = (await settlement.count(payload)) ? undefined : settlement.refusal()
      closing = refusal !== undefined
      if (!closing && payload.hasNext !== false) return { done: false, value: payload }
      const extension = finish()
      const last: ExecutionResult & { hasNext?: boolean } = { ...payload }
      if (closing) {
        last.hasNext = false
        last.errors = [...(payload.errors ?? []), refusal as GraphQLError]
      }
      if (extension !== undefined) last.extensions = { ...payload.extensions, cost: extension }
      return { done: false, value: last }
    },
    async return(value?: unknown) {
      finish()
      return (await iterator.return?.(value)) ?? { done: true, value: undefined }
    },
    async throw(error?: unknown) {
      finish()
      if (iterator.throw === undefined) throw error
      return iterator.throw(error)
    },
  }
}
