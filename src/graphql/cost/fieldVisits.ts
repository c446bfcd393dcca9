import { type FragmentDefinitionNode, GraphQLError, Kind, type SelectionSetNode } from 'graphql'
import { ErrorCodes, TollboothError } from '../../core/errors.js'
import { isIncluded } from '../documentParts.js'

/**
 * The fragment explosion guard (`maxFieldVisits`). A document can spread a fragment that spreads another twice, and
 * so on: a few hundred bytes that expand to billions of fields. Pricing refuses such a document before any walk
 * that could take that long.
 */

/** The operation could not be priced within `maxFieldVisits`. */
export class TooLargeToPriceError extends TollboothError {
  constructor(readonly maxFieldVisits: number) {
    super(
      ErrorCodes.TOO_LARGE_TO_PRICE,
      `The operation is too large to price (more than ${maxFieldVisits} fields once fragments are expanded).`,
    )
  }
}

/** Counts the selections a walk looks at, and stops it past `maxFieldVisits`. */
export class FieldVisitBudget {
  private visits = 0

  constructor(readonly maxFieldVisits: number) {}

  spend(): void {
    if (++this.visits > this.maxFieldVisits) throw new TooLargeToPriceError(this.maxFieldVisits)
  }
}

/** A fragment whose expansion is being counted: met again inside itself, it is a cycle. */
const IN_PROGRESS = -1

/**
 * Refuses an operation that holds more than `maxFieldVisits` selections once every fragment is expanded at every
 * spread and every occurrence of a field is walked on its own, as if nothing merged: which documents are refused
 * does not depend on how their fields merge. Each fragment's expansion is counted once and reused at its other
 * spreads, so counting 2^40 expansions takes as long as reading the document. Selections excluded by
 * `@skip`/`@include` count, but not what is inside them.
 *
 * A fragment that spreads itself, directly or further down, cannot be priced (graphql-js validation refuses it
 * too): it would expand forever.
 */
export function checkExpandedSize(
  root: SelectionSetNode,
  fragments: ReadonlyMap<string, FragmentDefinitionNode>,
  variables: Readonly<Record<string, unknown>>,
  maxFieldVisits: number,
): void {
  const expanded = new Map<string, number>()
  const fragmentVisits = (name: string): number => {
    const known = expanded.get(name)
    if (known === IN_PROGRESS) throw new GraphQLError(`Cannot spread fragment "${name}" within itself.`)
    if (known !== undefined) return known
    const fragment = fragments.get(name)
    if (fragment === undefined) return 0
    expanded.set(name, IN_PROGRESS)
    const visits = setVisits(fragment.selectionSet)
    expanded.set(name, visits)
    return visits
  }
  const setVisits = (set: SelectionSetNode): number => {
    let visits = 0
    for (const selection of set.selections) {
      visits++
      if (isIncluded(selection, variables)) {
        if (selection.kind === Kind.FRAGMENT_SPREAD) visits += fragmentVisits(selection.name.value)
        else if (selection.selectionSet !== undefined) visits += setVisits(selection.selectionSet)
      }
      // A part above the limit puts the whole above it: stop before counting the rest.
      if (visits > maxFieldVisits) throw new TooLargeToPriceError(maxFieldVisits)
    }
    return visits
  }
  setVisits(root)
}
