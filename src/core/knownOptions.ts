import { ErrorCodes, TollboothError } from './errors.js'

/**
 * Every key of an options type, written as an object rather than an array so that the compiler checks the list
 * against the type both ways: a field added to the type but not listed, or listed but not in the type, is a type
 * error.
 */
export type OptionKeys<T> = Record<keyof T, true>

/** The names of an options type's keys, for `checkOptionKeys`. Give the type: `optionNames<XOptions>({ … })`. */
export function optionNames<T>(keys: OptionKeys<T>): readonly string[] {
  return Object.freeze(Object.keys(keys))
}

/**
 * Refuses a key of `options` that is not in `known` with a `TOLLBOOTH_ERR_INVALID_OPTION` naming it (under `path`
 * for a nested object) and the closest known name: a misspelt key would otherwise be ignored and its default used.
 * A known key may hold `undefined`; symbol keys are not looked at. A value that is not an object, or is an array,
 * is left to the caller's own checks.
 */
export function checkOptionKeys(
  owner: string,
  options: unknown,
  known: readonly string[],
  path?: string,
): void {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) return
  for (const key of Object.keys(options)) {
    if (known.includes(key)) continue
    const option = path === undefined ? key : `${path}.${key}`
    const closest = closestName(key, known)
    const hint = closest === undefined ? `known options: ${listNames(known)}` : `did you mean "${closest}"?`
    throw new TollboothError(ErrorCodes.INVALID_OPTION, `${owner}: unknown option "${option}" (${hint})`)
  }
}

/** Most names listed when none is close enough to suggest. */
const MAX_LISTED = 12

function listNames(names: readonly string[]): string {
  if (names.length <= MAX_LISTED) return names.join(', ')
  return `${names.slice(0, MAX_LISTED).join(', ')}, …`
}

/**
 * The candidate `name` was most likely meant to be: one equal to it but for case, else the one at the smallest
 * edit distance (Damerau-Levenshtein, case ignored) of at most max(2, ⌊length / 3⌋) and less than the shorter
 * length (two short names with nothing in common are not a typo of each other). The first listed wins a tie;
 * undefined when none is close.
 */
export function closestName(name: string, candidates: readonly string[]): string | undefined {
  const lower = name.toLowerCase()
  const sameButCase = candidates.find((candidate) => candidate.toLowerCase() === lower)
  if (sameButCase !== undefined) return sameButCase
  // A name cut short (`rate` for `ratePerSecond`) is nearer its whole than any name a few edits away.
  const completions = lower.length >= 3 ? candidates.filter((c) => c.toLowerCase().startsWith(lower)) : []
  if (completions.length === 1) return completions[0]
  const threshold = Math.max(2, Math.floor(name.length / 3))
  let best: string | undefined
  let bestDistance = Number.POSITIVE_INFINITY
  for (const candidate of candidates) {
    const distance = editDistance(lower, candidate.toLowerCase())
    if (
      distance <= threshold &&
      distance < Math.min(name.length, candidate.length) &&
      distance < bestDistance
    ) {
      best = candidate
      bestDistance = distance
    }
  }
  return best
}

/**
 * Insertions, deletions, substitutions and transpositions of adjacent characters needed to turn `a` into `b`
 * (optimal string alignment: no substring is edited twice).
 */
export function editDistance(a: string, b: string): number {
  // Three rows of the (a.length + 1) × (b.length + 1) table: a transposition looks two rows back.
  let twoBack: number[] = []
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) {
      const substitution = a[i - 1] === b[j - 1] ? 0 : 1
      let cell = Math.min(
        (previous[j] as number) + 1,
        (current[j - 1] as number) + 1,
        (previous[j - 1] as number) + substitution,
      )
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        cell = Math.min(cell, (twoBack[j - 2] as number) + 1)
      }
      current.push(cell)
    }
    twoBack = previous
    previous = current
  }
  return previous[b.length] as number
}
