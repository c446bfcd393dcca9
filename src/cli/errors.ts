import type { CliIo } from './io.js'

/**
 * The exit codes every `tollbooth` command uses. 2 is decided by the command line's shape alone, before any file
 * is opened or value checked; 1 is everything wrong with what the command line points at or says.
 */
export const EXIT_OK = 0
export const EXIT_BAD_INPUT = 1
export const EXIT_BAD_USAGE = 2

/** The exit-code section of every usage text, so each command documents the same rule. */
export const EXIT_CODES_HELP = `Exit codes:
  0  success
  1  bad input: a file that does not exist or cannot be read or parsed, an invalid schema, query, variables,
     config or pattern, an option value that is invalid or out of range
  2  bad usage: an unknown command or option, a missing required option or argument, an option without its
     value, an unexpected argument
`

/** A command-line mistake (exit code 2): printed with a pointer to the command's --help. */
export class UsageError extends Error {
  override name = 'UsageError'
}

/** Something the command line points at or says is wrong (exit code 1): printed as is. */
export class InputError extends Error {
  override name = 'InputError'
}

/**
 * Prints a command's failure as one line, `tollbooth <command>: <message>` (a usage error adds a pointer to
 * --help), and returns its exit code. Anything else is a bug and is rethrown, so it keeps its stack.
 */
export function reportFailure(command: string, error: unknown, io: CliIo): number {
  const prefix = command === '' ? 'tollbooth' : `tollbooth ${command}`
  if (error instanceof UsageError) {
    io.stderr.write(`${prefix}: ${error.message}\nRun "${prefix} --help" for usage.\n`)
    return EXIT_BAD_USAGE
  }
  if (error instanceof InputError) {
    io.stderr.write(`${prefix}: ${error.message}\n`)
    return EXIT_BAD_INPUT
  }
  throw error
}
