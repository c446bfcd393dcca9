/**
 * `tollbooth cost`, spawned as a user runs it (the package's bin, built by `pretest`), against the fixtures in
 * test/fixtures/cost/. Every expected number is worked out by hand from the cost model in the README.
 */
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { REPO_ROOT, tollbooth as run } from './bin.js'

const FIXTURES = 'test/fixtures/cost'

const tollbooth = (...args: string[]) => run(args)

describe('tollbooth cost', () => {
  it('prints the total and the per-field breakdown with where each list size came from', async () => {
    const run = await tollbooth(
      'cost',
      '--schema',
      `${FIXTURES}/schema.graphql`,
      `${FIXTURES}/query.graphql`,
      '--variables',
      `${FIXTURES}/variables.json`,
    )
    expect(run.stderr).toBe('')
    expect(run.code).toBe(0)
    const lines = run.stdout.trimEnd().split('\n')
    // users(first: $n = 7): 7 × (User 1 + friends(first: 2) 2 × (User 1 + name 0)) = 7 × (1 + 2) = 21
    // repo: 1 + issues (connection 1 + pageInfo 1 + edges 5 × (edge 1 + node (Issue 1 + author @cost 3))) = 1 + 27
    // total 21 + 28 = 49
    expect(lines[0]).toBe('total cost: 49')
    expect(lines).toContain('  Query.users(first: $n)  21  = 7 × (1 + 2)  [size: slicing argument first = 7]')
    expect(lines).toContain('    User.friends(first: 2)  2  = 2 × 1  [size: slicing argument first = 2]')
    expect(lines).toContain('      IssueConnection.pageInfo  1  = 1')
    expect(lines).toContain(
      '      IssueConnection.edges  25  = 5 × (1 + 4)  [size: sizedFields of issues: slicing argument first = 5]',
    )
    expect(lines).toContain('          Issue.author  3  = 3')
  })

  it('--json gives the same numbers as a tree', async () => {
    const run = await tollbooth(
      'cost',
      '--schema',
      `${FIXTURES}/schema.graphql`,
      `${FIXTURES}/query.graphql`,
      '--json',
    )
    expect(run.code).toBe(0)
    const explanation = JSON.parse(run.stdout) as {
      total: number
      fields: { field: string; total: number; multiplier: number; sizeSource?: string; children: unknown[] }[]
    }
    // Without variables, users takes its schema default first = 20: 20 × (1 + 2) = 60; 60 + 28 = 88
    expect(explanation.total).toBe(88)
    expect(explanation.fields.map((f) => [f.field, f.total, f.multiplier, f.sizeSource])).toEqual([
      ['users(first: $n)', 60, 20, 'slicing argument first = 20'],
      ['repo(name: "x")', 28, 1, undefined],
    ])
  })

  it('--config applies the same cost options the plugin would get', async () => {
    const run = await tollbooth(
      'cost',
      '--schema',
      `${FIXTURES}/schema.graphql`,
      `${FIXTURES}/query.graphql`,
      '--config',
      `${FIXTURES}/config.mjs`,
      '--json',
    )
    expect(run.stderr).toBe('')
    const explanation = JSON.parse(run.stdout) as { total: number }
    // author 10 (options win over SDL): edges 5 × (1 + (1 + 10)) = 60, issues 1 + pageInfo 1 + 60 = 62, repo 63;
    // users 60 (first defaults to 20): total 123
    expect(explanation.total).toBe(123)
  })

  it('says what the plugin charges when it is more than the total: minCost (1, or from --config)', async () => {
    const query = `${FIXTURES}/typename.graphql`
    const plain = await tollbooth('cost', '--schema', `${FIXTURES}/schema.graphql`, query)
    expect(plain.stdout.split('\n').slice(0, 2)).toEqual([
      'total cost: 0',
      'charged: 1 (every operation pays at least minCost)',
    ])
    const configured = await tollbooth(
      'cost',
      '--schema',
      `${FIXTURES}/schema.graphql`,
      query,
      '--config',
      `${FIXTURES}/min-cost.json`,
      '--json',
    )
    expect(JSON.parse(configured.stdout)).toMatchObject({ total: 0, charged: 5 })
  })

  it('refuses a config key useTollbooth does not know, suggesting the closest', async () => {
    const run = await tollbooth(
      'cost',
      '--schema',
      `${FIXTURES}/schema.graphql`,
      `${FIXTURES}/query.graphql`,
      '--config',
      `${FIXTURES}/config-typo.json`,
    )
    expect(run).toMatchObject({
      code: 1,
      stdout: '',
      stderr:
        `tollbooth cost: ${FIXTURES}/config-typo.json: useTollbooth: unknown option "defaultListsize" ` +
        '(did you mean "defaultListSize"?)\n',
    })
  })

  it('points at file, line and column when the query does not validate or parse', async () => {
    const invalid = await tollbooth(
      'cost',
      '--schema',
      `${FIXTURES}/schema.graphql`,
      `${FIXTURES}/invalid-query.graphql`,
    )
    expect(invalid.code).toBe(1)
    expect(invalid.stderr).toBe(
      `tollbooth cost: ${FIXTURES}/invalid-query.graphql:3:5: Cannot query field "nope" on type "User". Did you mean "name"?\n`,
    )
    const syntax = await tollbooth(
      'cost',
      '--schema',
      `${FIXTURES}/schema.graphql`,
      `${FIXTURES}/syntax-error.graphql`,
    )
    expect(syntax.code).toBe(1)
    expect(syntax.stderr).toBe(
      `tollbooth cost: ${FIXTURES}/syntax-error.graphql:2:10: Syntax Error: Expected Name, found "{".\n`,
    )
  })

  it('reports a schema that does not build, a missing file and bad usage', async () => {
    const schemaAsQuery = await tollbooth(
      'cost',
      '--schema',
      `${FIXTURES}/query.graphql`,
      `${FIXTURES}/query.graphql`,
    )
    expect(schemaAsQuery.code).toBe(1)
    expect(schemaAsQuery.stderr).toMatch(/^tollbooth cost: test\/fixtures\/cost\/query\.graphql/)
    const unknownType = await tollbooth(
      'cost',
      '--schema',
      `${FIXTURES}/invalid-schema.graphql`,
      `${FIXTURES}/query.graphql`,
    )
    expect(unknownType).toMatchObject({
      code: 1,
      stderr: `tollbooth cost: ${FIXTURES}/invalid-schema.graphql:2:6: Unknown type "Nope".\n`,
    })
    const missing = await tollbooth('cost', '--schema', `${FIXTURES}/schema.graphql`, 'nope.graphql')
    expect(missing).toMatchObject({ code: 1, stderr: 'tollbooth cost: nope.graphql: no such file\n' })
    const usage = await tollbooth('cost', `${FIXTURES}/query.graphql`)
    expect(usage).toEqual({
      code: 2,
      stdout: '',
      stderr:
        'tollbooth cost: missing the required option --schema <schema.graphql>\n' +
        'Run "tollbooth cost --help" for usage.\n',
    })
  })
})

