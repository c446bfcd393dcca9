/**
 * tollbooth/metrics (src/metrics/index.ts) with a real prom-client Registry: real limiters on a MemoryStore (exact
 * counter values), limiters on a store that fails (fail-policy sources), a RedisStore on the test Redis (latency)
 * and on a port nothing listens on (errors, breaker), `onOperation` events as useTollbooth reports them, and the
 * WebSocket gauges read at scrape time. No label value may be an identity.
 */
import { createServer } from 'node:net'
import { Redis } from 'ioredis'
import { Registry } from 'prom-client'
import { afterEach, describe, expect, inject, it } from 'vitest'
import { ErrorCodes, TollboothError } from '../../../src/core/errors.js'
import {
  allOf,
  concurrencyLimit,
  fixedWindow,
  MemoryStore,
  RedisStore,
  type Store,
  tokenBucket,
} from '../../../src/index.js'
import { createPrometheusMetrics } from '../../../src/metrics/index.js'
import { limiterClientOptions, whenReady } from '../../helpers/stores.js'

const cleanups: (() => unknown)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** The value of one sample of `name` with exactly `labels`, or undefined when there is none. */
async function sample(
  registry: Registry,
  name: string,
  labels: Record<string, string>,
): Promise<number | undefined> {
  const metrics = await registry.getMetricsAsJSON()
  for (const metric of metrics) {
    for (const value of metric.values as {
      value: number
      labels: Record<string, unknown>
      metricName?: string
    }[]) {
      const sampleName = value.metricName ?? metric.name
      if (sampleName !== name) continue
      const keys = Object.keys(value.labels)
      if (
        keys.length === Object.keys(labels).length &&
        keys.every((key) => String(value.labels[key]) === labels[key])
      ) {
        return value.value
      }
    }
  }
  return undefined
}

/** Every label value of every sample in the registry. */
async function labelValues(registry: Registry): Promise<string[]> {
  const metrics = await registry.getMetricsAsJSON()
  return metrics.flatMap((metric) =>
    (metric.values as { labels: Record<string, unknown> }[]).flatMap((value) =>
      Object.values(value.labels).map(String),
    ),
  )
}

/** A store that always fails as an unreachable Redis does (its breaker open). */
const failingStore: Store = {
  kind: 'remote',
  run: () => Promise.reject(new TollboothError(ErrorCodes.STORE_UNAVAILABLE, 'down')),
  consumeAll: () => Promise.reject(new TollboothError(ErrorCodes.STORE_UNAVAILABLE, 'down')),
  delete: () => Promise.reject(new TollboothError(ErrorCodes.STORE_UNAVAILABLE, 'down')),
}

