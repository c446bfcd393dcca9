/**
 * The operations kit (examples/observability/): every metric the Grafana dashboard and the Prometheus alerting rules
 * query is one the example server really exports. The server runs as `npm start` does (memory store, a child
 * process on a free port); a little traffic (GraphQL over HTTP, a chat WebSocket) makes its families appear, and its
 * `/metrics` is read. The rules file must have the shape Prometheus loads, and the dashboard the shape Grafana
 * imports.
 */
import type { ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { WebSocket } from 'ws'
import { parse } from 'yaml'
import { startExample } from '../helpers/exampleServer.js'

const root = fileURLToPath(new URL('../..', import.meta.url))
const kit = (file: string) => readFileSync(`${root}/examples/observability/${file}`, 'utf8')

/** PromQL's functions, aggregations, keywords and constants: identifiers that are not metric names. */
// biome-ignore format: a word list reads best packed
const PROMQL_WORDS = new Set([
  // aggregation operators and their modifiers
  'sum', 'min', 'max', 'avg', 'group', 'stddev', 'stdvar', 'count', 'count_values', 'bottomk', 'topk', 'quantile',
  'limitk', 'limit_ratio', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'offset',
  'and', 'or', 'unless', 'atan2', 'inf', 'nan',
  // functions
  'abs', 'absent', 'absent_over_time', 'ceil', 'changes', 'clamp', 'clamp_max', 'clamp_min', 'day_of_month',
  'day_of_week', 'day_of_year', 'days_in_month', 'delta', 'deriv', 'exp', 'floor', 'histogram_avg',
  'histogram_count', 'histogram_fraction', 'histogram_quantile', 'histogram_stddev', 'histogram_stdvar',
  'histogram_sum', 'holt_winters', 'hour', 'idelta', 'increase', 'irate', 'label_join', 'label_replace', 'ln',
  'log2', 'log10', 'minute', 'month', 'predict_linear', 'rate', 'resets', 'round', 'scalar', 'sgn', 'sort',
  'sort_desc', 'sqrt', 'time', 'timestamp', 'vector', 'year', 'avg_over_time', 'min_over_time', 'max_over_time',
  'sum_over_time', 'count_over_time', 'quantile_over_time', 'stddev_over_time', 'stdvar_over_time',
  'last_over_time', 'present_over_time', 'label_values',
])

/**
 * The metric names a PromQL expression reads: string literals, label matchers `{…}`, ranges and subqueries `[…]`,
 * label lists of `by`/`without`/`on`/`ignoring`/`group_left`/`group_right`, durations after `offset` and numbers
 * are removed; what is left of the identifiers, less PromQL's own words, are metric names.
 */
function metricNames(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, ' ')
    // A PromQL comment runs from # to the end of its line (no string holds a # here: they are gone above).
    .replace(/#[^\n]*/g, ' ')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ')
    .replace(/\boffset\s+-?[0-9a-z]+/g, ' ')
    // Grafana's variables ($job, $__rate_interval), and numbers (1e3, 0.99) which the next pattern would split.
    .replace(/\$\w+/g, ' ')
    .replace(/(?<![\w:])[0-9][0-9.eE+-]*/g, ' ')
  const names = new Set<string>()
  for (const match of stripped.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    if (!PROMQL_WORDS.has(match[0].toLowerCase())) names.add(match[0])
  }
  return [...names]
}

/** The metric families of a Prometheus text exposition: name → type. */
function families(exposition: string): Map<string, string> {
  const types = new Map<string, string>()
  for (const match of exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm))
    types.set(match[1] as string, match[2] as string)
  return types
}

/** The names of `names` that no family exports (a histogram's `_bucket`, `_sum` and `_count` are its family's). */
function missingFrom(exported: Map<string, string>, names: readonly string[]): string[] {
  return names.filter((name) => {
    if (exported.has(name)) return false
    const family = name.replace(/_(bucket|sum|count)$/, '')
    return !(family !== name && ['histogram', 'summary'].includes(exported.get(family) ?? ''))
  })
}

interface Panel {
  readonly type: string
  readonly title?: string
  readonly datasource?: { readonly type?: string; readonly uid?: string }
  readonly targets?: readonly { readonly expr?: string; readonly datasource?: unknown }[]
}

