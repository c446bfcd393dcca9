import type { ExecutionResult } from 'graphql'
import type { LimiterHooks } from '../../core/hooks.js'
import {
  type ConcurrencyLimiter,
  concurrencyLimit,
  type Lease,
} from '../../core/limiters/concurrencyLimit.js'
import type { ResolvedConfig } from '../config.js'
import type { GraphQLContext } from '../options.js'
import { limitDetails, limitMessage, type RefusalCode, RefusalCodes, refusal } from '../refusal.js'
import type { Admission, Stop } from './admissionEngine.js'
import {
  budgetRefusal,
  charged,
  operationEvent,
  refusedResult,
  retryAfterSeconds,
  withoutHttp,
} from './operationResults.js'

/** What a running subscription needs from tollbooth while it delivers events. */
export interface SubscriptionHooks {
  /** Charges `costPerEvent` for an event; an event the budget cannot pay is replaced through `setResult`. */
  readonly onNext: ((payload: { setResult(result: ExecutionResult): void }) => Promise<void>) | undefined
  /** The subscription ended (completed, failed or cancelled): its lease is given back. */
  onEnd(): void
}

/** An admitted subscription, holding its lease (if the caller's subscriptions are capped) until it ends. */
export interface OpenSubscription {
  /**
   * The source stream was created (`result` an async iterable) or refused with a result: hooks for its events, or
   * undefined when there is nothing to run (the lease is then given back at once).
   */
  started(result: unknown): SubscriptionHooks | undefined
  /** Creating the source stream failed: the lease is given back. */
  failed(): void
}

/** The subscription side of admission: the per-identity cap (leases), the charge per event. */
export class SubscriptionAdmission {
  private readonly leases: ConcurrencyLimiter | undefined

  constructor(
    private readonly config: ResolvedConfig,
    hooks: LimiterHooks | undefined,
    private readonly overHttp: (context: GraphQLContext) => boolean,
  ) {
    this.leases =
      config.maxSubscriptionsPerIdentity === undefined
        ? undefined
        : concurrencyLimit({
            name: `${config.name}:subscriptions`,
            store: config.store,
            max: config.maxSubscriptionsPerIdentity,
            leaseMs: config.subscriptionLeaseMs,
            ...(hooks === undefined ? {} : { hooks }),
          })
  }

  /**
   * Takes a lease for an admitted subscription. Undefined: refused for the cap (`stop` has been called, and what
   * admission charged is given back, as every other refusal spends nothing).
   */
  async open(admission: Admission, stop: Stop): Promise<OpenSubscription | undefined> {
    const { config, leases } = this
    let lease: Lease | undefined
    let wouldRefuse = admission.wouldRefuse
    const report = (refused: RefusalCode | undefined) =>
      config.onOperation?.(
        operationEvent(config, admission.operation, admission.cost, refused, admission.decision),
      )
    if (leases !== undefined) {
      lease = await leases.acquire(admission.identity)
      if (!lease.allowed && config.dryRun) wouldRefuse ??= RefusalCodes.SUBSCRIPTION_LIMIT_EXCEEDED
      if (!lease.allowed && !config.dryRun) {
        const { cost, decision, limiter, identity } = admission
        if (cost > 0 && charged(decision)) {
          await limiter.refund(identity, cost).catch(() => {})
        }
        report(RefusalCodes.SUBSCRIPTION_LIMIT_EXCEEDED)
        const retryAfter = retryAfterSeconds(lease.retryAfterMs)
        const error = refusal(
          RefusalCodes.SUBSCRIPTION_LIMIT_EXCEEDED,
          limitMessage(
            config,
            `At most ${leases.limit} subscriptions may be open at once.`,
            'Too many subscriptions are open.',
          ),
          429,
          { retryAfter, ...limitDetails(config, { limit: leases.limit }) },
          { 'Retry-After': String(retryAfter) },
        )
        stop(refusedResult(config, error, admission.cost, this.overHttp(admission.context)))
        return undefined
      }
    }
    report(wouldRefuse)
    return {
      started: (result) => {
        if (!isAsyncIterable(result)) {
          void lease?.release()
          return undefined
        }
        const stopRenewing = keepLeaseAlive(lease, leases)
        return {
          onNext:
            config.costPerEvent === 0
              ? undefined
              : eventCharger(admission, config, this.overHttp(admission.context)),
          onEnd() {
            stopRenewing()
            void lease?.release()
          },
        }
      },
      failed() {
        void lease?.release()
      },
    }
  }
}

/** Charges `costPerEvent` for each event; an event the budget cannot pay is replaced by a RATE_LIMITED error. */
function eventCharger(admission: Admission, config: ResolvedConfig, overHttp: boolean) {
  return async ({ setResult }: { setResult: (r: ExecutionResult) => void }) => {
    const decision = await admission.limiter.consume(admission.identity, config.costPerEvent)
    if (decision.allowed || config.dryRun) return
    const error = budgetRefusal(
      config,
      decision,
      admission.limiter,
      config.costPerEvent,
      'An event',
      'The budget is spent; this event was not delivered.',
    )
    // Over graphql-ws there is no status line for the refusal's `http` (status, headers) to go to.
    setResult({ errors: [overHttp ? error : withoutHttp(error)] })
  }
}

/** Renews a subscription's lease every third of its lifetime while it lives; returns the stop function. */
function keepLeaseAlive(lease: Lease | undefined, limiter: ConcurrencyLimiter | undefined): () => void {
  if (lease?.leaseId === undefined || limiter === undefined) return () => {}
  const timer = setInterval(
    () => void lease.renew().catch(() => {}),
    Math.max(1, Math.floor(limiter.leaseMs / 3)),
  )
  timer.unref()
  return () => clearInterval(timer)
}

export function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === 'object' && value !== null && Symbol.asyncIterator in value
}
