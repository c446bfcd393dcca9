import {
  type GraphQLArgument,
  type GraphQLField,
  type GraphQLInputField,
  type GraphQLInputObjectType,
  type GraphQLInputType,
  type GraphQLNamedType,
  type GraphQLSchema,
  getDirectiveValues,
  getNamedType,
  getNullableType,
  isAbstractType,
  isCompositeType,
  isEnumType,
  isInputObjectType,
  isInterfaceType,
  isObjectType,
} from 'graphql'

import { ErrorCodes, invalidOption, TollboothError } from '../../core/errors.js'
import { checkOptionKeys, closestName, optionNames } from '../../core/knownOptions.js'
import { isOptionsObject } from '../../core/validate.js'
import { GRAPHQL_OPTIONS_OWNER } from '../optionsOwner.js'

/** `@listSize` as options or field extensions (same names as the directive's arguments). */
export interface ListSizeConfig {
  /** Items assumed when no slicing argument is given. */
  assumedSize?: number
  /** Arguments whose value is the list size; the largest given one wins. A dotted path reads an input field. */
  slicingArguments?: readonly string[]
  /** Child fields the size applies to instead of this field (a connection's `edges`, `nodes`). */
  sizedFields?: readonly string[]
  /** Kept for parity with the directive; the size is the largest slicing argument given either way. */
  requireOneSlicingArgument?: boolean
}

/** Weights for one schema coordinate, given in the plugin options instead of SDL. */
export interface CostConfig {
  /** `@cost(weight:)` */
  weight?: number
  /** `@listSize(...)` (fields only) */
  listSize?: ListSizeConfig
}

/**
 * Weights keyed by schema coordinate: `'Type'`, `'Type.field'`, `'*.field'` (that field name on every type),
 * `'Type.field(arg:)'` and `'Input.field'`. Options win over field `extensions.cost` / `extensions.listSize`,
 * which win over `@cost` / `@listSize` in SDL.
 */
export type CostMap = Readonly<Record<string, CostConfig>>

const COST_CONFIG_OPTIONS = optionNames<CostConfig>({ weight: true, listSize: true })
const LIST_SIZE_OPTIONS = optionNames<ListSizeConfig>({
  assumedSize: true,
  slicingArguments: true,
  sizedFields: true,
  requireOneSlicingArgument: true,
})

/** What the estimator needs to know about one field, compiled once per field. */
export interface FieldCost {
  /** The field's own weight: explicit, else its type's weight, else 1 for objects and 0 for leaves. */
  readonly weight: number
  readonly listSize: ResolvedListSize | undefined
  /** Arguments that add a weight when provided (including through weighted input fields). */
  readonly weightedArguments: readonly WeightedInput[]
  /**
   * Whether the cost directives say anything of this field: a weight of its own or of the type it returns, a list
   * size, a weighted argument. What estimators price instead of the defaults (see costDirectiveEstimator.ts).
   */
  readonly annotated: boolean
}

export interface ResolvedListSize {
  readonly assumedSize: number | undefined
  /** Each slicing argument as a path: `['first']`, `['input', 'first']`. */
  readonly slicingArguments: readonly (readonly string[])[]
  readonly sizedFields: ReadonlySet<string> | undefined
}

/** An argument or input field with its weight and the weighted input fields below it. */
export interface WeightedInput {
  readonly name: string
  readonly weight: number
  /** Under a recursive input type, a list above this one again: walk it along a value, never on its own. */
  readonly children: readonly WeightedInput[]
}

const OWNER = GRAPHQL_OPTIONS_OWNER
const NO_WEIGHTED_INPUTS: readonly WeightedInput[] = Object.freeze([])

/**
 * The cost-directive model for one schema: reads `@cost` / `@listSize` from SDL, `extensions` and the options'
 * `CostMap`, compiling each field once.
 */
export class CostModel {
  private readonly fields = new WeakMap<GraphQLField<unknown, unknown>, FieldCost>()
  private readonly typeWeights = new Map<string, number | undefined>()
  private readonly inputWeights = new Map<string, readonly WeightedInput[]>()
  private readonly inputTypesHoldingWeights = new Map<string, boolean>()

  constructor(
    readonly schema: GraphQLSchema,
    private readonly costMap: CostMap,
  ) {
    checkCostDirectivesDefined(schema)
    checkCoordinates(schema, costMap)
    checkExtensionListSizes(schema)
    this.checkListSizes()
  }

