import {
  defaultFieldResolver,
  type GraphQLField,
  type GraphQLFieldResolver,
  type GraphQLObjectType,
  type GraphQLResolveInfo,
  type GraphQLSchema,
  type GraphQLType,
  isListType,
  isNonNullType,
  isObjectType,
} from 'graphql'
import { isAsyncIterable } from '../asyncIterable.js'
import type { CostModel } from './costModel.js'
import { type CostSettings, weightedInputCost } from './estimator.js'

/**
 * What a resolver reports of the work it does, in the cost model's points: `points` for the values it returned (or
 * its call, for a field that is not a list, before it runs), answering whether the operation may go on. `false`
 * refuses the field: a list's items' own fields never run, another field's resolver is not called.
 */
export type WorkReport = (context: unknown, info: GraphQLResolveInfo, points: number) => boolean

/**
 * A field is refused: the work it would cost is more than the operation can pay. `counted` is what the response
 * will count for the null it leaves, work that never ran.
 */
export type WorkRefusal = (context: unknown, info: GraphQLResolveInfo, counted: number) => Error

/**
 * Wraps the resolvers of `schema` once, so that each reports the work it did as it runs, in the same model the
 * estimate and the response count use: a field's weight for each value it returns (a list: each item at any depth, a
 * null item too, an empty list once; anything else: the call, whatever it answers or throws), its weighted
 * arguments, `mutationCost` on root mutation fields. A field selected through an interface weighs as the dearest of
 * its definitions. Fields that weigh nothing (the leaves, by default) are left alone, and so are the introspection
 * types, which graphql-js shares between schemas.
 *
 * This is what the response cannot always tell: work that ran and that an error then hid (a non-null field failing
 * nulls its parent and what had run below it), the parts of an incremental response still to be sent when its
 * client goes away. Work the operation cannot pay for is refused (`refuse`): a list at its resolver, before its
 * items' fields run, any other weighted field before its resolver is called. That is what bounds the work of a
 * response that outruns its estimate.
 */
export function instrumentResolvers(
  schema: GraphQLSchema,
  model: CostModel,
  settings: CostSettings,
  report: WorkReport,
  refuse: WorkRefusal,
  /** Marks a resolver this instrumentation made: a schema is instrumented once per mark. */
  mark: symbol,
): void {
  const mutationType = schema.getMutationType()
  for (const type of Object.values(schema.getTypeMap())) {
    if (!isObjectType(type) || type.name.startsWith('__')) continue
    for (const field of Object.values(type.getFields())) {
      const resolve = field.resolve as
        | (GraphQLFieldResolver<unknown, unknown> & Record<symbol, true>)
        | undefined
      if (resolve?.[mark] === true) continue
      const weight = dearestWeight(model, type, field)
      const { weightedArguments } = model.field(type, field)
      const mutationCost = type === mutationType ? settings.mutationCost : 0
      if (weight === 0 && weightedArguments.length === 0 && mutationCost === 0) continue
      const inner = resolve ?? defaultFieldResolver
      const fixed = (args: unknown): number =>
        mutationCost + (weightedArguments.length === 0 ? 0 : weightedInputCost(weightedArguments, args))
      const failed = (error: unknown, args: unknown, context: unknown, info: GraphQLResolveInfo) => {
        // A list resolver that threw ran once: its weight, as a null list counts.
        report(context, info, weight + fixed(args))
        throw error
      }
      const wrapped: GraphQLFieldResolver<unknown, unknown> = isList(field.type)
        ? (source, args, context, info) => {
            let values: unknown
            try {
              values = inner(source, args, context, info)
            } catch (error) {
              return failed(error, args, context, info)
            }
            if (values instanceof Promise) {
              return values.then(
                (settled) => listed(settled, args, context, info),
                (error: unknown) => failed(error, args, context, info),
              )
            }
            return listed(values, args, context, info)
          }
        : (source, args, context, info) => {
            // Counted before it runs: a resolver that throws after its work has done it.
            const points = weight + fixed(args)
            if (!report(context, info, points)) throw refuse(context, info, points)
            return inner(source, args, context, info)
          }
      const listed = (values: unknown, args: unknown, context: unknown, info: GraphQLResolveInfo) => {
        if (isAsyncIterable(values)) return meteredItems(values, weight, context, info, report, refuse)
        if (!report(context, info, fixed(args) + weight * countValues(values))) {
          throw refuse(context, info, weight + fixed(args))
        }
        return values
      }
      Object.defineProperty(wrapped, mark, { value: true })
      field.resolve = wrapped
    }
  }
}

/** The field's weight on `type`, or on an interface of it that defines the field dearer. */
function dearestWeight(
  model: CostModel,
  type: GraphQLObjectType,
  field: GraphQLField<unknown, unknown>,
): number {
  let weight = model.field(type, field).weight
  for (const face of type.getInterfaces()) {
    const inherited = face.getFields()[field.name]
    if (inherited !== undefined) weight = Math.max(weight, model.field(face, inherited).weight)
  }
  return weight
}

function isList(type: GraphQLType): boolean {
  return isListType(isNonNullType(type) ? type.ofType : type)
}

/** Values a list holds at any depth, a null item counting as one, an empty list once (its resolver ran). */
function countValues(value: unknown): number {
  if (!Array.isArray(value)) return 1
  if (value.length === 0) return 1
  let count = 0
  for (const item of value) count += countValues(item)
  return count
}

/**
 * A streamed list (an async iterable, as `@stream` reads it): each item reported as it is pulled, and the stream
 * closed, with the refusal, once the operation cannot pay for more.
 */
function meteredItems(
  source: AsyncIterable<unknown>,
  weight: number,
  context: unknown,
  info: GraphQLResolveInfo,
  report: WorkReport,
  refuse: WorkRefusal,
): AsyncIterableIterator<unknown> {
  const iterator = source[Symbol.asyncIterator]()
  return {
    [Symbol.asyncIterator]() {
      return this
    },
    async next() {
      const step = await iterator.next()
      if (step.done !== true && !report(context, info, weight)) {
        await iterator.return?.()
        // The items sent are counted as they ran; the rest never reach the response.
        throw refuse(context, info, 0)
      }
      return step
    },
    async return(value?: unknown) {
      return (await iterator.return?.(value)) ?? { done: true, value: undefined }
    },
  }
}
