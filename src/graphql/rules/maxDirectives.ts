import type { ValidationRule } from 'graphql'
import { RefusalCodes, refusal } from '../refusal.js'
import { countOverOperation } from './selectionWalk.js'

/**
 * Refuses an operation with more than `max` directives on its selections and on itself (fragments count at every
 * spread). Stops directive overloading (`@a @a @a …`) before the executor reads them.
 */
export function maxDirectivesRule(max: number): ValidationRule {
  return (context) => ({
    OperationDefinition(operation) {
      const own = operation.directives?.length ?? 0
      const count =
        own +
        countOverOperation(
          context,
          operation.selectionSet,
          (selection) => selection.directives?.length ?? 0,
          max,
        )
      if (count > max) {
        context.reportError(
          refusal(
            RefusalCodes.MAX_DIRECTIVES_EXCEEDED,
            `The operation has more than ${max} directives.`,
            400,
            {
              limit: max,
            },
          ),
        )
      }
    },
  })
}
