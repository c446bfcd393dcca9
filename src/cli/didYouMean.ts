import { editDistance } from '../core/knownOptions.js'

/**
 * The name a mistyped command or option most likely meant: the closest candidate within an edit distance of 2
 * (and less than the typed name's length, so `-x` is not taken for `out`), else the first candidate the typed name
 * abbreviates or extends (`--sch` for `--schema`, `--windowms` for `--window`). Case is ignored; the first listed
 * wins a tie; undefined when nothing is close.
 */
export function didYouMean(typed: string, candidates: readonly string[]): string | undefined {
  const lower = typed.toLowerCase()
  let best: string | undefined
  let bestDistance = Number.POSITIVE_INFINITY
  for (const candidate of candidates) {
    const distance = editDistance(lower, candidate.toLowerCase())
    if (distance <= 2 && distance < typed.length && distance < bestDistance) {
      best = candidate
      bestDistance = distance
    }
  }
  if (best !== undefined || lower.length < 2) return best
  return candidates.find((candidate) => {
    const other = candidate.toLowerCase()
    return other.startsWith(lower) || lower.startsWith(other)
  })
}
