/**
 * Requests per second of GraphQL Yoga and Apollo Server, plain and protected, side by side in one run.
 *
 *   npm run bench:graphql                         both workloads, every contender
 *   npm run bench:graphql -- --workload heavy     one workload (light or heavy)
 *
 * Contenders, each one server in a process of its own (bench/graphql/server.ts), all started before the first
 * round and alive until the last, on the same schema and resolvers (bench/graphql/schema.ts), on node:http at
 * 127.0.0.1:
 * - plain Yoga 5 (its defaults: parse and validation caches on), and a second plain Yoga, an A/A control: its ratio
 *   to the first shows how far this run can read one server against itself, i.e. what a ratio of this run is good
 *   to;
 * - Yoga + `useTollbooth` (tollbooth/graphql) with a tokenBucket on the default MemoryStore, and on a RedisStore
 *   (default batching and timeout), default guards and cost model (`@listSize(slicingArguments: ["first"])` given
 *   through the `costs` option), `extensions.cost` and RateLimit headers on (the defaults);
 * - Yoga + @escape.tech/graphql-armor's `new EnvelopArmor().protect()` plugins with their defaults (cost limit 5000,
 *   max depth 6, max aliases 15, max directives 50, max tokens 1000, field suggestions blocked): static analysis
 *   only, for reference;
 * - plain Apollo Server 5 (`startStandaloneServer`, its defaults), Apollo + tollbooth's Apollo plugin
 *   (tollbooth/apollo, the same options) on a MemoryStore and on a RedisStore, and Apollo + graphql-armor
 *   (`new ApolloArmor().protect()`); the tollbooth rows are skipped, with a line saying so, while tollbooth/apollo
 *   is not built;
 * - with `--breakdown`, the Yoga MemoryStore contender again with `costExtension: false`, with `headers: false`,
 *   and with both: what reporting costs;
 * - with `--calibrate`, plugins that do no protection: on Yoga, one spending BURN_MICROS µs of CPU per operation,
 *   one deferring execution by a turn of the event loop, and one registering the hooks `useTollbooth` does with
 *   nothing in them; on Apollo, one registering the hooks tollbooth's Apollo plugin does with nothing in them: what a
 *   known cost reads as here, how much scheduling alone moves, and what each server spends on running a plugin of
 *   tollbooth's shape.
 * Yoga rows are read against plain Yoga, Apollo rows against plain Apollo. Budgets are far beyond what the load can
 * spend (capacity 1e9, refill 1e6/s): nothing is refused, what is measured is the overhead. The identity is the
 * `x-bench-user` header (read by `identify`).
 *
 * Why one process per server, all alive for the run: servers in one process share its event loop, heap and garbage
 * collector, so one server's garbage is collected during another's measurement; a process per server measures each
 * alone, and its own CPU time and GC counts can be read (`process.cpuUsage()` and a `gc` PerformanceObserver in the
 * server process, over the measured phase only). Starting them once rather than per round keeps each server's
 * compiled code warm from round to round, as a production server's is, and keeps process start-up (a second or
 * more per server on this machine) out of the time budget; an idle server process spends no CPU.
 *
 * Workloads (bench/graphql/workloads.ts), both run by default, one after the other:
 * - light: 4 small queries in turn (with variables, a fragment, a bare query), 1000 identities, 50 connections;
 * - heavy: one page of 10 users with 5 friends and 3 posts each (about 4.5 kB of JSON per response), `$n = 10` in the
 *   variables and a cursor that differs per identity, 100 identities, 32 connections.
 * Load: autocannon (no pipelining), each connection cycling through one prebuilt request per identity, in a
 * process of its own (bench/graphql/load.ts). Each workload starts with an unmeasured pass of WARM_UP_PASS_S on
 * every server; then each measurement is WARMUP_S of the same load (not counted) and MEASURE_S measured. With 2
 * CPUs, the server, the load and redis-server share the machine. ROUNDS rounds per workload, each running the
 * Yoga contenders together and the Apollo ones together, in the order of `roundContenders` (a balanced Latin square
 * within each group, so that a ratio pairs measurements seconds apart); the table shows medians, the verdicts paired
 * ratios (each round's rate over the plain server's in the same round), and the A/A control's spread says how far
 * they can be read. Every response is checked: non-2xx, socket errors, timeouts and GraphQL `errors` are counted
 * and printed. Server figures (CPU time, its system part, scavenges and GC time per request, Redis calls) come from
 * the server's own process over the measured phase. After the rounds, one more pass per server counts the bytes
 * it allocates per request (V8's sampling heap profiler in the server process): a figure that, unlike the rates,
 * does not move with the machine's load, to read a change in the work per request by.
 *
 * Flags: `--workload light|heavy`, `--rounds N`, `--warmup S`, `--measure S`, `--contenders key,key,…` (keys of
 * bench/graphql/contenders.ts; the plain server of each framework is always added), `--breakdown`, `--calibrate`,
 * `--cpu-prof DIR` (each server process writes a V8 CPU profile into DIR/<contender key> when the run ends).
 *
 * NODE_ENV: graphql-js checks every `isObjectType()`-style test more slowly unless NODE_ENV is 'production', which
 * weighs on whatever walks types per response value (the executor, tollbooth's actual-cost walk); Apollo Server
 * also reads it. Production servers set it: `NODE_ENV=production npm run bench:graphql` measures that setting (the
 * server and load processes inherit it).
 *
 * Redis: a private redis-server started by `startRedis()` (never the shared one on :6379), stopped at the end.
 *
 * What is measured is the built package, imported by its own name (`tollbooth`, `tollbooth/graphql`,
 * `tollbooth/apollo`: `dist/`, what npm publishes; the script builds first), not the TypeScript sources: tsx
 * compiles those with esbuild's `keepNames`, which wraps every function created per request in a `__name()` call,
 * a cost no user pays.
 */
