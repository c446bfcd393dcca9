/**
 * Judges a soak run against its guarantees and writes it up: a table for the terminal, a Markdown report and three
 * SVG charts (decisions by source, p99 decision time, admitted cost per identity class, over time).
 */
import { mkdir, writeFile } from 'node:fs/promises'
import { cpus } from 'node:os'
import { join } from 'node:path'
import { niceCeiling } from '../src/cli/simulate/svgChart.js'
import type { HttpClass } from './load.js'
import { attributeOutages, type Outage } from './outages.js'
import { PROBE_BUDGET } from './probes.js'
import { percentileOf, type Sample } from './samples.js'
import { CHAT_CAP, type FaultRecord, GRAPHQL_WS_CAP, type SoakRun, wellBehavedLatencies } from './soak.js'
import { renderTimeSeries, type Series } from './svgTimeSeries.js'

/** A fault's disturbance lasts until this long after its last fail-policy decision. */
const SETTLE_MS = 5000
/** Tokens the probe may miss after a spell of fail-policy decisions without it meaning a late write. */
const LATE_SPEND_SLACK = 3
/** During a reshard, at most this share of decisions may come from the fail policy (as outside faults). */
const MAX_RESHARD_FAIL_SHARE = 0.01
/** A stray outage disturbs the budgets from a second before it to this long after it. */
const STRAY_SETTLE_MS = 3000
/** The example server's RedisStore deadline (the default `timeoutMs`). */
const STORE_TIMEOUT_MS = 50
/** Outside faults, at most this share of decisions may come from the fail policy. */
const MAX_STRAY_SHARE = 0.01

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
  const outages = attributeOutages(samples, run.faults)
  const disturbed = run.faults.map((fault, i) => disturbance(fault, outages.byFault[i]))
  const strayWindows = outages.strays.map((o) => ({ from: o.from - 1000, until: o.last + STRAY_SETTLE_MS }))
  const steady = steadyWindows({ from: warmEnd, until: run.endedAt }, [...disturbed, ...strayWindows])
  const inSteady = (t: number) => steady.some((w) => t >= w.from && t < w.until)
  /** Chart time: seconds since enforcement began. */
  const chartTime = (t: number) => `${((t - run.enforceFrom) / 1000).toFixed(1)} s`
  const checks: Check[] = []
  const lines: string[] = []
  const md: string[] = []
  const intro =
    `Times are seconds since enforcement began, ${((run.enforceFrom - run.startedAt) / 1000).toFixed(0)} s ` +
    'into the run (after starting the cluster and any dry-run baseline), as on the charts.'

  // Load and decisions
  const steadySeconds = steady.reduce((sum, w) => sum + (w.until - w.from) / 1000, 0)
  const sentInSteady = [...run.load.sent.values()].flat().filter((r) => inSteady(r.at)).length
  const decisionsInSteady = samples
    .filter((s) => inSteady(s.at))
    .reduce((sum, s) => sum + Object.values(s.bySource).reduce((a, b) => a + b, 0), 0)
  const flow = steadyFlow(samples, inSteady)
  const graphqlPerSecond = sentInSteady / steadySeconds
  const messagesPerSecond = flow.seconds > 0 ? flow.sent / flow.seconds : 0
  const machineShare = flow.machineTotal > 0 ? flow.machineBusy / flow.machineTotal : 0
  const cores = cpus().length
  const loadLine =
    `${graphqlPerSecond.toFixed(0)} GraphQL requests/s over HTTP from ${run.load.sent.size} identities, ` +
    `${messagesPerSecond.toFixed(0)} WebSocket messages/s on ${run.load.sockets.length} sockets; ` +
    `${(decisionsInSteady / steadySeconds).toFixed(0)} limiter decisions/s in the instances, ` +
    `${run.probe.decisions.length} admission-probe decisions; the machine's ${cores} cores ` +
    `${(machineShare * 100).toFixed(0)} % busy (everything on it: instances, Redis, the load's clients)`
  lines.push(`load: ${loadLine}`)
  md.push(
    `**Load.** ${loadLine}. Steady parts: ${steadySeconds.toFixed(0)} s of ${((run.endedAt - run.enforceFrom) / 1000).toFixed(0)} s.`,
    '',
  )
  const busy = run.profile.busy
  if (busy !== undefined) {
    const { graphqlPerSecond: wantedRequests, webSocketMessagesPerSecond: wantedMessages } = busy.targets
    checks.push({
      name: `the load reached: ≥ ${wantedRequests} GraphQL requests/s and ≥ ${wantedMessages} WebSocket messages/s in the steady parts`,
      passed: graphqlPerSecond >= wantedRequests && messagesPerSecond >= wantedMessages,
      detail: `${graphqlPerSecond.toFixed(0)} requests/s, ${messagesPerSecond.toFixed(0)} messages/s, the machine ${(machineShare * 100).toFixed(0)} % busy`,
    })
  }
  if (flow.pings > 0) {
    // A ping in flight at a window's edge is answered in the next second: at most one per socket.
    const unanswered = flow.pings - flow.pongs
    checks.push({
      name: 'graphql-ws pings under their rate: every one answered (no message refused)',
      passed: unanswered <= run.load.sockets.length,
      detail: `${flow.pings} pings sent in the steady parts, ${flow.pongs} pongs (${run.load.sockets.length} may be in flight at the edges)`,
    })
  }

  // Added latency: what a request waits for its decisions (the decision time histogram of the steady parts), and
  // the well-behaved requests' own latency against the dry-run baseline.
  const decisionBuckets = new Map<number, number>()
  for (const sample of samples.filter((s) => inSteady(s.at))) {
    for (const [le, n] of sample.buckets) decisionBuckets.set(le, (decisionBuckets.get(le) ?? 0) + n)
  }
  const decisionP99 = percentileOf(decisionBuckets, 99)
  const decisionLine =
    `decision time (what a request waits for the limiter, store round trip included): p50 ≤ ` +
    `${percentileOf(decisionBuckets, 50) ?? '?'} ms, p99 ≤ ${decisionP99 ?? '?'} ms (histogram bucket bounds)`
  lines.push(decisionLine)
  if (busy !== undefined) {
    const target = busy.targets.decisionP99Ms
    const total = decisionBuckets.get(Number.POSITIVE_INFINITY) ?? 0
    const withinTarget = total > 0 ? (100 * (decisionBuckets.get(target / 1000) ?? 0)) / total : Number.NaN
    checks.push({
      name: `decision time p99 ≤ ${target} ms in the steady parts`,
      passed: decisionP99 !== undefined && decisionP99 <= target,
      detail:
        `p99 ≤ ${decisionP99 ?? '?'} ms (the bound of its histogram bucket); ${withinTarget.toFixed(2)} % of ` +
        `decisions within ${target} ms; a Redis PING from the load's process: p99 ${pct(steadyRedisPings(run, inSteady), 99)} ms`,
    })
  }
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
  const steadyPings = steadyRedisPings(run, inSteady)
  const redisLine = `Redis PING to each master: p50 ${pct(steadyPings, 50)} ms, p99 ${pct(steadyPings, 99)} ms in the steady parts`
  lines.push(redisLine)
  md.push(`**Redis.** ${redisLine}.`, '')

  // Classes against their budgets
  md.push(
    '## Admitted cost per identity class (steady parts)',
    '',
    '| class | identities | admitted | budget (what was left after the first admission + refill × time) | admitted / budget | refused |',
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
        detail:
          `least served identity-window: ${(result.leastServed * 100).toFixed(1)} % of its budget, ` +
          `${(result.lowest * 100).toFixed(1)} % counting the request its leftover could not pay for (95 % needed); ` +
          `${result.overBudget} identity-windows got more than budget + ${overBudgetSlack(group)}`,
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

  // WebSockets: the sockets the load keeps open per identity, and whether one more than the cap gets in.
  const calm = samples.filter((s) => inSteady(s.at))
  const maxChat = Math.max(0, ...calm.map((s) => s.maxSockets.chat ?? 0))
  const maxGraphqlWs = Math.max(0, ...calm.map((s) => s.maxSockets['graphql-ws'] ?? 0))
  const breaches = run.load.capBreaches.filter((b) => inSteady(b.at))
  const breachTimes = breaches.map((b) => `${b.kind} at ${chartTime(b.at)}`).join(', ')
  checks.push({
    name: 'WebSocket sockets per identity: none admitted past the cap (store up)',
    passed: maxChat <= CHAT_CAP && maxGraphqlWs <= GRAPHQL_WS_CAP && breaches.length === 0,
    detail:
      `sockets held per identity, sampled each second: chat at most ${maxChat} of ${CHAT_CAP}, graphql-ws at most ` +
      `${maxGraphqlWs} of ${GRAPHQL_WS_CAP}; one more than the cap tried: ${breaches.length} admitted` +
      (breaches.length > 0 ? ` (${breachTimes})` : ''),
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
    // What the fault disturbed; for a reshard the store answered throughout, the move itself.
    const window =
      fault.kind === 'reshard' && outages.byFault[i] === undefined
        ? { from: fault.at, until: (fault.repairedAt ?? fault.at) + 1000 }
        : (disturbed[i] as Window)
    const bySource = decisionsBySource(samples.filter((s) => s.at >= fault.at && s.at < window.until))
    const outage = outages.byFault[i]
    const repaired =
      fault.repairedAt === undefined
        ? ''
        : ` (${fault.kind === 'reshard' ? 'the move done' : 'repaired'} after ${((fault.repairedAt - fault.at) / 1000).toFixed(1)} s)`
    const excess = probeExcess(run, { from: fault.at, until: window.until })
    const sources = [...bySource].map(([source, n]) => `${source} ${n}`).join(', ')
    // Samples are per second: an outage seen in n consecutive samples lasted about n seconds.
    const without = outage === undefined ? 0 : (outage.last - outage.from) / 1000 + 1
    const back = outage === undefined ? 0 : (outage.last - fault.at) / 1000
    md.push(
      `| ${fault.kind} at ${chartTime(fault.at)} | ${fault.detail} | ${sources} | ${outage === undefined ? '—' : `${without.toFixed(0)} s`} | ${outage === undefined ? 'the store answered throughout' : `after ${back.toFixed(1)} s${repaired}`} | ${excess.total} (at most ${excess.worst} for one identity of budget ${PROBE_BUDGET.capacity} + ${PROBE_BUDGET.refillPerSecond}/s) |`,
    )
    const outageLine =
      outage === undefined
        ? 'the store answered throughout'
        : `without the store ${without.toFixed(0)} s, back after ${back.toFixed(1)} s${repaired}`
    lines.push(
      `fault ${fault.kind} at ${chartTime(fault.at)} (${fault.detail}): ${outageLine}; decisions ${sources}; admitted beyond budget ${excess.total} (worst identity ${excess.worst})`,
    )
    checks.push({
      name: `${fault.kind}: decisions come back from the store while it is watched`,
      passed: outage === undefined || outage.last < fault.until,
      detail:
        outage === undefined
          ? 'the store answered throughout'
          : `the last fail-policy decision of its outage ${back.toFixed(1)} s after the fault (watched ${((fault.until - fault.at) / 1000).toFixed(0)} s)`,
    })
    if (fault.kind === 'kill-instance') checks.push(reconnected(run, fault))
    if (fault.kind === 'reshard') checks.push(...reshardChecks(run, fault, samples, excess.total))
  }
  md.push(
    '',
    "Each instance answers by its limiters' fail policies while the store cannot be reached (the example: `local` for users and the chat, `open` for anonymous callers and graphql-ws): the steady-state figures above leave these disturbances out, and the admission probe (a fail-closed token bucket on the same cluster) shows what a failover cost in admission: a master's acknowledged writes its replica had not received are lost when the replica takes over, and a restart of the whole cluster (nothing persisted) forgets every budget.",
    '',
  )
  const strayDecisions = outages.strays.reduce((sum, o) => sum + o.decisions, 0)
  const outsideFaults = samples
    .filter((s) => s.at >= warmEnd && !disturbed.some((w) => s.at >= w.from && s.at < w.until))
    .reduce((sum, s) => sum + Object.values(s.bySource).reduce((a, b) => a + b, 0), 0)
  const strayShare = outsideFaults > 0 ? strayDecisions / outsideFaults : 0
  const strayList = outages.strays
    .map((o) => `${o.decisions} at ${chartTime(o.from)}${o.last > o.from ? `–${chartTime(o.last)}` : ''}`)
    .join(', ')
  const strayLine =
    `outside faults: ${strayDecisions} of ${outsideFaults} decisions (${(strayShare * 100).toFixed(2)} %) answered by ` +
    `the fail policy${strayList === '' ? '' : ` (${strayList})`}: store calls that missed their deadline, ` +
    "a stall of the instance's event loop or a busy machine; left out of the steady parts with the seconds around them"
  lines.push(strayLine)
  md.push(`**Outside faults.** ${strayLine.replace(/^outside faults: /, '')}.`, '')
  checks.push({
    name: `outside faults the store answers (at most ${MAX_STRAY_SHARE * 100} % of decisions by the fail policy)`,
    passed: strayShare <= MAX_STRAY_SHARE,
    detail: `${(strayShare * 100).toFixed(2)} % (${strayDecisions} of ${outsideFaults})`,
  })
  const late = probeLateSpends(run)
  checks.push({
    name: 'admission probe: a decision the fail policy answered never spends the budget later',
    passed: late.tokens === 0,
    detail: `${late.tokens} tokens missing after ${late.gaps} spells of fail-policy decisions (beyond ${LATE_SPEND_SLACK} of measurement)`,
  })
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
  const failed = checks.filter((c) => !c.passed)
  const verdict =
    failed.length === 0
      ? `all ${checks.length} checks passed`
      : `${failed.length} of ${checks.length} checks FAILED: ${failed.map((c) => c.name).join('; ')}`
  lines.push(
    '',
    ...checks.map((c) => `${c.passed ? 'passed' : 'FAILED'}  ${c.name}: ${c.detail}`),
    '',
    verdict,
  )
  const head = [
    `# tollbooth soak (${run.profile.name} profile)`,
    '',
    `**Result: ${verdict}.**`,
    '',
    intro,
    '',
  ]
  return {
    checks,
    table: [intro, '', ...lines].join('\n'),
    markdown: [...head, ...md].join('\n'),
    charts: charts(run),
  }
}

/**
 * A reshard is no outage: redirected calls are answered by the node the slot moved to, no breaker opens, and a moved
 * key keeps its budget (MIGRATE moves it whole), so nothing is admitted beyond budget.
 */
function reshardChecks(
  run: SoakRun,
  fault: FaultRecord,
  samples: readonly Sample[],
  admittedBeyondBudget: number,
): Check[] {
  // The decisions of the move itself (each sample counts the second before it), not of the calm after it.
  const movedBy = (fault.repairedAt ?? fault.at) + 1000
  const bySource = decisionsBySource(samples.filter((s) => s.at > fault.at && s.at <= movedBy))
  const all = [...bySource.values()].reduce((a, b) => a + b, 0)
  const failed = ['fail-open', 'fail-closed', 'local'].reduce((sum, s) => sum + (bySource.get(s) ?? 0), 0)
  const share = all > 0 ? failed / all : 0
  const took = fault.repairedAt === undefined ? '?' : ((fault.repairedAt - fault.at) / 1000).toFixed(1)
  return [
    {
      name: `reshard: the store answers while slots move (at most ${MAX_RESHARD_FAIL_SHARE * 100} % of decisions by the fail policy)`,
      passed: share <= MAX_RESHARD_FAIL_SHARE,
      detail: `${failed} of ${all} decisions (${(share * 100).toFixed(2)} %) by the fail policy; the move took ${took} s`,
    },
    {
      name: 'reshard: admission probe admits nothing beyond budget',
      passed: admittedBeyondBudget === 0,
      detail: `${admittedBeyondBudget} admitted beyond budget (${run.probe.decisions.length} probe decisions in the run)`,
    },
  ]
}

/** The decisions of these samples, summed by source. */
function decisionsBySource(samples: readonly Sample[]): Map<string, number> {
  const bySource = new Map<string, number>()
  for (const sample of samples) {
    for (const [source, n] of Object.entries(sample.bySource))
      bySource.set(source, (bySource.get(source) ?? 0) + n)
  }
  return bySource
}

/** The load process' own PINGs to the masters in the steady parts: what one round trip to Redis costs on this machine. */
function steadyRedisPings(run: SoakRun, inSteady: (t: number) => boolean): number[] {
  return run.redisLatency.samples
    .filter((p) => inSteady(p.at) && p.ms !== undefined)
    .map((p) => p.ms as number)
}

/** Per-second sample deltas over the steady parts: WebSocket messages, pings and pongs, the machine's CPU. */
function steadyFlow(samples: readonly Sample[], inSteady: (t: number) => boolean) {
  const flow = { seconds: 0, sent: 0, pings: 0, pongs: 0, machineBusy: 0, machineTotal: 0 }
  for (let i = 1; i < samples.length; i++) {
    const [before, after] = [samples[i - 1] as Sample, samples[i] as Sample]
    if (!inSteady(before.at) || !inSteady(after.at)) continue
    flow.seconds += (after.at - before.at) / 1000
    flow.sent += after.traffic.sent - before.traffic.sent
    flow.pings += after.traffic.pings - before.traffic.pings
    flow.pongs += after.traffic.pongs - before.traffic.pongs
    flow.machineBusy += after.machine.busy - before.machine.busy
    flow.machineTotal += after.machine.total - before.machine.total
  }
  return flow
}

export async function writeReport(report: SoakReport, dir: string): Promise<void> {
  await mkdir(dir, { recursive: true })
  await writeFile(join(dir, 'report.md'), report.markdown)
  for (const [name, svg] of Object.entries(report.charts)) await writeFile(join(dir, name), svg)
}

/**
 * What a fault disturbs, left out of the budget checks: from the fault (a second before a killed instance: the
 * requests it was answering fail) to SETTLE_MS after its outage's last fail-policy decision, or after the fault when
 * the store answered throughout. The rest of its watch is judged like any steady part.
 */
function disturbance(fault: FaultRecord, outage: Outage | undefined): Window {
  // A reshard the store answered throughout disturbs nothing: the budgets are judged while the slots move.
  if (fault.kind === 'reshard' && outage === undefined) return { from: fault.at, until: fault.at }
  const from = fault.kind === 'kill-instance' ? fault.at - 1000 : fault.at
  return { from, until: (outage?.last ?? fault.at) + SETTLE_MS }
}

function steadyWindows(whole: Window, disturbed: readonly Window[]): Window[] {
  const windows: Window[] = []
  let from = whole.from
  for (const d of [...disturbed].sort((a, b) => a.from - b.from)) {
    if (d.until <= d.from) continue
    if (d.from > from) windows.push({ from, until: d.from })
    from = Math.max(from, d.until)
  }
  if (whole.until > from) windows.push({ from, until: whole.until })
  return windows
}

/**
 * A class's admissions in the steady windows against what its budgets allowed. For each identity and window, the
 * window's first admitted request is the anchor: its RateLimit `r` is what the store had left right after it (a
 * refusal's `r` may come from the deny cache, and an answer just before the window from a fail policy). From it,
 * the budget is that plus the refill to the window's end.
 */
function classAgainstBudget(run: SoakRun, group: HttpClass, windows: readonly Window[]) {
  let admitted = 0
  let budget = 0
  let refused = 0
  let sent = 0
  let lowest = Number.POSITIVE_INFINITY
  let leastServed = Number.POSITIVE_INFINITY
  let overBudget = 0
  for (const identity of group.identities) {
    const records = [...(run.load.sent.get(identity.name) ?? [])].sort((a, b) => a.at - b.at)
    for (const w of windows) {
      const inside = records.filter((r) => r.at >= w.from && r.at < w.until)
      sent += inside.length
      refused += inside.filter((r) => r.status !== 200).length
      const anchorAt = inside.findIndex((r) => r.status === 200 && r.remaining !== undefined)
      const anchor = inside[anchorAt]
      if (anchor?.remaining === undefined) continue
      const got = inside.slice(anchorAt + 1).reduce((sum, r) => sum + r.charged, 0)
      const allowed = anchor.remaining + (group.budget.refillPerSecond * (w.until - anchor.at)) / 1000
      admitted += anchor.charged + got
      budget += anchor.charged + allowed
      if (!group.greedy) continue
      // Short of the budget by up to one request: what is left at the end may not pay for another.
      lowest = Math.min(lowest, (got + group.cost) / allowed)
      leastServed = Math.min(leastServed, got / allowed)
      if (got > allowed + overBudgetSlack(group)) overBudget++
    }
  }
  return {
    admitted,
    budget,
    refused,
    sent,
    lowest: Number.isFinite(lowest) ? lowest : 1,
    leastServed: Number.isFinite(leastServed) ? leastServed : 1,
    overBudget,
  }
}

/**
 * Admitted beyond the budget by this much is within measurement: the `r` of the RateLimit field is rounded down,
 * and a request sent just before a window's end may be decided just after it (half a second of refill).
 */
function overBudgetSlack(group: HttpClass): number {
  return 2 + group.budget.refillPerSecond * 0.5
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

/**
 * Whether refused probe decisions were applied after all: across each spell of fail-policy decisions of an
 * identity, the store's next answer should show what its previous one left plus the refill (up to the capacity),
 * less that decision's own token. A late application of the spell's decisions shows as tokens missing. Within
 * LATE_SPEND_SLACK: rounding, and a second of refill for replies timed late by a busy process.
 */
function probeLateSpends(run: SoakRun): { tokens: number; gaps: number } {
  const last = new Map<number, { at: number; remaining: number; failedSince: boolean }>()
  let tokens = 0
  let gaps = 0
  for (const d of run.probe.decisions) {
    const previous = last.get(d.identity)
    if (!d.fromStore) {
      if (previous !== undefined) previous.failedSince = true
      continue
    }
    if (previous?.failedSince === true) {
      gaps++
      const refilled = previous.remaining + (PROBE_BUDGET.refillPerSecond * (d.at - previous.at)) / 1000
      const expected = Math.floor(Math.min(PROBE_BUDGET.capacity, refilled)) - (d.allowed ? 1 : 0)
      tokens += Math.max(0, expected - LATE_SPEND_SLACK - d.remaining)
    }
    last.set(d.identity, { at: d.at, remaining: d.remaining, failedSince: false })
  }
  return { tokens, gaps }
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
    {
      name: `the store's deadline (${STORE_TIMEOUT_MS} ms)`,
      color: '#cf222e',
      dashed: true,
      points: [
        [0, STORE_TIMEOUT_MS],
        [duration, STORE_TIMEOUT_MS],
      ],
    },
  ]
  const palette = ['#cf222e', '#2da44e', '#8250df', '#0969da']
  const refills = run.load.classes.map((group) => group.budget.refillPerSecond * group.identities.length)
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
      subtitle:
        "All instances and limiters, store round trip included; above the deadline only when an instance's event loop stalls",
      yLabel: 'ms',
      series: p99,
      markers,
      durationSeconds: duration,
    }),
    'admitted-cost.svg': renderTimeSeries({
      title: 'Admitted GraphQL cost per second, by identity class',
      subtitle:
        'Greedy classes ask far more than their budget and get its refill (dashed); fail-open bursts are cut off at the top',
      yLabel: 'cost / s',
      series: admitted,
      yMax: niceCeiling(3 * Math.max(1, ...refills)),
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
