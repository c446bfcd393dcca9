import {
  type FieldNode,
  type FragmentDefinitionNode,
  Kind,
  type OperationDefinitionNode,
  print,
  type SelectionSetNode,
} from 'graphql'
import { isIncluded } from '../documentParts.js'
import type { FieldPricing } from './estimator.js'

/** One priced field and the fields priced inside it. */
export interface FieldExplanation extends Omit<FieldPricing, 'node'> {
  /** The field as written: alias, name and arguments (`a: users(first: $n)`). */
  readonly field: string
  readonly children: readonly FieldExplanation[]
}

/** The total of an operation and the per-field breakdown that adds up to it. */
export interface CostExplanation {
  readonly total: number
  readonly fields: readonly FieldExplanation[]
}

/**
 * Rebuilds the tree of priced fields from graphql-query-complexity's post-order trace. The estimator is called
 * once per field, children before their parent, in selection order with fragments expanded at every spread and
 * excluded fields skipped; walking the operation the same way gives the same sequence, and each step checks it is
 * looking at the very node that was priced.
 */
export function explainTrace(
  operation: OperationDefinitionNode,
  fragments: ReadonlyMap<string, FragmentDefinitionNode>,
  variables: Readonly<Record<string, unknown>>,
  trace: readonly FieldPricing[],
  total: number,
): CostExplanation {
  let next = 0
  const walk = (set: SelectionSetNode, activeFragments: Set<string>): FieldExplanation[] => {
    const fields: FieldExplanation[] = []
    for (const selection of set.selections) {
      if (!isIncluded(selection, variables)) continue
      if (selection.kind === Kind.FIELD) {
        const children =
          selection.selectionSet === undefined ? [] : walk(selection.selectionSet, activeFragments)
        const pricing = trace[next]
        // Fields unknown to the schema are not priced (validation refuses them); they have no trace entry.
        if (pricing?.node !== selection) continue
        next++
        const { node: _node, ...numbers } = pricing
        fields.push({ ...numbers, field: describe(selection), children })
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        fields.push(...walk(selection.selectionSet, activeFragments))
      } else {
        const name = selection.name.value
        const fragment = fragments.get(name)
        if (fragment === undefined || activeFragments.has(name)) continue
        activeFragments.add(name)
        fields.push(...walk(fragment.selectionSet, activeFragments))
        activeFragments.delete(name)
      }
    }
    return fields
  }
  return { total, fields: walk(operation.selectionSet, new Set()) }
}

function describe(node: FieldNode): string {
  const alias = node.alias === undefined ? '' : `${node.alias.value}: `
  const args = node.arguments?.length ? `(${node.arguments.map((arg) => print(arg)).join(', ')})` : ''
  return `${alias}${node.name.value}${args}`
}