import { cpus } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { startRedis } from '../test/helpers/redisServer.js'
import {
  ALLOCATION_TARGETS,
  ALLOCATION_WORKLOAD,
  apolloPluginBuilt,
  baselineOf,
  CONTENDER_KEYS,
  CONTENDER_NAMES,
  type ContenderKey,
  defaultContenders,
  needsApolloPlugin,
  needsRedis,
  TARGETS,
} from './graphql/contenders.js'
import type { LoadJob, LoadResult } from './graphql/load.js'
import { IDENTITY_HEADER } from './graphql/schema.js'
import { ServerProcess, type ServerStats } from './graphql/serverProcess.js'
import { WORKLOAD_NAMES, WORKLOADS, type Workload, type WorkloadName } from './graphql/workloads.js'
import { LoadProcess } from './loadProcess.js'
import { fmt, loadAverage, median, pct, verdict, versusPlain } from './report.js'

const WARMUP_S = 0.5
const MEASURE_S = 1.5
/** Of each workload, before its first round, per server (see `runWorkload`). */
const WARM_UP_PASS_S = 2
/** Of each workload, after its last round, per server: the allocation count (see `allocatedPerRequest`). */
const ALLOCATION_PASS_S = 1
/**
 * Of the workload the allocation verdicts are for, after that pass, per server: requests answered one after another
 * inside the server process, unmeasured and then counted. Two identical servers read within about 0.3 kB of each
 * other this way, against several kB over the network, whose count moves with node:http and the load's concurrency.
 */
const IN_PROCESS_REQUESTS = 6000
/**
 * Many short rounds rather than a few long ones: the machine's load drifts, and each round is paired with the plain
 * server's. Six rounds of both workloads keep a full run (nine servers) within about six to seven minutes.
 */
const ROUNDS = 6

interface RunOptions {
  workloads: WorkloadName[]
  rounds: number
  warmupSeconds: number
  measureSeconds: number
  contenders: ContenderKey[]
  cpuProfileDir: string | undefined
}

