import { type Decision, type DecisionSource, refusedForever } from './decision.js'
import { invalidOption } from './errors.js'
import {
  type FailPolicy,
  failClosedDecision,
  failOpenDecision,
  failPolicies,
  isStoreFailure,
} from './failPolicy.js'
import { emit, type LimiterHooks, limiterHooksOption } from './hooks.js'
import { checkOptionKeys, type OptionKeys } from './knownOptions.js'
import { MemoryStore } from './stores/memoryStore.js'
import type { Reply, Store, StoreRequest } from './stores/store.js'
import { isOptionsObject, oneOf, positiveInteger } from './validate.js'

/** Options every limiter takes. */
export interface LimiterOptions {
  /** Unique among limiters sharing a store; part of every key. No `{` or `}`, at most 128 characters. */
  name: string
  /** Where state lives. @default a new MemoryStore */
  store?: Store
  /** What to answer while the store fails; see docs/core.md, "Fail policy". @default 'open' */
  failPolicy?: FailPolicy
  /** Retry-After of denials under `failPolicy: 'closed'`, in milliseconds. @default 1000 */
  failClosedRetryAfterMs?: number
  /** Most keys of the in-process limiter used by `failPolicy: 'local'`. @default 10000 */
  localMaxKeys?: number
  hooks?: LimiterHooks
}

/** The options every limiter takes; each factory adds its own to these. */
export const limiterOptionKeys: OptionKeys<LimiterOptions> = {
  name: true,
  store: true,
  failPolicy: true,
  failClosedRetryAfterMs: true,
  localMaxKeys: true,
  hooks: true,
}

/** How a store reply is read: the store step, the policy's quota and whether the reply's delay is meaningful. */
export interface ResolvedLimiterOptions {
  readonly name: string
  readonly store: Store
  readonly failPolicy: FailPolicy
  readonly failClosedRetryAfterMs: number
  readonly localMaxKeys: number
  readonly hooks: LimiterHooks
}

/** The `store` option: a MemoryStore of its own when not given; anything without `run` (null too) is refused. */
export function storeOption(owner: string, store: Store | undefined): Store {
  if (store === undefined) return new MemoryStore()
  if (typeof store !== 'object' || store === null || typeof store.run !== 'function') {
    throw invalidOption(owner, 'store', 'a MemoryStore, a RedisStore or another Store', store)
  }
  return store
}

/** Checks and resolves the options every limiter takes; `known` lists every key of the factory's options. */
export function resolveLimiterOptions(
  owner: string,
  options: LimiterOptions,
  known: readonly string[],
): ResolvedLimiterOptions {
  if (!isOptionsObject(options)) throw invalidOption(owner, 'options', 'an object', options)
  checkOptionKeys(owner, options, known)
  const { name, store } = options
  // Braces would break the Redis Cluster hash tag that follows the name in every key; the name is also the policy's
  // in the RateLimit fields, which carry printable ASCII only (refused there, it would fail every admitted request).
  if (typeof name !== 'string' || !/^[\x20-\x7e]{1,128}$/.test(name) || /[{}]/.test(name)) {
    throw invalidOption(
      owner,
      'name',
      'a string of 1 to 128 printable ASCII characters (0x20-0x7E) without "{" or "}"',
      name,
    )
  }
  return Object.freeze({
    name,
    store: storeOption(owner, store),
    failPolicy: oneOf(owner, 'failPolicy', options.failPolicy ?? 'open', failPolicies),
    failClosedRetryAfterMs: positiveInteger(
      owner,
      'failClosedRetryAfterMs',
      options.failClosedRetryAfterMs ?? 1000,
    ),
    localMaxKeys: positiveInteger(owner, 'localMaxKeys', options.localMaxKeys ?? 10_000),
    hooks: limiterHooksOption(owner, options.hooks),
  })
}

/**
 * What every limiter shares: running a step on its store, and when the store fails, answering by the fail policy
 * (with an in-process twin store for `local`), then reporting the decision.
 */