  /**
   * Every field's list size, from the options, extensions or SDL, names arguments and child fields that exist: a
   * misspelt `slicingArguments` entry would silently price the list at `defaultListSize` whatever the client asks.
   */
  private checkListSizes(): void {
    for (const type of Object.values(this.schema.getTypeMap())) {
      if ((!isObjectType(type) && !isInterfaceType(type)) || type.name.startsWith('__')) continue
      for (const field of Object.values(type.getFields())) {
        const listSize = this.field(type, field).listSize
        if (listSize !== undefined) checkListSizeNames(`${type.name}.${field.name}`, field, listSize)
      }
    }
  }

  field(parentType: GraphQLNamedType, field: GraphQLField<unknown, unknown>): FieldCost {
    let cost = this.fields.get(field)
    if (cost === undefined) {
      cost = this.compileField(parentType, field)
      this.fields.set(field, cost)
    }
    return cost
  }

  /** Explicit weight of a type, or undefined (then objects weigh 1 and leaves 0). */
  typeWeight(type: GraphQLNamedType): number | undefined {
    if (this.typeWeights.has(type.name)) return this.typeWeights.get(type.name)
    const weight =
      this.costMap[type.name]?.weight ??
      extensionWeight(type.extensions, type.name) ??
      this.directiveWeight(type.astNode, type.extensionASTNodes)
    this.typeWeights.set(type.name, weight)
    return weight
  }

  /**
   * What a field returning `type` weighs by default. An interface or union without its own `@cost` weighs as its
   * heaviest possible type, so a type's weight cannot be dodged by selecting it through an abstract field.
   */
  private returnedTypeWeight(type: GraphQLNamedType): number {
    const own = this.typeWeight(type)
    if (own !== undefined) return own
    if (!isCompositeType(type)) return 0
    if (!isAbstractType(type)) return 1
    let heaviest = 1
    for (const possible of this.schema.getPossibleTypes(type)) {
      heaviest = Math.max(heaviest, this.typeWeight(possible) ?? 1)
    }
    return heaviest
  }

  /** Whether `type`, or one of the types an abstract `type` may be, has a weight of its own. */
  private returnsWeightedType(type: GraphQLNamedType): boolean {
    if (this.typeWeight(type) !== undefined) return true
    if (!isAbstractType(type)) return false
    return this.schema.getPossibleTypes(type).some((possible) => this.typeWeight(possible) !== undefined)
  }

  /** The coordinates of fields whose list size goes to child fields (`sizedFields`), as `Type.field`. */
  fieldsSizingChildren(): string[] {
    const found: string[] = []
    for (const type of Object.values(this.schema.getTypeMap())) {
      if ((!isObjectType(type) && !isInterfaceType(type)) || type.name.startsWith('__')) continue
      for (const field of Object.values(type.getFields())) {
        if (this.field(type, field).listSize?.sizedFields !== undefined)
          found.push(`${type.name}.${field.name}`)
      }
    }
    return found
  }

  private compileField(parentType: GraphQLNamedType, field: GraphQLField<unknown, unknown>): FieldCost {
    const coordinate = `${parentType.name}.${field.name}`
    // Per property, like options over extensions over SDL: 'Type.field' refines '*.field'.
    const wildcard = this.costMap[`*.${field.name}`]
    const exact = this.costMap[coordinate]
    const configured = wildcard === undefined ? exact : { ...wildcard, ...exact }
    const namedType = getNamedType(field.type)
    const explicit =
      configured?.weight ??
      extensionWeight(field.extensions, coordinate) ??
      this.directiveWeight(field.astNode, undefined)
    const weight = explicit ?? this.returnedTypeWeight(namedType)
    const listSize =
      configured?.listSize ?? extensionListSize(field.extensions) ?? this.directiveListSize(field.astNode)
    const weightedArguments: WeightedInput[] = []
    for (const arg of field.args) {
      const input = this.weightedArgument(coordinate, arg)
      if (input !== undefined) weightedArguments.push(input)
    }
    return {
      weight,
      listSize: listSize === undefined ? undefined : resolveListSize(coordinate, listSize),
      weightedArguments,
      annotated:
        explicit !== undefined ||
        listSize !== undefined ||
        weightedArguments.length > 0 ||
        this.returnsWeightedType(namedType),
    }
  }

  private weightedArgument(fieldCoordinate: string, arg: GraphQLArgument): WeightedInput | undefined {
    const weight =
      this.costMap[`${fieldCoordinate}(${arg.name}:)`]?.weight ??
      extensionWeight(arg.extensions, `${fieldCoordinate}(${arg.name}:)`) ??
      this.directiveWeight(arg.astNode, undefined) ??
      0
    const children = this.inputObjectWeights(getNamedType(arg.type))
    if (weight === 0 && children.length === 0) return undefined
    return { name: arg.name, weight, children }
  }