function runOptions(): RunOptions {
  const { values } = parseArgs({
    options: {
      workload: { type: 'string' },
      rounds: { type: 'string' },
      warmup: { type: 'string' },
      measure: { type: 'string' },
      contenders: { type: 'string' },
      breakdown: { type: 'boolean', default: false },
      calibrate: { type: 'boolean', default: false },
      'cpu-prof': { type: 'string' },
    },
  })
  const number = (flag: string, value: string | undefined, fallback: number): number => {
    if (value === undefined) return fallback
    const parsed = Number(value)
    if (!(parsed > 0)) throw new Error(`--${flag}: expected a positive number, got ${value}`)
    return parsed
  }
  const workload = values.workload as WorkloadName | undefined
  if (workload !== undefined && !WORKLOAD_NAMES.includes(workload)) {
    throw new Error(`--workload: expected one of ${WORKLOAD_NAMES.join(', ')}, got ${workload}`)
  }
  let contenders = defaultContenders({ breakdown: values.breakdown, calibrate: values.calibrate })
  if (values.contenders !== undefined) {
    const picked = values.contenders.split(',').map((key) => key.trim()) as ContenderKey[]
    for (const key of picked) {
      if (!CONTENDER_KEYS.includes(key)) throw new Error(`--contenders: unknown contender ${key}`)
    }
    // Every ratio needs the plain server of its framework in the same rounds.
    const baselines = [...new Set(picked.map(baselineOf))]
    contenders = [...baselines, ...picked.filter((key) => !baselines.includes(key))]
  }
  return {
    workloads: workload === undefined ? [...WORKLOAD_NAMES] : [workload],
    rounds: Math.round(number('rounds', values.rounds, ROUNDS)),
    warmupSeconds: number('warmup', values.warmup, WARMUP_S),
    measureSeconds: number('measure', values.measure, MEASURE_S),
    contenders,
    cpuProfileDir: values['cpu-prof'],
  }
}

/** A contender's server process and where it listens. */
interface Contender {
  readonly key: ContenderKey
  readonly name: string
  readonly process: ServerProcess
  readonly url: string
}

/** One contender's measured phase: the load's figures and the server process' own. */
interface Round extends LoadResult {
  /** Server CPU time over the measured phase, as a fraction of one core. */
  serverCpu: number
  serverMicrosPerRequest: number
  /** The system (kernel) part of `serverMicrosPerRequest`. */
  systemMicrosPerRequest: number
  minorGcsPer1000: number
  majorGcsPer1000: number
  gcMicrosPerRequest: number
  /** RedisStore script calls per request (the Redis contenders only). */
  storeCallsPerRequest: number | undefined
}

function measuredRound(result: LoadResult, before: ServerStats, after: ServerStats): Round {
  const requests = Math.max(1, result.requests)
  const cpuMicros = after.cpuMicros - before.cpuMicros
  return {
    ...result,
    serverCpu: cpuMicros / 1e6 / result.seconds,
    serverMicrosPerRequest: cpuMicros / requests,
    systemMicrosPerRequest: (after.systemMicros - before.systemMicros) / requests,
    minorGcsPer1000: ((after.minorGcs - before.minorGcs) * 1000) / requests,
    majorGcsPer1000: ((after.majorGcs - before.majorGcs) * 1000) / requests,
    gcMicrosPerRequest: (after.gcMicros - before.gcMicros) / requests,
    storeCallsPerRequest:
      after.storeCalls === undefined || before.storeCalls === undefined
        ? undefined
        : (after.storeCalls - before.storeCalls) / requests,
  }
}

/**
 * Bytes the server allocates per request under this workload (garbage included, estimated by V8's sampling heap
 * profiler in the server process: bench/graphql/server.ts' `Allocations`), over one more pass of the load. Unlike
 * rates and CPU time it does not move with the machine's load, so it shows a change in the work done per request
 * that a noisy run cannot. The profiler slows the server down: this pass is not one of the rounds.
 */