describe('tollbooth cost: the directives a schema does not declare', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tollbooth-cost-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))
  const file = (name: string, text: string) => {
    const path = join(dir, name)
    writeFileSync(path, text)
    return path
  }
  const query = () => file('query.graphql', '{ items }')

  it("a syntax error is placed in the schema's own text", async () => {
    const schema = file('broken.graphql', 'type Query { a: Int')
    const run = await tollbooth('cost', '--schema', schema, query())
    expect(run).toMatchObject({
      code: 1,
      stderr: `tollbooth cost: ${schema}:1:20: Syntax Error: Expected Name, found <EOF>.\n`,
    })
  })

  it('a schema that declares @rateLimit itself and uses @listSize without declaring it is priced', async () => {
    const schema = file(
      'own-directive.graphql',
      [
        'directive @rateLimit(limit: Int!, window: String!, by: [String!]) on FIELD_DEFINITION',
        'directive @cost(weight: Int!) on FIELD_DEFINITION | OBJECT',
        'type Query { items: [Int!]! @listSize(assumedSize: 7) @cost(weight: 2) }',
      ].join('\n'),
    )
    const run = await tollbooth('cost', '--schema', schema, query())
    expect(run.stderr).toBe('')
    expect(run.code).toBe(0)
    // items: 7 × weight 2 = 14
    expect(run.stdout.split('\n')[0]).toBe('total cost: 14')
  })
})

describe('tollbooth cost --schema <module>: a schema built in code', () => {
  it('prices code-first-schema.mjs, schema.graphql with extensions for directives, as schema.graphql', async () => {
    const args = [`${FIXTURES}/query.graphql`, '--variables', `${FIXTURES}/variables.json`]
    const codeFirst = await tollbooth('cost', '--schema', `${FIXTURES}/code-first-schema.mjs`, ...args)
    expect(codeFirst.stderr).toBe('')
    expect(codeFirst.code).toBe(0)
    // The numbers of the SDL run above: users 21 + repo 28, the author's extensions.cost 3
    expect(codeFirst.stdout.split('\n')[0]).toBe('total cost: 49')
    expect(codeFirst.stdout).toContain(
      '      IssueConnection.edges  25  = 5 × (1 + 4)  [size: sizedFields of issues: slicing argument first = 5]',
    )
    const sdl = await tollbooth('cost', '--schema', `${FIXTURES}/schema.graphql`, ...args)
    expect(codeFirst.stdout).toBe(sdl.stdout)
    // --config wins over extensions as over SDL: author 10, 123 (see above)
    const configured = await tollbooth(
      'cost',
      '--schema',
      `${FIXTURES}/code-first-schema.mjs`,
      `${FIXTURES}/query.graphql`,
      '--config',
      `${FIXTURES}/config.mjs`,
      '--json',
    )
    expect(JSON.parse(configured.stdout)).toMatchObject({ total: 123, charged: 123 })
  })

  it('a schema of another copy of graphql is refused, naming both copies', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollbooth-cost-graphql-copy-'))
    try {
      const theirs = join(dir, 'node_modules', 'graphql')
      mkdirSync(theirs, { recursive: true })
      cpSync(join(REPO_ROOT, 'node_modules', 'graphql'), theirs, { recursive: true })
      const schema = join(dir, 'schema.mjs')
      writeFileSync(
        schema,
        "import { buildSchema } from 'graphql'\nexport const schema = buildSchema('type Query { a: Int }')\n",
      )
      const ours = join(REPO_ROOT, 'node_modules', 'graphql')
      const { version } = JSON.parse(readFileSync(join(ours, 'package.json'), 'utf8')) as { version: string }
      const refused = await tollbooth('cost', '--schema', schema, `${FIXTURES}/typename.graphql`)
      expect(refused).toEqual({
        code: 1,
        stdout: '',
        stderr:
          `tollbooth cost: ${schema}: its schema was built with another copy of graphql than the one tollbooth ` +
          `uses (graphql@${version} at ${theirs}, not graphql@${version} at ${ours}); graphql cannot read a schema ` +
          'across copies: install one graphql for both (npm dedupe), or run the tollbooth installed next to the ' +
          'schema\n',
      })
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
