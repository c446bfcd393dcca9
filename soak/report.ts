/**
 * Judges a soak run against its guarantees and writes it up: a table for the terminal, a Markdown report and three
 * SVG charts (decisions by source, p99 decision time, admitted cost per identity class, over time).
 */
import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { HttpClass, Sent } from './load.js'
import { PROBE_BUDGET } from './probes.js'
import { percentileOf } from './samples.js'
import { CHAT_CAP, type FaultRecord, GRAPHQL_WS_CAP, type SoakRun, wellBehavedLatencies } from './soak.js'
import { renderTimeSeries, type Series } from './svgTimeSeries.js'

/** Decisions not answered by the store (the fail policy answered). */
const FAIL_SOURCES = ['fail-open', 'fail-closed', 'local']
/** A fault's disturbance lasts until this long after its last fail-policy decision. */
const SETTLE_MS = 5000

export interface Check {
  readonly name: string
  readonly passed: boolean
  readonly detail: string
}

export interface SoakReport {
  readonly checks: readonly Check[]
  readonly table: string
  readonly markdown: string
  readonly charts: Record<string, string>
}

interface Window {
  readonly from: number
  readonly until: number
}

export function judge(run: SoakRun): SoakReport {
  const samples = run.sampler.samples
  const warmEnd = run.enforceFrom + run.profile.warmMs
  const disturbed = run.faults.map((fault, i) =>
    disturbance(run, fault, run.faults[i + 1]?.at ?? run.endedAt),
  )
  const steady = steadyWindows({ from: warmEnd, until: run.endedAt }, disturbed)
  const inSteady = (t: number) => steady.some((w) => t >= w.from && t < w.until)
  const checks: Check[] = []
  const lines: string[] = []
  const md: string[] = [`# tollbooth soak (${run.profile.name} profile)`, '']

  // Load and decisions
  const steadySeconds = steady.reduce((sum, w) => sum + (w.until - w.from) / 1000, 0)
  const sentInSteady = [...run.load.sent.values()].flat().filter((r) => inSteady(r.at)).length
  const decisionsInSteady = samples
    .filter((s) => inSteady(s.at))
    .reduce((sum, s) => sum + Object.values(s.bySource).reduce((a, b) => a + b, 0), 0)
  const loadLine =
    `${(sentInSteady / steadySeconds).toFixed(0)} GraphQL requests/s over HTTP from ` +
    `${run.load.sent.size} identities, ${run.load.sockets.length} WebSocket sockets; ` +
    `${(decisionsInSteady / steadySeconds).toFixed(0)} limiter decisions/s in the instances, ` +
    `${run.probe.decisions.length} admission-probe decisions`
  lines.push(`load: ${loadLine}`)
  md.push(
    `**Load.** ${loadLine}. Steady parts: ${steadySeconds.toFixed(0)} s of ${((run.endedAt - run.enforceFrom) / 1000).toFixed(0)} s.`,
    '',
  )

  // Added latency: what a request waits for its decisions (the decision time histogram of the steady parts), and
  // the well-behaved requests' own latency against the dry-run baseline.
  const decisionBuckets = new Map<number, number>()
  for (const sample of samples.filter((s) => inSteady(s.at))) {
    for (const [le, n] of sample.buckets) decisionBuckets.set(le, (decisionBuckets.get(le) ?? 0) + n)
  }
  const decisionLine =
    `decision time (what a request waits for the limiter, store round trip included): p50 ≤ ` +
    `${percentileOf(decisionBuckets, 50) ?? '?'} ms, p99 ≤ ${percentileOf(decisionBuckets, 99) ?? '?'} ms (histogram bucket bounds)`
  lines.push(decisionLine)
  md.push(`**Latency.** ${decisionLine}.`)
  const enforced = steady.flatMap((w) => wellBehavedLatencies(run.load, w.from, w.until))
  if (run.baseline !== undefined) {
    const base = run.baseline.latenciesMs
    const latencyLine =
      `well-behaved requests end to end: dry-run p50 ${pct(base, 50)} ms, p99 ${pct(base, 99)} ms; enforcing ` +
      `p50 ${pct(enforced, 50)} ms, p99 ${pct(enforced, 99)} ms (in dry-run the greedy requests run too, so the ` +
      "instances do more work: the difference is not the limiter's alone)"
    lines.push(latencyLine)
    md.push(`The ${latencyLine}.`)
  }
  md.push('')

  // Instances: CPU and memory
  md.push(
    '| instance | CPU (share of one core) | RSS after warm-up | RSS at the end |',
    '| --- | ---: | ---: | ---: |',
  )
  for (const name of run.instanceNames) {
    // Readings of a live process only (a killed one reads as nothing).
    const own = samples.filter((s) => (s.instances[name]?.rssMb ?? 0) > 0 && s.at >= warmEnd)
    const first = own[0]?.instances[name]
    const last = own.at(-1)?.instances[name]
    if (first === undefined || last === undefined) continue
    const seconds = ((own.at(-1)?.at ?? 0) - (own[0]?.at ?? 0)) / 1000
    const cpu = seconds > 0 ? (last.cpuSeconds - first.cpuSeconds) / seconds : 0
    const killed = run.faults.some((f) => f.kind === 'kill-instance' && f.detail.includes(`${name},`))
    md.push(
      `| ${name}${killed ? ' (killed)' : ''} | ${(cpu * 100).toFixed(0)} % | ${first.rssMb.toFixed(0)} MB | ${last.rssMb.toFixed(0)} MB |`,
    )
    lines.push(
      `${name}: CPU ${(cpu * 100).toFixed(0)} % of a core, RSS ${first.rssMb.toFixed(0)} → ${last.rssMb.toFixed(0)} MB`,
    )
    if (!killed) {
      // No growth: over a run this short a leak shows as RSS well above where it settled after the warm-up.
      const grown = last.rssMb > first.rssMb * 1.3 + 20
      checks.push({
        name: `${name}: RSS does not grow`,
        passed: !grown,
        detail: `${first.rssMb.toFixed(0)} MB after warm-up, ${last.rssMb.toFixed(0)} MB at the end`,
      })
    }
  }
  md.push('')

  // Redis latency
  const pings = run.redisLatency.samples
  const steadyPings = pings.filter((p) => inSteady(p.at) && p.ms !== undefined).map((p) => p.ms as number)
  const redisLine = `Redis PING to each master: p50 ${pct(steadyPings, 50)} ms, p99 ${pct(steadyPings, 99)} ms in the steady parts`
  lines.push(redisLine)
  md.push(`**Redis.** ${redisLine}.`, '')

  // Classes against their budgets
  md.push(
    '## Admitted cost per identity class (steady parts)',
    '',
    '| class | identities | admitted | budget (what was left + refill × time) | admitted / budget | refused |',
    '| --- | ---: | ---: | ---: | ---: | ---: |',
  )
  for (const group of run.load.classes) {
    const result = classAgainstBudget(run, group, steady)
    const ratio = result.budget > 0 ? result.admitted / result.budget : 1
    md.push(
      `| ${group.name} | ${group.identities.length} | ${result.admitted} | ${result.budget.toFixed(0)} | ${ratio.toFixed(3)} | ${result.refused} |`,
    )
    lines.push(
      `${group.name}: admitted ${result.admitted} of a budget of ${result.budget.toFixed(0)} (${(ratio * 100).toFixed(1)} %), ${result.refused} refused`,
    )
    if (group.greedy) {
      checks.push({
        name: `${group.name}: at least 95 % of the budget (no false refusals), never more`,
        passed: result.lowest >= 0.95 && result.overBudget === 0,
        detail: `lowest identity-window ratio ${result.lowest.toFixed(3)} (one request of slack); ${result.overBudget} identity-windows over budget`,
      })
    } else {
      checks.push({
        name: `${group.name}: nothing refused`,
        passed: result.refused === 0,
        detail: `${result.refused} refused of ${result.sent}`,
      })
    }
  }
  md.push('')

  // WebSockets
  const calm = samples.filter((s) => inSteady(s.at))
  const maxChat = Math.max(0, ...calm.map((s) => s.maxSockets.chat ?? 0))
  const maxGraphqlWs = Math.max(0, ...calm.map((s) => s.maxSockets['graphql-ws'] ?? 0))
  const breaches = run.load.capBreaches.filter((b) => inSteady(b.at))
  checks.push({
    name: 'WebSocket sockets per identity never above the cap (store up)',
    passed: maxChat <= CHAT_CAP && maxGraphqlWs <= GRAPHQL_WS_CAP && breaches.length === 0,
    detail: `chat: at most ${maxChat} of ${CHAT_CAP}; graphql-ws: at most ${maxGraphqlWs} of ${GRAPHQL_WS_CAP}; ${breaches.length} extra sockets admitted`,
  })
  const wsLine = `WebSocket sockets per identity, sampled each second: chat at most ${maxChat} (cap ${CHAT_CAP}), graphql-ws at most ${maxGraphqlWs} (cap ${GRAPHQL_WS_CAP}); ${run.load.capBreaches.length} sockets past a cap admitted (${breaches.length} while the store was up)`
  lines.push(wsLine)
  md.push('## WebSockets', '', `${wsLine}.`, '')

  // Faults
  md.push(
    '## Faults',
    '',
    '| fault | what | decisions by source while disturbed | time without the store | back to the store | admission probe: admitted beyond budget |',
    '| --- | --- | --- | ---: | ---: | ---: |',
  )
  for (const [i, fault] of run.faults.entries()) {
    const window = disturbed[i] as Window
    const during = samples.filter((s) => s.at >= fault.at && s.at < window.until)
    const bySource = new Map<string, number>()
    for (const s of during)
      for (const [source, n] of Object.entries(s.bySource))
        bySource.set(source, (bySource.get(source) ?? 0) + n)
    const failing = during.filter((s) => FAIL_SOURCES.some((source) => (s.bySource[source] ?? 0) > 0))
    const without = failing.length === 0 ? 0 : ((failing.at(-1)?.at ?? 0) - (failing[0]?.at ?? 0)) / 1000 + 1
    const lastFailing = failing.at(-1)?.at
    const back = lastFailing === undefined ? 0 : (lastFailing - fault.at) / 1000
    const repaired =
      fault.repairedAt === undefined
        ? ''
        : ` (repaired after ${((fault.repairedAt - fault.at) / 1000).toFixed(1)} s)`
    const excess = probeExcess(run, { from: fault.at, until: window.until })
    const sources = [...bySource].map(([source, n]) => `${source} ${n}`).join(', ')
    md.push(
      `| ${fault.kind} | ${fault.detail} | ${sources} | ${lastFailing === undefined ? '—' : `${without.toFixed(0)} s`} | ${lastFailing === undefined ? 'the store answered throughout' : `after ${back.toFixed(1)} s${repaired}`} | ${excess.total} (at most ${excess.worst} for one identity of budget ${PROBE_BUDGET.capacity} + ${PROBE_BUDGET.refillPerSecond}/s) |`,
    )
    const outage =
      lastFailing === undefined
        ? 'the store answered throughout'
        : `without the store ${without.toFixed(0)} s, back after ${back.toFixed(1)} s${repaired}`
    lines.push(
      `fault ${fault.kind} (${fault.detail}): ${outage}; decisions ${sources}; admitted beyond budget ${excess.total} (worst identity ${excess.worst})`,
    )
    checks.push({
      name: `${fault.kind}: decisions come back from the store while it is watched`,
      passed: lastFailing === undefined || lastFailing < fault.until,
      detail:
        lastFailing === undefined
          ? 'the store answered throughout'
          : `last fail-policy decision ${((lastFailing - fault.at) / 1000).toFixed(1)} s after the fault`,
    })
    if (fault.kind === 'kill-instance') checks.push(reconnected(run, fault))
  }
  md.push(
    '',
    "Each instance answers by its limiters' fail policies while the store cannot be reached (the example: `local` for users and the chat, `open` for anonymous callers and graphql-ws): the steady-state figures above leave these disturbances out, and the admission probe (a fail-closed token bucket on the same cluster) shows what a failover cost in admission: a master's acknowledged writes its replica had not received are lost when the replica takes over, and a restart of the whole cluster (nothing persisted) forgets every budget.",
    '',
  )
  const steadyExcess = steady.reduce((sum, w) => sum + probeExcess(run, w).total, 0)
  checks.push({
    name: 'admission probe: nothing admitted beyond budget while no fault disturbs',
    passed: steadyExcess === 0,
    detail: `${steadyExcess} admitted beyond budget in the steady parts`,
  })
  checks.push({
    name: 'nothing thrown or unhandled, no instance died on its own',
    passed: run.problems.length === 0,
    detail: run.problems.join('; ').slice(0, 500) || 'none',
  })

  md.push('## Checks', '', '| check | result | detail |', '| --- | --- | --- |')
  for (const check of checks)
    md.push(`| ${check.name} | ${check.passed ? 'passed' : '**FAILED**'} | ${check.detail} |`)
  md.push(
    '',
    '![Decisions by source](decisions-by-source.svg)',
    '',
    '![p99 decision time](decision-p99.svg)',
    '',
    '![Admitted cost per class](admitted-cost.svg)',
    '',
  )
  lines.push('', ...checks.map((c) => `${c.passed ? 'passed' : 'FAILED'}  ${c.name}: ${c.detail}`))
  return { checks, table: lines.join('\n'), markdown: md.join('\n'), charts: charts(run) }
}

