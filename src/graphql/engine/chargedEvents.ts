import type { ExecutionResult } from 'graphql'
import type { MaybePromise } from '../optionTypes.js'

/** What charging one event decided: the result to send, and whether the subscription ends with it. */
export interface ChargedEvent {
  readonly result: ExecutionResult
  readonly last: boolean
}

/** What a running subscription needs from tollbooth while it delivers events. */
export interface SubscriptionHooks {
  /** Charges an event what its result cost; an event the budget cannot pay ends the subscription. */
  charge(event: ExecutionResult): MaybePromise<ChargedEvent>
  /** The subscription ended (completed, failed, cancelled or ended for its budget): its lease is given back. */
  onEnd(): void
}

/**
 * The subscription's events, each charged through `hooks.charge` before it is sent (`send` prepares it for the
 * wire), with `hooks.onEnd` called once when the stream ends, fails, is closed, or is ended because the budget
 * could not pay an event: that event's refusal is sent last, and the source is closed. A plain iterator, not an
 * async generator: graphql-ws and Yoga close a subscription with `return()`, which must take effect at once, not
 * after the next event.
 */
export function chargedEvents(
  source: AsyncIterable<ExecutionResult>,
  hooks: SubscriptionHooks,
  send: (result: ExecutionResult) => ExecutionResult = (result) => result,
): AsyncIterableIterator<ExecutionResult> {
  const iterator = source[Symbol.asyncIterator]()
  let ended = false
  /** The refusal that ends the subscription was sent: the next pull closes the source. */
  let closing = false
  const end = () => {
    if (ended) return
    ended = true
    hooks.onEnd()
  }
  const close = async (): Promise<IteratorResult<ExecutionResult>> => {
    end()
    await iterator.return?.()
    return { done: true, value: undefined }
  }
  return {
    [Symbol.asyncIterator]() {
      return this
    },
    async next() {
      if (closing) return close()
      let step: IteratorResult<ExecutionResult>
      try {
        step = await iterator.next()
      } catch (error) {
        end()
        throw error
      }
      if (step.done === true) {
        end()
        return step
      }
      const { result, last } = await hooks.charge(step.value)
      closing = last
      return { done: false, value: send(result) }
    },
    async return(value?: unknown) {
      end()
      return (await iterator.return?.(value)) ?? { done: true, value: undefined }
    },
    async throw(error?: unknown) {
      end()
      if (iterator.throw === undefined) throw error
      return iterator.throw(error)
    },
  }
}
