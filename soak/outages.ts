/**
 * When the store did not answer, read from the per-second samples: runs of seconds in which a fail policy answered
 * some decisions. A run that starts while a fault is watched is that fault's outage; any other is a stray (on a busy
 * machine a single store call now and then misses its deadline, and its decision is the fail policy's).
 */
import type { Sample } from './samples.js'
import type { FaultRecord } from './soak.js'

/** Decision sources that mean the store did not answer. */
const FAIL_SOURCES = ['fail-open', 'fail-closed', 'local']
/** Seconds with fail-policy decisions at most this far apart belong to one outage. */
const SAME_OUTAGE_GAP_MS = 2500

export interface Outage {
  /** The first and the last sample with fail-policy decisions. */
  readonly from: number
  readonly last: number
  /** Fail-policy decisions in it. */
  readonly decisions: number
}

export interface AttributedOutages {
  /** Per fault (in order), its outage, or undefined when the store answered throughout. */
  readonly byFault: readonly (Outage | undefined)[]
  /** Outages no fault explains. */
  readonly strays: readonly Outage[]
}

function failPolicyDecisions(sample: Sample): number {
  return FAIL_SOURCES.reduce((sum, source) => sum + (sample.bySource[source] ?? 0), 0)
}

export function attributeOutages(
  samples: readonly Sample[],
  faults: readonly FaultRecord[],
): AttributedOutages {
  const byFault: (Outage | undefined)[] = faults.map(() => undefined)
  const strays: Outage[] = []
  for (const outage of outagesIn(samples)) {
    const fault = faults.findIndex(
      (f, i) => byFault[i] === undefined && outage.from >= f.at && outage.from < f.until,
    )
    if (fault === -1) strays.push(outage)
    else byFault[fault] = outage
  }
  return { byFault, strays }
}

function outagesIn(samples: readonly Sample[]): Outage[] {
  const outages: Outage[] = []
  let current: { from: number; last: number; decisions: number } | undefined
  for (const sample of samples) {
    const failed = failPolicyDecisions(sample)
    if (failed === 0) continue
    if (current !== undefined && sample.at - current.last <= SAME_OUTAGE_GAP_MS) {
      current.last = sample.at
      current.decisions += failed
    } else {
      if (current !== undefined) outages.push(current)
      current = { from: sample.at, last: sample.at, decisions: failed }
    }
  }
  if (current !== undefined) outages.push(current)
  return outages
}
