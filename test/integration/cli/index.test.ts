/**
 * What every `tollbooth` command shares, through the built bin in a process of its own: help and version, the
 * exit codes (0 success, 1 bad input, 2 bad usage) and one clean line for a mistake, with the closest name.
 */
import { execFile } from 'node:child_process'
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { REPO_ROOT, tollbooth } from './bin.js'

const run = promisify(execFile)
const FIXTURES = 'test/fixtures/cost'
const SCHEMA = `${FIXTURES}/schema.graphql`
const QUERY = `${FIXTURES}/query.graphql`

const { version } = JSON.parse(await readFile(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }

/** What a usage error prints: the mistake, then where the options are. */
function usageError(command: string, message: string): string {
  const prefix = command === '' ? 'tollbooth' : `tollbooth ${command}`
  return `${prefix}: ${message}\nRun "${prefix} --help" for usage.\n`
}

let dir: string
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tollbooth-cli-'))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

describe('tollbooth --help', () => {
  it('prints the commands and the exit codes on stdout, and exits 0, however it is asked', async () => {
    const runs = await Promise.all([['--help'], ['-h'], ['help']].map((args) => tollbooth(args)))
    for (const result of runs) {
      expect(result.code).toBe(0)
      expect(result.stderr).toBe('')
      expect(result.stdout).toBe(runs[0]?.stdout)
    }
    const { stdout } = runs[0] as { stdout: string }
    expect(stdout.startsWith('Usage: tollbooth <command> [options]\n')).toBe(true)
    expect(stdout).toMatch(/^ {2}cost {8}price a query/m)
    expect(stdout).toMatch(/^ {2}simulate {4}replay traffic patterns/m)
    expect(stdout).toContain('Exit codes:\n  0  success\n  1  bad input: ')
    expect(stdout).toMatch(/^ {2}2 {2}bad usage: an unknown command or option/m)
  })

  it('without a command, prints the same usage on stderr and exits 2', async () => {
    const help = await tollbooth(['--help'])
    expect(await tollbooth([])).toEqual({ code: 2, stdout: '', stderr: help.stdout })
  })

  it.each([
    ['cost', 'Usage: tollbooth cost --schema <schema.graphql> <query.graphql> [options]\n'],
    ['simulate', 'Usage: tollbooth simulate [options]\n'],
  ])(
    '%s: --help, -h and "tollbooth help %s" print its usage with the exit codes and exit 0',
    async (command, first) => {
      const runs = await Promise.all(
        [
          [command, '--help'],
          [command, '-h'],
          ['help', command],
          [command, '--no-such-flag', '--help'],
        ].map((args) => tollbooth(args)),
      )
      for (const result of runs) {
        expect(result.code).toBe(0)
        expect(result.stderr).toBe('')
        expect(result.stdout).toBe(runs[0]?.stdout)
      }
      const { stdout } = runs[0] as { stdout: string }
      expect(stdout.startsWith(first)).toBe(true)
      expect(stdout).toMatch(/^ {2}-h, --help +show this help$/m)
      expect(stdout).toMatch(/^ {2}-V, --version +print the version$/m)
      expect(stdout).toContain('Exit codes:\n  0  success\n  1  bad input: ')
      expect(stdout).toMatch(/^ {2}2 {2}bad usage: /m)
    },
  )
})

describe('tollbooth --version', () => {
  it("prints package.json's version and exits 0, at the top and in each command, from any directory", async () => {
    const asked = [
      ['--version'],
      ['-V'],
      ['cost', '--version'],
      ['cost', '-V'],
      ['simulate', '--version'],
      ['simulate', '-V'],
      // It wins over the rest of the command line, as --help does.
      ['cost', '--schema', 'nope.graphql', 'nope.graphql', '--version'],
    ]
    for (const args of asked) {
      expect(await tollbooth(args, { cwd: dir }), args.join(' ')).toEqual({
        code: 0,
        stdout: `${version}\n`,
        stderr: '',
      })
    }
  })

  it('prints the version from a packed install, reading the package.json installed with it', async () => {
    const { stdout } = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], {
      cwd: REPO_ROOT,
    })
    const [{ filename }] = JSON.parse(stdout) as [{ filename: string }]
    const installed = join(dir, 'node_modules', 'tollbooth')
    await mkdir(installed, { recursive: true })
    await run('tar', ['-xzf', join(dir, filename), '-C', installed, '--strip-components=1'])
    // Installed with another version than the repository's, so the number can only come from the installed file.
    const manifest = JSON.parse(await readFile(join(installed, 'package.json'), 'utf8')) as {
      version: string
    }
    await writeFile(
      join(installed, 'package.json'),
      JSON.stringify({ ...manifest, version: `${version}-installed` }),
    )
    // As npm links a bin: node_modules/.bin/tollbooth → ../tollbooth/dist/cli/index.js.
    await mkdir(join(dir, 'node_modules', '.bin'))
    const linked = join(dir, 'node_modules', '.bin', 'tollbooth')
    await symlink('../tollbooth/dist/cli/index.js', linked)
    for (const args of [['--version'], ['simulate', '-V']]) {
      expect(await tollbooth(args, { cwd: dir, bin: linked })).toEqual({
        code: 0,
        stdout: `${version}-installed\n`,
        stderr: '',
      })
    }
  })
})

