import {
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLField,
  type GraphQLNamedType,
  isInterfaceType,
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
  /** The field definition whose arguments and list size give the size (an implementation's, under an interface). */
  readonly field: GraphQLField<unknown, unknown>
  readonly cost: FieldCost
}

/** How a child field node is sized by connections above it. */
export interface Sizing {
  readonly parents: readonly SizingParent[]
  /**
   * The node is also selected where no parent sizes it (a fragment spread under another field too, or under an
   * interface field some implementation of which does not size it): it then also costs its own list size.
   */
  readonly alsoOwnSize: boolean
}

/**
 * What the cost of a document depends on, found once per document (no variables needed):
 * - which child field nodes are sized by a parent's `sizedFields` (the estimate of `edges` reads the size from its
 *   parent's arguments, found here);
 * - which variables can change the cost (slicing and weighted arguments, `@skip`/`@include`/`@defer`), so the
 *   cost cache keys on those variables' values, and on no more than whether each other argument variable is given.
 */
export interface DocumentPlan {
  /** The document's fragment definitions by name. */
  readonly fragments: ReadonlyMap<string, FragmentDefinitionNode>
  readonly sizing: ReadonlyMap<FieldNode, Sizing>
  readonly costVariables: readonly string[]
  /**
   * The other variables given to field arguments: only whether each is null, absent or given keys the cache (a null
   * or missing value for a non-null argument cannot be priced).
   */
  readonly presenceVariables: readonly string[]
}

/** Directives whose variables can change what runs, and so the cost. */
const COST_DIRECTIVES = new Set(['skip', 'include', 'defer'])

export function planDocument(model: CostModel, document: DocumentNode): DocumentPlan {
  const fragments = fragmentsOf(document)
  const sizingParents = new Map<FieldNode, SizingParent[]>()
  /** Sized children that some definition of their parent (an interface's implementation) does not size. */
  const partlySized = new Set<FieldNode>()
  const costVariables = new Set<string>()
  const argumentVariables = new Set<string>()
  const typeInfo = new TypeInfo(model.schema)
  visit(
    document,
    visitWithTypeInfo(typeInfo, {
      Directive(node) {
        // `@defer(if:)` decides whether a fragment merges or is priced again on its own.
        if (COST_DIRECTIVES.has(node.name.value)) collectVariables(node, costVariables)
      },
      Field(node) {
        const field = typeInfo.getFieldDef()
        const parentType = typeInfo.getParentType()
        if (field == null || parentType == null) return
        // Introspection is priced by what it returns (introspectionCost.ts), which its arguments choose:
        // `__type(name: $t)`, `fields(includeDeprecated: $d)`. Their values are the price's.
        if (node.name.value.startsWith('__') || parentType.name.startsWith('__')) {
          for (const argument of node.arguments ?? []) collectVariables(argument, costVariables)
          return
        }
        // Under an interface the field runs as one of its implementations': each may size its children its own way.
        const definitions = [{ field, cost: model.field(parentType as GraphQLNamedType, field) }]
        if (isInterfaceType(parentType)) {
          for (const type of model.schema.getPossibleTypes(parentType)) {
            const implementation = type.getFields()[field.name]
            if (implementation !== undefined) {
              definitions.push({ field: implementation, cost: model.field(type, implementation) })
            }
          }
        }
        // The estimate reads a number from slicing and weighted arguments only; any other argument (a cursor, an
        // id) changes the estimate only by being null or absent, which can make it unpriceable.
        const priced = pricedArguments(definitions)
        for (const argument of node.arguments ?? []) {
          collectVariables(argument, priced.has(argument.name.value) ? costVariables : argumentVariables)
        }
        if (node.selectionSet === undefined) return
        const children = directChildFields(node.selectionSet, fragments)
        for (const { field: definition, cost } of definitions) {
          const sizedFields = cost.listSize?.sizedFields
          for (const child of children) {
            if (sizedFields === undefined || !sizedFields.has(child.name.value)) {
              partlySized.add(child)
              continue
            }
            const list = sizingParents.get(child)
            const parent: SizingParent = { node, field: definition, cost }
            if (list === undefined) sizingParents.set(child, [parent])
            else list.push(parent)
          }
        }
      },
    }),
  )
  const sizing = new Map<FieldNode, Sizing>()
  if (sizingParents.size > 0) {
    // A node shared through a fragment spread may also sit right under the operation, or under an unsized field.
    const elsewhere = new Set([...partlySized, ...directChildFields(rootSelectionSet(document), fragments)])
    for (const [child, parents] of sizingParents) {
      sizing.set(child, { parents, alsoOwnSize: elsewhere.has(child) })
    }
  }
  return {
    fragments,
    sizing,
    costVariables: [...costVariables].sort(),
    presenceVariables: [...argumentVariables].filter((name) => !costVariables.has(name)).sort(),
  }
}

/** The arguments whose values the estimate prices: slicing arguments (their top-level name) and weighted ones. */
function pricedArguments(definitions: readonly { cost: FieldCost }[]): Set<string> {
  const names = new Set<string>()
  for (const { cost } of definitions) {
    for (const path of cost.listSize?.slicingArguments ?? []) names.add(path[0] as string)
    for (const input of cost.weightedArguments) names.add(input.name)
  }
  return names
}

/** Every operation's root selection set, merged (the operation executed is one of them). */
function rootSelectionSet(document: DocumentNode): SelectionSetNode {
  const selections = document.definitions.flatMap((definition) =>
    definition.kind === Kind.OPERATION_DEFINITION ? definition.selectionSet.selections : [],
  )
  return { kind: Kind.SELECTION_SET, selections }
}

/** Fields of a selection set, looking through inline fragments and spreads (each once). */
function directChildFields(
  selectionSet: SelectionSetNode,
  fragments: ReadonlyMap<string, FragmentDefinitionNode>,
): FieldNode[] {
  const found: FieldNode[] = []
  const seenFragments = new Set<string>()
  const walk = (set: SelectionSetNode): void => {
    for (const selection of set.selections) {
      if (selection.kind === Kind.FIELD) {
        found.push(selection)
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
