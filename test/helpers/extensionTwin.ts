/**
 * The code-first twin of a schema annotated in SDL: every `@cost` / `@listSize` moved onto the element's
 * `extensions.cost` / `extensions.listSize`, the way a code-first schema carries them, through graphql-js configs
 * (`toConfig()`). The twin keeps no AST and does not define the two directives, so nothing can read them from SDL.
 */
import {
  type ASTNode,
  type DirectiveNode,
  type GraphQLArgumentConfig,
  type GraphQLDirective,
  GraphQLEnumType,
  type GraphQLFieldConfig,
  type GraphQLFieldConfigArgumentMap,
  type GraphQLFieldConfigMap,
  type GraphQLInputFieldConfig,
  type GraphQLInputFieldConfigMap,
  GraphQLInputObjectType,
  GraphQLInterfaceType,
  GraphQLList,
  type GraphQLNamedType,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLScalarType,
  GraphQLSchema,
  type GraphQLType,
  GraphQLUnionType,
  getDirectiveValues,
  isEnumType,
  isInputObjectType,
  isInterfaceType,
  isListType,
  isNonNullType,
  isObjectType,
  isScalarType,
  isSpecifiedScalarType,
  isUnionType,
} from 'graphql'

type Extensions = Readonly<Record<string, unknown>> | null | undefined
type Directable = Parameters<typeof getDirectiveValues>[1]

/** The code-first twin of `schema`, with its `@cost` / `@listSize` uses in extensions instead. */
export function extensionTwin(schema: GraphQLSchema): GraphQLSchema {
  const cost = schema.getDirective('cost')
  const listSize = schema.getDirective('listSize')
  const twins = new Map<string, GraphQLNamedType>()

  /** `extensions` with `cost` (a number, as extensions take it) and `listSize` from the first node carrying them. */
  const moved = (
    extensions: Extensions,
    nodes: readonly (Directable | null | undefined)[],
    sized: Directable | null | undefined = undefined,
  ): Record<string, unknown> => {
    const result: Record<string, unknown> = { ...extensions }
    for (const node of nodes) {
      const values = node == null || cost == null ? undefined : getDirectiveValues(cost, node)
      if (values !== undefined) {
        // The IBM spec declares `weight: String!`: a number in extensions.
        result.cost = { weight: Number(values.weight) }
        break
      }
    }
    const size = sized == null || listSize == null ? undefined : getDirectiveValues(listSize, sized)
    if (size !== undefined) result.listSize = { ...size }
    return result
  }

  const named = <T extends GraphQLNamedType>(type: T): T =>
    isSpecifiedScalarType(type) ? type : (twins.get(type.name) as T)
  const wrapped = <T extends GraphQLType>(type: T): T => {
    if (isListType(type)) return new GraphQLList(wrapped(type.ofType)) as T
    if (isNonNullType(type)) return new GraphQLNonNull(wrapped(type.ofType)) as T
    return named(type as GraphQLNamedType) as T
  }
  const args = (map: GraphQLFieldConfigArgumentMap): GraphQLFieldConfigArgumentMap =>
    mapValues(
      map,
      (arg): GraphQLArgumentConfig => ({
        ...arg,
        type: wrapped(arg.type),
        astNode: undefined,
        extensions: moved(arg.extensions, [arg.astNode]),
      }),
    )
  const fields = (map: GraphQLFieldConfigMap<unknown, unknown>): GraphQLFieldConfigMap<unknown, unknown> =>
    mapValues(
      map,
      (field): GraphQLFieldConfig<unknown, unknown> => ({
        ...field,
        type: wrapped(field.type),
        args: field.args === undefined ? undefined : args(field.args),
        astNode: undefined,
        extensions: moved(field.extensions, [field.astNode], field.astNode),
      }),
    )
  const inputFields = (map: GraphQLInputFieldConfigMap): GraphQLInputFieldConfigMap =>
    mapValues(
      map,
      (field): GraphQLInputFieldConfig => ({
        ...field,
        type: wrapped(field.type),
        astNode: undefined,
        extensions: moved(field.extensions, [field.astNode]),
      }),
    )
  const typeExtensions = (type: GraphQLNamedType) =>
    moved(type.extensions, [type.astNode, ...type.extensionASTNodes])
  const bare = { astNode: undefined, extensionASTNodes: [] }

  for (const type of Object.values(schema.getTypeMap())) {
    if (type.name.startsWith('__') || isSpecifiedScalarType(type)) continue
    let twin: GraphQLNamedType
    if (isObjectType(type)) {
      const config = type.toConfig()
      twin = new GraphQLObjectType({
        ...config,
        ...bare,
        extensions: typeExtensions(type),
        interfaces: () => config.interfaces.map(named),
        fields: () => fields(config.fields),
      })
    } else if (isInterfaceType(type)) {
      const config = type.toConfig()
      twin = new GraphQLInterfaceType({
        ...config,
        ...bare,
        extensions: typeExtensions(type),
        interfaces: () => config.interfaces.map(named),
        fields: () => fields(config.fields),
      })
    } else if (isUnionType(type)) {
      const config = type.toConfig()
      twin = new GraphQLUnionType({
        ...config,
        ...bare,
        extensions: typeExtensions(type),
        types: () => config.types.map(named),
      })
    } else if (isEnumType(type)) {
      const config = type.toConfig()
      twin = new GraphQLEnumType({
        ...config,
        ...bare,
        extensions: typeExtensions(type),
        values: mapValues(config.values, (value) => ({ ...value, astNode: undefined })),
      })
    } else if (isInputObjectType(type)) {
      const config = type.toConfig()
      twin = new GraphQLInputObjectType({
        ...config,
        ...bare,
        extensions: typeExtensions(type),
        fields: () => inputFields(config.fields),
      })
    } else if (isScalarType(type)) {
      twin = new GraphQLScalarType({ ...type.toConfig(), ...bare, extensions: typeExtensions(type) })
    } else {
      throw new Error(`extensionTwin: a named type of no known kind, ${String(type)}`)
    }
    twins.set(type.name, twin)
  }

  const config = schema.toConfig()
  const root = (type: GraphQLObjectType | null | undefined) => (type == null ? type : named(type))
  return new GraphQLSchema({
    ...config,
    ...bare,
    query: root(config.query),
    mutation: root(config.mutation),
    subscription: root(config.subscription),
    types: [...twins.values()],
    directives: config.directives.filter((directive) => !isCostDirective(directive)),
  })
}

