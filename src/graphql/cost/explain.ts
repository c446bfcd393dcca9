import { type FieldNode, print } from 'graphql'

/**
 * One priced field and the fields priced inside it: the numbers behind
 * `(weight + children) × multiplier + arguments + mutation`. Nodes with the same response key under one parent
 * run as one field and are one entry, with their sub-selections merged into its children.
 */
export interface FieldExplanation {
  /** The type the field was selected on (a fragment's type condition, or the parent's type). */
  readonly parentType: string
  readonly fieldName: string
  readonly childrenCost: number
  readonly argumentsCost: number
  readonly mutationCost: number
  readonly multiplier: number
  /** Where the multiplier came from, in words ("slicing argument first = 10", "assumedSize", …); none for 1. */
  readonly sizeSource: string | undefined
  readonly weight: number
  readonly total: number
  /** The field as written (its first node): alias, name and arguments (`a: users(first: $n)`). */
  readonly field: string
  readonly children: readonly FieldExplanation[]
}

/** The total of an operation and the per-field breakdown that adds up to it. */
export interface CostExplanation {
  readonly total: number
  readonly fields: readonly FieldExplanation[]
}

export function describeField(node: FieldNode): string {
  const alias = node.alias === undefined ? '' : `${node.alias.value}: `
  const args = node.arguments?.length ? `(${node.arguments.map((arg) => print(arg)).join(', ')})` : ''
  return `${alias}${node.name.value}${args}`
}