async function allocatedPerRequest(
  contender: Contender,
  workload: Workload,
  load: LoadProcess<LoadJob, LoadResult>,
): Promise<number> {
  let counting: Promise<void> | undefined
  const result = await load.run(
    {
      url: contender.url,
      workload: workload.name,
      warmupSeconds: WARMUP_S,
      measureSeconds: ALLOCATION_PASS_S,
    },
    () => {
      counting = contender.process.startCountingAllocations()
    },
  )
  await counting
  return (await contender.process.allocatedBytes()) / Math.max(1, result.requests)
}

/** Sends every distinct query of the workload once and checks the answer; returns `requestedQueryCost` of each. */
async function check(contender: Contender, workload: Workload): Promise<(number | undefined)[]> {
  const costsSeen: (number | undefined)[] = []
  for (let i = 0; i < workload.distinctQueries; i++) {
    const response = await fetch(contender.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/graphql-response+json',
        [IDENTITY_HEADER]: 'check',
      },
      body: JSON.stringify(workload.requestBody(i)),
    })
    const text = await response.text()
    const body = JSON.parse(text) as {
      data?: unknown
      errors?: unknown
      extensions?: { cost?: { requestedQueryCost: number } }
    }
    if (response.status !== 200 || body.errors !== undefined || body.data == null) {
      throw new Error(`${contender.name}: query ${i} answered ${response.status} ${text.slice(0, 300)}`)
    }
    costsSeen.push(body.extensions?.cost?.requestedQueryCost)
  }
  return costsSeen
}

/**
 * The order of the servers in a round: the rows of Williams' balanced Latin square (n rounds, 2n when n is odd), so
 * that over a full set of rounds each server runs right after each other one equally often. Rotating one order
 * would keep every server's predecessor the same, and what a server leaves behind (a busy load generator, the
 * machine's caches) would always favour or burden the same one.
 */
function roundOrder(round: number, n: number): number[] {
  const first = [0]
  for (let low = 1, high = n - 1, i = 1; i < n; i++) first.push(i % 2 === 1 ? low++ : high--)
  const rows = n % 2 === 0 ? n : 2 * n
  const row = round % rows
  const order = first.map((position) => (position + row) % n)
  return row < n ? order : order.reverse()
}

/**
 * Half the width of the notch of a box plot (McGill, Tukey and Larsen): about a 95% interval for the median of
 * `values`, from their interquartile range.
 */
function medianNotch(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const quartile = (q: number) => sorted[Math.round(q * (sorted.length - 1))] as number
  return (1.58 * (quartile(0.75) - quartile(0.25))) / Math.sqrt(sorted.length)
}

/**
 * The contenders of one round in the order they run: those read against the same plain server together (Yoga's,
 * then Apollo's, the other way round every other round), each group in its `roundOrder`. Each ratio pairs two
 * measurements a few seconds apart, not half a round: load from elsewhere on the machine comes in bursts.
 */
function roundContenders(round: number, contenders: readonly Contender[]): Contender[] {
  const groups = new Map<ContenderKey, Contender[]>()
  for (const contender of contenders) {
    const baseline = baselineOf(contender.key)
    groups.set(baseline, [...(groups.get(baseline) ?? []), contender])
  }
  const ordered = [...groups.values()]
  if (round % 2 === 1) ordered.reverse()
  return ordered.flatMap((group) => roundOrder(round, group.length).map((i) => group[i] as Contender))
}

function printRound(round: number, contender: Contender, result: Round): void {
  const problems = result.non2xx + result.errors + result.timeouts + result.graphqlErrors
  console.log(
    `round ${round + 1}  ${contender.name.padEnd(34)} ${fmt(result.perSecond).padStart(6)} req/s` +
      `   p50 ${result.p50.toFixed(1)} ms  p99 ${result.p99.toFixed(1)} ms` +
      `   server ${result.serverMicrosPerRequest.toFixed(0)} µs CPU/req (${result.systemMicrosPerRequest.toFixed(0)} sys)` +
      `, GC ${result.gcMicrosPerRequest.toFixed(1)} µs/req` +
      `, CPU: server ${pct(result.serverCpu)} load ${pct(result.clientCpu)}` +
      (result.storeCallsPerRequest === undefined
        ? ''
        : `, ${result.storeCallsPerRequest.toFixed(2)} Redis calls/req`) +
      (problems === 0 ? '' : `   PROBLEMS: ${problems}`),
  )
}

