import {
  type DocumentNode,
  type FragmentDefinitionNode,
  type GraphQLCompositeType,
  type GraphQLInputType,
  type GraphQLSchema,
  getArgumentValues,
  getDirectiveValues,
  getNamedType,
  isCompositeType,
  isInputObjectType,
  isInterfaceType,
  isObjectType,
  Kind,
  type OperationDefinitionNode,
  type SelectionSetNode,
} from 'graphql'
import { ErrorCodes, invalidOption, TollboothError } from '../../core/errors.js'
import { type FailPolicy, failPolicies } from '../../core/failPolicy.js'
import { hashKey } from '../../core/hashKey.js'
import type { LimiterHooks } from '../../core/hooks.js'
import { closestName } from '../../core/knownOptions.js'
import { slidingWindow } from '../../core/limiters/slidingWindow.js'
import type { Store } from '../../core/stores/store.js'
import { isOptionsObject, oneOf, positiveInteger } from '../../core/validate.js'
import { createIpKeyer, type IpKeyOptions, resolveIpKeyOptions } from '../../identity/ipKey.js'
import { normalizeAccount } from '../../identity/normalizeAccount.js'
import { fragmentsOf, readPath } from '../documentParts.js'
import { GRAPHQL_OPTIONS_OWNER } from '../optionsOwner.js'
import type { FieldLimitConfig } from '../optionTypes.js'
import type { FieldLimitExecutions } from './fieldLimitExecutions.js'
import type { FieldLimitDenial, LimitedField, Occurrence } from './limitedField.js'

const OWNER = GRAPHQL_OPTIONS_OWNER

export interface FieldLimitsOptions {
  readonly configs: Readonly<Record<string, FieldLimitConfig>>
  /** Where the limits' sliding windows live. */
  readonly store: Store
  /** Prefix of the limiters' names: `<prefix>:field:<coordinate>`. */
  readonly prefix: string
  readonly hooks: LimiterHooks | undefined
  /** The plugin's `ipv6Prefix` and `ipv4Prefix` (its identity's), from which a field's defaults are worked out. */
  readonly ipKeyOptions: Required<IpKeyOptions>
  /** Counts the runs of limited fields during execution; without it only admission counts (occurrences). */
  readonly executions?: FieldLimitExecutions
}

/** What `selected` answers for the operations of a schema without limited fields: the common case, not allocated. */
const NONE: readonly Occurrence[] = Object.freeze([])

/**
 * Separate limits for sensitive fields (`login`, `sendCode`, `resetPassword`), from the `fieldLimits` option and
 * `@rateLimit` in SDL. Each occurrence of such a field in the operation (aliases included) spends one unit from
 * a sliding window keyed by the client's network (grouped as the plugin's identity is, unless the field says
 * otherwise) and the normalized `by` argument values, hashed. Checked before any
 * resolver of the operation runs.
 */
export class FieldLimits {
  private readonly configured: ReadonlyMap<string, LimitedField>
  private readonly bySchema = new WeakMap<GraphQLSchema, ReadonlyMap<string, LimitedField>>()
  /**
   * Per schema, then per document: Yoga's parse cache hands out the same DocumentNode for the same text across a
   * schema change, and a plan holds the fields and limits of the schema it was made for.
   */
  private readonly plans = new WeakMap<
    GraphQLSchema,
    WeakMap<DocumentNode, Map<OperationDefinitionNode, readonly Occurrence[]>>
  >()

  private readonly store: Store
  private readonly prefix: string
  private readonly hooks: LimiterHooks | undefined
  private readonly ipKeyOptions: Required<IpKeyOptions>
  private readonly executions: FieldLimitExecutions | undefined

  constructor(options: FieldLimitsOptions) {
    const { configs } = options
    this.store = options.store
    this.prefix = options.prefix
    this.hooks = options.hooks
    this.executions = options.executions
    // One grouping of addresses for every limiter: a field's own prefixes override the plugin's.
    this.ipKeyOptions = options.ipKeyOptions
    if (!isOptionsObject(configs)) {
      throw invalidOption(OWNER, 'fieldLimits', 'an object keyed by field coordinate', configs)
    }
    const configured = new Map<string, LimitedField>()
    for (const [coordinate, config] of Object.entries(configs)) {
      configured.set(coordinate, this.limitedField(coordinate, config, `fieldLimits["${coordinate}"]`))
    }
    this.configured = configured
  }

  /** Spends one unit per occurrence (from `selected`); resolves the first denial, or undefined when all passed. */
  async spend(
    occurrences: readonly Occurrence[],
    values: Readonly<Record<string, unknown>>,
    ip: string,
    context: object,
  ): Promise<FieldLimitDenial | undefined> {
    const keys = occurrences.map(({ field, node, limit }) =>
      limit.keyOf(getArgumentValues(field, node, values), ip),
    )
    const decisions = await Promise.all(
      occurrences.map(({ limit }, index) => limit.limiter.consume(keys[index] as string)),
    )
    // What was spent, key by key: the runs that execution counts later draw on it (see FieldLimitExecutions).
    this.executions?.paidFor(
      context,
      occurrences.flatMap(({ limit }, index) =>
        decisions[index]?.allowed === true ? [{ limit, key: keys[index] as string }] : [],
      ),
    )
    for (const [index, decision] of decisions.entries()) {
      if (!decision.allowed) {
        const { limit } = occurrences[index] as Occurrence
        return { coordinate: limit.coordinate, decision, limiter: limit.limiter }
      }
    }
    return undefined
  }

