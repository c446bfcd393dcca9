import { Kind, type SelectionSetNode, type ValidationRule } from 'graphql'
import { EXPOSE_LIMITS, type LimitExposure, limitRefusal, RefusalCodes } from '../refusal.js'

/**
 * Refuses an operation selecting more than `max` root fields (through fragments at the root). Each root field is
 * a separate entry point into resolvers: `{ a: user(id: 1) b: user(id: 2) … }` is batching in disguise. With
 * `exposeLimits: false` the refusal does not name `max`.
 */
export function maxRootFieldsRule(max: number, exposure: LimitExposure = EXPOSE_LIMITS): ValidationRule {
  return (context) => ({
    OperationDefinition(operation) {
      const seenFragments = new Set<string>()
      const count = (set: SelectionSetNode): number => {
        let total = 0
        for (const selection of set.selections) {
          if (selection.kind === Kind.FIELD) total++
          else if (selection.kind === Kind.INLINE_FRAGMENT) total += count(selection.selectionSet)
          else if (!seenFragments.has(selection.name.value)) {
            // A fragment spread twice at the root selects the same fields again; graphql-js merges them.
            seenFragments.add(selection.name.value)
            const fragment = context.getFragment(selection.name.value)
            if (fragment != null) total += count(fragment.selectionSet)
          }
          if (total > max) return total
        }
        return total
      }
      if (count(operation.selectionSet) > max) {
        context.reportError(
          limitRefusal(
            exposure,
            RefusalCodes.MAX_ROOT_FIELDS_EXCEEDED,
            400,
            max,
            `The operation selects more than ${max} root fields.`,
            'The operation selects too many root fields.',
          ),
        )
      }
    },
  })
}
