/** Whether an executor's answer is a stream (a subscription's events, an incremental response, a streamed list). */
export function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === 'object' && value !== null && Symbol.asyncIterator in value
}
