import type { Decision } from './decision.js'
import { DenyCache } from './denyCache.js'
import { checkOptionKeys, type OptionKeys, optionNames } from './knownOptions.js'
import {
  LimiterBase,
  type LimiterOptions,
  limiterOptionKeys,
  type ResolvedLimiterOptions,
} from './limiterBase.js'
import { LIMITER_KIND, type LimiterKind } from './limiterKind.js'
import { type QuotaRestore, quotaRestoreOf } from './quotaRestore.js'
import type { RateLimitPolicy } from './rateLimitHeaders.js'
import type { AlgorithmName, Reply, StoreRequest } from './stores/store.js'
import { positiveInteger, validAmount, validKey } from './validate.js'

export interface RateLimiterOptions extends LimiterOptions {
  /**
   * Answer repeated requests of a denied key in-process until its Retry-After has passed, without a store round
   * trip. `false` turns it off. Only for remote stores (a memory store answers as fast as the cache would).
   * @default { maxKeys: 10000 } for remote stores
   */
  denyCache?: boolean | { maxKeys?: number }
}

/** The options every rate limiter takes; each factory adds its own to these. */
export const rateLimiterOptionKeys: OptionKeys<RateLimiterOptions> = { ...limiterOptionKeys, denyCache: true }

const DENY_CACHE_OPTIONS = optionNames<Exclude<RateLimiterOptions['denyCache'], boolean | undefined>>({
  maxKeys: true,
})

/** How one algorithm maps costs to store arguments. */
export interface RateAlgorithm {
  readonly algorithm: string
  readonly step: AlgorithmName
  readonly limit: number
  /** The largest cost one request can ever be allowed: a bucket's capacity, a window's limit. */
  readonly maxCost: number
  readonly windowSeconds: number
  /** Units that come back per second (refill or drain rate; a window's limit over its length). */
  readonly restorePerSecond: number
  /** Store arguments for a consume, debit or refund of `amount` (and a peek, with amount 1). */
  args(amount: number): readonly number[]
}

/**
 * A limiter that spends a budget: token bucket, fixed window, sliding window, leaky bucket.
 * `consume` answers a Decision (never throws for a denial); invalid keys or costs throw TOLLBOOTH_ERR_INVALID_ARGUMENT.
 */
export class RateLimiter extends LimiterBase {
  readonly algorithm: string
  /** Told apart from other limiters by this mark (see core/limiterKinds.ts). */
  get [LIMITER_KIND](): LimiterKind {
    return 'rate'
  }
  readonly limit: number
  override readonly maxCost: number
  /** Quota and window, for `rateLimitHeaders(decision, limiter.policy)`. */
  readonly policy: Readonly<RateLimitPolicy>
  /** Units that come back per second: the refill rate of a bucket, `limit / window` for windows. */
  readonly restorePerSecond: number
  private readonly rate: RateAlgorithm
  private readonly denyCache: DenyCache | undefined
  private readonly denyCacheOption: RateLimiterOptions['denyCache']

  constructor(options: ResolvedLimiterOptions & Pick<RateLimiterOptions, 'denyCache'>, rate: RateAlgorithm) {
    super(options)
    this.rate = rate
    this.denyCacheOption = options.denyCache
    this.algorithm = rate.algorithm
    this.limit = rate.limit
    this.maxCost = rate.maxCost
    this.restorePerSecond = rate.restorePerSecond
    this.reportsMoreQuota = rate.step === 'slidingWindow'
    this.policy = Object.freeze({
      name: options.name,
      quota: rate.limit,
      windowSeconds: rate.windowSeconds,
      restore: quotaRestoreOf(rate.step, rate.args(1)),
    })
    this.denyCache = createDenyCache(
      rate.algorithm,
      options.store.kind,
      options.denyCache,
      this.policy.restore,
    )
  }

