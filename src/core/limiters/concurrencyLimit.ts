import { randomUUID } from 'node:crypto'
import type { Decision } from '../decision.js'
import { optionNames } from '../knownOptions.js'
import { LimiterBase, type LimiterOptions, limiterOptionKeys, resolveLimiterOptions } from '../limiterBase.js'
import { LIMITER_KIND, type LimiterKind } from '../limiterKind.js'
import type { Store } from '../stores/store.js'
import { positiveInteger, timerMs, validKey } from '../validate.js'

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
  /** The lease's id; `undefined` when denied. */
  readonly leaseId: string | undefined
  /** Frees the slot. Safe to call more than once: only the first call reaches the store. */
  release(): Promise<void>
  /**
   * Extends the lease by `leaseMs` from now. A lease the store no longer holds (it expired, the store lost it in a
   * failover or a restart, or the fail policy granted it while the store was unreachable) takes a free slot again.
   * Resolves `true` when held, `false` when released, never granted, or gone with every slot taken (the holder
   * should let go), and `true` while the store cannot be reached (a store outage should not end connections).
   */
  renew(): Promise<boolean>
}

/**
 * Concurrency leases: at most `max` concurrent holders per key (open WebSocket connections per identity, running
 * jobs per tenant). Crash-safe: leases expire after `leaseMs` unless renewed.
 */
export class ConcurrencyLimiter extends LimiterBase {
  readonly algorithm = 'concurrencyLimit'
  /** Told apart from other limiters by this mark (see core/limiterKinds.ts). */
  get [LIMITER_KIND](): LimiterKind {
    return 'concurrency'
  }
  readonly limit: number
  readonly leaseMs: number
  private readonly leaseUs: number

  constructor(options: ConcurrencyLimitOptions) {
    const owner = 'concurrencyLimit'
    super(resolveLimiterOptions(owner, options, OPTIONS))
    this.limit = positiveInteger(owner, 'max', options.max)
    // Renewed every leaseMs / 3 by a timer: a lease longer than a timer honours would be renewed every millisecond.
    this.leaseMs = timerMs(owner, 'leaseMs', options.leaseMs)
    this.leaseUs = this.leaseMs * 1000
  }

  async acquire(key: string): Promise<Lease> {
    validKey(this.algorithm, key)
    const leaseId = randomUUID()
    const { decision, store } = await this.run(this.request('acquire', key, leaseId), 1)
    if (!decision.allowed) {
      return {
        ...decision,
        leaseId: undefined,
        release: () => Promise.resolve(),
        renew: () => Promise.resolve(false),
      }
    }
    // Granted by the fail policy: `open` recorded it nowhere, `local` in the in-process twin.
    const twin = store !== this.store ? store : undefined
    return this.lease(decision, key, leaseId, twin)
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

  /**
   * A granted lease. Its renewals go to the store even when the fail policy granted it: a lease the store does not
   * hold (granted while it was unreachable, or forgotten by a failover or a restart) takes a free slot there again,
   * or is lost when the slots are full, so that the holders beyond `max` let go once the store is back.
   */
  private lease(decision: Decision, key: string, leaseId: string, twin: Store | undefined): Lease {
    let released: Promise<void> | undefined
    let localTwin = twin
    const call = (store: Store, op: 'release' | 'renew') => store.run(this.request(op, key, leaseId))
    const dropFromTwin = () => {
      if (localTwin !== undefined) void call(localTwin, 'release').catch(() => {})
      localTwin = undefined
    }
    return {
      ...decision,
      leaseId,
      release: () => {
        // An unreachable store is not an error here: the lease expires by itself after leaseMs.
        released ??= call(this.store, 'release').then(
          () => undefined,
          () => undefined,
        )
        dropFromTwin()
        return released
      },
      renew: () => {
        if (released !== undefined) return Promise.resolve(false)
        return call(this.store, 'renew').then(
          (reply) => {
            // The store holds it now: the twin's copy would only count it twice if the store failed again.
            dropFromTwin()
            return reply[0] === 1
          },
          () => {
            // A store outage does not end the holder; a lease of the twin stays counted there.
            if (localTwin === undefined) return true
            return call(localTwin, 'renew').then(
              (reply) => reply[0] === 1,
              () => true,
            )
          },
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