export async function writeReport(report: SoakReport, dir: string): Promise<void> {
  await mkdir(dir, { recursive: true })
  await writeFile(join(dir, 'report.md'), report.markdown)
  for (const [name, svg] of Object.entries(report.charts)) await writeFile(join(dir, name), svg)
}

/**
 * From the fault to a settled store: its last fail-policy decision (before the next fault) plus SETTLE_MS, at least
 * its watch.
 */
function disturbance(run: SoakRun, fault: FaultRecord, nextFault: number): Window {
  const failing = run.sampler.samples.filter(
    (s) =>
      s.at >= fault.at && s.at < nextFault && FAIL_SOURCES.some((source) => (s.bySource[source] ?? 0) > 0),
  )
  const last = failing.at(-1)?.at ?? fault.at
  return { from: fault.at, until: Math.max(fault.until, last + SETTLE_MS) }
}

function steadyWindows(whole: Window, disturbed: readonly Window[]): Window[] {
  const windows: Window[] = []
  let from = whole.from
  for (const d of [...disturbed].sort((a, b) => a.from - b.from)) {
    if (d.from > from) windows.push({ from, until: d.from })
    from = Math.max(from, d.until)
  }
  if (whole.until > from) windows.push({ from, until: whole.until })
  return windows
}

/**
 * A class's admissions in the steady windows against what its budgets allowed: for each identity and window, what
 * was left at the window's start (the RateLimit `r` of the last answer before it) plus the refill over the window.
 */