/** The table of medians, the check of every response, the verdicts on paired ratios. */
function report(
  workload: Workload,
  contenders: readonly Contender[],
  results: ReadonlyMap<Contender, Round[]>,
  allocated: ReadonlyMap<Contender, number>,
  inProcess: ReadonlyMap<Contender, number>,
): void {
  console.log()
  console.log(`workload ${workload.name}: medians over rounds`)
  console.log(
    [
      'server'.padEnd(34),
      'req/s'.padStart(6),
      'min–max of rounds'.padStart(17),
      'p50 ms'.padStart(7),
      'p99 ms'.padStart(7),
      'µs CPU/req'.padStart(11),
      'of it sys'.padStart(10),
      'CPU srv/load'.padStart(13),
      'scav/1k req'.padStart(12),
      'GC µs/req'.padStart(10),
      'kB alloc/req'.padStart(13),
      'B/resp'.padStart(7),
      'responses'.padStart(10),
      'not ok'.padStart(7),
    ].join(' '),
  )
  const of = (contender: Contender) => results.get(contender) ?? []
  const sum = (rounds: Round[], pick: (r: Round) => number) => rounds.reduce((total, r) => total + pick(r), 0)
  const problemsOf = (r: Round) => r.non2xx + r.errors + r.timeouts + r.graphqlErrors
  for (const contender of contenders) {
    const rounds = of(contender)
    const rates = rounds.map((r) => r.perSecond).sort((a, b) => a - b)
    const med = (pick: (r: Round) => number) => median(rounds.map(pick))
    console.log(
      [
        contender.name.padEnd(34),
        fmt(median(rates)).padStart(6),
        `${fmt(rates[0])}–${fmt(rates.at(-1))}`.padStart(17),
        med((r) => r.p50)
          .toFixed(1)
          .padStart(7),
        med((r) => r.p99)
          .toFixed(1)
          .padStart(7),
        med((r) => r.serverMicrosPerRequest)
          .toFixed(0)
          .padStart(11),
        med((r) => r.systemMicrosPerRequest)
          .toFixed(0)
          .padStart(10),
        `${pct(med((r) => r.serverCpu))}/${pct(med((r) => r.clientCpu))}`.padStart(13),
        med((r) => r.minorGcsPer1000)
          .toFixed(1)
          .padStart(12),
        med((r) => r.gcMicrosPerRequest)
          .toFixed(1)
          .padStart(10),
        ((allocated.get(contender) ?? Number.NaN) / 1000).toFixed(1).padStart(13),
        fmt(med((r) => r.bytesPerRequest)).padStart(7),
        fmt(sum(rounds, (r) => r.requests)).padStart(10),
        String(sum(rounds, problemsOf)).padStart(7),
      ].join(' '),
    )
    const statuses: Record<string, number> = {}
    for (const r of rounds) {
      for (const [code, n] of Object.entries(r.statusCodes)) statuses[code] = (statuses[code] ?? 0) + n
    }
    if (Object.keys(statuses).some((code) => code !== '200')) console.log('  status codes:', statuses)
    const sample = rounds.find((r) => r.sampleError !== undefined)?.sampleError
    if (sample !== undefined) console.log(`  first GraphQL error: ${sample}`)
  }

  const failures = contenders.reduce((total, c) => total + sum(of(c), problemsOf), 0)
  console.log(
    failures === 0
      ? '\nall responses: 200, with data and without errors'
      : `\n${failures} responses were NOT 200 with data and without errors (see the table): the rates above are not comparable`,
  )

  // Verdicts on paired ratios: each round's rate over the plain server's in the same round, median over rounds
  // (drift of the machine's load between rounds cancels out); the ratio of the medians and of server CPU per
  // request too.
  console.log()
  for (const contender of contenders) {
    const baselineKey = baselineOf(contender.key)
    const baseline = contenders.find((c) => c.key === baselineKey)
    if (baseline === undefined || baseline === contender) continue
    const { paired, ofMedians, cpu } = versusPlain(
      of(contender),
      of(baseline),
      (r) => r.serverMicrosPerRequest,
    )
    const target = TARGETS[contender.key]
    const targetText =
      contender.key === 'yogaPlainAgain'
        ? '(A/A control: the same server read against its twin)'
        : target === undefined
          ? '(reference, no target)'
          : `target ≥ ${target.toFixed(2)}×   ${verdict(paired, target)}`
    const perRound = of(contender)
      .map((r, i) => (r.perSecond / (of(baseline)[i]?.perSecond ?? Number.NaN)).toFixed(2))
      .join(' ')
    console.log(
      `${contender.name.padEnd(34)} ${paired.toFixed(2)}× ${baseline.name} (paired; ratio of medians ` +
        `${ofMedians.toFixed(2)}×)   ${targetText}`,
    )
    console.log(`${''.padEnd(34)} per round: ${perRound}`)
    console.log(
      `${''.padEnd(34)} server CPU per request, plain/this: ${cpu.toFixed(2)}× (what a CPU-bound server would get)` +
        (target === undefined ? '' : `   ${cpu >= target ? 'met' : 'NOT met'}`),
    )
    const bytes = allocated.get(contender)
    const baselineBytes = allocated.get(baseline)
    if (bytes !== undefined && baselineBytes !== undefined) {
      console.log(
        `${''.padEnd(34)} bytes allocated per request: ${fmt(bytes)} against ${fmt(baselineBytes)}, ` +
          `${bytes >= baselineBytes ? '+' : '−'}${fmt(Math.abs(bytes - baselineBytes))} ` +
          `(${((bytes / baselineBytes - 1) * 100).toFixed(1)}%; an estimate, about ±2% whatever the machine's load)`,
      )
    }
  }
  if (workload.name === ALLOCATION_WORKLOAD) allocationVerdicts(contenders, results, allocated, inProcess)
  const control = contenders.find((c) => c.key === 'yogaPlainAgain')
  const plain = contenders.find((c) => c.key === 'yogaPlain')
  if (control !== undefined && plain !== undefined) {
    const ratios = of(control).map((r, i) => r.perSecond / (of(plain)[i]?.perSecond ?? Number.NaN))
    const goodTo = Math.max(Math.abs(median(ratios) - 1), medianNotch(ratios))
    console.log(
      `\nhow far this run can be trusted: the A/A control (one plain Yoga against its twin) read ` +
        `${median(ratios).toFixed(2)}× paired, single rounds ${Math.min(...ratios).toFixed(2)}–` +
        `${Math.max(...ratios).toFixed(2)}; a paired ratio of this run is good to about ±${Math.round(goodTo * 100)}% ` +
        "(the control's distance from 1, or the 95% notch of its median, 1.58 × IQR / √rounds, if larger)",
    )
  }
  for (const contender of contenders) {
    const calls = of(contender).flatMap((r) =>
      r.storeCallsPerRequest === undefined ? [] : [r.storeCallsPerRequest],
    )
    if (calls.length === 0) continue
    console.log(
      `${contender.name}: ${median(calls).toFixed(2)} RedisStore script calls per request (median of rounds; ` +
        'the decisions of one event-loop turn share a call)',
    )
  }
  console.log(`load average after workload ${workload.name}: ${loadAverage()}`)
}

