#!/usr/bin/env node
/**
 * `tollbooth` — command-line tools for tuning limits:
 *   tollbooth cost --schema schema.graphql query.graphql [--variables vars.json] [--config tollbooth.config.js] [--json]
 *   tollbooth simulate [--pattern NAME | --pattern-file FILE] [--out chart.svg] [--json]
 */

const USAGE = `Usage:
  tollbooth cost --schema <schema.graphql> <query.graphql> [--variables <vars.json>] [--config <config.js>] [--json]
  tollbooth simulate [--pattern <name> | --pattern-file <file.json>] [--out <chart.svg>] [--json]
`

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv
  // Each command loads only what it needs.
  if (command === 'cost') return (await import('./cost.js')).runCost(rest, process)
  if (command === 'simulate') return (await import('./simulate.js')).runSimulate(rest, process)
  process.stderr.write(
    command === undefined || command === '--help' || command === '-h'
      ? USAGE
      : `Unknown command "${command}".\n${USAGE}`,
  )
  return command === undefined || command === '--help' || command === '-h' ? 0 : 2
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code
  },
  (error: unknown) => {
    process.stderr.write(`tollbooth: ${error instanceof Error ? error.message : String(error)}\n`)
    process.exitCode = 1
  },
)