  /**
   * The operation of `context` goes through admission: when the schema has limited fields, their runs in it are
   * counted (see FieldLimitExecutions), whether or not admission saw them selected.
   */
  countRuns(schema: GraphQLSchema, context: object): void {
    if (this.executions !== undefined && this.limits(schema).size > 0) this.executions.admitted(context)
  }

  /**
   * Reads the schema's `@rateLimit` directives and checks every limit against the schema now, so a malformed one
   * throws at startup, and wraps the limited fields' resolvers to count their runs.
   */
  validate(schema: GraphQLSchema): void {
    this.limits(schema)
  }

  /** Whether any field of `schema` is limited (by `fieldLimits` or `@rateLimit`): each reads the client's address. */
  any(schema: GraphQLSchema): boolean {
    return this.limits(schema).size > 0
  }

  private limits(schema: GraphQLSchema): ReadonlyMap<string, LimitedField> {
    let limits = this.bySchema.get(schema)
    if (limits !== undefined) return limits
    const merged = new Map(this.configured)
    const directive = schema.getDirective('rateLimit')
    if (directive != null) {
      for (const type of Object.values(schema.getTypeMap())) {
        if (!isObjectType(type) && !isInterfaceType(type)) continue
        for (const field of Object.values(type.getFields())) {
          const coordinate = `${type.name}.${field.name}`
          const values = field.astNode == null ? undefined : getDirectiveValues(directive, field.astNode)
          if (values === undefined || merged.has(coordinate)) continue
          const config = {
            limit: values.limit as number,
            windowMs: parseWindow(coordinate, values.window),
            by: values.by as string[] | undefined,
          }
          merged.set(coordinate, this.limitedField(coordinate, config, `@rateLimit on ${coordinate}`))
        }
      }
    }
    // A misspelt coordinate or `by` argument would leave the limit counting nothing, or every value as one.
    for (const limit of merged.values()) checkAgainstSchema(schema, limit)
    this.executions?.guard(schema, merged)
    limits = merged
    this.bySchema.set(schema, limits)
    return limits
  }

  private limitedField(coordinate: string, config: FieldLimitConfig, option: string): LimitedField {
    if (!isOptionsObject(config)) throw invalidOption(OWNER, option, 'an object', config)
    if (!/^[_A-Za-z][_0-9A-Za-z]*\.[_A-Za-z][_0-9A-Za-z]*$/.test(coordinate)) {
      throw invalidOption(OWNER, option, 'keyed by a field coordinate like "Mutation.login"', coordinate)
    }
    const by = config.by ?? []
    if (!Array.isArray(by) || !by.every((path) => typeof path === 'string' && path.length > 0)) {
      throw invalidOption(OWNER, `${option}.by`, 'an array of argument names', by)
    }
    const limiter = slidingWindow({
      name: `${this.prefix}:field:${coordinate}`,
      store: this.store,
      limit: positiveInteger(OWNER, `${option}.limit`, config.limit),
      windowMs: positiveInteger(OWNER, `${option}.windowMs`, config.windowMs),
      ...(this.hooks === undefined ? {} : { hooks: this.hooks }),
      failPolicy: oneOf<FailPolicy>(
        OWNER,
        `${option}.failPolicy`,
        config.failPolicy ?? 'closed',
        failPolicies,
      ),
    })
    const ipKeyOptions = resolveIpKeyOptions(
      {
        ipv6Prefix: config.ipv6Prefix ?? this.ipKeyOptions.ipv6Prefix,
        ipv4Prefix: config.ipv4Prefix ?? this.ipKeyOptions.ipv4Prefix,
      },
      OWNER,
      `${option}.`,
    )
    const paths = by.map((path: string) => path.split('.'))
    const ipKey = createIpKeyer(ipKeyOptions)
    return {
      coordinate,
      option,
      limiter,
      by: paths,
      keyOf: (args, ip) =>
        hashKey([ipKey(ip), ...paths.map((path) => normalize(readPath(args, path)))].join('\u0000')),
    }
  }

  /** Limited fields the operation selects, through its fragments (each walked once). Cached per schema and document. */
  selected(
    schema: GraphQLSchema,
    document: DocumentNode,
    operation: OperationDefinitionNode,
  ): readonly Occurrence[] {
    const limits = this.limits(schema)
    if (limits.size === 0) return NONE
    let byDocument = this.plans.get(schema)
    if (byDocument === undefined) {
      byDocument = new WeakMap()
      this.plans.set(schema, byDocument)
    }
    let byOperation = byDocument.get(document)
    if (byOperation === undefined) {
      byOperation = new Map()
      byDocument.set(document, byOperation)
    }
    const known = byOperation.get(operation)
    if (known !== undefined) return known
    const rootType = schema.getRootType(operation.operation)
    const found: Occurrence[] = []
    if (rootType != null) {
      collect(schema, fragmentsOf(document), operation.selectionSet, rootType, limits, found, new Set())
    }
    byOperation.set(operation, found)
    return found
  }
}

