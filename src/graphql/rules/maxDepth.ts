import { Kind, type SelectionSetNode, type ValidationContext, type ValidationRule } from 'graphql'
import { EXPOSE_LIMITS, type LimitExposure, limitRefusal, RefusalCodes } from '../refusal.js'

/**
 * Refuses an operation whose fields nest deeper than `maxDepth` (a root field is depth 1), following fragment
 * spreads. A `__schema` or `__type` field's subtree is measured on its own against `maxIntrospectionDepth`
 * (GraphiQL's introspection query is deeper than most APIs' data), keyed on the field itself: naming an
 * operation or a fragment `__schema` changes nothing. Fragment cycles are refused by NoFragmentCyclesRule; here
 * a cycle simply stops the walk. The walk stops as soon as a limit is passed, so a 10,000-deep document costs
 * no more than the limit. With `exposeLimits: false` the refusal does not name the limit.
 */
export function maxDepthRule(
  maxDepth: number,
  maxIntrospectionDepth: number,
  exposure: LimitExposure = EXPOSE_LIMITS,
): ValidationRule {
  return (context) => ({
    OperationDefinition(operation) {
      const measure = new DepthMeasure(context, maxDepth, maxIntrospectionDepth)
      const depth = measure.depth(operation.selectionSet, false, new Set())
      if (measure.introspectionTooDeep) {
        context.reportError(
          limitRefusal(
            exposure,
            RefusalCodes.MAX_DEPTH_EXCEEDED,
            400,
            maxIntrospectionDepth,
            `An introspection query nests deeper than ${maxIntrospectionDepth}.`,
            'An introspection query nests too deeply.',
          ),
        )
      } else if (depth > maxDepth) {
        context.reportError(
          limitRefusal(
            exposure,
            RefusalCodes.MAX_DEPTH_EXCEEDED,
            400,
            maxDepth,
            `The operation nests deeper than ${maxDepth}.`,
            'The operation nests too deeply.',
          ),
        )
      }
    },
  })
}

class DepthMeasure {
  introspectionTooDeep = false
  /** A fragment's depth relative to its spread (exact, or past the limit): explosion-proof, path-independent. */
  private readonly fragmentDepths = new Map<string, number>()

  constructor(
    private readonly context: ValidationContext,
    private readonly maxDepth: number,
    private readonly maxIntrospectionDepth: number,
  ) {}

  /**
   * Depth of a selection set's deepest field, relative to it. Inside an introspection subtree the introspection
   * limit applies; outside, an introspection field counts as depth 1 for the operation.
   * `activeFragments` holds the spreads on the current path (cycle guard, backtracked).
   */
  depth(set: SelectionSetNode, inIntrospection: boolean, activeFragments: Set<string>): number {
    const cap = inIntrospection ? this.maxIntrospectionDepth : this.maxDepth
    let deepest = 0
    for (const selection of set.selections) {
      let depth = 0
      if (selection.kind === Kind.FIELD) {
        const name = selection.name.value
        if (selection.selectionSet === undefined) depth = 1
        else if (!inIntrospection && (name === '__schema' || name === '__type')) {
          const subtree = 1 + this.depth(selection.selectionSet, true, activeFragments)
          if (subtree > this.maxIntrospectionDepth) this.introspectionTooDeep = true
          depth = 1
        } else {
          depth = 1 + this.depth(selection.selectionSet, inIntrospection, activeFragments)
        }
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        depth = this.depth(selection.selectionSet, inIntrospection, activeFragments)
      } else {
        const name = selection.name.value
        const memoKey = inIntrospection ? `__introspection:${name}` : name
        const known = this.fragmentDepths.get(memoKey)
        if (known !== undefined) depth = known
        else {
          const fragment = this.context.getFragment(name)
          if (fragment == null || activeFragments.has(name)) continue
          activeFragments.add(name)
          depth = this.depth(fragment.selectionSet, inIntrospection, activeFragments)
          activeFragments.delete(name)
          this.fragmentDepths.set(memoKey, depth)
        }
      }
      if (depth > deepest) deepest = depth
      if (deepest > cap || this.introspectionTooDeep) return deepest
    }
    return deepest
  }
}