describe('exit code 2: bad usage, one line and a pointer to --help', () => {
  it.each([
    // An unknown command, with the closest one when it is near (edit distance ≤ 2, or a prefix).
    [['simulat'], usageError('', 'unknown command simulat (did you mean simulate?)')],
    [['cots', '--schema', SCHEMA], usageError('', 'unknown command cots (did you mean cost?)')],
    [['sim'], usageError('', 'unknown command sim (did you mean simulate?)')],
    [['frobnicate'], usageError('', 'unknown command frobnicate')],
    // Names of Object.prototype are no commands or options.
    [['constructor'], usageError('', 'unknown command constructor')],
    [['cost', '--toString', 'x'], usageError('cost', 'unknown option --toString')],
    [['help', 'simulat'], usageError('', 'unknown command simulat (did you mean simulate?)')],
    [['--verison'], usageError('', 'unknown option --verison (did you mean --version?)')],
    // An unknown option, in either command.
    [
      ['cost', '--shema', SCHEMA, QUERY],
      usageError('cost', 'unknown option --shema (did you mean --schema?)'),
    ],
    [
      ['cost', '--schema', SCHEMA, QUERY, '--var', 'v.json'],
      usageError('cost', 'unknown option --var (did you mean --variables?)'),
    ],
    [
      ['cost', '-schema', SCHEMA, QUERY],
      usageError('cost', 'unknown option -schema (did you mean --schema?)'),
    ],
    [['cost', '--schema', SCHEMA, QUERY, '--frobnicate'], usageError('cost', 'unknown option --frobnicate')],
    [['cost', '--schema', SCHEMA, QUERY, '-x'], usageError('cost', 'unknown option -x')],
    [
      ['simulate', '--paterrn', 'abuser'],
      usageError('simulate', 'unknown option --paterrn (did you mean --pattern?)'),
    ],
    [
      ['simulate', '--max-queu=3'],
      usageError('simulate', 'unknown option --max-queu (did you mean --max-queue?)'),
    ],
    // A missing required option or argument, an unexpected argument.
    [['cost', QUERY], usageError('cost', 'missing the required option --schema <schema.graphql>')],
    [['cost', '--schema', SCHEMA], usageError('cost', 'missing the argument <query.graphql>')],
    [['cost', '--schema', SCHEMA, QUERY, QUERY], usageError('cost', `unexpected argument "${QUERY}"`)],
    [['simulate', 'abuser'], usageError('simulate', 'unexpected argument "abuser"')],
    // An option without its value, or with one it does not take.
    [
      ['cost', QUERY, '--schema'],
      usageError('cost', 'option --schema needs a value: --schema <schema.graphql>'),
    ],
    [
      ['cost', '--schema', '--json', QUERY],
      usageError('cost', 'option --schema needs a value: --schema <schema.graphql>'),
    ],
    [['simulate', '--limit'], usageError('simulate', 'option --limit needs a value: --limit <n>')],
    [['simulate', '--out='], usageError('simulate', 'option --out needs a value: --out <file.svg | dir>')],
    [['simulate', '--json=yes'], usageError('simulate', 'option --json takes no value, got "--json=yes"')],
  ])('tollbooth %j', async (args, stderr) => {
    expect(await tollbooth(args, { cwd: REPO_ROOT })).toEqual({ code: 2, stdout: '', stderr })
  })
})

