import { Counter, Gauge, Histogram, type Registry, register } from 'prom-client'
import { worstBreakerState } from '../core/circuitBreaker.js'
import { type Clock, nowMicros } from '../core/clock.js'
import { invalidOption } from '../core/errors.js'
import type { BreakerState, DecisionEvent, LimiterHooks, StoreHooks } from '../core/hooks.js'
import { checkOptionKeys, optionNames } from '../core/knownOptions.js'
import { isOptionsObject, positiveInteger } from '../core/validate.js'
import type { OperationEvent } from '../graphql/optionTypes.js'
import { ActiveIdentities } from './activeIdentities.js'
import { ESTIMATE_ERROR_BOUND, EXACT_CAP } from './distinctCounter.js'

export interface PrometheusMetricsOptions {
  /** Where the metrics are registered. @default prom-client's global `register` */
  registry?: Registry
  /** Prefix of every metric name. @default 'tollbooth_' */
  prefix?: string
  /** Buckets of the store latency histogram, in seconds. @default 0.25 ms … 250 ms */
  storeDurationBuckets?: readonly number[]
  /** Buckets of the decision time histogram, in seconds. @default 0.1 ms … 1 s */
  decisionDurationBuckets?: readonly number[]
  /** Buckets of the GraphQL cost histograms. @default 1 … 10000 */
  costBuckets?: readonly number[]
  /**
   * Window of the active identities gauge, in milliseconds: it reports the distinct identities of the last complete
   * window. @default 60000
   */
  activeWindowMs?: number
  /** Most limiters the active identities gauge tracks; the limiters past it are left out of it. @default 100 */
  activeMaxLimiters?: number
  /** Clock in microseconds of the active identities windows; for tests and simulations. @default wall clock */
  clock?: Clock
}

/** What `watchStore` reads: a RedisStore (its name and its breaker). */
export interface WatchedStore {
  readonly name: string
  readonly breaker: { readonly state: BreakerState }
}

/** What `watchWebSocketServer` reads: the handle `protectWebSocketServer` returns. */
export interface WatchedWebSocketProtection {
  readonly openConnections: number
  readonly pendingUpgrades?: number
}

export interface PrometheusMetrics {
  readonly registry: Registry
  /**
   * `hooks` for limiters (`tokenBucket({ …, hooks })`, `allOf(…, { hooks })`): counts `consume` and `acquire`
   * decisions by limiter, result and source, those answered by a fail policy, and the distinct identities they were
   * for. `peek` and `refund` are not decisions and are not counted.
   */
  readonly limiterHooks: LimiterHooks
  /** `hooks` for a `RedisStore`: latency of successful calls, errors by code, breaker state and transitions. */
  readonly storeHooks: StoreHooks
  /**
   * `onOperation` for `useTollbooth`: operations by type and refusal, requested and actual cost, and the operations
   * whose actual cost was above their estimate.
   */
  readonly onOperation: (event: OperationEvent) => void
  /**
   * Reports the store's breaker state at every scrape (without it, a store shows up only after its first breaker
   * change). Returns a function that stops watching.
   */
  watchStore(store: WatchedStore): () => void
  /**
   * Reports the protection's open connections (and upgrades being decided) at every scrape, labelled `server`.
   * Returns a function that stops watching.
   */
  watchWebSocketServer(server: string, protection: WatchedWebSocketProtection): () => void
  /** Counts a message dropped over quota; call it from `protectWebSocketServer`'s `onDrop`. */
  webSocketDropped(server: string): void
  /** Counts a closed WebSocket by close code (codes outside the standard and tollbooth's own count as `other`). */
  webSocketClosed(server: string, code: number): void
}

const OWNER = 'createPrometheusMetrics'
const OPTIONS = optionNames<PrometheusMetricsOptions>({
  registry: true,
  prefix: true,
  storeDurationBuckets: true,
  decisionDurationBuckets: true,
  costBuckets: true,
  activeWindowMs: true,
  activeMaxLimiters: true,
  clock: true,
})
const BREAKER_STATES: readonly BreakerState[] = ['closed', 'half-open', 'open']
/** Close codes kept as label values; any other (a client may send any code from 3000 to 4999) is `other`. */
const KNOWN_CLOSE_CODES = new Set([
  1000, 1001, 1002, 1003, 1005, 1006, 1007, 1008, 1009, 1010, 1011, 1012, 1013,
])
/** Decision ops that admit or deny something; `peek` and `refund` (and lease renewals) are not counted. */
const COUNTED_OPS = new Set(['consume', 'acquire'])
const FAIL_POLICY_SOURCES: Readonly<Record<string, string>> = {
  'fail-open': 'open',
  'fail-closed': 'closed',
  local: 'local',
}