/** Throws `TOLLBOOTH_ERR_INVALID_OPTION` when the limit names no field of the schema, or `by` no argument of it. */
function checkAgainstSchema(schema: GraphQLSchema, limit: LimitedField): void {
  const [typeName = '', fieldName = ''] = limit.coordinate.split('.')
  const type = schema.getType(typeName)
  const field = isObjectType(type) || isInterfaceType(type) ? type.getFields()[fieldName] : undefined
  if (field === undefined) {
    const coordinates = Object.values(schema.getTypeMap()).flatMap((candidate) =>
      (isObjectType(candidate) || isInterfaceType(candidate)) && !candidate.name.startsWith('__')
        ? Object.keys(candidate.getFields()).map((name) => `${candidate.name}.${name}`)
        : [],
    )
    throw notInSchema(limit.option, 'a field of the schema', limit.coordinate, coordinates)
  }
  for (const path of limit.by) {
    let inputs: readonly { readonly name: string; readonly type: GraphQLInputType }[] = field.args
    for (const [depth, name] of path.entries()) {
      const input = inputs.find((candidate) => candidate.name === name)
      if (input === undefined) {
        const what =
          depth === 0 ? `an argument of ${limit.coordinate}` : `a field of ${path.slice(0, depth).join('.')}`
        throw notInSchema(
          `${limit.option}.by`,
          what,
          path.join('.'),
          inputs.map((candidate) => candidate.name),
        )
      }
      const named = getNamedType(input.type)
      inputs = isInputObjectType(named) ? Object.values(named.getFields()) : []
    }
  }
}

function notInSchema(option: string, what: string, got: string, known: readonly string[]): TollboothError {
  const closest = closestName(got, known)
  const hint = closest === undefined ? '' : ` (did you mean "${closest}"?)`
  return new TollboothError(
    ErrorCodes.INVALID_OPTION,
    `${OWNER}: "${option}" must name ${what}, got "${got}"${hint}`,
  )
}

function collect(
  schema: GraphQLSchema,
  fragments: ReadonlyMap<string, FragmentDefinitionNode>,
  set: SelectionSetNode,
  parentType: GraphQLCompositeType,
  limits: ReadonlyMap<string, LimitedField>,
  into: Occurrence[],
  seenFragments: Set<string>,
): void {
  for (const selection of set.selections) {
    if (selection.kind === Kind.FIELD) {
      if (!isObjectType(parentType) && !isInterfaceType(parentType)) continue
      const field = parentType.getFields()[selection.name.value]
      if (field === undefined) continue
      const limit = limits.get(`${parentType.name}.${field.name}`)
      if (limit !== undefined) into.push({ node: selection, field, limit })
      const fieldType = getNamedType(field.type)
      if (selection.selectionSet !== undefined && isCompositeType(fieldType)) {
        collect(schema, fragments, selection.selectionSet, fieldType, limits, into, seenFragments)
      }
      continue
    }
    let fragmentSet: SelectionSetNode | undefined
    let typeName: string | undefined
    if (selection.kind === Kind.INLINE_FRAGMENT) {
      fragmentSet = selection.selectionSet
      typeName = selection.typeCondition?.name.value
    } else {
      if (seenFragments.has(selection.name.value)) continue
      seenFragments.add(selection.name.value)
      const fragment = fragments.get(selection.name.value)
      if (fragment === undefined) continue
      fragmentSet = fragment.selectionSet
      typeName = fragment.typeCondition.name.value
    }
    const conditionType = typeName === undefined ? parentType : schema.getType(typeName)
    if (isCompositeType(conditionType))
      collect(schema, fragments, fragmentSet, conditionType, limits, into, seenFragments)
  }
}

/**
 * The same person types their e-mail many ways: `Alice@Example.com `, `alice@example.com` and the same with a
 * zero-width space inside are one key (as for the HTTP login guard).
 */
function normalize(value: unknown): string {
  if (typeof value === 'string') return normalizeAccount(value)
  return JSON.stringify(value) ?? ''
}

const WINDOW = /^(\d+)\s*(ms|s|m|h|d)$/
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }

/** `@rateLimit(window:)`: "500ms", "30s", "1m", "1h", "1d". */
export function parseWindow(coordinate: string, window: unknown): number {
  const match = typeof window === 'string' ? WINDOW.exec(window.trim()) : null
  if (match === null) {
    throw invalidOption(
      OWNER,
      `@rateLimit(window:) on ${coordinate}`,
      'a duration like "30s", "1m" or "1h"',
      window,
    )
  }
  return Number(match[1]) * (UNIT_MS[match[2] as string] as number)
}
