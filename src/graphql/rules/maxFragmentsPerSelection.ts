import { Kind, type SelectionSetNode, type ValidationRule } from 'graphql'
import { EXPOSE_LIMITS, type LimitExposure, limitRefusal, RefusalCodes } from '../refusal.js'

/**
 * Refuses an operation in which one selection set spreads more than `max` distinct fragments (in the operation or
 * in a fragment it spreads). graphql-js' OverlappingFieldsCanBeMergedRule compares the fragments spread into one
 * selection set pairwise, without a budget: 350 fragments spread under one field (20 kB, within every other limit)
 * take it far longer to validate than tollbooth's rules take to refuse them (docs/graphql.md). With `exposeLimits:
 * false` the refusal does not name `max`.
 */
export function maxFragmentsPerSelectionRule(
  max: number,
  exposure: LimitExposure = EXPOSE_LIMITS,
): ValidationRule {
  return (context) => ({
    OperationDefinition(operation) {
      const visited = new Set<string>()
      const widest = (set: SelectionSetNode): number => {
        const spread = new Set<string>()
        let most = 0
        for (const selection of set.selections) {
          if (selection.kind === Kind.FRAGMENT_SPREAD) {
            const name = selection.name.value
            spread.add(name)
            if (spread.size > max) return spread.size
            if (visited.has(name)) continue
            // Each fragment's own selections are looked at once, wherever it is spread.
            visited.add(name)
            const fragment = context.getFragment(name)
            if (fragment != null) most = Math.max(most, widest(fragment.selectionSet))
          } else if (selection.selectionSet !== undefined) {
            most = Math.max(most, widest(selection.selectionSet))
          }
          if (most > max) return most
        }
        return Math.max(most, spread.size)
      }
      if (widest(operation.selectionSet) > max) {
        context.reportError(
          limitRefusal(
            exposure,
            RefusalCodes.MAX_FRAGMENTS_EXCEEDED,
            400,
            max,
            `A selection spreads more than ${max} fragments.`,
            'A selection spreads too many fragments.',
          ),
        )
      }
    },
  })
}