/** The options, checked, with their defaults: what every metric family is made from. */
interface Settings {
  readonly registers: Registry[]
  readonly prefix: string
  readonly storeDurationBuckets: readonly number[] | undefined
  readonly decisionDurationBuckets: readonly number[] | undefined
  readonly costBuckets: readonly number[] | undefined
  readonly activeWindowMs: number
  readonly activeMaxLimiters: number
  readonly clock: Clock
}

function resolveSettings(options: PrometheusMetricsOptions): Settings {
  if (!isOptionsObject(options)) throw invalidOption(OWNER, 'options', 'an object', options)
  checkOptionKeys(OWNER, options, OPTIONS)
  const prefix = options.prefix ?? 'tollbooth_'
  if (typeof prefix !== 'string' || !/^([a-zA-Z_:][a-zA-Z0-9_:]*)?$/.test(prefix)) {
    throw invalidOption(OWNER, 'prefix', 'a metric name prefix ([a-zA-Z_:][a-zA-Z0-9_:]*)', prefix)
  }
  // `undefined` takes the default; `null` is refused like any other value of the wrong type.
  const given = <T>(value: T | undefined, fallback: T): T => (value === undefined ? fallback : value)
  const clock = given(options.clock, nowMicros)
  if (typeof clock !== 'function') throw invalidOption(OWNER, 'clock', 'a function', clock)
  return {
    registers: [options.registry ?? register],
    prefix,
    storeDurationBuckets: options.storeDurationBuckets,
    decisionDurationBuckets: options.decisionDurationBuckets,
    costBuckets: options.costBuckets,
    activeWindowMs: positiveInteger(OWNER, 'activeWindowMs', given(options.activeWindowMs, 60_000)),
    activeMaxLimiters: positiveInteger(OWNER, 'activeMaxLimiters', given(options.activeMaxLimiters, 100)),
    clock,
  }
}

/** Limiter decisions: counts, times, fail-policy answers, and the distinct identities they were for. */
function decisionMetrics({ registers, prefix, ...settings }: Settings): LimiterHooks {
  const decisions = new Counter({
    name: `${prefix}decisions_total`,
    help: 'Limiter decisions (consume and acquire), by limiter, result and the source that decided.',
    labelNames: ['limiter', 'result', 'source'] as const,
    registers,
  })
  const decisionDuration = new Histogram({
    name: `${prefix}decision_duration_seconds`,
    help: 'Time of a decision (consume and acquire), store round trip included, by limiter and source.',
    labelNames: ['limiter', 'source'] as const,
    buckets: [
      ...(settings.decisionDurationBuckets ?? [
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
      ]),
    ],
    registers,
  })
  const failPolicyDecisions = new Counter({
    name: `${prefix}fail_policy_decisions_total`,
    help: 'Decisions answered by the fail policy because the store failed (open, closed or local), by limiter.',
    labelNames: ['limiter', 'policy'] as const,
    registers,
  })
  const { activeWindowMs } = settings
  const activeIdentities = new ActiveIdentities({
    windowMs: activeWindowMs,
    maxLimiters: settings.activeMaxLimiters,
    clock: settings.clock,
  })
  new Gauge({
    name: `${prefix}active_identities`,
    help:
      `Distinct identities with a decision (consume or acquire, allowed or denied) in the last complete ` +
      `${activeWindowMs / 1000} s window, by limiter: exact up to ${EXACT_CAP}, estimated within ` +
      `${ESTIMATE_ERROR_BOUND * 100} % above.`,
    labelNames: ['limiter'] as const,
    registers,
    collect() {
      this.reset()
      for (const [limiter, count] of activeIdentities.lastWindowCounts()) this.set({ limiter }, count)
    },
  })

  // A decision is the hot path: the labelled children are looked up once per (limiter, result, source).
  const decisionChildren = new Map<string, Counter.Internal>()
  const durationChildren = new Map<string, ReturnType<typeof decisionDuration.labels>>()
  const onDecision = (event: DecisionEvent): void => {
    if (!COUNTED_OPS.has(event.op)) return
    const result = event.allowed ? 'allowed' : 'denied'
    const id = `${event.limiter}\u0000${result}\u0000${event.source}`
    let child = decisionChildren.get(id)
    if (child === undefined) {
      child = decisions.labels({ limiter: event.limiter, result, source: event.source })
      decisionChildren.set(id, child)
    }
    child.inc()
    const durationId = `${event.limiter}\u0000${event.source}`
    let duration = durationChildren.get(durationId)
    if (duration === undefined) {
      duration = decisionDuration.labels({ limiter: event.limiter, source: event.source })
      durationChildren.set(durationId, duration)
    }
    duration.observe(event.durationMs / 1000)
    const policy = FAIL_POLICY_SOURCES[event.source]
    if (policy !== undefined) failPolicyDecisions.inc({ limiter: event.limiter, policy })
    // The identity is hashed into the count and never kept, let alone used as a label.
    activeIdentities.record(event.limiter, event.key)
  }
  return { onDecision }
}

