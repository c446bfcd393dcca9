import { type Decision, type DecisionSource, refusedForever } from '../decision.js'
import { invalidOption } from '../errors.js'
import {
  type FailPolicy,
  failClosedDecision,
  failOpenDecision,
  failPolicies,
  isStoreFailure,
} from '../failPolicy.js'
import { emit, type LimiterHooks, limiterHooksOption } from '../hooks.js'
import { checkOptionKeys, optionNames } from '../knownOptions.js'
import { isRateLimiter } from '../limiterKinds.js'
import type { RateLimiter } from '../rateLimiter.js'
import { MemoryStore } from '../stores/memoryStore.js'
import type { Reply, Store } from '../stores/store.js'
import { oneOf, positiveInteger, validAmount, validKey } from '../validate.js'

export interface AllOfOptions {
  /** Name used in events. @default the limiters' names joined with `+` */
  name?: string
  /**
   * What the combination answers while the store fails.
   * @default the strictest of its limiters' policies: `closed`, then `local`, then `open`
   */
  failPolicy?: FailPolicy
  /** Retry-After of denials under `failPolicy: 'closed'`, in milliseconds. @default 1000 */
  failClosedRetryAfterMs?: number
  hooks?: LimiterHooks
}

const OPTIONS = optionNames<AllOfOptions>({
  name: true,
  failPolicy: true,
  failClosedRetryAfterMs: true,
  hooks: true,
})

/** A combined decision: the governing policy's numbers, plus every policy's own decision (for headers). */
export interface CombinedDecision extends Decision {
  /**
   * Each policy's decision, in the order the limiters were given. When the combination is denied nothing was spent
   * anywhere, even from policies that alone would have allowed (their `remaining` reads as if it had been).
   */
  readonly decisions: readonly Decision[]
}

/**
 * Several rate policies for one identity, checked and spent atomically, all or nothing: e.g. 10 per second and
 * 1,000 per day, or a global budget and a per-operation one. A request denied by one policy spends nothing from the
 * others (the bug of composed limiters that spend from the first policies before the last one refuses). On Redis it
 * is one Lua script; the keys share the identity's hash tag, so it also runs on a cluster. The limiters must share
 * one store; their deny caches are not used here.
 */
export class CombinedLimiter {
  readonly name: string
  readonly limiters: readonly RateLimiter[]
  readonly failPolicy: FailPolicy
  /** The largest cost every policy can admit: above it, the combination is refused with `neverAllowed`. */
  readonly maxCost: number
  private readonly store: Store
  private readonly failClosedRetryAfterMs: number
  private readonly hooks: LimiterHooks
  private localStore: MemoryStore | undefined

  constructor(limiters: readonly RateLimiter[], options: AllOfOptions = {}) {
    const owner = 'allOf'
    if (!Array.isArray(limiters) || limiters.length === 0 || !limiters.every((l) => isRateLimiter(l))) {
      throw invalidOption(
        owner,
        'limiters',
        'a non-empty array of rate limiters (token bucket, windows)',
        limiters,
      )
    }
    const store = (limiters[0] as RateLimiter).store
    if (!limiters.every((limiter) => limiter.store === store)) {
      throw invalidOption(
        owner,
        'limiters',
        'limiters sharing one store (atomicity needs one store)',
        'several stores',
      )
    }
    const names = limiters.map((limiter) => limiter.name)
    if (new Set(names).size !== names.length) {
      throw invalidOption(owner, 'limiters', 'limiters with distinct names', names.join(', '))
    }
    checkOptionKeys(owner, options, OPTIONS)
    this.limiters = Object.freeze([...limiters])
    this.maxCost = Math.min(...limiters.map((limiter) => limiter.maxCost))
    this.store = store
    this.name = options.name ?? names.join('+')
    this.failPolicy = oneOf(owner, 'failPolicy', options.failPolicy ?? strictest(limiters), failPolicies)
    this.failClosedRetryAfterMs = positiveInteger(
      owner,
      'failClosedRetryAfterMs',
      options.failClosedRetryAfterMs ?? 1000,
    )
    this.hooks = limiterHooksOption(owner, options.hooks)
  }

  /** Spends `cost` from every policy if every policy allows it; otherwise spends nothing. */
  async consume(key: string, cost = 1): Promise<CombinedDecision> {
    validKey('allOf', key)
    validAmount('allOf', 'cost', cost)
    const started = performance.now()
    const requests = this.limiters.map((limiter) => limiter.request('consume', key, cost))
    let decisions: Decision[]
    try {
      decisions = this.read(await this.store.consumeAll(requests), 'store')
    } catch (error) {
      if (!isStoreFailure(error)) throw error
      decisions = this.whenStoreFails(requests)
    }
    // A cost one policy can never admit is refused, whoever answered.
    if (cost > this.maxCost) {
      decisions = decisions.map((decision, i) =>
        cost > (this.limiters[i] as RateLimiter).maxCost ? refusedForever(decision) : decision,
      )
    }
    const combined = combine(decisions)
    emit(this.hooks.onDecision, {
      limiter: this.name,
      key,
      algorithm: 'allOf',
      op: 'consume',
      allowed: combined.allowed,
      source: combined.source,
      cost,
      durationMs: performance.now() - started,
    })
    return combined
  }

  /** Reads every policy without spending. */
  async peek(key: string): Promise<CombinedDecision> {
    return combine(await Promise.all(this.limiters.map((limiter) => limiter.peek(key))))
  }

  /** Gives `amount` back to every policy (each capped at its quota). */
  async refund(key: string, amount: number): Promise<CombinedDecision> {
    return combine(await Promise.all(this.limiters.map((limiter) => limiter.refund(key, amount))))
  }

  async reset(key: string): Promise<void> {
    await Promise.all(this.limiters.map((limiter) => limiter.reset(key)))
  }

  private read(replies: readonly Reply[], source: DecisionSource): Decision[] {
    return replies.map((reply, i) => (this.limiters[i] as RateLimiter).toDecision(reply, source))
  }

  private whenStoreFails(requests: Parameters<Store['consumeAll']>[0]): Decision[] {
    switch (this.failPolicy) {
      case 'open':
        return this.limiters.map((limiter) => failOpenDecision(limiter.limit))
      case 'closed':
        return this.limiters.map((limiter) => failClosedDecision(limiter.limit, this.failClosedRetryAfterMs))
      case 'local':
        this.localStore ??= new MemoryStore({ maxKeys: 10_000 })
        return this.read(this.localStore.consumeAllNow(requests), 'local')
    }
  }
}

export function allOf(limiters: readonly RateLimiter[], options?: AllOfOptions): CombinedLimiter {
  return new CombinedLimiter(limiters, options)
}

/** Allowed only if every policy allows; the numbers are those of the policy that governs the answer. */
function combine(decisions: Decision[]): CombinedDecision {
  const denied = decisions.filter((decision) => !decision.allowed)
  // Denied: a policy that can never admit the cost, else the refusal that lasts longest. Allowed: the policy with
  // the least left.
  const governing = (
    denied.length > 0
      ? (denied.find((decision) => decision.neverAllowed) ??
        denied.reduce((a, b) => (b.retryAfterMs > a.retryAfterMs ? b : a)))
      : decisions.reduce((a, b) => (b.remaining < a.remaining ? b : a))
  ) as Decision
  return { ...governing, allowed: denied.length === 0, decisions }
}

function strictest(limiters: readonly RateLimiter[]): FailPolicy {
  const policies = new Set(limiters.map((limiter) => limiter.failPolicy))
  if (policies.has('closed')) return 'closed'
  if (policies.has('local')) return 'local'
  return 'open'
}
