import { readFileSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { dirname, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import {
  buildASTSchema,
  concatAST,
  type DocumentNode,
  GraphQLError,
  GraphQLSchema,
  Kind,
  parse,
  Source,
  specifiedRules,
  validate,
  validateSchema,
} from 'graphql'
import { nonNegativeInteger } from '../core/validate.js'
import {
  type CostAnalysisOptions,
  CostAnalyzer,
  costAnalysisOptions,
  selectOperation,
} from '../graphql/cost/costAnalyzer.js'
import type { CostExplanation, FieldExplanation } from '../graphql/cost/explain.js'
import { checkTollboothOptionKeys } from '../graphql/engine/resolveOptions.js'
import { costDirectivesTypeDefs } from '../graphql/index.js'
import { GRAPHQL_OPTIONS_OWNER } from '../graphql/optionsOwner.js'
import type { TollboothGraphQLOptions } from '../graphql/optionTypes.js'
import { type CommandLine, type CommandSpec, parseCommandLine } from './args.js'
import { EXIT_CODES_HELP, EXIT_OK, InputError, reportFailure } from './errors.js'
import type { CliIo } from './io.js'
import { packageVersion } from './version.js'

/** The command line `tollbooth cost` takes. */
const COST_COMMAND = {
  name: 'cost',
  flags: {
    schema: { type: 'string', required: true, placeholder: '<schema.graphql>' },
    variables: { type: 'string', placeholder: '<vars.json>' },
    operation: { type: 'string', placeholder: '<name>' },
    config: { type: 'string', placeholder: '<config.js|.mjs|.json>' },
    json: { type: 'boolean' },
  },
  positionals: { query: '<query.graphql>' },
} as const satisfies CommandSpec

type CostFlags = Extract<CommandLine<typeof COST_COMMAND>, { action: 'run' }>['flags']

export const COST_USAGE = `Usage: tollbooth cost --schema <schema.graphql> <query.graphql> [options]

Prices a query the way useTollbooth charges it (the same analyzer, the same options) and prints the total with
a per-field breakdown: each field's weight, its list multiplier and where that size came from.

Options:
  --schema <schema.graphql>   the schema (required): its SDL, where the cost directives it uses without
                              declaring them are added; or a .js, .mjs or .cjs module (.ts, .mts, .cts under
                              a TypeScript loader) exporting a GraphQLSchema built in code (as its default
                              export or as "schema", or a function returning one), whose extensions.cost and
                              extensions.listSize are read
  --variables <vars.json>     the operation's variables, a JSON object
  --operation <name>          the operation to price, when the document holds several
  --config <file>             the cost options given to useTollbooth: a .js or .mjs module's default export,
                              or a .json file
  --json                      print the breakdown as JSON
  -h, --help                  show this help
  -V, --version               print the version

${EXIT_CODES_HELP}`

/**
 * `tollbooth cost`: prices a query exactly as `useTollbooth` would charge it (same analyzer, same options) and
 * prints the total with a per-field breakdown. Exit codes as in `EXIT_CODES_HELP`.
 */
export async function runCost(argv: string[], io: CliIo): Promise<number> {
  try {
    const commandLine = parseCommandLine(COST_COMMAND, argv)
    if (commandLine.action === 'help') {
      io.stdout.write(COST_USAGE)
      return EXIT_OK
    }
    if (commandLine.action === 'version') {
      io.stdout.write(`${await packageVersion()}\n`)
      return EXIT_OK
    }
    io.stdout.write(await price(commandLine.flags, commandLine.positionals.query))
    return EXIT_OK
  } catch (error) {
    return reportFailure(COST_COMMAND.name, error, io)
  }
}

/** The priced query, as text or JSON. Every failure past the command line is bad input (exit code 1). */
async function price(values: CostFlags, queryFile: string): Promise<string> {
  try {
    const options = values.config === undefined ? {} : await loadConfig(values.config)
    const schema = await loadSchema(values.schema)
    const document = await loadQuery(queryFile, schema)
    const variables = values.variables === undefined ? {} : await loadVariables(values.variables)
    if (selectOperation(document, values.operation) === undefined) {
      throw new InputError(
        values.operation === undefined
          ? `${queryFile}: the document holds several operations; pick one with --operation <name>`
          : `${queryFile}: no operation named "${values.operation}"`,
      )
    }
    const analyzer = new CostAnalyzer(costAnalysisOptions(options))
    let explanation: CostExplanation
    try {
      explanation = analyzer.explain({ schema, document, operationName: values.operation, variables })
    } catch (error) {
      // graphql-js words every refused variable `Variable "$name" …`; anything else is the query's (a field no
      // estimator prices, a cost that is not a finite number).
      if (error instanceof GraphQLError) {
        const about = error.message.startsWith('Variable "$') ? (values.variables ?? 'variables') : queryFile
        throw new InputError(`${about}: ${error.message}`)
      }
      throw error
    }
    // What the plugin charges: never less than minCost.
    const minCost = nonNegativeInteger(GRAPHQL_OPTIONS_OWNER, 'minCost', options.minCost ?? 1)
    const charged = Math.max(explanation.total, minCost)
    if (values.json) return `${JSON.stringify({ ...explanation, charged }, null, 2)}\n`
    const text = formatExplanation(explanation, charged)
    // graphql-query-complexity answers a total only.
    return options.estimators === undefined
      ? text
      : `${text}  (priced by the estimators of ${values.config}: no breakdown per field)\n`
  } catch (error) {
    // The options' own validation (a cost or a list size out of range) is bad input too.
    if (error instanceof InputError) throw error
    throw new InputError(error instanceof Error ? error.message : String(error))
  }
}

async function readText(file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8')
  } catch (error) {
    throw new InputError(
      `${file}: ${(error as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (error as Error).message}`,
    )
  }
}

/** A module (`--schema schema.mjs`) holds a schema built in code; any other file is SDL. */
const SCHEMA_MODULE = /\.(?:js|mjs|cjs|ts|mts|cts)$/
/** TypeScript, which Node 20 does not load by itself. */
const TYPESCRIPT_MODULE = /\.(?:ts|mts|cts)$/

/**
 * Builds the schema. The definitions of tollbooth's directives the SDL does not declare itself are added (so a schema
 * written for `costDirectivesTypeDefs` prices as the plugin does), as a document of their own: the positions of
 * errors stay those of the file.
 */
async function loadSchema(file: string): Promise<GraphQLSchema> {
  if (SCHEMA_MODULE.test(file)) return loadSchemaModule(file)
  const sdl = await readText(file)
  try {
    const document = parse(new Source(sdl, file))
    const declared = new Set(
      document.definitions.flatMap((definition) =>
        definition.kind === Kind.DIRECTIVE_DEFINITION ? [definition.name.value] : [],
      ),
    )
    const added = COST_DIRECTIVES.definitions.filter(
      (definition) => definition.kind === Kind.DIRECTIVE_DEFINITION && !declared.has(definition.name.value),
    )
    const withDirectives = concatAST([document, { kind: Kind.DOCUMENT, definitions: added }])
    const errors = await sdlErrors(withDirectives)
    if (errors.length > 0) throw new InputError(errors.map((error) => located(file, error)).join('\n'))
    return buildASTSchema(withDirectives)
  } catch (error) {
    if (error instanceof InputError) throw error
    throw new InputError(located(file, error))
  }
}

/**
 * The GraphQLSchema a module exports: its export named `schema`, else its default export; a function is called
 * (without arguments) and a promise awaited, for modules that build their schema at startup (NestJS, say).
 */
async function loadSchemaModule(file: string): Promise<GraphQLSchema> {
  const url = pathToFileURL(resolve(file))
  let exported: unknown
  let called = false
  try {
    const module = (await import(url.href)) as { schema?: unknown; default?: unknown }
    exported = module.schema !== undefined ? module.schema : module.default
    called = typeof exported === 'function'
    exported = await (called ? (exported as () => unknown)() : exported)
  } catch (error) {
    if (error instanceof InputError) throw error
    if (
      TYPESCRIPT_MODULE.test(file) &&
      (error as NodeJS.ErrnoException).code === 'ERR_UNKNOWN_FILE_EXTENSION'
    ) {
      throw new InputError(
        `${file}: Node does not load TypeScript by itself: give the compiled .js, or run the CLI with a loader (npx tsx node_modules/tollbooth/dist/cli/index.js cost …)`,
      )
    }
    throw new InputError(`${file}: could not be loaded (${(error as Error).message})`)
  }
  if (exported instanceof GraphQLSchema) {
    const errors = validateSchema(exported)
    if (errors.length > 0) {
      throw new InputError(
        `${file}: the schema it exports is invalid: ${errors.map((e) => e.message).join('; ')}`,
      )
    }
    return exported
  }
  if (Object.prototype.toString.call(exported) === '[object GraphQLSchema]') {
    throw new InputError(`${file}: ${otherGraphql(url)}`)
  }
  throw new InputError(
    `${file}: must export a GraphQLSchema (as its default export or as "schema", or a function returning one), ` +
      `found ${called ? `a function returning ${described(exported, 'undefined')}` : described(exported)}`,
  )
}

/**
 * A GraphQLSchema of another copy of graphql than tollbooth's: graphql-js refuses to read a schema across copies
 * (its `instanceof` checks fail), and rebuilding it from its printed SDL would lose its extensions.
 */
function otherGraphql(module: URL): string {
  const ours = graphqlCopy(import.meta.url)
  const theirs = graphqlCopy(module.href)
  const copies =
    ours === undefined || theirs === undefined
      ? ''
      : ours === theirs
        ? ` (${ours}, loaded twice: its ESM index.mjs and its CommonJS index.js are two copies)`
        : ` (${theirs}, not ${ours})`
  return (
    `its schema was built with another copy of graphql than the one tollbooth uses${copies}; ` +
    'graphql cannot read a schema across copies: install one graphql for both (npm dedupe), or run the ' +
    'tollbooth installed next to the schema'
  )
}

/** `graphql@16.9.0 at /app/node_modules/graphql`: the graphql a file resolves, if it resolves one. */
function graphqlCopy(from: string): string | undefined {
  try {
    const entry = createRequire(from).resolve('graphql')
    const dir = dirname(entry)
    const { version } = JSON.parse(readFileSync(resolve(dir, 'package.json'), 'utf8')) as { version?: string }
    return `graphql@${version ?? '?'} at ${dir}`
  } catch {
    return undefined
  }
}

function described(value: unknown, nothing = 'no default export and no export named "schema"'): string {
  if (value === undefined) return nothing
  if (value === null) return 'null'
  if (typeof value !== 'object') return `a ${typeof value}`
  const name = (value as { constructor?: { name?: unknown } }).constructor?.name
  return typeof name === 'string' && name !== 'Object' ? `an object of class ${name}` : 'an object'
}

/** `@cost`, `@listSize` and `@rateLimit`, as `costDirectivesTypeDefs` defines them. */
const COST_DIRECTIVES = parse(costDirectivesTypeDefs)

/**
 * The SDL's errors with their locations. `buildASTSchema` reports them joined in one message without locations;
 * graphql-js's `validateSDL` has them, from a module path that is not part of its public index (hence the guard:
 * without it, the joined message is still reported).
 */
async function sdlErrors(document: DocumentNode): Promise<readonly GraphQLError[]> {
  try {
    const { validateSDL } = (await import('graphql/validation/validate.js')) as {
      validateSDL: (document: DocumentNode) => readonly GraphQLError[]
    }
    return validateSDL(document)
  } catch {
    return []
  }
}

async function loadQuery(file: string, schema: GraphQLSchema): Promise<DocumentNode> {
  const text = await readText(file)
  let document: DocumentNode
  try {
    document = parse(new Source(text, file))
  } catch (error) {
    throw new InputError(located(file, error))
  }
  const errors = validate(schema, document, specifiedRules)
  if (errors.length > 0) throw new InputError(errors.map((error) => located(file, error)).join('\n'))
  return document
}

async function loadVariables(file: string): Promise<Record<string, unknown>> {
  const text = await readText(file)
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (error) {
    throw new InputError(`${file}: not valid JSON (${(error as Error).message})`)
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new InputError(`${file}: variables must be a JSON object`)
  }
  return value as Record<string, unknown>
}

/**
 * The cost options of the plugin (`costs`, `defaultListSize`, `mutationCost`, …) from a module's default
 * export or a JSON file: the same object you pass to `useTollbooth`, so the price printed is the price charged.
 */
async function loadConfig(
  file: string,
): Promise<CostAnalysisOptions & Pick<TollboothGraphQLOptions, 'minCost'>> {
  let config: unknown
  if (file.endsWith('.json')) {
    try {
      config = JSON.parse(await readText(file))
    } catch (error) {
      if (error instanceof InputError) throw error
      throw new InputError(`${file}: not valid JSON (${(error as Error).message})`)
    }
  } else {
    try {
      const module = (await import(pathToFileURL(resolve(file)).href)) as { default?: unknown }
      config = module.default
    } catch (error) {
      throw new InputError(`${file}: could not be loaded (${(error as Error).message})`)
    }
  }
  if (config === null || typeof config !== 'object' || Array.isArray(config)) {
    const found = Array.isArray(config) ? 'an array' : described(config, 'no default export')
    throw new InputError(
      `${file}: must export (default) an object of useTollbooth cost options, found ${found}`,
    )
  }
  // The object useTollbooth gets: its other keys (limiter, limits, …) are allowed here, and unknown ones refused.
  try {
    checkTollboothOptionKeys(config as TollboothGraphQLOptions)
  } catch (error) {
    throw new InputError(`${file}: ${(error as Error).message}`)
  }
  return config as CostAnalysisOptions & Pick<TollboothGraphQLOptions, 'minCost'>
}

/** `file:line:column: message` for a GraphQL error, as editors link it. */
function located(file: string, error: unknown): string {
  if (!(error instanceof GraphQLError)) return `${file}: ${(error as Error).message}`
  const location = error.locations?.[0]
  return location === undefined
    ? `${file}: ${error.message}`
    : `${file}:${location.line}:${location.column}: ${error.message}`
}

/** The breakdown as an indented tree, one field per line, with the arithmetic behind each number. */
export function formatExplanation(explanation: CostExplanation, charged = explanation.total): string {
  const lines = [`total cost: ${explanation.total}`]
  if (charged !== explanation.total) lines.push(`charged: ${charged} (every operation pays at least minCost)`)
  const write = (fields: readonly FieldExplanation[], depth: number): void => {
    for (const field of fields) {
      lines.push(
        `${'  '.repeat(depth + 1)}${field.parentType}.${field.field}  ${field.total}${arithmetic(field)}`,
      )
      write(field.children, depth + 1)
    }
  }
  write(explanation.fields, 0)
  return `${lines.join('\n')}\n`
}

function arithmetic(field: FieldExplanation): string {
  if (field.total === 0) return ''
  const inner = field.childrenCost > 0 ? `(${field.weight} + ${field.childrenCost})` : `${field.weight}`
  let text =
    field.multiplier === 0
      ? `${field.weight} (a list of size 0: its weight once)`
      : field.multiplier === 1
        ? inner
        : `${field.multiplier} × ${inner}`
  if (field.argumentsCost > 0) text += ` + ${field.argumentsCost} arguments`
  if (field.mutationCost > 0) text += ` + ${field.mutationCost} mutation`
  const source = field.sizeSource === undefined ? '' : `  [size: ${field.sizeSource}]`
  return `  = ${text}${source}`
}