const dashboard = JSON.parse(kit('grafana-dashboard.json')) as {
  readonly __inputs: readonly { name: string; type: string; pluginId: string }[]
  readonly schemaVersion: number
  readonly title: string
  readonly uid: string
  readonly panels: readonly Panel[]
  readonly templating: { readonly list: readonly { name: string; query: { query: string } | string }[] }
}
const panels = dashboard.panels.filter((panel) => panel.type !== 'row')
const rules = parse(kit('prometheus-alerts.yml')) as { groups: Record<string, unknown>[] }
const alertRules = rules.groups.flatMap((group) => group.rules as Record<string, unknown>[])

/** Every PromQL expression of the kit, with where it comes from. */
const expressions: { where: string; expr: string }[] = [
  ...panels.flatMap((panel) =>
    (panel.targets ?? []).map((target) => ({ where: `panel "${panel.title}"`, expr: target.expr ?? '' })),
  ),
  // A variable's `label_values(<series>, <label>)`: the series is PromQL, the label is not a metric.
  ...dashboard.templating.list.map((variable) => ({
    where: `variable $${variable.name}`,
    expr: (typeof variable.query === 'string' ? variable.query : variable.query.query).replace(
      /^label_values\((.*),\s*\w+\)$/,
      '$1',
    ),
  })),
  ...alertRules.map((rule) => ({ where: `alert ${String(rule.alert)}`, expr: String(rule.expr) })),
]

