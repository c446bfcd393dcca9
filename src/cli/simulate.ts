/**
 * `tollbooth simulate`: replays traffic patterns against the four rate-limiting algorithms on a virtual clock and
 * writes one SVG chart per pattern plus a summary, so an algorithm can be seen at work before it is chosen.
 *
 * This file only reads the command line, resolves patterns and policy, and writes the results; patterns.ts,
 * replay.ts, summary.ts and svgChart.ts each do one step.
 */
import { mkdir, stat, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { TollboothError } from '../core/errors.js'
import { type CommandLine, type CommandSpec, parseCommandLine } from './args.js'
import { EXIT_CODES_HELP, EXIT_OK, InputError, reportFailure } from './errors.js'
import type { CliIo } from './io.js'
import {
  BUILT_IN_NAMES,
  BUILT_IN_PATTERNS,
  type BuiltIn,
  MAX_REQUESTS,
  type Pattern,
  type PolicyOverrides,
  readPatternFile,
} from './simulate/patterns.js'
import {
  checkPolicy,
  DEFAULT_LIMIT,
  DEFAULT_WINDOW_MS,
  defaultMaxQueue,
  type Policy,
  replay,
} from './simulate/replay.js'
import { type AlgorithmSummary, formatSummary, type PatternReport, summarize } from './simulate/summary.js'
import { renderChart } from './simulate/svgChart.js'
import { packageVersion } from './version.js'

/** The command line `tollbooth simulate` takes. */
const SIMULATE_COMMAND = {
  name: 'simulate',
  flags: {
    pattern: { type: 'string', multiple: true, placeholder: '<name>' },
    'pattern-file': { type: 'string', multiple: true, placeholder: '<file.json>' },
    out: { type: 'string', placeholder: '<file.svg | dir>' },
    limit: { type: 'string', placeholder: '<n>' },
    window: { type: 'string', placeholder: '<duration>' },
    'max-queue': { type: 'string', placeholder: '<n>' },
    json: { type: 'boolean' },
  },
  positionals: {},
} as const satisfies CommandSpec

export const SIMULATE_USAGE = `Usage: tollbooth simulate [options]

Replays a traffic pattern against the fixed window, sliding window, token bucket and leaky bucket, all configured
for the same limit, on a virtual clock; writes one SVG chart per pattern (admitted vs refused over time, one panel
per algorithm) and prints a summary.

Options:
  --pattern <name>        a built-in pattern: ${BUILT_IN_NAMES.join(', ')} (repeatable;
                          default: all built-in patterns unless --pattern-file is given)
  --pattern-file <file>   a JSON pattern: { "events": [{ "at": <ms>, "count": <n>, "key": "<client>" }, ...] },
                          optional "name", "description", "limit", "windowMs", "durationMs" (repeatable)
  --out <file.svg | dir>  where charts go: a .svg file (one pattern only) or a directory, as <pattern>.svg
                          (default: the current directory)
  --limit <n>             requests allowed per window (default: ${DEFAULT_LIMIT}, or the pattern file's)
  --window <duration>     window length: 60000, 60s, 1m, 500ms, 1h (default: 60s, or the pattern file's)
  --max-queue <n>         leaky bucket queue (default: a tenth of the limit)
  --json                  print the summary as JSON instead of text
  -h, --help              show this help
  -V, --version           print the version

Built-in patterns:
${BUILT_IN_NAMES.map((name) => `  ${name.padEnd(16)}${BUILT_IN_PATTERNS[name]?.summary}`).join('\n')}

${EXIT_CODES_HELP}`

/** The longest window accepted: longer ones overflow the limiters' microsecond arithmetic. */
const MAX_WINDOW_MS = 30 * 24 * 3_600_000

interface SimulateOptions {
  readonly patterns: readonly string[]
  readonly patternFiles: readonly string[]
  readonly out: string
  readonly json: boolean
  readonly limit: number | undefined
  readonly windowMs: number | undefined
  readonly maxQueue: number | undefined
}

/** Exit codes as in `EXIT_CODES_HELP`. */
export async function runSimulate(argv: string[], io: CliIo): Promise<number> {
  let options: SimulateOptions
  let planned: Planned[]
  try {
    const commandLine = parseCommandLine(SIMULATE_COMMAND, argv)
    if (commandLine.action === 'help') {
      io.stdout.write(SIMULATE_USAGE)
      return EXIT_OK
    }
    if (commandLine.action === 'version') {
      io.stdout.write(`${await packageVersion()}\n`)
      return EXIT_OK
    }
    options = readOptions(commandLine.flags)
    planned = await plan(options)
  } catch (error) {
    return reportFailure(SIMULATE_COMMAND.name, error, io)
  }

  const reports: PatternReport[] = []
  for (const { pattern, policy, chart } of planned) {
    const runs = await replay(pattern, policy)
    const report: PatternReport = {
      pattern,
      policy,
      chart,
      algorithms: runs.map((run) => summarize(run, policy.windowMs)),
    }
    const svg = renderChart(
      report,
      runs.map((run, index) => ({
        summary: report.algorithms[index] as AlgorithmSummary,
        outcomes: run.outcomes,
      })),
    )
    try {
      await writeFile(chart, svg)
    } catch (error) {
      return reportFailure(
        'simulate',
        new InputError(`cannot write the chart ${chart}: ${(error as Error).message}`),
        io,
      )
    }
    reports.push(report)
  }

  if (options.json) io.stdout.write(`${JSON.stringify(toJson(reports), null, 2)}\n`)
  else io.stdout.write(reports.map(formatSummary).join('\n'))
  return EXIT_OK
}

type SimulateFlags = Extract<CommandLine<typeof SIMULATE_COMMAND>, { action: 'run' }>['flags']

/** The option values, checked: a value out of range is bad input (exit code 1). */
function readOptions(flags: SimulateFlags): SimulateOptions {
  return {
    patterns: flags.pattern,
    patternFiles: flags['pattern-file'],
    out: flags.out ?? '.',
    json: flags.json,
    limit: flags.limit === undefined ? undefined : count('--limit', flags.limit, 1),
    windowMs: flags.window === undefined ? undefined : duration('--window', flags.window),
    maxQueue:
      flags['max-queue'] === undefined ? undefined : count('--max-queue', flags['max-queue'], 0, 1_000_000),
  }
}

function count(option: string, value: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const parsed = /^\d+$/.test(value) ? Number(value) : Number.NaN
  if (!Number.isSafeInteger(parsed) || parsed < min) {
    throw new InputError(
      `${option} must be ${min === 0 ? 'a whole number' : 'a positive whole number'}, got "${value}"`,
    )
  }
  if (parsed > max) throw new InputError(`${option} must be at most ${max}, got "${value}"`)
  return parsed
}

const DURATION_UNITS: Readonly<Record<string, number>> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  min: 60_000,
  h: 3_600_000,
}

