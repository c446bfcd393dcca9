import {
  type DocumentNode,
  type FragmentDefinitionNode,
  GraphQLIncludeDirective,
  GraphQLSkipDirective,
  getDirectiveValues,
  Kind,
} from 'graphql'

/** Small readers of a document that the cost analysis, the refund walk and the field limits share. */

/** The document's fragment definitions by name. */
export function fragmentsOf(document: DocumentNode): Map<string, FragmentDefinitionNode> {
  const fragments = new Map<string, FragmentDefinitionNode>()
  for (const definition of document.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition)
  }
  return fragments
}

/** Whether `@skip`/`@include` (with these coerced variables) keep a selection, as graphql-js decides it. */
export function isIncluded(
  selection: { readonly directives?: readonly unknown[] | undefined },
  variables: Readonly<Record<string, unknown>>,
): boolean {
  if (selection.directives === undefined || selection.directives.length === 0) return true
  const node = selection as Parameters<typeof getDirectiveValues>[1]
  if (getDirectiveValues(GraphQLSkipDirective, node, variables)?.if === true) return false
  return getDirectiveValues(GraphQLIncludeDirective, node, variables)?.if !== false
}

/** The value at a dotted path of argument names (`['input', 'first']`), or undefined. */
export function readPath(args: Readonly<Record<string, unknown>>, path: readonly string[]): unknown {
  let value: unknown = args
  for (const key of path) value = (value as Record<string, unknown> | null | undefined)?.[key]
  return value
}
