import { Kind, type ValidationRule } from 'graphql'
import { EXPOSE_LIMITS, type LimitExposure, limitRefusal, RefusalCodes } from '../refusal.js'
import { countOverOperation } from './selectionWalk.js'

/**
 * Refuses an operation with more than `max` aliased fields (fragments count at every spread). With
 * `exposeLimits: false` the refusal does not name `max`.
 */
export function maxAliasesRule(max: number, exposure: LimitExposure = EXPOSE_LIMITS): ValidationRule {
  return (context) => ({
    OperationDefinition(operation) {
      const count = countOverOperation(
        context,
        operation.selectionSet,
        (selection) => (selection.kind === Kind.FIELD && selection.alias !== undefined ? 1 : 0),
        max,
      )
      if (count > max) {
        context.reportError(
          limitRefusal(
            exposure,
            RefusalCodes.MAX_ALIASES_EXCEEDED,
            400,
            max,
            `The operation has more than ${max} aliases.`,
            'The operation has too many aliases.',
          ),
        )
      }
    },
  })
}
