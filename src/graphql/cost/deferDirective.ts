import {
  DirectiveLocation,
  type FragmentSpreadNode,
  GraphQLBoolean,
  GraphQLDirective,
  GraphQLString,
  getDirectiveValues,
  type InlineFragmentNode,
} from 'graphql'

/**
 * `@defer` as executors that support it read it (graphql-yoga's defer-stream plugin, @graphql-tools/executor):
 * on by default, off only with `if: false`. Declared here because graphql 16 does not export it; only its name
 * and arguments matter to read a document.
 */
const DEFER_DIRECTIVE = new GraphQLDirective({
  name: 'defer',
  locations: [DirectiveLocation.FRAGMENT_SPREAD, DirectiveLocation.INLINE_FRAGMENT],
  args: {
    if: { type: GraphQLBoolean, defaultValue: true },
    label: { type: GraphQLString },
  },
})

/**
 * Whether a fragment is deferred with these coerced variables. Such an executor runs the fields of each deferred
 * fragment as a patch of its own, not merged with the same response keys around it, and runs it again at every
 * deferred spread of the same fragment: each is priced as one more selection.
 */
export function isDeferred(
  selection: FragmentSpreadNode | InlineFragmentNode,
  variables: Readonly<Record<string, unknown>>,
): boolean {
  if (selection.directives === undefined || selection.directives.length === 0) return false
  const values = getDirectiveValues(DEFER_DIRECTIVE, selection, variables)
  return values !== undefined && values.if !== false
}