function classAgainstBudget(run: SoakRun, group: HttpClass, windows: readonly Window[]) {
  let admitted = 0
  let budget = 0
  let refused = 0
  let sent = 0
  let lowest = Number.POSITIVE_INFINITY
  let overBudget = 0
  for (const identity of group.identities) {
    const records = run.load.sent.get(identity.name) ?? []
    for (const w of windows) {
      const inside = records.filter((r) => r.at >= w.from && r.at < w.until)
      sent += inside.length
      refused += inside.filter((r) => r.status !== 200).length
      const got = inside.reduce((sum, r) => sum + r.charged, 0)
      admitted += got
      const before = lastBefore(records, w.from)
      if (before?.remaining === undefined) continue
      const allowed = before.remaining + (group.budget.refillPerSecond * (w.until - w.from)) / 1000
      budget += allowed
      if (!group.greedy) continue
      // One request of slack either way: the client's clock and Redis' are not the same clock.
      lowest = Math.min(lowest, (got + group.cost) / allowed)
      if (got > allowed + group.cost) overBudget++
    }
  }
  return { admitted, budget, refused, sent, lowest: Number.isFinite(lowest) ? lowest : 1, overBudget }
}

function lastBefore(records: readonly Sent[], t: number): Sent | undefined {
  let found: Sent | undefined
  for (const r of records) {
    if (r.at >= t) break
    if (r.remaining !== undefined) found = r
  }
  return found
}