/** `60000` (milliseconds), `60s`, `1m`, `1.5min`, `500ms`, `1h` → whole milliseconds. */
function duration(option: string, value: string): number {
  const match = /^(\d+(?:\.\d+)?)\s*(ms|s|m|min|h)?$/.exec(value.trim())
  const ms = match === null ? Number.NaN : Number(match[1]) * (DURATION_UNITS[match[2] ?? 'ms'] ?? Number.NaN)
  if (!Number.isSafeInteger(ms) || ms <= 0) {
    throw new InputError(
      `${option} must be a duration of whole milliseconds like 60000, 60s, 1m or 500ms, got "${value}"`,
    )
  }
  if (ms > MAX_WINDOW_MS) throw new InputError(`${option} must be at most 30 days, got "${value}"`)
  return ms
}

interface Planned {
  readonly pattern: Pattern
  readonly policy: Policy
  readonly chart: string
}

/** Resolves every pattern with its policy and chart file, so no mistake surfaces after charts were written. */
async function plan(options: SimulateOptions): Promise<Planned[]> {
  const noneGiven = options.patterns.length === 0 && options.patternFiles.length === 0
  // Naming a pattern twice simulates it once.
  const names = [...new Set(noneGiven ? BUILT_IN_NAMES : options.patterns)]
  for (const name of names) {
    if (!Object.hasOwn(BUILT_IN_PATTERNS, name)) {
      throw new InputError(
        `unknown pattern "${name}" (built-in patterns: ${BUILT_IN_NAMES.join(', ')}; use --pattern-file for your own)`,
      )
    }
  }
  const fromFiles = await Promise.all(options.patternFiles.map((file) => readPatternFile(file)))
  const resolved: { pattern: Pattern; policy: Policy }[] = []
  if (names.length > 0) {
    // Built-in patterns share the command-line policy (resolving it also checks it: only when one runs).
    const policy = resolvePolicy(options, {})
    for (const name of names) {
      resolved.push({ pattern: (BUILT_IN_PATTERNS[name] as BuiltIn).build(policy), policy })
    }
  }
  for (const pattern of fromFiles) resolved.push({ pattern, policy: resolvePolicy(options, pattern.policy) })
  for (const { pattern } of resolved) {
    if (pattern.requests.length > MAX_REQUESTS) {
      throw new InputError(
        `pattern "${pattern.name}" has ${pattern.requests.length} requests, more than ${MAX_REQUESTS}; lower --limit`,
      )
    }
  }
  const charts = await chartPaths(
    resolved.map(({ pattern }) => pattern.name),
    options.out,
  )
  return resolved.map((entry, index) => ({ ...entry, chart: charts[index] as string }))
}