  /**
   * Weighted fields of an input object type, and the fields whose input type holds weighted fields further down.
   * A recursive input type (`input Filter { and: [Filter!] }`) refers to its own list: the cost of an argument is
   * then the walk of the value the client gave, as deep as that value goes (weightedInputCost).
   */
  private inputObjectWeights(type: GraphQLNamedType): readonly WeightedInput[] {
    if (!isInputObjectType(type)) return NO_WEIGHTED_INPUTS
    const known = this.inputWeights.get(type.name)
    if (known !== undefined) return known
    if (!this.holdsWeights(type)) {
      this.inputWeights.set(type.name, NO_WEIGHTED_INPUTS)
      return NO_WEIGHTED_INPUTS
    }
    // Registered before it is filled: a field of this type (or of a type below it) that refers back to it gets
    // this very list.
    const result: WeightedInput[] = []
    this.inputWeights.set(type.name, result)
    for (const inputField of Object.values(type.getFields())) {
      const weight = this.inputFieldWeight(type.name, inputField)
      const fieldType = getNamedType(inputField.type)
      if (weight === 0 && !this.holdsWeights(fieldType)) continue
      result.push({ name: inputField.name, weight, children: this.inputObjectWeights(fieldType) })
    }
    return result
  }

  /** Whether some input field with a weight can be reached from `type` (an input object type) through its fields. */
  private holdsWeights(type: GraphQLNamedType): boolean {
    if (!isInputObjectType(type)) return false
    const known = this.inputTypesHoldingWeights.get(type.name)
    if (known !== undefined) return known
    const reached = new Set<string>([type.name])
    const pending = [type]
    let holds = false
    while (!holds && pending.length > 0) {
      const current = pending.pop() as GraphQLInputObjectType
      for (const inputField of Object.values(current.getFields())) {
        if (this.inputFieldWeight(current.name, inputField) > 0) {
          holds = true
          break
        }
        const fieldType = getNamedType(inputField.type)
        if (isInputObjectType(fieldType) && !reached.has(fieldType.name)) {
          reached.add(fieldType.name)
          pending.push(fieldType)
        }
      }
    }
    this.inputTypesHoldingWeights.set(type.name, holds)
    return holds
  }

  private inputFieldWeight(typeName: string, inputField: GraphQLInputField): number {
    return (
      this.costMap[`${typeName}.${inputField.name}`]?.weight ??
      extensionWeight(inputField.extensions, `${typeName}.${inputField.name}`) ??
      this.directiveWeight(inputField.astNode, undefined) ??
      0
    )
  }

  private directiveWeight(
    node: DirectableNode | null | undefined,
    extensions: readonly DirectableNode[] | undefined,
  ): number | undefined {
    const cost = this.schema.getDirective('cost')
    if (cost === undefined || cost === null) return undefined
    for (const candidate of [node, ...(extensions ?? [])]) {
      if (candidate == null) continue
      const values = getDirectiveValues(cost, candidate)
      // Apollo declares `weight: Int!`, the IBM spec `weight: String!`: accept both.
      if (values !== undefined) return weightValue(Number(values.weight), 'the @cost weight')
    }
    return undefined
  }

  private directiveListSize(node: DirectableNode | null | undefined): ListSizeConfig | undefined {
    const listSize = this.schema.getDirective('listSize')
    if (listSize == null || node == null) return undefined
    return getDirectiveValues(listSize, node) as ListSizeConfig | undefined
  }
}

type DirectableNode = Parameters<typeof getDirectiveValues>[1]

/** `extensions.cost` of the element at `coordinate`: a weight, or `{ weight }` (a misspelt key is refused). */
function extensionWeight(
  extensions: Readonly<Record<string, unknown>> | null | undefined,
  coordinate: string,
): number | undefined {
  const cost = extensions?.cost
  if (cost === undefined) return undefined
  const option = `extensions.cost on ${coordinate}`
  if (typeof cost !== 'object' || cost === null) return weightValue(cost, option)
  for (const key of Object.keys(cost)) {
    if (key === 'weight') continue
    const hint =
      closestName(key, ['weight']) === undefined ? 'its one key is weight' : 'did you mean "weight"?'
    throw new TollboothError(
      ErrorCodes.INVALID_OPTION,
      `${OWNER}: unknown key "${key}" in ${option} (${hint})`,
    )
  }
  return weightValue((cost as { weight?: unknown }).weight, `${option}: weight`)
}

