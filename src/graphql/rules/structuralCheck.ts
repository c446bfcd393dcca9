import {
  type ASTVisitFn,
  type DocumentNode,
  type GraphQLError,
  Kind,
  type OperationDefinitionNode,
  type ValidationContext,
  type ValidationRule,
} from 'graphql'
import { fragmentsOf } from '../documentParts.js'

/**
 * The first error tollbooth's structural rules report for `document`, without graphql-js' traversal. Each of
 * these rules acts on entering an operation (its `OperationDefinition` visitor) and reads only the document's
 * fragments and `reportError` of its context, so it is handed each operation directly: graphql-js' `validate`
 * would walk every node of a hostile document with its TypeInfo first (milliseconds for 800 fields), and the rules
 * need none of it. The check stops at the first error.
 */
export function firstStructuralError(
  document: DocumentNode,
  rules: readonly ValidationRule[],
): GraphQLError | undefined {
  const fragments = fragmentsOf(document)
  let found: GraphQLError | undefined
  const context = {
    getFragment: (name: string) => fragments.get(name),
    reportError: (error: GraphQLError) => {
      found ??= error
    },
  } as unknown as ValidationContext
  const enter = rules.map(
    (rule) =>
      (rule(context) as { OperationDefinition?: ASTVisitFn<OperationDefinitionNode> }).OperationDefinition,
  )
  for (const definition of document.definitions) {
    if (definition.kind !== Kind.OPERATION_DEFINITION) continue
    for (const visit of enter) {
      visit?.(definition, undefined, undefined, [], [])
      if (found !== undefined) return found
    }
  }
  return undefined
}
