import { describe, expect, it } from 'vitest'
import { type CommandSpec, parseCommandLine } from '../../../src/cli/args.js'
import { UsageError } from '../../../src/cli/errors.js'

const COMMAND = {
  name: 'demo',
  flags: {
    schema: { type: 'string', required: true, placeholder: '<schema.graphql>' },
    pattern: { type: 'string', multiple: true, placeholder: '<name>' },
    limit: { type: 'string', placeholder: '<n>' },
    json: { type: 'boolean' },
  },
  positionals: { query: '<query.graphql>' },
} as const satisfies CommandSpec

function usageError(argv: string[]): string {
  try {
    parseCommandLine(COMMAND, argv)
  } catch (error) {
    expect(error).toBeInstanceOf(UsageError)
    return (error as Error).message
  }
  throw new Error(`accepted: ${argv.join(' ')}`)
}

describe('parseCommandLine', () => {
  it('returns the values as typed, with defaults for what is absent', () => {
    expect(parseCommandLine(COMMAND, ['--schema', 's.graphql', 'q.graphql'])).toEqual({
      action: 'run',
      flags: { schema: 's.graphql', pattern: [], limit: undefined, json: false },
      positionals: { query: 'q.graphql' },
    })
  })

  it('collects a repeatable option, keeps the last of another, reads --name=value and what follows --', () => {
    expect(
      parseCommandLine(COMMAND, [
        '--pattern=a',
        '--schema',
        'one',
        '--pattern',
        'b',
        '--schema=two',
        '--json',
        '--',
        '--query-named-like-an-option',
      ]),
    ).toEqual({
      action: 'run',
      flags: { schema: 'two', pattern: ['a', 'b'], limit: undefined, json: true },
      positionals: { query: '--query-named-like-an-option' },
    })
  })

  it('takes a value that starts with one dash (a negative number is for the command to refuse)', () => {
    const parsed = parseCommandLine(COMMAND, ['--schema', 's', 'q', '--limit', '-1'])
    expect(parsed.action === 'run' && parsed.flags.limit).toBe('-1')
  })

  it('answers --help and --version wherever they are, before any other check', () => {
    expect(parseCommandLine(COMMAND, ['--unknown', '-h'])).toEqual({ action: 'help' })
    expect(parseCommandLine(COMMAND, ['--help'])).toEqual({ action: 'help' })
    expect(parseCommandLine(COMMAND, ['q', '--version'])).toEqual({ action: 'version' })
    expect(parseCommandLine(COMMAND, ['-V'])).toEqual({ action: 'version' })
    expect(parseCommandLine(COMMAND, ['-Vh'])).toEqual({ action: 'version' })
    // A value in the place of a forgotten one still asks for help.
    expect(parseCommandLine(COMMAND, ['--schema', '--help'])).toEqual({ action: 'help' })
    expect(parseCommandLine(COMMAND, ['--schema', 'toString', 'q']).action).toBe('run')
    // After --, it is an argument.
    expect(usageError(['--schema', 's', '--', '--help', 'q'])).toBe('unexpected argument "q"')
  })

  it('names an unknown option, with the closest known one', () => {
    expect(usageError(['--shema', 's', 'q'])).toBe('unknown option --shema (did you mean --schema?)')
    expect(usageError(['--sch=s', 'q'])).toBe('unknown option --sch (did you mean --schema?)')
    expect(usageError(['--verison'])).toBe('unknown option --verison (did you mean --version?)')
    expect(usageError(['--nothing-like-it'])).toBe('unknown option --nothing-like-it')
    expect(usageError(['-x'])).toBe('unknown option -x')
    // One dash before a long name: not the -h inside it.
    expect(usageError(['-schema', 's', 'q'])).toBe('unknown option -schema (did you mean --schema?)')
    expect(usageError(['-hx'])).toBe('unknown option -hx')
    expect(usageError(['--constructor', 'x'])).toBe('unknown option --constructor')
  })

  it('refuses an option without its value, or with a value it does not take', () => {
    expect(usageError(['q', '--schema'])).toBe('option --schema needs a value: --schema <schema.graphql>')
    expect(usageError(['--schema=', 'q'])).toBe('option --schema needs a value: --schema <schema.graphql>')
    expect(usageError(['--schema', '--json', 'q'])).toBe(
      'option --schema needs a value: --schema <schema.graphql>',
    )
    expect(usageError(['--schema', 's', 'q', '--json=yes'])).toBe(
      'option --json takes no value, got "--json=yes"',
    )
  })

  it('refuses a missing required option, a missing argument and an extra one', () => {
    expect(usageError(['q'])).toBe('missing the required option --schema <schema.graphql>')
    expect(usageError(['--schema', 's'])).toBe('missing the argument <query.graphql>')
    expect(usageError(['--schema', 's', 'q', 'r'])).toBe('unexpected argument "r"')
  })
})