/** Store calls: latency, errors, and the circuit breakers' states and transitions. */
function storeMetrics({ registers, prefix, storeDurationBuckets }: Settings): {
  readonly storeHooks: StoreHooks
  readonly watchStore: PrometheusMetrics['watchStore']
} {
  const storeDuration = new Histogram({
    name: `${prefix}store_duration_seconds`,
    help: 'Round-trip time of successful store calls, in seconds.',
    labelNames: ['store'] as const,
    buckets: [
      ...(storeDurationBuckets ?? [0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25]),
    ],
    registers,
  })
  const storeErrors = new Counter({
    name: `${prefix}store_errors_total`,
    help: 'Failed store calls, by store, operation and error code (TOLLBOOTH_ERR_STORE_*).',
    labelNames: ['store', 'op', 'code'] as const,
    registers,
  })
  /**
   * Per store name, the nodes whose breaker the events left not closed (a closed one is dropped: the map holds at
   * most the nodes failing now). Watched stores are read again at every scrape instead.
   */
  const openNodes = new Map<string, Map<string, BreakerState>>()
  const watchedStores = new Set<WatchedStore>()
  new Gauge({
    name: `${prefix}store_breaker_state`,
    help: "The store's circuit breakers (one per Redis node): 1 for the worst node's state, 0 for the others.",
    labelNames: ['store', 'state'] as const,
    registers,
    collect() {
      const current = new Map<string, BreakerState>()
      for (const [store, nodes] of openNodes) current.set(store, worstBreakerState(nodes.values()))
      for (const store of watchedStores) current.set(store.name, store.breaker.state)
      this.reset()
      for (const [store, worst] of current) {
        for (const state of BREAKER_STATES) this.set({ store, state }, state === worst ? 1 : 0)
      }
    },
  })
  const breakerTransitions = new Counter({
    name: `${prefix}store_breaker_transitions_total`,
    help: "Changes of the store's circuit breaker, by the state entered.",
    labelNames: ['store', 'to'] as const,
    registers,
  })

  // Every store call reports its latency: one child per store, looked up once.
  const latencyChildren = new Map<string, ReturnType<typeof storeDuration.labels>>()
  const onStoreLatency: NonNullable<StoreHooks['onStoreLatency']> = ({ store, durationMs }) => {
    let child = latencyChildren.get(store)
    if (child === undefined) {
      child = storeDuration.labels({ store })
      latencyChildren.set(store, child)
    }
    child.observe(durationMs / 1000)
  }
  return {
    storeHooks: {
      onStoreLatency,
      onStoreError: ({ store, op, error }) =>
        storeErrors.inc({ store, op, code: typeof error.code === 'string' ? error.code : 'unknown' }),
      onBreakerChange: ({ store, node, to }) => {
        const nodes = openNodes.get(store) ?? new Map<string, BreakerState>()
        openNodes.set(store, nodes)
        if (to === 'closed') nodes.delete(node)
        else nodes.set(node, to)
        breakerTransitions.inc({ store, to })
      },
    },
    watchStore(store) {
      watchedStores.add(store)
      return () => {
        watchedStores.delete(store)
      }
    },
  }
}