function isCostDirective(directive: GraphQLDirective): boolean {
  return directive.name === 'cost' || directive.name === 'listSize'
}

function mapValues<T, U>(map: Readonly<Record<string, T>>, fn: (value: T) => U): Record<string, U> {
  return Object.fromEntries(Object.entries(map).map(([key, value]) => [key, fn(value)]))
}

/** One schema element that can carry a cost: its coordinate, extensions and SDL nodes. */
export interface CostElement {
  readonly coordinate: string
  readonly extensions: Extensions
  readonly nodes: readonly ASTNode[]
}

/** Every type, field, argument, input field and enum value of the schema (introspection types aside). */
export function* costElements(schema: GraphQLSchema): Generator<CostElement> {
  for (const type of Object.values(schema.getTypeMap())) {
    if (type.name.startsWith('__')) continue
    yield element(type.name, type.extensions, [type.astNode, ...type.extensionASTNodes])
    if (isEnumType(type)) {
      for (const value of type.getValues()) {
        yield element(`${type.name}.${value.name}`, value.extensions, [value.astNode])
      }
    }
    if (!isObjectType(type) && !isInterfaceType(type) && !isInputObjectType(type)) continue
    for (const field of Object.values(type.getFields())) {
      const coordinate = `${type.name}.${field.name}`
      yield element(coordinate, field.extensions, [field.astNode])
      for (const arg of 'args' in field ? field.args : []) {
        yield element(`${coordinate}(${arg.name}:)`, arg.extensions, [arg.astNode])
      }
    }
  }
}

function element(coordinate: string, extensions: Extensions, nodes: readonly (ASTNode | null | undefined)[]) {
  return { coordinate, extensions, nodes: nodes.filter((node): node is ASTNode => node != null) }
}

/** `@cost` / `@listSize` uses in SDL, as `coordinate @name`. */
export function directiveUses(schema: GraphQLSchema): string[] {
  const uses = new Set<string>()
  for (const { coordinate, nodes } of costElements(schema)) {
    for (const node of nodes) {
      const directives = (node as { directives?: readonly DirectiveNode[] }).directives ?? []
      for (const directive of directives) {
        if (directive.name.value === 'cost' || directive.name.value === 'listSize') {
          uses.add(`${coordinate} @${directive.name.value}`)
        }
      }
    }
  }
  return [...uses]
}

/** `extensions.cost` / `extensions.listSize` in the schema, as `coordinate @cost` / `coordinate @listSize`. */
export function extensionUses(schema: GraphQLSchema): string[] {
  const uses: string[] = []
  for (const { coordinate, extensions } of costElements(schema)) {
    if (extensions?.cost !== undefined) uses.push(`${coordinate} @cost`)
    if (extensions?.listSize !== undefined) uses.push(`${coordinate} @listSize`)
  }
  return uses
}
