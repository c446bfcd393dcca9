import {
  defaultFieldResolver,
  type GraphQLError,
  type GraphQLFieldResolver,
  type GraphQLSchema,
  isInterfaceType,
  isObjectType,
} from 'graphql'
import type { FieldLimitDenial, LimitedField } from './limitedField.js'

/** What admission paid for one limited field and one key (client and `by` values), and how many runs since. */
interface Runs {
  paid: number
  ran: number
}

/** The runs of one operation: per limited field, per key. */
type OperationRuns = Map<LimitedField, Map<string, Runs>>

/**
 * The part of a field limit that only execution can know. Admission spends one unit per occurrence of a limited
 * field in the document, before anything runs; but an occurrence runs once per item of every list above it
 * (`accounts(first: 50) { verifyPin }` runs 50 times) and once per spread of a fragment in different places. So the
 * limited fields' resolvers are wrapped: each run beyond what admission paid for its key spends one more unit when
 * it happens, and a denial makes that run a field error (RATE_LIMITED) instead of calling the resolver. What was
 * paid for one key (one e-mail) is never spent by a run for another.
 *
 * The wrapping is done once per schema, on the schema's own field objects (as Envelop's `useOnResolve` does); only
 * limited fields are wrapped, so no other resolver pays anything. Only operations this plugin admitted are counted:
 * another plugin (another Yoga on the same schema) counts its own.
 */
export class FieldLimitExecutions {
  /** The operations this plugin admitted, keyed by their context object (one per operation, batches included). */
  private readonly runs = new WeakMap<object, OperationRuns>()
  /** The limits each field's resolver is already wrapped for (a schema is seen again on every schema change). */
  private readonly guarded = new WeakMap<object, WeakSet<LimitedField>>()

  constructor(
    /** The client address of an operation's context. */
    private readonly ipOf: (context: Record<string, unknown>) => string,
    /** The field error of a denied run, or undefined to let it run all the same (dry-run). */
    private readonly refusal: (
      denial: FieldLimitDenial,
      context: Record<string, unknown>,
    ) => GraphQLError | undefined,
  ) {}

  /** Admission let the operation of `context` through: its runs of limited fields are counted from now on. */
  admitted(context: object): void {
    if (!this.runs.has(context)) this.runs.set(context, new Map())
  }

  /** Admission spent one unit on each of these keys, for the operation of `context`. */
  paidFor(context: object, paid: readonly { readonly limit: LimitedField; readonly key: string }[]): void {
    let runs = this.runs.get(context)
    if (runs === undefined) {
      runs = new Map()
      this.runs.set(context, runs)
    }
    for (const { limit, key } of paid) runsOf(runs, limit, key).paid++
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
      const runs = typeof context === 'object' && context !== null ? this.runs.get(context) : undefined
      // An operation this plugin did not admit is not its to count (another plugin on the same schema counts it).
      if (runs === undefined) return resolve(source, args, context, info)
      const key = limit.keyOf(args, this.ipOf(context as Record<string, unknown>))
      const counted = runsOf(runs, limit, key)
      if (++counted.ran <= counted.paid) return resolve(source, args, context, info)
      return limit.limiter.consume(key).then((decision) => {
        if (!decision.allowed) {
          const denial = { coordinate: limit.coordinate, decision, limiter: limit.limiter }
          const error = this.refusal(denial, context as Record<string, unknown>)
          if (error !== undefined) throw error
        }
        return resolve(source, args, context, info)
      })
    }
  }
}

function runsOf(runs: OperationRuns, limit: LimitedField, key: string): Runs {
  let byKey = runs.get(limit)
  if (byKey === undefined) {
    byKey = new Map()
    runs.set(limit, byKey)
  }
  let counted = byKey.get(key)
  if (counted === undefined) {
    counted = { paid: 0, ran: 0 }
    byKey.set(key, counted)
  }
  return counted
}