describe('examples/observability against the example server', () => {
  let child: ChildProcess
  let exported: Map<string, string>

  beforeAll(async () => {
    const example = await startExample()
    child = example.child
    const url = example.url

    const query = await fetch(`${url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer alice-token' },
      body: JSON.stringify({ query: '{ me { name } posts(first: 3) { title } }' }),
    })
    expect(query.status).toBe(200)
    expect(((await query.json()) as { data: unknown }).data).toMatchObject({ me: { name: 'Alice' } })
    // A chat connection, closed by the client: the WebSocket families get samples.
    const socket = new WebSocket(`${url.replace(/^http/, 'ws')}/chat?token=bob-token`)
    const welcomed = once(socket, 'message')
    await once(socket, 'open')
    await welcomed
    const closed = once(socket, 'close')
    socket.close(1000)
    await closed

    const metrics = await fetch(`${url}/metrics`)
    expect(metrics.status).toBe(200)
    exported = families(await metrics.text())
  })

  afterAll(async () => {
    if (child?.exitCode === null) {
      const exited = once(child, 'exit')
      child.kill('SIGTERM')
      await exited
    }
  })

  it('exports every metric the dashboard and the alerts query', () => {
    expect(expressions.length).toBeGreaterThan(30)
    const missing = expressions.flatMap(({ where, expr }) =>
      missingFrom(exported, metricNames(expr)).map((name) => `${where}: ${name}`),
    )
    expect(missing).toEqual([])
  })

  it('the dashboard shows every tollbooth family the server exports', () => {
    const queried = new Set(
      expressions.flatMap(({ expr }) =>
        metricNames(expr).map((name) => name.replace(/_(bucket|sum|count)$/, '')),
      ),
    )
    const tollbooth = [...exported.keys()].filter((name) => name.startsWith('tollbooth_'))
    expect(tollbooth).toContain('tollbooth_active_identities')
    expect(tollbooth.filter((name) => !queried.has(name))).toEqual([])
  })

  it('finds a misspelt name: the check can fail', () => {
    const names = metricNames(
      'sum by (limiter) (rate(tollbooth_decisons_total{result="denied"}[5m] offset 1h)) / 2 > 0.5',
    )
    expect(names).toEqual(['tollbooth_decisons_total'])
    expect(missingFrom(exported, names)).toEqual(['tollbooth_decisons_total'])
    expect(
      missingFrom(exported, ['tollbooth_store_duration_seconds_bucket', 'tollbooth_decisions_total_count']),
    ).toEqual(['tollbooth_decisions_total_count'])
  })
})

describe('examples/observability/prometheus-alerts.yml', () => {
  const DURATION = /^(?=\d)(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?$/
  const GROUP_KEYS = ['name', 'interval', 'rules', 'limit', 'query_offset']
  const RULE_KEYS = ['alert', 'expr', 'for', 'keep_firing_for', 'labels', 'annotations']

  it('has the shape Prometheus loads: named groups of alerting rules with a severity and a summary', () => {
    expect(Object.keys(rules)).toEqual(['groups'])
    expect(rules.groups.length).toBeGreaterThan(0)
    const names = new Set<string>()
    for (const group of rules.groups) {
      expect(Object.keys(group).filter((key) => !GROUP_KEYS.includes(key))).toEqual([])
      expect(typeof group.name).toBe('string')
      expect(names.has(group.name as string)).toBe(false)
      names.add(group.name as string)
      expect(Array.isArray(group.rules) && group.rules.length > 0).toBe(true)
      for (const rule of group.rules as Record<string, unknown>[]) {
        const where = String(rule.alert)
        expect(
          Object.keys(rule).filter((key) => !RULE_KEYS.includes(key)),
          where,
        ).toEqual([])
        expect(rule.alert, where).toMatch(/^[a-zA-Z_][a-zA-Z0-9_]*$/)
        expect(typeof rule.expr === 'string' && rule.expr.trim() !== '', where).toBe(true)
        expect(rule.for, where).toMatch(DURATION)
        const labels = rule.labels as Record<string, unknown>
        expect(['critical', 'warning', 'info']).toContain(labels.severity)
        const annotations = rule.annotations as Record<string, unknown>
        expect(typeof annotations.summary === 'string' && annotations.summary !== '', where).toBe(true)
        expect(typeof annotations.description === 'string' && annotations.description !== '', where).toBe(
          true,
        )
      }
    }
  })

  it('alerts on what the runbook covers', () => {
    const byName = new Map(alertRules.map((rule) => [rule.alert as string, String(rule.expr)]))
    expect([...byName.keys()].sort()).toEqual([
      'TollboothFailingClosed',
      'TollboothFailingOpen',
      'TollboothRefusalsRising',
      'TollboothStoreBreakerOpen',
      'TollboothStoreLatencyNearDeadline',
      'TollboothWebSocketDroppingMessages',
      'TollboothWebSocketPolicyCloses',
    ])
    // A ratio against the previous hour, not a count.
    expect(byName.get('TollboothRefusalsRising')).toMatch(/\/[\s\S]*offset 10m/)
    expect(byName.get('TollboothWebSocketPolicyCloses')).toContain('code="1008"')
  })
})

describe('examples/observability/grafana-dashboard.json', () => {
  // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's placeholder for the datasource chosen at import
  const DATASOURCE_INPUT = '${DS_PROMETHEUS}'

  it('imports anywhere: a DS_PROMETHEUS datasource input, schemaVersion ≥ 36, every panel titled, on it, with a query', () => {
    expect(dashboard.schemaVersion).toBeGreaterThanOrEqual(36)
    expect(dashboard.__inputs).toEqual([
      expect.objectContaining({ name: 'DS_PROMETHEUS', type: 'datasource', pluginId: 'prometheus' }),
    ])
    expect(dashboard.title).toBe('tollbooth')
    expect(panels.length).toBeGreaterThanOrEqual(12)
    for (const panel of panels) {
      expect(panel.title, JSON.stringify(panel).slice(0, 80)).toMatch(/\S/)
      expect(panel.datasource, panel.title).toEqual({ type: 'prometheus', uid: DATASOURCE_INPUT })
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0)
      for (const target of panel.targets ?? []) {
        expect(target.expr, panel.title).toMatch(/tollbooth_/)
        expect(target.datasource, panel.title).toEqual(panel.datasource)
      }
    }
    // Titles are unique: a runbook names panels by title.
    expect(new Set(panels.map((panel) => panel.title)).size).toBe(panels.length)
  })

  it('has the panels the runbook names', () => {
    const titles = panels.map((panel) => panel.title)
    for (const title of [
      'Decisions by limiter and source',
      'Refusals by limiter and source',
      'Refusal ratio by limiter',
      'Active identities by limiter',
      'Refusals per active identity',
      'Fail-policy decisions (store failing)',
      'Store latency p50 / p99',
      'Store errors by code',
      'Breaker state by store',
      'GraphQL requested vs actual cost',
      'GraphQL cost underestimates',
      'WebSocket open connections',
      'WebSocket messages dropped',
      'WebSocket closes by code',
    ]) {
      expect(titles).toContain(title)
    }
  })
})