describe('createPrometheusMetrics', () => {
  it('counts consume decisions by limiter, result and source on a memory store; peek and refund are not decisions', async () => {
    const registry = new Registry()
    const metrics = createPrometheusMetrics({ registry })
    const store = new MemoryStore()
    const limiter = tokenBucket({
      name: 'api',
      store,
      capacity: 3,
      refillPerSecond: 0.001,
      hooks: metrics.limiterHooks,
    })
    const other = tokenBucket({
      name: 'other',
      store,
      capacity: 1,
      refillPerSecond: 0.001,
      hooks: metrics.limiterHooks,
    })
    const results: boolean[] = []
    for (let i = 0; i < 5; i++) results.push((await limiter.consume('alice@example.com')).allowed)
    expect(results).toEqual([true, true, true, false, false])
    await limiter.peek('alice@example.com')
    await limiter.refund('alice@example.com', 1)
    expect((await limiter.consume('alice@example.com')).allowed).toBe(true)
    await other.consume('10.1.2.3')
    await other.consume('10.1.2.3')

    const decisions = 'tollbooth_decisions_total'
    expect(await sample(registry, decisions, { limiter: 'api', result: 'allowed', source: 'store' })).toBe(4)
    expect(await sample(registry, decisions, { limiter: 'api', result: 'denied', source: 'store' })).toBe(2)
    expect(await sample(registry, decisions, { limiter: 'other', result: 'allowed', source: 'store' })).toBe(
      1,
    )
    expect(await sample(registry, decisions, { limiter: 'other', result: 'denied', source: 'store' })).toBe(1)
    const text = await registry.metrics()
    expect(text).toContain('tollbooth_decisions_total{limiter="api",result="allowed",source="store"} 4')
    expect(text).not.toContain('tollbooth_fail_policy_decisions_total{')
    // Identities never become labels.
    for (const value of await labelValues(registry)) {
      expect(value).not.toMatch(/alice|10\.1\.2\.3/)
    }
    expect(text).not.toMatch(/alice|10\.1\.2\.3/)
  })

  it('counts concurrency acquires and allOf decisions under their own names', async () => {
    const registry = new Registry()
    const metrics = createPrometheusMetrics({ registry })
    const leases = concurrencyLimit({ name: 'conns', max: 1, leaseMs: 10_000, hooks: metrics.limiterHooks })
    const first = await leases.acquire('u1')
    const second = await leases.acquire('u1')
    expect([first.allowed, second.allowed]).toEqual([true, false])
    await first.release()
    expect((await leases.acquire('u1')).allowed).toBe(true)

    const store = new MemoryStore()
    const burst = tokenBucket({ name: 'burst', store, capacity: 2, refillPerSecond: 0.001 })
    const daily = fixedWindow({ name: 'daily', store, limit: 100, windowMs: 86_400_000 })
    const both = allOf([burst, daily], { name: 'burst+daily', hooks: metrics.limiterHooks })
    for (let i = 0; i < 3; i++) await both.consume('u1')

    const decisions = 'tollbooth_decisions_total'
    expect(await sample(registry, decisions, { limiter: 'conns', result: 'allowed', source: 'store' })).toBe(
      2,
    )
    expect(await sample(registry, decisions, { limiter: 'conns', result: 'denied', source: 'store' })).toBe(1)
    expect(
      await sample(registry, decisions, { limiter: 'burst+daily', result: 'allowed', source: 'store' }),
    ).toBe(2)
    expect(
      await sample(registry, decisions, { limiter: 'burst+daily', result: 'denied', source: 'store' }),
    ).toBe(1)
  })

  it('counts decisions answered by each fail policy while the store fails', async () => {
    const registry = new Registry()
    const metrics = createPrometheusMetrics({ registry })
    const hooks = metrics.limiterHooks
    const open = tokenBucket({ name: 'open', store: failingStore, capacity: 5, refillPerSecond: 1, hooks })
    const closed = tokenBucket({
      name: 'closed',
      store: failingStore,
      capacity: 5,
      refillPerSecond: 1,
      failPolicy: 'closed',
      hooks,
    })
    const local = tokenBucket({
      name: 'local',
      store: failingStore,
      capacity: 2,
      refillPerSecond: 0.001,
      failPolicy: 'local',
      hooks,
    })
    for (let i = 0; i < 3; i++) {
      await open.consume('k')
      await closed.consume('k')
      await local.consume('k')
    }
    const decisions = 'tollbooth_decisions_total'
    expect(
      await sample(registry, decisions, { limiter: 'open', result: 'allowed', source: 'fail-open' }),
    ).toBe(3)
    expect(
      await sample(registry, decisions, { limiter: 'closed', result: 'denied', source: 'fail-closed' }),
    ).toBe(3)
    expect(await sample(registry, decisions, { limiter: 'local', result: 'allowed', source: 'local' })).toBe(
      2,
    )
    expect(await sample(registry, decisions, { limiter: 'local', result: 'denied', source: 'local' })).toBe(1)
    const fallbacks = 'tollbooth_fail_policy_decisions_total'
    expect(await sample(registry, fallbacks, { limiter: 'open', policy: 'open' })).toBe(3)
    expect(await sample(registry, fallbacks, { limiter: 'closed', policy: 'closed' })).toBe(3)
    expect(await sample(registry, fallbacks, { limiter: 'local', policy: 'local' })).toBe(3)
  })

  it('observes store latency on a real Redis, and errors, breaker state and transitions when it is unreachable', async () => {
    const registry = new Registry()
    const metrics = createPrometheusMetrics({ registry })
    const client = new Redis(inject('redisUrl'), limiterClientOptions)
    cleanups.push(() => client.disconnect())
    await whenReady(client)
    const store = new RedisStore({
      client,
      name: 'main',
      prefix: `metrics-${process.pid}-${Date.now()}:`,
      timeoutMs: 2000,
      hooks: metrics.storeHooks,
    })
    metrics.watchStore(store)
    const limiter = tokenBucket({
      name: 'api',
      store,
      capacity: 10,
      refillPerSecond: 1,
      hooks: metrics.limiterHooks,
    })
    for (let i = 0; i < 4; i++) expect((await limiter.consume('someone')).allowed).toBe(true)
    expect(await sample(registry, 'tollbooth_store_duration_seconds_count', { store: 'main' })).toBe(4)
    expect(
      await sample(registry, 'tollbooth_decision_duration_seconds_count', {
        limiter: 'api',
        source: 'store',
      }),
    ).toBe(4)
    expect(await sample(registry, 'tollbooth_store_breaker_state', { store: 'main', state: 'closed' })).toBe(
      1,
    )
    expect(await sample(registry, 'tollbooth_store_breaker_state', { store: 'main', state: 'open' })).toBe(0)

    // A port nothing listens on: every call waits its deadline (50 ms) for the client to connect, then fails; 3
    // failures open the breaker.
    const port = await closedPort()
    const down = new Redis({ ...limiterClientOptions, host: '127.0.0.1', port, retryStrategy: () => 1000 })
    down.on('error', () => {})
    cleanups.push(() => down.disconnect())
    const downStore = new RedisStore({
      client: down,
      name: 'down',
      hooks: metrics.storeHooks,
      breaker: { failureThreshold: 3, cooldownMs: 60_000 },
    })
    metrics.watchStore(downStore)
    const guarded = tokenBucket({
      name: 'guarded',
      store: downStore,
      capacity: 10,
      refillPerSecond: 1,
      hooks: metrics.limiterHooks,
    })
    for (let i = 0; i < 5; i++) expect((await guarded.consume('someone')).source).toBe('fail-open')
    expect(
      await sample(registry, 'tollbooth_store_errors_total', {
        store: 'down',
        op: 'consume',
        code: ErrorCodes.STORE_TIMEOUT,
      }),
    ).toBe(3)
    expect(
      await sample(registry, 'tollbooth_store_breaker_transitions_total', { store: 'down', to: 'open' }),
    ).toBe(1)
    expect(await sample(registry, 'tollbooth_store_breaker_state', { store: 'down', state: 'open' })).toBe(1)
    expect(await sample(registry, 'tollbooth_store_breaker_state', { store: 'down', state: 'closed' })).toBe(
      0,
    )
    expect(
      await sample(registry, 'tollbooth_store_duration_seconds_count', { store: 'down' }),
    ).toBeUndefined()
    expect(
      await sample(registry, 'tollbooth_decisions_total', {
        limiter: 'guarded',
        result: 'allowed',
        source: 'fail-open',
      }),
    ).toBe(5)
    expect(
      await sample(registry, 'tollbooth_fail_policy_decisions_total', { limiter: 'guarded', policy: 'open' }),
    ).toBe(5)
    expect((await registry.metrics()).includes('someone')).toBe(false)
  })

  it('counts GraphQL operations by type and refusal, with requested and actual cost', async () => {
    const registry = new Registry()
    const metrics = createPrometheusMetrics({ registry })
    const base = { operationName: 'SecretName', dryRun: false } as const
    metrics.onOperation({
      ...base,
      operationType: 'query',
      requestedCost: 52,
      actualCost: 7,
      refused: undefined,
    })
    metrics.onOperation({ ...base, operationType: 'query', requestedCost: 600, refused: 'RATE_LIMITED' })
    metrics.onOperation({
      ...base,
      operationType: 'mutation',
      requestedCost: 11,
      actualCost: 11,
      refused: undefined,
    })
    metrics.onOperation({ ...base, operationType: 'subscription', requestedCost: 3, refused: undefined })
    metrics.onOperation({
      ...base,
      dryRun: true,
      operationType: 'query',
      requestedCost: 9000,
      actualCost: 20,
      refused: 'COST_LIMIT_EXCEEDED',
    })
    const ops = 'tollbooth_graphql_operations_total'
    expect(await sample(registry, ops, { operation_type: 'query', refused: 'none', dry_run: 'false' })).toBe(
      1,
    )
    expect(
      await sample(registry, ops, { operation_type: 'query', refused: 'RATE_LIMITED', dry_run: 'false' }),
    ).toBe(1)
    expect(
      await sample(registry, ops, { operation_type: 'mutation', refused: 'none', dry_run: 'false' }),
    ).toBe(1)
    expect(
      await sample(registry, ops, { operation_type: 'subscription', refused: 'none', dry_run: 'false' }),
    ).toBe(1)
    expect(
      await sample(registry, ops, {
        operation_type: 'query',
        refused: 'COST_LIMIT_EXCEEDED',
        dry_run: 'true',
      }),
    ).toBe(1)
    expect(
      await sample(registry, 'tollbooth_graphql_requested_cost_count', { operation_type: 'query' }),
    ).toBe(3)
    expect(await sample(registry, 'tollbooth_graphql_requested_cost_sum', { operation_type: 'query' })).toBe(
      9652,
    )
    expect(await sample(registry, 'tollbooth_graphql_actual_cost_count', { operation_type: 'query' })).toBe(2)
    expect(await sample(registry, 'tollbooth_graphql_actual_cost_sum', { operation_type: 'query' })).toBe(27)
    expect(
      await sample(registry, 'tollbooth_graphql_requested_cost_bucket', {
        operation_type: 'query',
        le: '100',
      }),
    ).toBe(1)
    // Operation names are chosen by clients: never a label.
    expect(await registry.metrics()).not.toContain('SecretName')
  })

  it('reads WebSocket gauges at scrape time and counts drops and closes', async () => {
    const registry = new Registry()
    const metrics = createPrometheusMetrics({ registry })
    const protection = { openConnections: 2, pendingUpgrades: 1 }
    const stop = metrics.watchWebSocketServer('chat', protection)
    metrics.watchWebSocketServer('graphql-ws', { openConnections: 0 })
    expect(await sample(registry, 'tollbooth_ws_open_connections', { server: 'chat' })).toBe(2)
    expect(await sample(registry, 'tollbooth_ws_pending_upgrades', { server: 'chat' })).toBe(1)
    expect(await sample(registry, 'tollbooth_ws_open_connections', { server: 'graphql-ws' })).toBe(0)
    protection.openConnections = 5
    expect(await sample(registry, 'tollbooth_ws_open_connections', { server: 'chat' })).toBe(5)
    stop()
    expect(await sample(registry, 'tollbooth_ws_open_connections', { server: 'chat' })).toBeUndefined()

    metrics.webSocketDropped('chat')
    metrics.webSocketDropped('chat')
    metrics.webSocketClosed('chat', 1001)
    metrics.webSocketClosed('chat', 1013)
    metrics.webSocketClosed('chat', 4321)
    metrics.webSocketClosed('chat', 4999)
    expect(await sample(registry, 'tollbooth_ws_dropped_messages_total', { server: 'chat' })).toBe(2)
    expect(await sample(registry, 'tollbooth_ws_closed_total', { server: 'chat', code: '1001' })).toBe(1)
    expect(await sample(registry, 'tollbooth_ws_closed_total', { server: 'chat', code: '1013' })).toBe(1)
    expect(await sample(registry, 'tollbooth_ws_closed_total', { server: 'chat', code: 'other' })).toBe(2)
  })

  it('takes a prefix, and registers in the global registry by default', async () => {
    const registry = new Registry()
    const metrics = createPrometheusMetrics({ registry, prefix: 'edge_' })
    const limiter = tokenBucket({ name: 'api', capacity: 1, refillPerSecond: 1, hooks: metrics.limiterHooks })
    await limiter.consume('k')
    expect(
      await sample(registry, 'edge_decisions_total', { limiter: 'api', result: 'allowed', source: 'store' }),
    ).toBe(1)
    expect(() => createPrometheusMetrics({ registry, prefix: 'edge_' })).toThrow(/already been registered/)
    expect(() => createPrometheusMetrics({ registry, prefix: 'bad prefix' })).toThrow(
      expect.objectContaining({ code: ErrorCodes.INVALID_OPTION }),
    )
    const misspelt = { registry, prefx: 'edge_' }
    expect(() => createPrometheusMetrics(misspelt)).toThrow(
      expect.objectContaining({
        code: ErrorCodes.INVALID_OPTION,
        message: 'createPrometheusMetrics: unknown option "prefx" (did you mean "prefix"?)',
      }),
    )

    const { register } = await import('prom-client')
    const global = createPrometheusMetrics()
    cleanups.push(() => register.clear())
    expect(global.registry).toBe(register)
    // The default prefix, on the default registry: a decision counted there under tollbooth_.
    const counted = tokenBucket({
      name: 'global',
      capacity: 1,
      refillPerSecond: 1,
      hooks: global.limiterHooks,
    })
    await counted.consume('k')
    expect(
      await sample(register, 'tollbooth_decisions_total', {
        limiter: 'global',
        result: 'allowed',
        source: 'store',
      }),
    ).toBe(1)
  })
})

/** A TCP port that was free a moment ago and on which nothing listens. */
async function closedPort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  await new Promise((resolve) => server.close(resolve))
  if (address === null || typeof address === 'string') throw new Error('no port')
  return address.port
}