function extensionListSize(extensions: Readonly<Record<string, unknown>> | null | undefined) {
  return extensions?.listSize as ListSizeConfig | undefined
}

function weightValue(value: unknown, what: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw invalidOption(OWNER, what, 'a non-negative finite number', value)
  }
  return value
}

function resolveListSize(coordinate: string, config: ListSizeConfig): ResolvedListSize {
  const option = `costs["${coordinate}"].listSize`
  if (!isOptionsObject(config)) throw invalidOption(OWNER, option, 'an object', config)
  const { assumedSize, slicingArguments, sizedFields } = config
  if (
    assumedSize !== undefined &&
    assumedSize !== null &&
    (!Number.isSafeInteger(assumedSize) || assumedSize < 0)
  ) {
    throw invalidOption(OWNER, `${option}.assumedSize`, 'a non-negative integer', assumedSize)
  }
  return {
    assumedSize: assumedSize ?? undefined,
    slicingArguments: stringList(`${option}.slicingArguments`, slicingArguments).map((path) =>
      path.split('.'),
    ),
    sizedFields:
      sizedFields === undefined || sizedFields === null
        ? undefined
        : new Set(stringList(`${option}.sizedFields`, sizedFields)),
  }
}

function stringList(option: string, value: unknown): string[] {
  if (value === undefined || value === null) return []
  if (!Array.isArray(value) || !value.every((item) => typeof item === 'string' && item.length > 0)) {
    throw invalidOption(OWNER, option, 'an array of non-empty strings', value)
  }
  return value
}

/**
 * Refuses unknown keys in each `costs` entry and its `listSize` (the entries' values are checked by `CostModel`,
 * against a schema). Entries that are not objects are left to that check.
 */
export function checkCostMapKeys(costMap: CostMap): void {
  for (const [coordinate, config] of Object.entries(costMap)) {
    const option = `costs["${coordinate}"]`
    checkOptionKeys(OWNER, config, COST_CONFIG_OPTIONS, option)
    checkOptionKeys(OWNER, config?.listSize, LIST_SIZE_OPTIONS, `${option}.listSize`)
  }
}

/** A `costs` key naming nothing in the schema is a typo that would silently charge the default: refuse it. */
function checkCoordinates(schema: GraphQLSchema, costMap: CostMap): void {
  for (const [coordinate, config] of Object.entries(costMap)) {
    if (!isOptionsObject(config)) {
      throw invalidOption(OWNER, `costs["${coordinate}"]`, 'an object', config)
    }
    if (config.weight !== undefined) weightValue(config.weight, `costs["${coordinate}"].weight`)
    if (config.listSize !== undefined) resolveListSize(coordinate, config.listSize)
    if (!coordinateExists(schema, coordinate)) {
      throw invalidOption(
        OWNER,
        `costs["${coordinate}"]`,
        'a schema coordinate that exists in the schema',
        coordinate,
      )
    }
  }
}