/** GraphQL operations: by type and refusal, their requested and actual costs, and the underestimates. */
function graphqlMetrics({ registers, prefix, ...settings }: Settings): (event: OperationEvent) => void {
  const operations = new Counter({
    name: `${prefix}graphql_operations_total`,
    help: 'GraphQL operations priced, by type and refusal code ("none" when it ran); in dry-run mode the refusal that would have been.',
    labelNames: ['operation_type', 'refused', 'dry_run'] as const,
    registers,
  })
  const costBuckets = [
    ...(settings.costBuckets ?? [1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000]),
  ]
  const requestedCost = new Histogram({
    name: `${prefix}graphql_requested_cost`,
    help: 'Estimated cost of GraphQL operations (refused ones included), by type.',
    labelNames: ['operation_type'] as const,
    buckets: costBuckets,
    registers,
  })
  const actualCost = new Histogram({
    name: `${prefix}graphql_actual_cost`,
    help: 'Cost of GraphQL responses as counted after execution, by type.',
    labelNames: ['operation_type'] as const,
    buckets: costBuckets,
    registers,
  })
  const underestimates = new Counter({
    name: `${prefix}graphql_cost_underestimates_total`,
    help: 'GraphQL operations whose response cost more than their estimate (a list size set too low), by type.',
    labelNames: ['operation_type'] as const,
    registers,
  })
  return (event) => {
    const operation_type = event.operationType
    operations.inc({ operation_type, refused: event.refused ?? 'none', dry_run: String(event.dryRun) })
    requestedCost.observe({ operation_type }, event.requestedCost)
    if (event.actualCost === undefined) return
    actualCost.observe({ operation_type }, event.actualCost)
    if (event.actualCost > event.requestedCost) underestimates.inc({ operation_type })
  }
}

/** WebSocket servers: open connections and pending upgrades read at each scrape, drops, and closes by code. */
function webSocketMetrics({
  registers,
  prefix,
}: Settings): Pick<PrometheusMetrics, 'watchWebSocketServer' | 'webSocketDropped' | 'webSocketClosed'> {
  const webSocketServers = new Map<string, WatchedWebSocketProtection>()
  new Gauge({
    name: `${prefix}ws_open_connections`,
    help: 'Open WebSocket connections admitted by tollbooth/ws, by server.',
    labelNames: ['server'] as const,
    registers,
    collect() {
      this.reset()
      for (const [server, protection] of webSocketServers) this.set({ server }, protection.openConnections)
    },
  })
  new Gauge({
    name: `${prefix}ws_pending_upgrades`,
    help: 'WebSocket upgrades being decided now, by server.',
    labelNames: ['server'] as const,
    registers,
    collect() {
      this.reset()
      for (const [server, protection] of webSocketServers) {
        if (protection.pendingUpgrades !== undefined) this.set({ server }, protection.pendingUpgrades)
      }
    },
  })
  const droppedMessages = new Counter({
    name: `${prefix}ws_dropped_messages_total`,
    help: 'WebSocket messages dropped over quota, by server.',
    labelNames: ['server'] as const,
    registers,
  })
  const closedSockets = new Counter({
    name: `${prefix}ws_closed_total`,
    help: 'Closed WebSocket connections, by server and close code.',
    labelNames: ['server', 'code'] as const,
    registers,
  })
  return {
    watchWebSocketServer(server, protection) {
      webSocketServers.set(server, protection)
      return () => {
        if (webSocketServers.get(server) === protection) webSocketServers.delete(server)
      }
    },
    webSocketDropped(server) {
      droppedMessages.inc({ server })
    },
    webSocketClosed(server, code) {
      closedSockets.inc({ server, code: KNOWN_CLOSE_CODES.has(code) ? String(code) : 'other' })
    },
  }
}

/**
 * Creates tollbooth's metrics in `registry`. Create it once per registry: prom-client refuses a second metric of
 * the same name.
 *
 * ```ts
 * const metrics = createPrometheusMetrics({ registry })
 * const budget = tokenBucket({ name: 'api', capacity: 100, refillPerSecond: 10, hooks: metrics.limiterHooks })
 * const store = new RedisStore({ client, hooks: metrics.storeHooks }); metrics.watchStore(store)
 * useTollbooth({ limiter: budget, onOperation: metrics.onOperation })
 * metrics.watchWebSocketServer('chat', protectWebSocketServer(wss, { … }))
 * ```
 */
export function createPrometheusMetrics(options: PrometheusMetricsOptions = {}): PrometheusMetrics {
  const settings = resolveSettings(options)
  const [registry] = settings.registers as [Registry]
  // Registered in this order, which is the order of a scrape.
  const limiterHooks = decisionMetrics(settings)
  const { storeHooks, watchStore } = storeMetrics(settings)
  const onOperation = graphqlMetrics(settings)
  return { registry, limiterHooks, storeHooks, onOperation, watchStore, ...webSocketMetrics(settings) }
}
