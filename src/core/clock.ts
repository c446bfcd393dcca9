/** Read once: the getter is measurably slow on a path that runs per decision. */
const timeOrigin = performance.timeOrigin

/** Current wall-clock time in microseconds, with sub-millisecond resolution. */
export function nowMicros(): number {
  return Math.floor((timeOrigin + performance.now()) * 1000)
}

/** A clock in microseconds; injectable so tests and the simulator can run on virtual time. */
export type Clock = () => number