/** A slicing argument must be a number the client can give; a sized field must be a child of the field's type. */
function checkListSizeNames(
  coordinate: string,
  field: GraphQLField<unknown, unknown>,
  listSize: ResolvedListSize,
): void {
  const option = `@listSize on ${coordinate}`
  for (const path of listSize.slicingArguments) {
    let inputs: readonly { readonly name: string; readonly type: GraphQLInputType }[] = field.args
    let type: GraphQLInputType | undefined
    for (const name of path) {
      type = inputs.find((input) => input.name === name)?.type
      if (type === undefined) {
        const known = inputs.map((input) => input.name)
        throw notInSchema(
          `${option}: slicingArguments`,
          `an argument of ${coordinate}`,
          path.join('.'),
          known,
        )
      }
      const named = getNamedType(type)
      inputs = isInputObjectType(named) ? Object.values(named.getFields()) : []
    }
    const named = type === undefined ? undefined : getNullableType(type)
    if (named?.toString() !== 'Int' && named?.toString() !== 'Float') {
      throw invalidOption(
        OWNER,
        `${option}: slicingArguments`,
        'arguments of type Int or Float',
        path.join('.'),
      )
    }
  }
  if (listSize.sizedFields === undefined) return
  const returned = getNamedType(field.type)
  const children =
    isObjectType(returned) || isInterfaceType(returned) ? Object.keys(returned.getFields()) : []
  for (const name of listSize.sizedFields) {
    if (!children.includes(name)) {
      throw notInSchema(`${option}: sizedFields`, `a field of ${returned.name}`, name, children)
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

/** tollbooth's directives, by their lowercased names (a misspelt case is caught as well as a missing definition). */
const TOLLBOOTH_DIRECTIVES = new Map(
  ['cost', 'listSize', 'rateLimit'].map((name) => [name.toLowerCase(), name]),
)

/**
 * A schema built without validating its SDL (`assumeValidSDL`) keeps `@cost`, `@listSize` and `@rateLimit` in its
 * AST even when it does not define them (or spells them `@Cost`); they would then be ignored: every field priced at
 * the defaults, a login limit gone. (A validated build fails earlier, with graphql's `Unknown directive "@cost".`,
 * before tollbooth sees the schema.)
 */
function checkCostDirectivesDefined(schema: GraphQLSchema): void {
  for (const [coordinate, node] of directableNodes(schema)) {
    for (const directive of node.directives ?? []) {
      const name = directive.name.value
      const meant = TOLLBOOTH_DIRECTIVES.get(name.toLowerCase())
      if (meant === undefined || schema.getDirective(name) != null) continue
      const fix =
        name === meant
          ? "add costDirectivesTypeDefs from 'tollbooth/graphql' to its type definitions, e.g. " +
            'createSchema({ typeDefs: [costDirectivesTypeDefs, typeDefs] })'
          : `did you mean @${meant}?`
      throw new TollboothError(
        ErrorCodes.INVALID_OPTION,
        `${OWNER}: the schema uses @${name} (on ${coordinate}) but does not define it: ${fix}`,
      )
    }
  }
}

/** Every SDL node of the schema's types, fields, arguments, input fields and enum values, with its coordinate. */
function* directableNodes(schema: GraphQLSchema): Generator<[string, DirectableNode]> {
  for (const type of Object.values(schema.getTypeMap())) {
    if (type.name.startsWith('__')) continue
    for (const node of [type.astNode, ...type.extensionASTNodes]) if (node) yield [type.name, node]
    if (isEnumType(type)) {
      for (const value of type.getValues()) {
        if (value.astNode) yield [`${type.name}.${value.name}`, value.astNode]
      }
    }
    if (!isObjectType(type) && !isInterfaceType(type) && !isInputObjectType(type)) continue
    for (const field of Object.values(type.getFields())) {
      const coordinate = `${type.name}.${field.name}`
      if (field.astNode) yield [coordinate, field.astNode]
      for (const arg of 'args' in field ? field.args : []) {
        if (arg.astNode) yield [`${coordinate}(${arg.name}:)`, arg.astNode]
      }
    }
  }
}

/** `listSize` in field extensions, like the option, refuses keys it does not know (SDL `@listSize` is graphql's). */
function checkExtensionListSizes(schema: GraphQLSchema): void {
  for (const type of Object.values(schema.getTypeMap())) {
    if (!isObjectType(type) && !isInterfaceType(type)) continue
    for (const field of Object.values(type.getFields())) {
      const listSize = field.extensions?.listSize
      if (listSize === undefined) continue
      checkOptionKeys(OWNER, listSize, LIST_SIZE_OPTIONS, `${type.name}.${field.name}.extensions.listSize`)
    }
  }
}

const COORDINATE =
  /^(\*|[_A-Za-z][_0-9A-Za-z]*)(?:\.([_A-Za-z][_0-9A-Za-z]*)(?:\(([_A-Za-z][_0-9A-Za-z]*):\))?)?$/

function coordinateExists(schema: GraphQLSchema, coordinate: string): boolean {
  const match = COORDINATE.exec(coordinate)
  if (match === null) return false
  const [, typeName = '', fieldName, argName] = match
  if (typeName === '*') {
    // '*.field' names an output field on every type; arguments and input fields are named on their own type.
    if (fieldName === undefined || argName !== undefined) return false
    return Object.values(schema.getTypeMap()).some(
      (type) => (isObjectType(type) || isInterfaceType(type)) && type.getFields()[fieldName] !== undefined,
    )
  }
  const type = schema.getType(typeName)
  if (type == null) return false
  if (fieldName === undefined) return true
  if (!isObjectType(type) && !isInterfaceType(type) && !isInputObjectType(type)) return false
  const field = type.getFields()[fieldName]
  if (field === undefined) return false
  if (argName === undefined) return true
  return 'args' in field && field.args.some((arg) => arg.name === argName)
}
