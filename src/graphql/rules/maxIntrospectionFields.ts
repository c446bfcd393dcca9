import { Kind, type ValidationRule } from 'graphql'
import { EXPOSE_LIMITS, type LimitExposure, limitRefusal, RefusalCodes } from '../refusal.js'
import { countOverOperation } from './selectionWalk.js'

/**
 * Refuses an operation selecting `__schema` or `__type` more than `max` times (aliases and fragments count at every
 * spread). Each selection returns a part of the schema: twenty aliases of `__schema { types { fields { … } } } }`
 * return the schema twenty times. The depth inside each is `maxDepthRule`'s to judge, and its price the cost
 * model's. With `exposeLimits: false` the refusal does not name `max`.
 */
export function maxIntrospectionFieldsRule(
  max: number,
  exposure: LimitExposure = EXPOSE_LIMITS,
): ValidationRule {
  return (context) => ({
    OperationDefinition(operation) {
      const count = countOverOperation(
        context,
        operation.selectionSet,
        (selection) =>
          selection.kind === Kind.FIELD &&
          (selection.name.value === '__schema' || selection.name.value === '__type')
            ? 1
            : 0,
        max,
      )
      if (count > max) {
        context.reportError(
          limitRefusal(
            exposure,
            RefusalCodes.MAX_INTROSPECTION_FIELDS_EXCEEDED,
            400,
            max,
            `The operation selects __schema or __type more than ${max === 1 ? 'once' : `${max} times`}.`,
            'The operation selects __schema or __type too many times.',
          ),
        )
      }
    },
  })
}
