import {
  defaultFieldResolver,
  type GraphQLError,
  type GraphQLFieldResolver,
  type GraphQLSchema,
  isInterfaceType,
  isObjectType,
} from 'graphql'
import type { FieldLimitDenial, LimitedField, Occurrence } from './fieldLimits.js'

/** What admission paid for, per limited field of one operation, and how many times the field has run since. */
interface Runs {
  paid: number
  ran: number
}

/**
 * The part of a field limit that only execution can know. Admission spends one unit per occurrence of a limited
 * field in the document, before anything runs; but an occurrence runs once per item of every list above it
 * (`accounts(first: 50) { verifyPin }` runs 50 times) and once per spread of a fragment in different places. So the
 * limited fields' resolvers are wrapped: each run beyond what admission paid for spends one more unit when it
 * happens, and a denial makes that run a field error (RATE_LIMITED) instead of calling the resolver.
 *
 * The wrapping is done once per schema, on the schema's own field objects (as Envelop's `useOnResolve` does); only
 * limited fields are wrapped, so no other resolver pays anything.
 */
export class FieldLimitExecutions {
  /** Per operation, keyed by its context object (one per operation, batches included). */
  private readonly runs = new WeakMap<object, Map<LimitedField, Runs>>()
  /** The limits each field's resolver is already wrapped for (a schema is seen again on every schema change). */
  private readonly guarded = new WeakMap<object, WeakSet<LimitedField>>()

  constructor(
    /** The client address of an operation's context. */
    private readonly ipOf: (context: Record<string, unknown>) => string,
    /** The field error of a denied run, or undefined to let it run all the same (dry-run). */
    private readonly refusal: (denial: FieldLimitDenial) => GraphQLError | undefined,
  ) {}

  /** Admission spent one unit for each of these occurrences, for the operation of `context`. */
  paidFor(context: object, occurrences: readonly Occurrence[]): void {
    let runs = this.runs.get(context)
    if (runs === undefined) {
      runs = new Map()
      this.runs.set(context, runs)
    }
    for (const { limit } of occurrences) {
      const counted = runs.get(limit)
      if (counted === undefined) runs.set(limit, { paid: 1, ran: 0 })
      else counted.paid++
    }
  }

  /**
   * Wraps, once, the resolvers that run for each limited field of `schema`: the field's own, or for a field of an
   * interface, its implementations' (selected through `... on Impl`, they would be seen by no admission). The root
   * fields of subscriptions are left alone: their resolver runs once per event, and admission counted the subscribe.
   */
  guard(schema: GraphQLSchema, limits: ReadonlyMap<string, LimitedField>): void {
    const subscriptionType = schema.getSubscriptionType()
    for (const limit of limits.values()) {
      const [typeName = '', fieldName = ''] = limit.coordinate.split('.')
      const type = schema.getType(typeName)
      const types = isInterfaceType(type) ? schema.getPossibleTypes(type) : isObjectType(type) ? [type] : []
      for (const objectType of types) {
        const field = objectType.getFields()[fieldName]
        if (field === undefined || objectType === subscriptionType) continue
        let wrappedFor = this.guarded.get(field)
        if (wrappedFor === undefined) {
          wrappedFor = new WeakSet()
          this.guarded.set(field, wrappedFor)
        }
        if (wrappedFor.has(limit)) continue
        wrappedFor.add(limit)
        field.resolve = this.counted(limit, field.resolve ?? defaultFieldResolver)
      }
    }
  }

  private counted(
    limit: LimitedField,
    resolve: GraphQLFieldResolver<unknown, unknown>,
  ): GraphQLFieldResolver<unknown, unknown> {
    return (source, args, context, info) => {
      const runs = this.runsOf(context, limit)
      if (runs !== undefined && ++runs.ran <= runs.paid) return resolve(source, args, context, info)
      const ip = this.ipOf((context ?? {}) as Record<string, unknown>)
      return limit.limiter.consume(limit.keyOf(args, ip)).then((decision) => {
        if (!decision.allowed) {
          const error = this.refusal({ coordinate: limit.coordinate, decision, limiter: limit.limiter })
          if (error !== undefined) throw error
        }
        return resolve(source, args, context, info)
      })
    }
  }

  /** The runs of `limit` in the operation of `context`; undefined when the context is not an object. */
  private runsOf(context: unknown, limit: LimitedField): Runs | undefined {
    if (typeof context !== 'object' || context === null) return undefined
    let runs = this.runs.get(context)
    if (runs === undefined) {
      runs = new Map()
      this.runs.set(context, runs)
    }
    let counted = runs.get(limit)
    if (counted === undefined) {
      // Nothing paid: the operation did not go through admission, or selected the field where it was not seen.
      counted = { paid: 0, ran: 0 }
      runs.set(limit, counted)
    }
    return counted
  }
}
