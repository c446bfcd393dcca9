/**
 * The part of bench:ws and bench:socketio that is the same for both: paired echo rounds against every contender,
 * the table of medians, and the verdicts on paired ratios against the plain server.
 */
import type { Measured } from './loadProcess.js'
import { fmt, median, pct, verdict, versusPlain } from './report.js'

/** What an echo load generator measures in one round. */
export interface EchoLoadResult {
  echoes: number
  seconds: number
  perSecond: number
  /** CPU time of the load generator over the measured phase, as a fraction of one core. */
  clientCpu: number
  p50: number
  p99: number
  /** Connections that closed before the load generator closed them (a protection closing them, say). */
  unexpectedCloses: number
  /** Echoes of another size than sent (a check that the server echoes what it got). */
  wrongEchoes: number
}

/** A round's result with the server's CPU time, per echo too. */
export type EchoMeasured = Measured<EchoLoadResult> & { serverMicrosPerEcho: number }

/** One echo server of the bench. */
export interface EchoContender {
  readonly key: string
  readonly name: string
  readonly url: string
  /** Units the protection refused (onDrop) and connections the server closed, over the whole run. */
  readonly counters: { drops: number; closedByServer: number }
}

export type EchoTargets = Readonly<Record<string, { ratio: number; label: string } | undefined>>

/** `rounds` rounds over every contender, the order reversed every other round; each round's line is printed. */
export async function runEchoRounds<Contender extends EchoContender>(
  contenders: readonly Contender[],
  rounds: number,
  run: (url: string) => Promise<Measured<EchoLoadResult>>,
  unit: string,
  settle: () => Promise<void>,
): Promise<Map<Contender, EchoMeasured[]>> {
  const results = new Map<Contender, EchoMeasured[]>(contenders.map((c) => [c, []]))
  for (let round = 1; round <= rounds; round++) {
    const order = round % 2 === 0 ? [...contenders].reverse() : contenders
    for (const contender of order) {
      const measured = await run(contender.url)
      const result: EchoMeasured = {
        ...measured,
        serverMicrosPerEcho: measured.serverCpuMicros / measured.echoes,
      }
      results.get(contender)?.push(result)
      console.log(
        `round ${round}  ${contender.name.padEnd(42)} ${fmt(result.perSecond).padStart(9)} ${unit}` +
          `   p50 ${result.p50.toFixed(2)} ms  p99 ${result.p99.toFixed(2)} ms` +
          `   server ${result.serverMicrosPerEcho.toFixed(2)} µs CPU/echo, ` +
          `CPU: server ${pct(result.serverCpu)} clients ${pct(result.clientCpu)}`,
      )
      // Let the closes and lease releases of this run settle before the next.
      await settle()
    }
  }
  return results
}

/**
 * The table of medians over rounds and the verdicts. Both processes run near one core each, so echoes per second are
 * bounded by both; the server's CPU time per echo is the steadier measure of what the protection costs.
 */
export function printEchoSummary<Contender extends EchoContender>(
  contenders: readonly Contender[],
  results: ReadonlyMap<Contender, EchoMeasured[]>,
  targets: EchoTargets,
  unit: string,
  item: string,
): void {
  console.log()
  console.log(
    [
      'server'.padEnd(42),
      `echo ${unit}`.padStart(11),
      'min–max of rounds'.padStart(19),
      'p50 ms'.padStart(7),
      'p99 ms'.padStart(7),
      'µs CPU/echo'.padStart(12),
      'CPU srv/cli'.padStart(12),
      'drops'.padStart(6),
      'closed'.padStart(7),
    ].join(' '),
  )
  const of = (contender: Contender) => results.get(contender) ?? []
  for (const contender of contenders) {
    const rounds = of(contender)
    const rates = rounds.map((r) => r.perSecond).sort((a, b) => a - b)
    const closed = rounds.reduce((sum, r) => sum + r.unexpectedCloses, 0) + contender.counters.closedByServer
    console.log(
      [
        contender.name.padEnd(42),
        fmt(median(rates)).padStart(11),
        `${fmt(rates[0])}–${fmt(rates.at(-1))}`.padStart(19),
        median(rounds.map((r) => r.p50))
          .toFixed(2)
          .padStart(7),
        median(rounds.map((r) => r.p99))
          .toFixed(2)
          .padStart(7),
        median(rounds.map((r) => r.serverMicrosPerEcho))
          .toFixed(2)
          .padStart(12),
        `${pct(median(rounds.map((r) => r.serverCpu)))}/${pct(median(rounds.map((r) => r.clientCpu)))}`.padStart(
          12,
        ),
        String(contender.counters.drops).padStart(6),
        String(closed).padStart(7),
      ].join(' '),
    )
    const wrong = rounds.reduce((sum, r) => sum + r.wrongEchoes, 0)
    if (wrong > 0) console.log(`  ${wrong} echoes of the wrong size`)
  }

  // Both processes run near one core each (see CPU srv/cli), so echo msg/s is bounded by both; the server's CPU
  // time per echo is the steadier measure of what the protection costs.
  // Verdicts on paired ratios: each round's rate over the plain server's rate in the same round, median over
  // rounds (drift of the machine's load between rounds cancels out); the ratio of the medians is shown too.
  console.log()
  const plain = contenders.find((c) => c.key === 'plain') as Contender
  const plainRounds = of(plain)
  for (const contender of contenders) {
    const target = targets[contender.key]
    if (target === undefined) continue
    const rounds = of(contender)
    const { paired, ofMedians, cpu } = versusPlain(rounds, plainRounds, (r) => r.serverMicrosPerEcho)
    const cpuVerdict = cpu >= target.ratio ? 'met' : 'NOT met'
    console.log(
      `${contender.name.padEnd(42)} ${paired.toFixed(2)}× plain (paired; ratio of medians ${ofMedians.toFixed(2)}×)` +
        `   target ≥ ${target.ratio.toFixed(2)}× (${target.label})   ${verdict(paired, target.ratio)}`,
    )
    console.log(
      `${''.padEnd(42)} server CPU per echo, plain/this: ${cpu.toFixed(2)}× (what a CPU-bound server would get)` +
        `   same target: ${cpuVerdict}`,
    )
  }
  if (contenders.some((c) => c.counters.drops > 0)) {
    console.log(
      `\nA dropped ${item} is never echoed, so each drop shrinks a client's window for the rest of the run: ` +
        'a row with drops measures less load and is not comparable.',
    )
  }
}
