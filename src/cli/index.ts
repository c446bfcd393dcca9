#!/usr/bin/env node
/**
 * `tollbooth` — command-line tools for tuning limits. Dispatches to a command; every command reads its command
 * line through args.ts and reports failures through errors.ts, so help, version, messages and exit codes agree.
 */
import { didYouMean } from './didYouMean.js'
import {
  EXIT_BAD_INPUT,
  EXIT_BAD_USAGE,
  EXIT_CODES_HELP,
  EXIT_OK,
  reportFailure,
  UsageError,
} from './errors.js'
import type { CliIo } from './io.js'
import { packageVersion } from './version.js'

/** Each command is loaded only when it runs: `cost` needs graphql, `simulate` does not. */
const COMMANDS: ReadonlyMap<string, () => Promise<(argv: string[], io: CliIo) => Promise<number>>> = new Map([
  ['cost', async () => (await import('./cost.js')).runCost],
  ['simulate', async () => (await import('./simulate.js')).runSimulate],
])

const USAGE = `Usage: tollbooth <command> [options]

Commands:
  cost        price a query the way useTollbooth charges it, with a per-field breakdown
  simulate    replay traffic patterns against the four rate-limiting algorithms and chart them
  help [cmd]  show this help, or a command's

Options:
  -h, --help     show this help ("tollbooth <command> --help" for a command's options)
  -V, --version  print the version

${EXIT_CODES_HELP}`

async function main(argv: string[], io: CliIo): Promise<number> {
  const [first, ...rest] = argv
  try {
    if (first === undefined) {
      // No command is bad usage; the usage says what the commands are.
      io.stderr.write(USAGE)
      return EXIT_BAD_USAGE
    }
    if (first === '--help' || first === '-h') {
      io.stdout.write(USAGE)
      return EXIT_OK
    }
    if (first === '--version' || first === '-V') {
      io.stdout.write(`${await packageVersion()}\n`)
      return EXIT_OK
    }
    if (first === 'help') return await help(rest, io)
    const command = COMMANDS.get(first)
    if (command !== undefined) return await (await command())(rest, io)
    throw unknown(first)
  } catch (error) {
    return reportFailure('', error, io)
  }
}

/** `tollbooth help` prints this usage; `tollbooth help <command>` is `tollbooth <command> --help`. */
async function help(argv: readonly string[], io: CliIo): Promise<number> {
  const [topic, extra] = argv
  if (extra !== undefined) throw new UsageError(`unexpected argument "${extra}"`)
  if (topic === undefined) {
    io.stdout.write(USAGE)
    return EXIT_OK
  }
  const command = COMMANDS.get(topic)
  if (command === undefined) throw unknown(topic)
  return (await command())(['--help'], io)
}

function unknown(typed: string): UsageError {
  const option = typed.startsWith('-')
  const name = option ? typed.replace(/^--?/, '').replace(/=.*$/s, '') : typed
  const suggestion = didYouMean(name, option ? ['help', 'version'] : [...COMMANDS.keys(), 'help'])
  const hint = suggestion === undefined ? '' : ` (did you mean ${option ? '--' : ''}${suggestion}?)`
  return new UsageError(`unknown ${option ? 'option' : 'command'} ${typed.replace(/=.*$/s, '')}${hint}`)
}

main(process.argv.slice(2), process).then(
  (code) => {
    process.exitCode = code
  },
  (error: unknown) => {
    // Not a usage or input error: a bug. Its stack is what a report needs.
    process.stderr.write(
      `tollbooth: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    )
    process.exitCode = EXIT_BAD_INPUT
  },
)