/**
 * tollbooth's extra bytes per request over its plain server against graphql-armor's, with the paired rate beside.
 * The verdict is on the in-process count (see `IN_PROCESS_REQUESTS`); the count over the network is printed beside.
 */
function allocationVerdicts(
  contenders: readonly Contender[],
  results: ReadonlyMap<Contender, Round[]>,
  overNetwork: ReadonlyMap<Contender, number>,
  allocated: ReadonlyMap<Contender, number>,
): void {
  const byKey = (key: ContenderKey) => contenders.find((c) => c.key === key)
  const extraIn = (counts: ReadonlyMap<Contender, number>, contender: Contender) => {
    const plain = byKey(baselineOf(contender.key))
    return plain === undefined
      ? Number.NaN
      : (counts.get(contender) ?? Number.NaN) - (counts.get(plain) ?? Number.NaN)
  }
  const extraOf = (contender: Contender) => extraIn(allocated, contender)
  console.log()
  const twin = byKey('yogaPlainAgain')
  if (twin !== undefined) {
    console.log(
      `allocations counted in process (${IN_PROCESS_REQUESTS} requests in turn): ${twin.name} ` +
        `${signedKb(extraOf(twin))} over plain Yoga, the count's own spread`,
    )
  }
  for (const [key, target] of Object.entries(ALLOCATION_TARGETS) as [ContenderKey, AllocationTarget][]) {
    const contender = byKey(key)
    const reference = byKey(target.reference)
    const plain = byKey(baselineOf(key))
    if (contender === undefined || reference === undefined || plain === undefined) continue
    const extra = extraOf(contender)
    const allowed = extraOf(reference) + target.marginBytes
    const { paired } = versusPlain(
      results.get(contender) ?? [],
      results.get(plain) ?? [],
      (r) => r.serverMicrosPerRequest,
    )
    console.log(
      `allocation verdict, ${contender.name}: ${signedKb(extra)} per request over ${plain.name}, ` +
        `target ≤ ${reference.name}'s ${signedKb(extraOf(reference))} + ${fmt(target.marginBytes / 1000)} kB = ` +
        `${signedKb(allowed)}   ${extra <= allowed ? 'met' : `NOT met (${signedKb(extra - allowed)} over)`}` +
        `   (paired rate ${paired.toFixed(2)}×; over the network ${signedKb(extraIn(overNetwork, contender))} ` +
        `against ${signedKb(extraIn(overNetwork, reference))})`,
    )
  }
}

