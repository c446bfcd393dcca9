import { Kind, type ValidationRule } from 'graphql'
import { RefusalCodes, refusal } from '../refusal.js'
import { countOverOperation } from './selectionWalk.js'

/** Refuses an operation with more than `max` aliased fields (fragments count at every spread). */
export function maxAliasesRule(max: number): ValidationRule {
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
          refusal(RefusalCodes.MAX_ALIASES_EXCEEDED, `The operation has more than ${max} aliases.`, 400, {
            limit: max,
          }),
        )
      }
    },
  })
}
