import type { ExecutionResult } from 'graphql'
import type { Decision } from '../../core/decision.js'
import type { LimiterHooks } from '../../core/hooks.js'
import {
  type ConcurrencyLimiter,
  concurrencyLimit,
  type Lease,
} from '../../core/limiters/concurrencyLimit.js'
import type { RateLimiter } from '../../core/rateLimiter.js'
import { timerDelay } from '../../core/validate.js'
import { isAsyncIterable } from '../asyncIterable.js'
import type { GraphQLContext, MaybePromise } from '../optionTypes.js'
import { limitDetails, limitMessage, type RefusalCode, RefusalCodes, refusal } from '../refusal.js'
import type { AdmittedOperation, Stop } from './admittedOperation.js'
import { decide } from './budgetDecision.js'
import type { ChargedEvent, SubscriptionHooks } from './chargedEvents.js'
import {
  budgetRefusal,
  operationEvent,
  refusedResult,
  retryAfterSeconds,
  withoutHttp,
} from './operationResults.js'
import type { ResolvedConfig } from './resolveOptions.js'
import { actualCost, debitWork, spentByDecision } from './settlement.js'

export type { SubscriptionHooks } from './chargedEvents.js'

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

/**
 * The subscription side of admission: the per-identity cap (leases), and each event's charge, what its result
 * cost, to the subscriber's budget for events.
 */
export class SubscriptionAdmission {
  private readonly leases: ConcurrencyLimiter | undefined
  /** Per query budget, its default twin for events. */
  private readonly eventTwins = new WeakMap<RateLimiter, RateLimiter>()

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
  async open(admission: AdmittedOperation, stop: Stop): Promise<OpenSubscription | undefined> {
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
        // Refused for the cap, a denial as the budget's are: what admission charged goes back.
        const { cost, decision, limiter, identity } = admission
        if (cost > 0 && spentByDecision(decision)) {
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
    const events = await this.eventBudget(admission)
    admission.meter.boundEvents(events)
    return {
      started: (result) => {
        if (!isAsyncIterable(result)) {
          void lease?.release()
          return undefined
        }
        const stopRenewing = keepLeaseAlive(lease, leases)
        return {
          charge: eventCharger(admission, events, config, this.overHttp(admission.context)),
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

  /**
   * The budget the subscription's events draw from: `subscriptions.limiter`, or by default a budget of the same
   * size as the operation's, kept apart (`<name>-events`), so that what others publish can end a subscription but
   * never spend its owner's budget for queries.
   */
  private async eventBudget(admission: AdmittedOperation): Promise<RateLimiter> {
    const chosen = this.config.eventLimiter?.(admission.context)
    if (chosen !== undefined) return chosen
    let twin = this.eventTwins.get(admission.limiter)
    if (twin === undefined) {
      twin = admission.limiter.twin(`${admission.limiter.name}-events`)
      this.eventTwins.set(admission.limiter, twin)
    }
    return twin
  }
}

/**
 * Charges each event what its result cost in the cost model (at least `costPerEvent`), to `limiter` for the
 * subscriber, into debt if need be: the work of an event is done by the time it is counted. An event the budget
 * could not pay without debt is not sent: a RATE_LIMITED refusal is, and the subscription ends.
 */
function eventCharger(
  admission: AdmittedOperation,
  limiter: RateLimiter,
  config: ResolvedConfig,
  overHttp: boolean,
): (event: ExecutionResult) => MaybePromise<ChargedEvent> {
  /** The event the budget could not pay: its work is done, so it is paid all the same, and it ends the subscription. */
  const refuse = (cost: number, decision: Decision): ChargedEvent => {
    const error = budgetRefusal(
      config,
      decision,
      limiter,
      cost,
      'An event',
      `The budget for events is spent; the subscription ends. Retry in ${retryAfterSeconds(decision.retryAfterMs)} s.`,
    )
    // Over graphql-ws there is no status line for the refusal's `http` (status, headers) to go to.
    return { result: { errors: [overHttp ? error : withoutHttp(error)] }, last: true }
  }
  const judge = (event: ExecutionResult, cost: number, paid: Decision): MaybePromise<ChargedEvent> => {
    if (paid.allowed || config.dryRun) return { result: event, last: false }
    const debited = debitWork(limiter, admission.identity, cost)
    return debited instanceof Promise ? debited.then((owed) => refuse(cost, owed)) : refuse(cost, debited)
  }
  const { meter } = admission
  return (event) => {
    // What the event's execution ran, as its resolvers reported it (an error's null hides none of it).
    const ran = { work: meter.work - meter.counted, uncounted: meter.uncounted - meter.uncountedBefore }
    meter.counted = meter.work
    meter.uncountedBefore = meter.uncounted
    const cost = actualCost(
      admission,
      event,
      event.errors,
      config.costPerEvent,
      admission.metered ? ran : undefined,
    )
    if (cost === 0) return { result: event, last: false }
    // Paid if the budget holds it; an event it cannot pay is debited (its work is done) and is the last.
    const paid = decide(limiter, admission.identity, cost)
    return paid instanceof Promise
      ? paid.then((decided) => judge(event, cost, decided))
      : judge(event, cost, paid)
  }
}

/** Renews a subscription's lease every third of its lifetime while it lives; returns the stop function. */
function keepLeaseAlive(lease: Lease | undefined, limiter: ConcurrencyLimiter | undefined): () => void {
  if (lease?.leaseId === undefined || limiter === undefined) return () => {}
  const timer = setInterval(() => void lease.renew().catch(() => {}), timerDelay(limiter.leaseMs / 3))
  timer.unref()
  return () => clearInterval(timer)
}