/** Admission-probe decisions admitted beyond each identity's budget over a window, in all and at worst. */
function probeExcess(run: SoakRun, w: Window): { total: number; worst: number } {
  const byIdentity = new Map<number, { before: number | undefined; admitted: number }>()
  for (const d of run.probe.decisions) {
    const entry = byIdentity.get(d.identity) ?? { before: undefined, admitted: 0 }
    byIdentity.set(d.identity, entry)
    if (d.at < w.from) {
      if (d.fromStore) entry.before = d.remaining
    } else if (d.at < w.until && d.allowed) entry.admitted++
  }
  let total = 0
  let worst = 0
  for (const { before, admitted } of byIdentity.values()) {
    if (before === undefined) continue
    // Whole tokens only; one of slack for the clocks.
    const allowed = Math.floor(before + (PROBE_BUDGET.refillPerSecond * (w.until - w.from)) / 1000) + 1
    const excess = Math.max(0, admitted - allowed)
    total += excess
    worst = Math.max(worst, excess)
  }
  return { total, worst }
}

/** The sockets the killed instance held are open elsewhere within the lease lifetime (plus 3 s of retries). */
function reconnected(run: SoakRun, fault: FaultRecord): Check {
  const lostNow = (t: number | undefined) => t !== undefined && t >= fault.at - 1000 && t < fault.at + 1000
  const lost = run.load.sockets.filter(
    (s) => lostNow(s.lostAt) || s.reconnects.some((r) => lostNow(r.lostAt)),
  )
  const times = lost.flatMap((s) =>
    s.reconnects.filter((r) => lostNow(r.lostAt)).map((r) => r.backAt - r.lostAt),
  )
  const neverBack = lost.length - times.length
  const worst = Math.max(0, ...times)
  // Leases expire leaseMs after their last renewal; clients retry every 250 ms: 3 s of slack for a busy machine.
  const bound = run.profile.leaseMs + 3000
  return {
    name: 'kill-instance: its leases are freed within leaseMs and its identities reconnected elsewhere',
    passed: lost.length > 0 && neverBack === 0 && worst <= bound,
    detail: `${lost.length} sockets lost, ${neverBack} never back; the slowest back after ${(worst / 1000).toFixed(1)} s (leaseMs ${run.profile.leaseMs / 1000} s)`,
  }
}