type AllocationTarget = NonNullable<(typeof ALLOCATION_TARGETS)[ContenderKey]>

function signedKb(bytes: number): string {
  return `${bytes >= 0 ? '+' : '−'}${(Math.abs(bytes) / 1000).toFixed(1)} kB`
}

async function runWorkload(
  workload: Workload,
  contenders: readonly Contender[],
  load: LoadProcess<LoadJob, LoadResult>,
  options: RunOptions,
): Promise<void> {
  console.log()
  console.log(
    `=== workload ${workload.name}: ${workload.description}; ${workload.identities} identities in the ` +
      `${IDENTITY_HEADER} header, one prebuilt request each; autocannon ${workload.connections} connections; ` +
      `load average before: ${loadAverage()}`,
  )
  for (const contender of contenders) {
    const seen = await check(contender, workload)
    const costText = seen.every((c) => c === undefined) ? '' : `, extensions.cost ${seen.join(' / ')}`
    const queries = seen.length === 1 ? 'its query' : `${seen.length} distinct queries`
    console.log(`  check ${contender.name}: ${queries} answered with data${costText}`)
  }
  // One unmeasured pass first: a server's first seconds under this workload compile its code, which would weigh
  // on whichever round came first.
  for (const contender of contenders) {
    await load.run({
      url: contender.url,
      workload: workload.name,
      warmupSeconds: WARM_UP_PASS_S / 2,
      measureSeconds: WARM_UP_PASS_S / 2,
    })
  }
  console.log(`  warm-up pass: ${WARM_UP_PASS_S} s of this load on each server, not counted`)
  console.log()
  const results = new Map<Contender, Round[]>(contenders.map((c) => [c, []]))
  for (let round = 0; round < options.rounds; round++) {
    for (const contender of roundContenders(round, contenders)) {
      let before: Promise<ServerStats> | undefined
      const measured = await load.run(
        {
          url: contender.url,
          workload: workload.name,
          warmupSeconds: options.warmupSeconds,
          measureSeconds: options.measureSeconds,
        },
        () => {
          before = contender.process.stats()
        },
      )
      const after = await contender.process.stats()
      if (before === undefined) throw new Error('the load generator never announced its measured phase')
      const result = measuredRound(measured, await before, after)
      results.get(contender)?.push(result)
      printRound(round, contender, result)
    }
  }
  const allocated = new Map<Contender, number>()
  for (const contender of contenders)
    allocated.set(contender, await allocatedPerRequest(contender, workload, load))
  const inProcess = new Map<Contender, number>()
  if (workload.name === ALLOCATION_WORKLOAD) {
    for (const contender of contenders)
      inProcess.set(contender, await contender.process.allocatedInProcess(workload.name, IN_PROCESS_REQUESTS))
  }
  report(workload, contenders, results, allocated, inProcess)
  const errors = await Promise.all(
    contenders.map(async (c) => [c.key, (await c.process.stats()).storeErrors]),
  )
  const withErrors = errors.filter(([, e]) => Object.keys(e as object).length > 0)
  if (withErrors.length > 0)
    console.log('RedisStore errors and breaker changes:', Object.fromEntries(withErrors))
}

