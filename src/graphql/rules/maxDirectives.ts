import type { ValidationRule } from 'graphql'
import { EXPOSE_LIMITS, type LimitExposure, limitRefusal, RefusalCodes } from '../refusal.js'
import { countOverOperation } from './selectionWalk.js'

/**
 * Refuses an operation with more than `max` directives on its selections and on itself (fragments count at every
 * spread). Stops directive overloading (`@a @a @a …`) before the executor reads them. With `exposeLimits: false`
 * the refusal does not name `max`.
 */
export function maxDirectivesRule(max: number, exposure: LimitExposure = EXPOSE_LIMITS): ValidationRule {
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
          limitRefusal(
            exposure,
            RefusalCodes.MAX_DIRECTIVES_EXCEEDED,
            400,
            max,
            `The operation has more than ${max} directives.`,
            'The operation has too many directives.',
          ),
        )
      }
    },
  })
}
