import {
  type FieldNode,
  type GraphQLField,
  type GraphQLFieldResolver,
  type GraphQLObjectType,
  type GraphQLResolveInfo,
  getArgumentValues,
  getNamedType,
  isObjectType,
  SchemaMetaFieldDef,
  type SelectionSetNode,
  TypeMetaFieldDef,
} from 'graphql'
import type { CostModel } from './costModel.js'
import {
  type CollectionInput,
  collectFields,
  type FieldGroup,
  type FieldOccurrence,
  MergedSelectionKeys,
  subSelectionsOf,
} from './fieldCollection.js'

/** What pricing introspection reads of an estimate: the collection input, the cost model, the field's weight. */
export interface IntrospectionRun extends CollectionInput {
  readonly model: CostModel
  readonly settings: { readonly introspectionCost: number }
}

/**
 * The price of an introspection field (`__schema`, `__type`): what it returns on this schema, counted as a response
 * is counted (each object its weight, 1 unless `costs` says otherwise; each list item; a null where an object could
 * be; an empty list once), plus `introspectionCost` for the field itself. It is found by walking the schema with
 * graphql-js' own introspection resolvers, the ones execution runs, without building the response: the price is
 * exactly what the response will cost. Every value counted spends a field visit, so a selection that returns more
 * than `maxFieldVisits` values (the whole of a large schema) is too large to price, and is refused as such.
 */
export function introspectionPrice(run: IntrospectionRun, group: FieldGroup): number {
  const first = group.occurrences[0] as FieldOccurrence
  const definition = metaFieldOf(first.node.name.value)
  const walk = new IntrospectionWalk(run)
  const args = getArgumentValues(definition, first.node, run.variables)
  const value = walk.resolve(definition, undefined, args)
  return walk.valueCost(
    run.settings.introspectionCost,
    objectTypeOf(definition),
    subSelectionsOf(group),
    value,
  )
}

/** The definition of `__schema` or `__type` (they are not fields of the query type's `getFields()`). */
export function metaFieldOf(name: string): GraphQLField<unknown, unknown> {
  return name === '__schema' ? SchemaMetaFieldDef : TypeMetaFieldDef
}

/** The introspection object type a meta field or an introspection field returns, or undefined for leaves. */
export function objectTypeOf(field: GraphQLField<unknown, unknown>): GraphQLObjectType | undefined {
  const named = getNamedType(field.type)
  return isObjectType(named) ? named : undefined
}

/** The field selected under one response key, with what is the same for every object it is counted on. */
interface PlannedField {
  readonly definition: GraphQLField<unknown, unknown>
  readonly args: Record<string, unknown>
  readonly weight: number
  readonly type: GraphQLObjectType
  readonly sets: readonly SelectionSetNode[]
}

/** One walk of introspection values: the selections collected once per type and merged sub-selections. */
class IntrospectionWalk {
  private readonly planned = new Map<string, readonly PlannedField[]>()
  private readonly selectionKeys = new MergedSelectionKeys()
  /** What graphql-js' introspection resolvers read from `info`. */
  private readonly info: GraphQLResolveInfo

  constructor(private readonly run: IntrospectionRun) {
    this.info = { schema: run.schema } as GraphQLResolveInfo
  }

  resolve(
    definition: GraphQLField<unknown, unknown>,
    source: unknown,
    args: Record<string, unknown>,
  ): unknown {
    const resolver = definition.resolve as GraphQLFieldResolver<unknown, unknown> | undefined
    if (resolver !== undefined) return resolver(source, args, undefined, this.info)
    // graphql-js' default resolver: the property of the same name.
    const property = (source as Record<string, unknown> | null | undefined)?.[definition.name]
    return typeof property === 'function' ? property.call(source, args) : property
  }

  /** `weight` for each value `value` holds (objects with what they hold), as the response will count it. */
  valueCost(
    weight: number,
    type: GraphQLObjectType | undefined,
    sets: readonly SelectionSetNode[],
    value: unknown,
  ): number {
    if (Array.isArray(value)) {
      if (value.length === 0) return this.counted(weight)
      let sum = 0
      for (const item of value) sum += this.valueCost(weight, type, sets, item)
      return sum
    }
    if (value == null || type === undefined) return this.counted(weight)
    return this.counted(weight) + this.objectCost(type, sets, value)
  }

  private counted(weight: number): number {
    this.run.budget.spend()
    return weight
  }

  private objectCost(type: GraphQLObjectType, sets: readonly SelectionSetNode[], source: unknown): number {
    let total = 0
    for (const field of this.plan(type, sets)) {
      const value = this.resolve(field.definition, source, field.args)
      total += this.valueCost(field.weight, field.type, field.sets, value)
    }
    return total
  }

  /** The object-valued fields `sets` select on `type`, merged as they execute (leaves cost nothing). */
  private plan(type: GraphQLObjectType, sets: readonly SelectionSetNode[]): readonly PlannedField[] {
    const key = this.selectionKeys.keyOf(type, sets)
    let fields = this.planned.get(key)
    if (fields !== undefined) return fields
    const planned: PlannedField[] = []
    for (const group of collectFields(this.run, sets, type).groups) {
      const node = (group.occurrences[0] as FieldOccurrence).node
      const definition = type.getFields()[node.name.value]
      const child = definition === undefined ? undefined : objectTypeOf(definition)
      if (definition === undefined || child === undefined) continue
      planned.push({
        definition,
        args: argumentsOf(definition, node, this.run.variables),
        weight: this.run.model.field(type, definition).weight,
        type: child,
        sets: subSelectionsOf(group),
      })
    }
    fields = planned
    this.planned.set(key, fields)
    return fields
  }
}

function argumentsOf(
  definition: GraphQLField<unknown, unknown>,
  node: FieldNode,
  variables: Readonly<Record<string, unknown>>,
): Record<string, unknown> {
  return definition.args.length === 0 ? {} : getArgumentValues(definition, node, variables)
}