async function main(): Promise<void> {
  const started = performance.now()
  const options = runOptions()
  let keys = options.contenders
  if (keys.some(needsApolloPlugin) && !(await apolloPluginBuilt())) {
    const skipped = keys.filter(needsApolloPlugin)
    console.log(
      `tollbooth/apollo: not built (dist/graphql/apollo, exported as tollbooth/apollo); skipping ` +
        `${skipped.map((key) => CONTENDER_NAMES[key]).join(', ')}`,
    )
    keys = keys.filter((key) => !needsApolloPlugin(key))
  }
  const redis = keys.some(needsRedis) ? await startRedis() : undefined
  // A directory per server: its profile is named after the process and the thread, not the contender.
  const nodeOptions = (key: ContenderKey) =>
    options.cpuProfileDir === undefined
      ? []
      : ['--cpu-prof', `--cpu-prof-dir=${join(options.cpuProfileDir, key)}`]
  const servers = keys.map((key) => new ServerProcess(key, redis?.port ?? 0, nodeOptions(key)))
  const load = new LoadProcess<LoadJob, LoadResult>(new URL('./graphql/load.ts', import.meta.url).href)
  try {
    const contenders: Contender[] = []
    for (const server of servers) {
      contenders.push({
        key: server.key,
        name: CONTENDER_NAMES[server.key],
        process: server,
        url: await server.url(),
      })
    }
    console.log(
      `Node ${process.version}, ${cpus().length} CPUs (${cpus()[0]?.model ?? '?'}), ` +
        `NODE_ENV=${process.env.NODE_ENV ?? '(unset: graphql-js in development mode)'}, ` +
        `load average before: ${loadAverage()}`,
    )
    console.log(
      `each server in its own process (pids ${servers.map((s) => s.pid).join(', ')}), the load generator in ` +
        `another (pid ${load.pid})${redis === undefined ? '' : `, a private redis-server on :${redis.port}`}; ` +
        `${options.warmupSeconds} s warm-up + ${options.measureSeconds} s measured, ${options.rounds} rounds per ` +
        'workload in a balanced order; CPU is process CPU time over the measured phase (100% = one core)',
    )
    console.log(
      'tollbooth: tokenBucket (capacity 1e9, refill 1e6/s: nothing refused), identify from x-bench-user, ' +
        'costs: @listSize(slicingArguments: ["first"]) on Query.users, User.friends, User.posts; every other ' +
        'option default',
    )
    for (const name of options.workloads) await runWorkload(WORKLOADS[name], contenders, load, options)
    console.log(
      `\nload average at the end: ${loadAverage()}; total ${((performance.now() - started) / 1000).toFixed(0)} s`,
    )
  } finally {
    await load.stop()
    await Promise.all(servers.map((server) => server.stop()))
    await redis?.stop()
  }
}

await main()
