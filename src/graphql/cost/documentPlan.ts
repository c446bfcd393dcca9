import {
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLField,
  type GraphQLNamedType,
  Kind,
  type SelectionSetNode,
  TypeInfo,
  visit,
  visitWithTypeInfo,
} from 'graphql'
import { fragmentsOf } from '../documentParts.js'
import type { CostModel, FieldCost } from './costModel.js'

/** A connection field whose `@listSize(sizedFields:)` sizes one of its child fields. */
export interface SizingParent {
  readonly node: FieldNode
  readonly field: GraphQLField<unknown, unknown>
  readonly cost: FieldCost
}

/**
 * What the cost of a document depends on, found once per document (no variables needed):
 * - which child field nodes are sized by a parent's `sizedFields` (graphql-query-complexity calls an estimator
 *   without the parent's arguments, so the estimator of `edges` looks its parent up here);
 * - which variables can change the cost (slicing and weighted arguments, `@skip`/`@include`), so the cost cache
 *   keys on those variables only.
 */
export interface DocumentPlan {
  readonly sizingParents: ReadonlyMap<FieldNode, readonly SizingParent[]>
  readonly costVariables: readonly string[]
}

export function planDocument(model: CostModel, document: DocumentNode): DocumentPlan {
  const fragments = fragmentsOf(document)
  const sizingParents = new Map<FieldNode, SizingParent[]>()
  const costVariables = new Set<string>()
  const typeInfo = new TypeInfo(model.schema)
  visit(
    document,
    visitWithTypeInfo(typeInfo, {
      Directive(node) {
        if (node.name.value === 'skip' || node.name.value === 'include') collectVariables(node, costVariables)
      },
      Field(node) {
        const field = typeInfo.getFieldDef()
        const parentType = typeInfo.getParentType()
        if (field == null || parentType == null || node.name.value.startsWith('__')) return
        const cost = model.field(parentType as GraphQLNamedType, field)
        if (cost.listSize !== undefined || cost.weightedArguments.length > 0) {
          for (const argument of node.arguments ?? []) collectVariables(argument, costVariables)
        }
        const sizedFields = cost.listSize?.sizedFields
        if (sizedFields === undefined || node.selectionSet === undefined) return
        const parent: SizingParent = { node, field, cost }
        for (const child of directChildFields(node.selectionSet, fragments, sizedFields)) {
          const list = sizingParents.get(child)
          if (list === undefined) sizingParents.set(child, [parent])
          else list.push(parent)
        }
      },
    }),
  )
  return { sizingParents, costVariables: [...costVariables].sort() }
}

/** Fields of a selection set named in `names`, looking through inline fragments and spreads (each once). */
function directChildFields(
  selectionSet: SelectionSetNode,
  fragments: ReadonlyMap<string, FragmentDefinitionNode>,
  names: ReadonlySet<string>,
): FieldNode[] {
  const found: FieldNode[] = []
  const seenFragments = new Set<string>()
  const walk = (set: SelectionSetNode): void => {
    for (const selection of set.selections) {
      if (selection.kind === Kind.FIELD) {
        if (names.has(selection.name.value)) found.push(selection)
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        walk(selection.selectionSet)
      } else if (!seenFragments.has(selection.name.value)) {
        seenFragments.add(selection.name.value)
        const fragment = fragments.get(selection.name.value)
        if (fragment !== undefined) walk(fragment.selectionSet)
      }
    }
  }
  walk(selectionSet)
  return found
}

function collectVariables(node: Parameters<typeof visit>[0], into: Set<string>): void {
  visit(node, {
    Variable(variable) {
      into.add(variable.name.value)
    },
  })
}