export abstract class LimiterBase {
  readonly name: string
  readonly store: Store
  readonly failPolicy: FailPolicy
  /** Which algorithm this is, for events: `tokenBucket`, `slidingWindow`, ... */
  abstract readonly algorithm: string
  /** The policy's quota, reported as `limit` in decisions. */
  abstract readonly limit: number
  /** The largest cost one `consume` can ever be allowed; a larger one is refused with `neverAllowed`. */
  readonly maxCost: number = Number.POSITIVE_INFINITY
  protected readonly options: ResolvedLimiterOptions
  /** The store when it is a MemoryStore: answered synchronously, without a promise per layer. */
  protected readonly memoryStore: MemoryStore | undefined
  /** Only shapers (the leaky bucket) report a delay; for the others GCRA's delay is meaningless. */
  protected reportsDelay = false
  /** The sliding window reports, in the delay's place, when more quota is available (`moreQuotaMs`). */
  protected reportsMoreQuota = false
  private localStore: MemoryStore | undefined

  constructor(options: ResolvedLimiterOptions) {
    this.options = options
    this.name = options.name
    this.store = options.store
    this.failPolicy = options.failPolicy
    this.memoryStore = options.store instanceof MemoryStore ? options.store : undefined
  }

  /** Runs one step on the memory store, synchronously (a memory store cannot fail). */
  protected runInMemory(store: MemoryStore, request: StoreRequest, cost: number): Decision {
    const started = this.options.hooks.onDecision === undefined ? 0 : performance.now()
    let decision = this.toDecision(store.runNow(request), 'store')
    if (cost > this.maxCost && request.op === 'consume') decision = refusedForever(decision)
    if (started !== 0) this.report(request.op, request.key, decision, cost, started)
    return decision
  }

  /** Runs one step; returns the store that answered (for leases, which must be released where they were taken). */
  protected async run(
    request: StoreRequest,
    cost: number,
  ): Promise<{ decision: Decision; store: Store | undefined }> {
    const started = performance.now()
    let decision: Decision
    let answeredBy: Store | undefined = this.store
    try {
      decision = this.toDecision(await this.store.run(request), 'store')
    } catch (error) {
      if (!isStoreFailure(error)) throw error
      answeredBy = this.failPolicy === 'local' ? this.local() : undefined
      decision = this.whenStoreFails(request)
    }
    // Whoever answered (a fail-open decision too): a cost the policy can never admit is refused.
    if (cost > this.maxCost && request.op === 'consume') decision = refusedForever(decision)
    this.report(request.op, request.key, decision, cost, started)
    return { decision, store: answeredBy }
  }

  protected report(op: string, key: string, decision: Decision, cost: number, started: number): void {
    if (this.options.hooks.onDecision === undefined) return
    emit(this.options.hooks.onDecision, {
      limiter: this.name,
      key,
      algorithm: this.algorithm,
      op,
      allowed: decision.allowed,
      source: decision.source,
      cost,
      durationMs: performance.now() - started,
    })
  }

  /** @internal Reads a store reply as this limiter's decision. */
  toDecision(reply: Reply, source: DecisionSource): Decision {
    // Two literals rather than a spread: every decision is made here, and a spread costs an object and a slower
    // shape on each.
    if (this.reportsMoreQuota) {
      return {
        allowed: reply[0] === 1,
        limit: this.limit,
        remaining: reply[1],
        resetMs: reply[2],
        retryAfterMs: reply[3],
        delayMs: 0,
        moreQuotaMs: reply[4],
        neverAllowed: false,
        source,
      }
    }
    return {
      allowed: reply[0] === 1,
      limit: this.limit,
      remaining: reply[1],
      resetMs: reply[2],
      retryAfterMs: reply[3],
      delayMs: this.reportsDelay ? reply[4] : 0,
      neverAllowed: false,
      source,
    }
  }

  private whenStoreFails(request: StoreRequest): Decision {
    switch (this.failPolicy) {
      case 'open':
        return failOpenDecision(this.limit)
      case 'closed':
        return failClosedDecision(this.limit, this.options.failClosedRetryAfterMs)
      case 'local':
        return this.toDecision(this.local().runNow(request), 'local')
    }
  }

  /** Drops `key` from the in-process twin, if one was ever used. */
  protected forgetLocally(key: string): void {
    void this.localStore?.delete(this.name, key)
  }

  /** The in-process twin used by `failPolicy: 'local'`, created on first need. */
  protected local(): MemoryStore {
    this.localStore ??= new MemoryStore({ maxKeys: this.options.localMaxKeys })
    return this.localStore
  }
}
