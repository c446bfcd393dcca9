/**
 * The active identities gauge of tollbooth/metrics: fed by the limiter hooks of real limiters on a MemoryStore, both
 * on the same virtual clock, read through a real prom-client Registry. Identities never appear in the output.
 */
import { Registry } from 'prom-client'
import { describe, expect, it } from 'vitest'
import { ErrorCodes } from '../../../src/core/errors.js'
import type { DecisionEvent } from '../../../src/core/hooks.js'
import { allOf, concurrencyLimit, fixedWindow, MemoryStore, tokenBucket } from '../../../src/index.js'
import { createPrometheusMetrics } from '../../../src/metrics/index.js'

const SECOND = 1_000_000
const GAUGE = 'tollbooth_active_identities'

/** The gauge's samples, by limiter. */
async function activeIdentities(registry: Registry): Promise<Record<string, number>> {
  const metric = registry.getSingleMetric(GAUGE)
  if (metric === undefined) throw new Error(`${GAUGE} is not registered`)
  const counts: Record<string, number> = {}
  for (const { labels, value } of (await metric.get()).values) counts[String(labels.limiter)] = value
  return counts
}

describe('tollbooth_active_identities', () => {
  it('counts the distinct identities of consume and acquire decisions, allowed or denied, per limiter', async () => {
    const clock = { now: 10 * SECOND }
    const registry = new Registry()
    const metrics = createPrometheusMetrics({ registry, clock: () => clock.now })
    const store = new MemoryStore({ clock: () => clock.now })
    const hooks = metrics.limiterHooks
    const api = tokenBucket({ name: 'api', store, capacity: 2, refillPerSecond: 0.001, hooks })
    const leases = concurrencyLimit({ name: 'conns', store, max: 1, leaseMs: 10_000, hooks })
    const both = allOf(
      [
        tokenBucket({ name: 'burst', store, capacity: 1, refillPerSecond: 0.001 }),
        fixedWindow({ name: 'daily', store, limit: 100, windowMs: 86_400_000 }),
      ],
      { name: 'burst+daily', hooks },
    )

    const allowed: boolean[] = []
    for (const identity of [
      'alice@example.com',
      'bob',
      'alice@example.com',
      'alice@example.com',
      '10.1.2.3',
    ]) {
      allowed.push((await api.consume(identity)).allowed)
    }
    // The third decision for alice is a denial: she was active all the same.
    expect(allowed).toEqual([true, true, true, false, true])
    // Reads and refunds are not decisions.
    await api.peek('carol')
    await api.refund('dave', 1)
    expect((await leases.acquire('bob')).allowed).toBe(true)
    expect((await leases.acquire('bob')).allowed).toBe(false)
    await both.consume('erin')
    await both.consume('erin')
    await both.consume('frank')

    // Nothing before the window [0 s, 60 s) is complete.
    expect(await activeIdentities(registry)).toEqual({ api: 0, conns: 0, 'burst+daily': 0 })
    clock.now = 60 * SECOND
    expect(await activeIdentities(registry)).toEqual({ api: 3, conns: 1, 'burst+daily': 2 })
    const text = await registry.metrics()
    expect(text).toContain(
      '# HELP tollbooth_active_identities Distinct identities with a decision (consume or acquire, allowed or ' +
        'denied) in the last complete 60 s window, by limiter: exact up to 1024, estimated within 5 % above.',
    )
    expect(text).toContain('tollbooth_active_identities{limiter="api"} 3\n')
    expect(text).not.toMatch(/alice|bob|carol|dave|erin|frank|10\.1\.2\.3/)
  })

  it('reads the identity from the decision event the hooks receive', async () => {
    const clock = { now: 0 }
    const registry = new Registry()
    const metrics = createPrometheusMetrics({ registry, clock: () => clock.now, activeWindowMs: 1000 })
    const decision = (key: string, op: string): DecisionEvent & { key: string } => ({
      limiter: 'api',
      key,
      algorithm: 'tokenBucket',
      op,
      allowed: false,
      source: 'fail-closed',
      cost: 1,
      durationMs: 0.1,
    })
    for (const key of ['a', 'b', 'a', 'c']) metrics.limiterHooks.onDecision?.(decision(key, 'consume'))
    metrics.limiterHooks.onDecision?.(decision('d', 'peek'))
    metrics.limiterHooks.onDecision?.(decision('e', 'refund'))
    clock.now = SECOND
    expect(await activeIdentities(registry)).toEqual({ api: 3 })
  })

  it('says its window in its help, caps the limiters, and refuses invalid options by name', async () => {
    const registry = new Registry()
    const metrics = createPrometheusMetrics({ registry, activeWindowMs: 15_000, activeMaxLimiters: 1 })
    expect((await registry.getSingleMetric(GAUGE)?.get())?.help).toMatch(
      / in the last complete 15 s window, /,
    )
    const first = tokenBucket({ name: 'first', capacity: 5, refillPerSecond: 1, hooks: metrics.limiterHooks })
    const second = tokenBucket({
      name: 'second',
      capacity: 5,
      refillPerSecond: 1,
      hooks: metrics.limiterHooks,
    })
    await first.consume('a')
    await second.consume('a')
    expect(Object.keys(await activeIdentities(registry))).toEqual(['first'])

    const invalid = [
      [{ activeWindowMs: 0 }, 'createPrometheusMetrics: "activeWindowMs" must be a positive integer, got 0'],
      [
        { activeWindowMs: 1.5 },
        'createPrometheusMetrics: "activeWindowMs" must be a positive integer, got 1.5',
      ],
      [
        { activeMaxLimiters: -1 },
        'createPrometheusMetrics: "activeMaxLimiters" must be a positive integer, got -1',
      ],
      // null is not "not given": it is refused, not taken for the default.
      [
        { activeWindowMs: null },
        'createPrometheusMetrics: "activeWindowMs" must be a positive integer, got null',
      ],
      [
        { activeMaxLimiters: null },
        'createPrometheusMetrics: "activeMaxLimiters" must be a positive integer, got null',
      ],
    ] as const
    for (const [options, message] of invalid) {
      expect(() => createPrometheusMetrics({ registry: new Registry(), ...(options as object) })).toThrow(
        expect.objectContaining({ code: ErrorCodes.INVALID_OPTION, message }),
      )
    }
    for (const clock of [5, null]) {
      expect(() => createPrometheusMetrics({ registry: new Registry(), clock: clock as never })).toThrow(
        expect.objectContaining({
          code: ErrorCodes.INVALID_OPTION,
          message: expect.stringMatching(/"clock"/),
        }),
      )
    }
    expect(() => createPrometheusMetrics({ registry: new Registry(), clock: 5 as never })).toThrow(
      expect.objectContaining({ code: ErrorCodes.INVALID_OPTION, message: expect.stringMatching(/"clock"/) }),
    )
  })
})