describe('exit code 1: bad input, one line naming what is wrong', () => {
  it('a file that does not exist, in either command', async () => {
    expect(await tollbooth(['cost', '--schema', SCHEMA, 'nope.graphql'])).toEqual({
      code: 1,
      stdout: '',
      stderr: 'tollbooth cost: nope.graphql: no such file\n',
    })
    expect(await tollbooth(['cost', '--schema', SCHEMA, QUERY, '--variables', 'nope.json'])).toEqual({
      code: 1,
      stdout: '',
      stderr: 'tollbooth cost: nope.json: no such file\n',
    })
    expect(await tollbooth(['simulate', '--pattern-file', 'nope.json', '--out', dir])).toEqual({
      code: 1,
      stdout: '',
      stderr: 'tollbooth simulate: nope.json: cannot read the pattern file (no such file)\n',
    })
  })

  it('a TypeScript schema module, which Node does not load by itself', async () => {
    const typed = join(dir, 'schema.mts')
    await writeFile(typed, "export const schema: unknown = 'never loaded'")
    expect(await tollbooth(['cost', '--schema', typed, QUERY])).toEqual({
      code: 1,
      stdout: '',
      stderr:
        `tollbooth cost: ${typed}: Node does not load TypeScript by itself: give the compiled .js, or run the CLI ` +
        'with a loader (npx tsx node_modules/tollbooth/dist/cli/index.js cost …)\n',
    })
  })

  it('a file that does not parse, in either command', async () => {
    const notJson = join(dir, 'not-json.json')
    await writeFile(notJson, '{ "n": ')
    const variables = await tollbooth(['cost', '--schema', SCHEMA, QUERY, '--variables', notJson])
    expect(variables.code).toBe(1)
    expect(variables.stdout).toBe('')
    expect(variables.stderr).toMatch(new RegExp(`^tollbooth cost: ${notJson}: not valid JSON \\(.+\\)\\n$`))
    const pattern = await tollbooth(['simulate', '--pattern-file', notJson, '--out', dir])
    expect(pattern.code).toBe(1)
    expect(pattern.stdout).toBe('')
    expect(pattern.stderr).toMatch(new RegExp(`^tollbooth simulate: ${notJson}: not valid JSON \\(.+\\)\\n$`))
  })

  it('a value out of range, in either command', async () => {
    const config = join(dir, 'negative-list-size.json')
    await writeFile(config, JSON.stringify({ defaultListSize: -1 }))
    expect(await tollbooth(['cost', '--schema', SCHEMA, QUERY, '--config', config])).toEqual({
      code: 1,
      stdout: '',
      stderr: 'tollbooth cost: useTollbooth: "defaultListSize" must be a non-negative integer, got -1\n',
    })
    expect(await tollbooth(['simulate', '--limit', '0'])).toEqual({
      code: 1,
      stdout: '',
      stderr: 'tollbooth simulate: --limit must be a positive whole number, got "0"\n',
    })
    expect(await tollbooth(['simulate', '--limit', '-1'])).toEqual({
      code: 1,
      stdout: '',
      stderr: 'tollbooth simulate: --limit must be a positive whole number, got "-1"\n',
    })
    expect(await tollbooth(['simulate', '--pattern', 'toString'])).toMatchObject({
      code: 1,
      stdout: '',
      stderr: expect.stringMatching(/^tollbooth simulate: unknown pattern "toString" \(built-in patterns: /),
    })
    expect(await tollbooth(['simulate', '--pattern', 'thundering-herd'])).toMatchObject({
      code: 1,
      stdout: '',
      stderr: expect.stringMatching(
        /^tollbooth simulate: unknown pattern "thundering-herd" \(built-in patterns: /,
      ),
    })
  })
})
