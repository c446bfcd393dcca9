import type { FragmentDefinitionNode, SelectionSetNode, ValidationContext } from 'graphql'

/**
 * Counts something over an operation as executed: a fragment counts again at every spread (that is what the
 * server does), each fragment's own count is computed once, and counting stops once past `cap` so hostile
 * documents (fragment explosion) cost no more than the cap. Fragment cycles count as nothing here; graphql-js's
 * NoFragmentCyclesRule refuses them.
 */
export function countOverOperation(
  context: ValidationContext,
  selectionSet: SelectionSetNode,
  countSelection: (selection: SelectionSetNode['selections'][number]) => number,
  cap: number,
): number {
  const fragmentCounts = new Map<string, number>()
  const inProgress = new Set<string>()

  const countSet = (set: SelectionSetNode): number => {
    let total = 0
    for (const selection of set.selections) {
      total += countSelection(selection)
      if (selection.kind === 'FragmentSpread') {
        total += countFragment(context.getFragment(selection.name.value))
      } else if (selection.selectionSet !== undefined) {
        total += countSet(selection.selectionSet)
      }
      if (total > cap) return total
    }
    return total
  }

  const countFragment = (fragment: FragmentDefinitionNode | null | undefined): number => {
    if (fragment == null) return 0
    const name = fragment.name.value
    const known = fragmentCounts.get(name)
    if (known !== undefined) return known
    if (inProgress.has(name)) return 0
    inProgress.add(name)
    const count = countSet(fragment.selectionSet)
    inProgress.delete(name)
    fragmentCounts.set(name, count)
    return count
  }

  return countSet(selectionSet)
}