/** Command-line flags first, then what the pattern file says, then 100 per minute. */
function resolvePolicy(options: SimulateOptions, fromFile: PolicyOverrides): Policy {
  const limit = options.limit ?? fromFile.limit ?? DEFAULT_LIMIT
  const windowMs = options.windowMs ?? fromFile.windowMs ?? DEFAULT_WINDOW_MS
  if (windowMs > MAX_WINDOW_MS) throw new InputError(`the window must be at most 30 days, got ${windowMs} ms`)
  // The limiters count time in whole microseconds per request.
  if ((limit * 1000) / windowMs > 1_000_000) {
    throw new InputError(`${limit} per ${windowMs} ms is more than 1,000,000 requests per second`)
  }
  const maxQueue = options.maxQueue ?? defaultMaxQueue(limit)
  const policy = { limit, windowMs, maxQueue }
  try {
    checkPolicy(policy)
  } catch (error) {
    // The limiters' own validation: a rate or a queue beyond what their arithmetic represents.
    if (error instanceof TollboothError)
      throw new InputError(`this policy cannot be simulated: ${error.message}`)
    throw error
  }
  return policy
}

/** `--out` is a .svg file (for one pattern) or a directory, created if missing, that gets `<pattern>.svg`. */
async function chartPaths(names: readonly string[], out: string): Promise<string[]> {
  if (/\.svg$/i.test(out)) {
    if (names.length > 1) {
      throw new InputError(
        `--out ${out} names one file, but ${names.length} patterns are simulated (${names.join(', ')}); give a directory`,
      )
    }
    await makeDirectory(dirname(out))
    return [out]
  }
  const duplicate = names.find((name, index) => names.indexOf(name) !== index)
  if (duplicate !== undefined) {
    throw new InputError(`two patterns are named "${duplicate}"; their charts would overwrite each other`)
  }
  const existing = await stat(out).catch(() => undefined)
  if (existing !== undefined && !existing.isDirectory()) {
    throw new InputError(
      `--out ${out} exists and is not a directory (to write one chart, end the name with .svg)`,
    )
  }
  await makeDirectory(out)
  return names.map((name) => join(out, `${name}.svg`))
}

async function makeDirectory(directory: string): Promise<void> {
  try {
    await mkdir(directory, { recursive: true })
  } catch (error) {
    throw new InputError(`cannot create the directory ${directory}: ${(error as Error).message}`)
  }
}

/** The machine-readable summary: one entry per pattern, numbers in milliseconds. */
function toJson(reports: readonly PatternReport[]) {
  return {
    patterns: reports.map(({ pattern, policy, chart, algorithms }) => ({
      name: pattern.name,
      description: pattern.description,
      requests: pattern.requests.length,
      durationMs: pattern.durationMs,
      policy,
      chart,
      algorithms,
    })),
  }
}
