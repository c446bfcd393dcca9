/**
 * The contract between limiters and stores. A store runs one step of one algorithm on one key atomically and
 * answers with a `Reply`. The memory store runs the pure TypeScript step (`src/core/algorithms/`), the Redis store
 * runs the Lua twin of the same step (`src/core/stores/lua/`); tests check that both answer alike.
 */

/** The algorithms a store can run. Token bucket and leaky bucket share GCRA; they differ in how replies are read. */
export type AlgorithmName = 'gcra' | 'fixedWindow' | 'slidingWindow' | 'concurrency'

/** One atomic step on one key. */
export interface StoreRequest {
  readonly algorithm: AlgorithmName
  /** The operation: `consume`, `debit`, `peek`, `refund` (all algorithms but concurrency), `acquire`, `release`, `renew`. */
  readonly op: string
  /** Name of the limiter; keeps limiters that share a store apart. */
  readonly limiter: string
  /** The identity (user, API key, IP, ...). Stores that persist keys outside the process hash it first. */
  readonly key: string
  /** Numeric parameters of the step (and a lease id for concurrency), in the order the algorithm defines. */
  readonly args: readonly (number | string)[]
}

/**
 * `[allowed, remaining, resetMs, retryAfterMs, delayMs]`, all integers (`allowed` is 0 or 1). The same tuple comes
 * back from Lua, which can only return integers, and from the pure functions.
 */
export type Reply = readonly [number, number, number, number, number]

export interface Store {
  /** `memory` stores live in this process; `remote` stores can fail and are guarded by a deadline and breaker. */
  readonly kind: 'memory' | 'remote'
  run(request: StoreRequest): Promise<Reply>
  /**
   * Consumes from several rate policies of one identity atomically: the replies of all steps, and the writes of all
   * of them only when every one allows. Every request is a `consume` on the same `key`, with distinct limiters.
   */
  consumeAll(requests: readonly StoreRequest[]): Promise<Reply[]>
  /** Removes every trace of `key` for `limiter`. */
  delete(limiter: string, key: string): Promise<void>
}