function charts(run: SoakRun): Record<string, string> {
  const t0 = run.enforceFrom
  const seconds = (t: number) => (t - t0) / 1000
  const duration = seconds(run.endedAt)
  const markers = run.faults.map((f) => ({ at: seconds(f.at), label: f.kind }))
  const samples = run.sampler.samples.filter((s) => s.at >= t0)
  const colors: Record<string, string> = {
    store: '#2da44e',
    cache: '#0969da',
    'fail-open': '#bf8700',
    'fail-closed': '#cf222e',
    local: '#8250df',
  }
  const bySource: Series[] = Object.entries(colors).map(([source, color]) => ({
    name: source,
    color,
    points: samples.map((s) => [seconds(s.at), s.bySource[source] ?? 0] as const),
  }))
  const p99: Series[] = [
    {
      name: 'p99 decision time (ms, histogram bucket bound)',
      color: '#0969da',
      points: samples
        .filter((s) => s.p99Ms !== undefined)
        .map((s) => [seconds(s.at), s.p99Ms as number] as const),
    },
  ]
  const palette = ['#cf222e', '#2da44e', '#8250df', '#0969da']
  const admitted: Series[] = run.load.classes.flatMap((group, i) => {
    const names = new Set(group.identities.map((identity) => identity.name))
    const perSecond = new Map<number, number>()
    for (const [name, records] of run.load.sent) {
      if (!names.has(name)) continue
      for (const r of records) {
        if (r.at < t0) continue
        const second = Math.floor(seconds(r.at))
        perSecond.set(second, (perSecond.get(second) ?? 0) + r.charged)
      }
    }
    const points = [...perSecond].sort((a, b) => a[0] - b[0])
    const color = palette[i % palette.length] as string
    return [
      { name: group.name, color, points },
      ...(group.greedy
        ? [
            {
              name: `${group.name}: refill`,
              color,
              dashed: true,
              points: [
                [0, group.budget.refillPerSecond * group.identities.length],
                [duration, group.budget.refillPerSecond * group.identities.length],
              ] as const,
            },
          ]
        : []),
    ]
  })
  return {
    'decisions-by-source.svg': renderTimeSeries({
      title: 'Limiter decisions per second, by source',
      subtitle: 'All instances; a fail policy answers while the store cannot be reached',
      yLabel: 'decisions / s',
      series: bySource,
      markers,
      durationSeconds: duration,
    }),
    'decision-p99.svg': renderTimeSeries({
      title: 'p99 decision time per second',
      subtitle: 'All instances and limiters, store round trip included',
      yLabel: 'ms',
      series: p99,
      markers,
      durationSeconds: duration,
    }),
    'admitted-cost.svg': renderTimeSeries({
      title: 'Admitted GraphQL cost per second, by identity class',
      subtitle:
        'Greedy classes ask far more than their budget: they get its refill (dashed), no more, no less',
      yLabel: 'cost / s',
      series: admitted,
      markers,
      durationSeconds: duration,
    }),
  }
}

function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number
}

function pct(values: readonly number[], p: number): string {
  return percentile(values, p).toFixed(2)
}