  /**
   * Spends `cost` units for `key` if they are available; a denial spends nothing. A cost above `maxCost` is denied
   * with `neverAllowed` (and no Retry-After), whatever the store or the fail policy answers.
   */
  consume(key: string, cost = 1): Promise<Decision> {
    try {
      validKey(this.algorithm, key)
      validAmount(this.algorithm, 'cost', cost)
      // The hot path on a memory store: no promise but the one returned.
      const memory = this.memoryStore
      if (memory !== undefined)
        return Promise.resolve(this.runInMemory(memory, this.request('consume', key, cost), cost))
      return this.consumeRemote(key, cost)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  private async consumeRemote(key: string, cost: number): Promise<Decision> {
    // A cost above maxCost is never allowed, whatever was denied before: its answer is not the cached one.
    const cached = cost > this.maxCost ? undefined : this.denyCache?.get(key, cost)
    if (cached !== undefined) {
      this.report('consume', key, cached, cost, performance.now())
      return cached
    }
    const { decision } = await this.run(this.request('consume', key, cost), cost)
    if (!decision.allowed && decision.source === 'store') this.denyCache?.remember(key, cost, decision)
    return decision
  }

  /** Reads the state of `key` without spending: `allowed` says whether a cost of 1 would pass now. */
  async peek(key: string): Promise<Decision> {
    validKey(this.algorithm, key)
    return (await this.run(this.request('peek', key, 1), 0)).decision
  }

  /** Gives back up to `amount` units spent earlier (never beyond the quota). Answers the state after the refund. */
  async refund(key: string, amount: number): Promise<Decision> {
    validKey(this.algorithm, key)
    validAmount(this.algorithm, 'amount', amount)
    this.denyCache?.forget(key)
    return (await this.run(this.request('refund', key, amount), amount)).decision
  }

  /**
   * Takes `amount` units for work that already happened, whatever is left: into debt if need be, but never more
   * than one quota of it (a token bucket owes at most its capacity, a window its limit). While the key owes, its
   * consumes are refused, with a Retry-After that covers the debt. `allowed` says whether the whole amount was
   * taken: false once the key owes its whole quota. For charges that cannot be refused any more: a response that
   * cost more than its estimate, an event already computed.
   */
  async debit(key: string, amount: number): Promise<Decision> {
    validKey(this.algorithm, key)
    validAmount(this.algorithm, 'amount', amount)
    return (await this.run(this.request('debit', key, amount), amount)).decision
  }

  /** @internal A `debit` applied synchronously when the store is in memory; undefined when it is remote. */
  debitNow(key: string, amount: number): Decision | undefined {
    const memory = this.memoryStore
    if (memory === undefined) return undefined
    validKey(this.algorithm, key)
    validAmount(this.algorithm, 'amount', amount)
    return this.runInMemory(memory, this.request('debit', key, amount), amount)
  }

  /**
   * @internal A debit for work that has not run yet, when the store is in memory (undefined when it is remote):
   * `wanted` units if the key can owe them within one quota, else `needed`; when even `needed` would pass that
   * bound, nothing at all (`taken` 0, and the decision is the key's state), so that the work refused for it costs
   * nothing.
   */
  debitWithinDebtNow(
    key: string,
    wanted: number,
    needed: number,
  ): { readonly decision: Decision; readonly taken: number } | undefined {
    const memory = this.memoryStore
    if (memory === undefined) return undefined
    validKey(this.algorithm, key)
    validAmount(this.algorithm, 'amount', wanted)
    for (const amount of wanted > needed ? [wanted, needed] : [wanted]) {
      const started = performance.now()
      // consumeAllNow writes a step only if it allows: a debit that cannot take its whole amount takes nothing.
      const [reply] = memory.consumeAllNow([this.request('debit', key, amount)])
      const decision = this.toDecision(reply as Reply, 'store')
      if (decision.allowed) {
        this.report('debit', key, decision, amount, started)
        return { decision, taken: amount }
      }
    }
    return { decision: this.runInMemory(memory, this.request('peek', key, 1), 0), taken: 0 }
  }

  /** Forgets everything about `key`: the next request starts with a full budget. */
  async reset(key: string): Promise<void> {
    validKey(this.algorithm, key)
    this.denyCache?.forget(key)
    this.forgetLocally(key)
    await this.store.delete(this.name, key)
  }

  /**
   * @internal A `consume` (or, with a cost of 0, a `peek`) answered synchronously when the store is in memory;
   * undefined when the store is remote. Lets an adapter on the request path skip a promise per decision.
   */
  decideNow(key: string, cost: number): Decision | undefined {
    const memory = this.memoryStore
    if (memory === undefined) return undefined
    validKey(this.algorithm, key)
    if (cost === 0) return this.runInMemory(memory, this.request('peek', key, 1), 0)
    validAmount(this.algorithm, 'cost', cost)
    return this.runInMemory(memory, this.request('consume', key, cost), cost)
  }

  /** @internal A `refund` applied synchronously when the store is in memory; undefined when it is remote. */
  refundNow(key: string, amount: number): Decision | undefined {
    const memory = this.memoryStore
    if (memory === undefined) return undefined
    validKey(this.algorithm, key)
    validAmount(this.algorithm, 'amount', amount)
    return this.runInMemory(memory, this.request('refund', key, amount), amount)
  }

  /**
   * @internal A limiter of this one's algorithm, policy, store and options under another name: a budget of the same
   * size, kept apart (what a GraphQL subscription's events draw from, by default).
   */
  twin(name: string): RateLimiter {
    const Limiter = this.constructor as new (
      options: ResolvedLimiterOptions & Pick<RateLimiterOptions, 'denyCache'>,
      rate: RateAlgorithm,
    ) => RateLimiter
    return new Limiter({ ...this.options, name, denyCache: this.denyCacheOption }, this.rate)
  }

  /** @internal The store request of one step; `allOf` sends several of them in one atomic call. */
  request(op: string, key: string, amount: number): StoreRequest {
    return { algorithm: this.rate.step, op, limiter: this.name, key, args: this.rate.args(amount) }
  }
}

function createDenyCache(
  owner: string,
  storeKind: 'memory' | 'remote',
  option: RateLimiterOptions['denyCache'],
  restore: QuotaRestore | undefined,
): DenyCache | undefined {
  checkOptionKeys(owner, option, DENY_CACHE_OPTIONS, 'denyCache')
  // A memory store answers as fast as the cache would.
  if (option === false || storeKind === 'memory') return undefined
  const maxKeys = typeof option === 'object' ? option.maxKeys : undefined
  return new DenyCache(positiveInteger(owner, 'denyCache.maxKeys', maxKeys ?? 10_000), restore)
}
