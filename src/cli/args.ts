import { parseArgs } from 'node:util'
import { didYouMean } from './didYouMean.js'
import { UsageError } from './errors.js'

/** One `--name` option of a command. `--help` (`-h`) and `--version` (`-V`) are added to every command. */
export interface FlagSpec {
  readonly type: 'string' | 'boolean'
  /** Given more than once, a string option collects every value; otherwise the last one wins. */
  readonly multiple?: boolean
  /** Absent, the command line is refused (exit code 2). */
  readonly required?: boolean
  /** The value as usage shows it (`<schema.graphql>`), for messages about this option. */
  readonly placeholder?: string
}

export interface CommandSpec {
  /** As typed after `tollbooth`, for messages. */
  readonly name: string
  readonly flags: Readonly<Record<string, FlagSpec>>
  /** The positional arguments, in order, all required: name → placeholder (`{ query: '<query.graphql>' }`). */
  readonly positionals: Readonly<Record<string, string>>
}

type FlagValue<S extends FlagSpec> = S extends { type: 'boolean' }
  ? boolean
  : S extends { multiple: true }
    ? string[]
    : S extends { required: true }
      ? string
      : string | undefined

/** A parsed command line: run the command with these values, or print its help or the version. */
export type CommandLine<C extends CommandSpec> =
  | { readonly action: 'help' }
  | { readonly action: 'version' }
  | {
      readonly action: 'run'
      readonly flags: { readonly [K in keyof C['flags']]: FlagValue<C['flags'][K]> }
      readonly positionals: { readonly [K in keyof C['positionals']]: string }
    }

const BUILT_IN_FLAGS = {
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'V' },
} as const
// Maps, not objects: a typed `--constructor` must not find Object.prototype's.
const SHORT_FLAGS: ReadonlySet<string> = new Set(['h', 'V'])
const BUILT_IN_SPELLINGS: ReadonlyMap<string, 'help' | 'version'> = new Map([
  ['--help', 'help'],
  ['-h', 'help'],
  ['--version', 'version'],
  ['-V', 'version'],
])

type Token = NonNullable<ReturnType<typeof parseArgs>['tokens']>[number]
type OptionToken = Extract<Token, { kind: 'option' }>

/**
 * Reads a command line against a command's spec, the same way for every command: `--help` / `-h` and `--version`
 * / `-V` win wherever they are (before `--`); otherwise every mistake in the command line's shape throws a
 * `UsageError` naming it (unknown option, with the closest known one; an option without its value or with a value
 * it does not take; a missing required option or argument; an unexpected argument). Values are returned as typed:
 * checking them is the command's job, and its errors are bad input, not bad usage.
 */
export function parseCommandLine<const C extends CommandSpec>(
  spec: C,
  argv: readonly string[],
): CommandLine<C> {
  const flags = { ...spec.flags, ...BUILT_IN_FLAGS } as Record<string, FlagSpec & { short?: string }>
  const { tokens } = parseArgs({
    args: [...argv],
    // Strict parsing would throw Node's own messages; the tokens let each mistake be named here instead.
    strict: false,
    allowPositionals: true,
    tokens: true,
    options: Object.fromEntries(
      Object.entries(flags).map(([name, flag]) => [
        name,
        { type: flag.type, ...(flag.short === undefined ? {} : { short: flag.short }) },
      ]),
    ),
  })
  const options = tokens.filter((token): token is OptionToken => token.kind === 'option')
  const asTyped = (token: OptionToken): string =>
    token.rawName.startsWith('--') ? token.rawName : (argv[token.index] as string)

  for (const token of options) {
    const builtIn = builtInAction(token, asTyped(token))
    if (builtIn !== undefined) return { action: builtIn }
  }

  const values: Record<string, string | string[] | boolean> = {}
  const positionals: string[] = []
  for (const token of tokens) {
    if (token.kind === 'positional') positionals.push(token.value)
    if (token.kind !== 'option') continue
    const typed = asTyped(token)
    const flag = Object.hasOwn(spec.flags, token.name) ? spec.flags[token.name] : undefined
    if (flag === undefined || !isKnownSpelling(token, typed)) throw unknownOption(spec, typed)
    const shown = `--${token.name}`
    if (flag.type === 'boolean') {
      if (token.value !== undefined)
        throw new UsageError(`option ${shown} takes no value, got "${argv[token.index]}"`)
      values[token.name] = true
      continue
    }
    // An option name in the value's place means the value was forgotten: `--schema --json q.graphql`.
    if (
      token.value === undefined ||
      token.value === '' ||
      (!token.inlineValue && token.value.startsWith('--'))
    ) {
      throw new UsageError(`option ${shown} needs a value: ${shown} ${flag.placeholder ?? '<value>'}`)
    }
    if (flag.multiple)
      values[token.name] = [...((values[token.name] as string[] | undefined) ?? []), token.value]
    else values[token.name] = token.value
  }

  for (const [name, flag] of Object.entries(spec.flags)) {
    if (values[name] !== undefined) continue
    if (flag.required) {
      throw new UsageError(`missing the required option --${name} ${flag.placeholder ?? '<value>'}`)
    }
    if (flag.type === 'boolean') values[name] = false
    else if (flag.multiple) values[name] = []
  }

  const expected = Object.entries(spec.positionals)
  if (positionals.length > expected.length) {
    throw new UsageError(`unexpected argument "${positionals[expected.length]}"`)
  }
  const missing = expected[positionals.length]
  if (missing !== undefined) throw new UsageError(`missing the argument ${missing[1]}`)
  const named = Object.fromEntries(expected.map(([name], index) => [name, positionals[index] as string]))

  return { action: 'run', flags: values, positionals: named } as CommandLine<C>
}

/**
 * `--help`, `-h` or a group of only built-in shorts (`-hV`); not an `h` inside a mistyped `-schema`. Also one
 * taken as the value of an option whose value was forgotten (`--schema --help`).
 */
function builtInAction(token: OptionToken, typed: string): 'help' | 'version' | undefined {
  if (token.value !== undefined && !token.inlineValue) return BUILT_IN_SPELLINGS.get(token.value)
  if (token.name !== 'help' && token.name !== 'version') return undefined
  return isKnownSpelling(token, typed) ? token.name : undefined
}

/** Long options are known by name; a short one only in a group made of known shorts alone. */
function isKnownSpelling(token: OptionToken, typed: string): boolean {
  if (token.rawName.startsWith('--')) return true
  return [...typed.slice(1)].every((short) => SHORT_FLAGS.has(short))
}

function unknownOption(spec: CommandSpec, typed: string): UsageError {
  const name = typed.replace(/^--?/, '').replace(/=.*$/s, '')
  const suggestion = didYouMean(name, [...Object.keys(spec.flags), ...Object.keys(BUILT_IN_FLAGS)])
  const option = typed.replace(/=.*$/s, '')
  return new UsageError(
    `unknown option ${option}${suggestion === undefined ? '' : ` (did you mean --${suggestion}?)`}`,
  )
}
