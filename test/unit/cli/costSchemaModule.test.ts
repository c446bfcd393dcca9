import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { runCost } from '../../../src/cli/cost.js'

/**
 * `tollbooth cost --schema <module>`: a .js, .mjs or .cjs module exporting a schema built in code, whose
 * extensions.cost and extensions.listSize price the query. What a module may export, and the error for anything else.
 */

// Inside the repository, so that the modules resolve its graphql, the one the CLI uses.
const cache = fileURLToPath(new URL('../../../node_modules/.cache/', import.meta.url))
mkdirSync(cache, { recursive: true })
const dir = mkdtempSync(join(cache, 'tollbooth-cost-module-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

function file(name: string, text: string): string {
  const path = join(dir, name)
  writeFileSync(path, text)
  return path
}

/** `Query.items`: 7 items (listSize) of weight 2 (cost) = 14. */
const SCHEMA = `new GraphQLSchema({
  query: new GraphQLObjectType({
    name: 'Query',
    fields: {
      items: {
        type: new GraphQLList(GraphQLInt),
        extensions: { cost: { weight: 2 }, listSize: { assumedSize: 7 } },
      },
    },
  }),
})`
const IMPORTS = "import { GraphQLInt, GraphQLList, GraphQLObjectType, GraphQLSchema } from 'graphql'"

const query = file('query.graphql', '{ items }')

async function cost(schema: string) {
  let stdout = ''
  let stderr = ''
  const io = {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
  }
  const code = await runCost(['--schema', schema, query], io)
  return { code, stdout, stderr }
}

describe('tollbooth cost --schema <module>: what the module may export', () => {
  it.each([
    ['a default export (.mjs)', 'default.mjs', `${IMPORTS}\nexport default ${SCHEMA}`],
    [
      'an export named schema, which wins over the default one',
      'named.mjs',
      `${IMPORTS}\nexport const schema = ${SCHEMA}\nexport default 'not this one'`,
    ],
    [
      'a function returning a promise of one',
      'factory.mjs',
      `${IMPORTS}\nexport default async () => ${SCHEMA}`,
    ],
    [
      'module.exports of CommonJS (.cjs)',
      'common.cjs',
      `const { GraphQLInt, GraphQLList, GraphQLObjectType, GraphQLSchema } = require('graphql')\nmodule.exports = ${SCHEMA}`,
    ],
    ['a .js module', 'plain.js', `${IMPORTS}\nexport const schema = ${SCHEMA}`],
  ])('%s: 7 × 2 = 14', async (_, name, text) => {
    const run = await cost(file(name, text))
    expect(run.stderr).toBe('')
    expect(run.code).toBe(0)
    expect(run.stdout).toBe('total cost: 14\n  Query.items  14  = 7 × 2  [size: assumedSize]\n')
  })
})

describe('tollbooth cost --schema <module>: a clear error, naming the file and what it found', () => {
  it.each([
    ['nothing', 'empty.mjs', 'export const other = 1', 'no default export and no export named "schema"'],
    ['SDL text', 'sdl.mjs', "export default 'type Query { a: Int }'", 'a string'],
    ['an object', 'config.mjs', 'export default { schema: undefined, typeDefs: "" }', 'an object'],
    ['an instance of a class', 'date.mjs', 'export default new Date(0)', 'an object of class Date'],
    ['null', 'null.mjs', 'export const schema = null', 'null'],
    ['a function returning nothing', 'void.mjs', 'export default () => {}', 'a function returning undefined'],
  ])('%s', async (_, name, text, found) => {
    const path = file(name, text)
    expect(await cost(path)).toEqual({
      code: 1,
      stdout: '',
      stderr:
        `tollbooth cost: ${path}: must export a GraphQLSchema (as its default export or as "schema", or a ` +
        `function returning one), found ${found}\n`,
    })
  })

  it('a GraphQLSchema of another copy of graphql is named as such, not rebuilt without its extensions', async () => {
    // What an object of another graphql's GraphQLSchema class shows to this one: its toStringTag.
    const path = file(
      'foreign.mjs',
      "export default { get [Symbol.toStringTag]() { return 'GraphQLSchema' }, extensions: {} }",
    )
    const run = await cost(path)
    expect(run.code).toBe(1)
    expect(run.stderr).toMatch(
      new RegExp(
        `^tollbooth cost: ${path}: its schema was built with another copy of graphql than the one tollbooth uses[^;]*; ` +
          'graphql cannot read a schema across copies: install one graphql for both \\(npm dedupe\\), or run ' +
          'the tollbooth installed next to the schema\n$',
      ),
    )
  })

  it('a module that throws, one that does not exist, and an invalid schema', async () => {
    const throws = file('throws.mjs', "throw new Error('no database')")
    expect((await cost(throws)).stderr).toBe(`tollbooth cost: ${throws}: could not be loaded (no database)\n`)
    const missing = join(dir, 'missing.mjs')
    const run = await cost(missing)
    expect(run.code).toBe(1)
    expect(run.stderr).toMatch(
      new RegExp(`^tollbooth cost: ${missing}: could not be loaded \\(Cannot find module`),
    )
    const invalid = file(
      'invalid.mjs',
      "import { GraphQLSchema } from 'graphql'\nexport default new GraphQLSchema({})",
    )
    expect(await cost(invalid)).toEqual({
      code: 1,
      stdout: '',
      stderr: `tollbooth cost: ${invalid}: the schema it exports is invalid: Query root type must be provided.\n`,
    })
  })
})

describe('tollbooth cost --config with graphql-query-complexity estimators', () => {
  it('prices a schema annotated with complexity as the plugin does: 7 × (title 1) = 7', async () => {
    const schema = file(
      'complexity.mjs',
      `import { GraphQLInt, GraphQLList, GraphQLObjectType, GraphQLSchema, GraphQLString } from 'graphql'
const Post = new GraphQLObjectType({ name: 'Post', fields: { title: { type: GraphQLString } } })
export const schema = new GraphQLSchema({ query: new GraphQLObjectType({ name: 'Query', fields: {
  posts: { type: new GraphQLList(Post), args: { count: { type: GraphQLInt } },
    extensions: { complexity: ({ args, childComplexity }) => args.count * childComplexity } },
} }) })`,
    )
    const config = file(
      'estimators.mjs',
      `import { fieldExtensionsEstimator, simpleEstimator } from 'graphql-query-complexity'
export default { estimators: [fieldExtensionsEstimator(), simpleEstimator({ defaultComplexity: 1 })] }`,
    )
    const posts = file('posts.graphql', '{ posts(count: 7) { title } }')
    let stdout = ''
    const io = { stdout: { write: (text: string) => (stdout += text) }, stderr: { write: () => true } }
    expect(await runCost(['--schema', schema, '--config', config, posts], io)).toBe(0)
    expect(stdout).toBe(`total cost: 7\n  (priced by the estimators of ${config}: no breakdown per field)\n`)
  })
})

describe('tollbooth cost: TypeScript modules and what a --config module exported', () => {
  async function run(args: string[]) {
    let stdout = ''
    let stderr = ''
    const io = {
      stdout: { write: (text: string) => (stdout += text) },
      stderr: { write: (text: string) => (stderr += text) },
    }
    const code = await runCost(args, io)
    return { code, stdout, stderr }
  }

  it('a .mts module is loaded as a module under a TypeScript loader (here vitest), not read as SDL', async () => {
    const schema = file('typed.mts', `${IMPORTS}\nexport const schema: GraphQLSchema = ${SCHEMA}`)
    expect(await run(['--schema', schema, query])).toEqual({
      code: 0,
      stdout: 'total cost: 14\n  Query.items  14  = 7 × 2  [size: assumedSize]\n',
      stderr: '',
    })
  })

  it.each([
    ['no default export', 'noDefault.mjs', 'export const costs = {}', 'no default export'],
    ['a function', 'fn.mjs', 'export default () => ({})', 'a function'],
    ['an array', 'list.mjs', 'export default []', 'an array'],
    ['a number', 'number.json', '42', 'a number'],
  ])('a --config exporting %s names what it found', async (_, name, text, found) => {
    const config = file(name, text)
    expect(
      await run(['--schema', file('s.graphql', 'type Query { a: Int }'), '--config', config, query]),
    ).toEqual({
      code: 1,
      stdout: '',
      stderr: `tollbooth cost: ${config}: must export (default) an object of useTollbooth cost options, found ${found}\n`,
    })
  })

  it('a field no estimator prices is an error of the query file, a refused variable one of the variables file', async () => {
    const schema = file('sdl.graphql', 'type Query { items(n: Int!): Int }')
    const config = file(
      'fieldExtensionsOnly.mjs',
      `import { fieldExtensionsEstimator } from 'graphql-query-complexity'
export default { estimators: [fieldExtensionsEstimator()] }`,
    )
    const items = file('items.graphql', 'query($n: Int!) { items(n: $n) }')
    const variables = file('vars.json', '{"n": 1}')
    const unpriced = await run(['--schema', schema, '--config', config, '--variables', variables, items])
    expect(unpriced.code).toBe(1)
    expect(unpriced.stderr).toBe(
      `tollbooth cost: ${items}: No complexity could be calculated for field Query.items. At least one complexity estimator has to return a complexity score.\n`,
    )
    const wrongVariables = file('wrongVars.json', '{"n": "one"}')
    const refused = await run(['--schema', schema, '--variables', wrongVariables, items])
    expect(refused.code).toBe(1)
    expect(refused.stderr).toMatch(
      new RegExp(`^tollbooth cost: ${wrongVariables}: Variable "\\$n" got invalid value`),
    )
  })
})
