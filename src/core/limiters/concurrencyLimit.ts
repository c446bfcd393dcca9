import { randomUUID } from 'node:crypto'
import type { Decision } from '../decision.js'
import { optionNames } from '../knownOptions.js'
import { LimiterBase, type LimiterOptions, limiterOptionKeys, resolveLimiterOptions } from '../limiterBase.js'
import type { Store } from '../stores/store.js'
import { positiveInteger, validKey } from '../validate.js'

export interface ConcurrencyLimitOptions extends LimiterOptions {
  /** Most leases held at once per key. */
  max: number
  /**
   * How long a lease lives unless renewed, in milliseconds. A holder that dies without releasing frees its slot
   * after this long; a live holder renews well before (e.g. every `leaseMs / 3`).
   */
  leaseMs: number
}

const OPTIONS = optionNames<ConcurrencyLimitOptions>({ ...limiterOptionKeys, max: true, leaseMs: true })

/** An `acquire` decision. When allowed, the slot is held until `release()` or until the lease expires. */
export interface Lease extends Decision {
  /** The lease's id; `undefined` when denied or when granted by `failPolicy: 'open'` (nothing to release). */
  readonly leaseId: string | undefined
  /** Frees the slot. Safe to call more than once: only the first call reaches the store. */
  release(): Promise<void>
  /**
   * Extends the lease by `leaseMs` from now. Resolves `false` when the lease is gone (expired or released) or was
   * never granted, `true` when still held, and also `true` when the store cannot be reached or the lease was granted
   * by `failPolicy: 'open'` (a store outage should not end connections).
   */
  renew(): Promise<boolean>
}

/**
 * Concurrency leases: at most `max` concurrent holders per key (open WebSocket connections per identity, running
 * jobs per tenant). Crash-safe: leases expire after `leaseMs` unless renewed.
 */
export class ConcurrencyLimiter extends LimiterBase {
  readonly algorithm = 'concurrencyLimit'
  readonly limit: number
  readonly leaseMs: number
  private readonly leaseUs: number

  constructor(options: ConcurrencyLimitOptions) {
    const owner = 'concurrencyLimit'
    super(resolveLimiterOptions(owner, options, OPTIONS))
    this.limit = positiveInteger(owner, 'max', options.max)
    this.leaseMs = positiveInteger(owner, 'leaseMs', options.leaseMs)
    this.leaseUs = this.leaseMs * 1000
  }

  async acquire(key: string): Promise<Lease> {
    validKey(this.algorithm, key)
    const leaseId = randomUUID()
    const { decision, store } = await this.run(this.request('acquire', key, leaseId), 1)
    if (!decision.allowed || store === undefined) {
      // Denied: there is nothing to renew. Granted by `failPolicy: 'open'`: nothing was recorded, so nothing can be
      // lost either; renew answers true, as it does for any lease while the store is unreachable.
      const held = decision.allowed
      return {
        ...decision,
        leaseId: undefined,
        release: () => Promise.resolve(),
        renew: () => Promise.resolve(held),
      }
    }
    return this.lease(decision, store, key, leaseId)
  }

  /** How many leases `key` holds now; `allowed` says whether one more could be acquired. */
  async peek(key: string): Promise<Decision> {
    validKey(this.algorithm, key)
    return (await this.run(this.request('peek', key, ''), 0)).decision
  }

  /** Drops every lease of `key`. */
  async reset(key: string): Promise<void> {
    validKey(this.algorithm, key)
    this.forgetLocally(key)
    await this.store.delete(this.name, key)
  }

  private lease(decision: Decision, store: Store, key: string, leaseId: string): Lease {
    let released: Promise<void> | undefined
    const call = (op: 'release' | 'renew') => store.run(this.request(op, key, leaseId))
    return {
      ...decision,
      leaseId,
      release: () => {
        // An unreachable store is not an error here: the lease expires by itself after leaseMs.
        released ??= call('release').then(
          () => undefined,
          () => undefined,
        )
        return released
      },
      renew: () => {
        if (released !== undefined) return Promise.resolve(false)
        return call('renew').then(
          (reply) => reply[0] === 1,
          () => true,
        )
      },
    }
  }

  private request(op: string, key: string, leaseId: string) {
    return {
      algorithm: 'concurrency' as const,
      op,
      limiter: this.name,
      key,
      args: [this.leaseUs, this.limit, leaseId],
    }
  }
}

export function concurrencyLimit(options: ConcurrencyLimitOptions): ConcurrencyLimiter {
  return new ConcurrencyLimiter(options)
}
