import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { runCost } from '../../../src/cli/cost.js'

/**
 * `tollbooth cost` on queries that select one response key twice: graphql-js runs such fields once, with their
 * sub-selections merged, and the breakdown shows that one field. Every number is worked out by hand from the cost
 * model (an object 1 or its @cost, a scalar 0, a list size × (weight + children)).
 */

const dir = mkdtempSync(join(tmpdir(), 'tollbooth-cost-merging-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

function file(name: string, text: string): string {
  const path = join(dir, name)
  writeFileSync(path, text)
  return path
}

// The cost directives are used without being declared: `tollbooth cost` adds their definitions.
const schema = file(
  'schema.graphql',
  /* GraphQL */ `
    type Query {
      object1: Int @cost(weight: 1)
      obj: Obj
      list(first: Int): [Obj!]! @listSize(slicingArguments: ["first"])
      media: Media
    }
    type Obj {
      id: ID
      x: Leaf
      y: Leaf
    }
    type Leaf {
      v: Int
    }
    interface Media {
      cover: Image
    }
    type Book implements Media {
      cover: Image
      author: Person
    }
    type Film implements Media {
      cover: Image
      director: Person
    }
    type Image {
      url: String
      thumb: Image
    }
    type Person {
      name: String
    }
  `,
)

async function cost(query: string, ...flags: string[]) {
  let stdout = ''
  let stderr = ''
  const io = {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
  }
  const code = await runCost(['--schema', schema, file('query.graphql', query), ...flags], io)
  return { code, stdout, stderr }
}

describe('tollbooth cost: a response key selected twice is one field', () => {
  it('prints the merged field once, with both sub-selections as its children', async () => {
    const run = await cost('{ obj { x { v } } obj { y { v } } }')
    expect(run.stderr).toBe('')
    expect(run.code).toBe(0)
    // obj 1 + x 1 + y 1 = 3
    expect(run.stdout).toBe(
      [
        'total cost: 3',
        '  Query.obj  3  = (1 + 2)',
        '    Obj.x  1  = 1',
        '      Leaf.v  0',
        '    Obj.y  1  = 1',
        '      Leaf.v  0',
        '',
      ].join('\n'),
    )
  })

  it('a list selected twice with the same slicing argument: one list of merged items', async () => {
    // 3 × (Obj 1 + x 1 + y 1) = 9
    const run = await cost('{ list(first: 3) { x { v } } list(first: 3) { y { v } } }')
    expect(run.stdout.split('\n').slice(0, 3)).toEqual([
      'total cost: 9',
      '  Query.list(first: 3)  9  = 3 × (1 + 2)  [size: slicing argument first = 3]',
      '    Obj.x  1  = 1',
    ])
  })

  it('under an interface, a key merged differently per type is one line per type', async () => {
    // Book: cover { url thumb { url } } 2 + author 1 = 3; Film: cover { url } 1 + director 1 = 2; media 1 + 3 = 4
    const run = await cost(`{ media {
      cover { url }
      ... on Book { cover { thumb { url } } author { name } }
      ... on Film { director { name } } } }`)
    expect(run.stdout).toBe(
      [
        'total cost: 4',
        '  Query.media  4  = (1 + 3)',
        '    Book.cover  2  = (1 + 1)',
        '      Image.url  0',
        '      Image.thumb  1  = 1',
        '        Image.url  0',
        '    Film.cover  1  = 1',
        '      Image.url  0',
        '    Book.author  1  = 1',
        '      Person.name  0',
        '    Film.director  1  = 1',
        '      Person.name  0',
        '',
      ].join('\n'),
    )
  })

  it('--json: { object1 object1 } is one field of cost 1', async () => {
    const run = await cost('{ object1 object1 }', '--json')
    expect(run.code).toBe(0)
    expect(JSON.parse(run.stdout)).toEqual({
      total: 1,
      fields: [
        {
          parentType: 'Query',
          fieldName: 'object1',
          childrenCost: 0,
          argumentsCost: 0,
          mutationCost: 0,
          multiplier: 1,
          weight: 1,
          total: 1,
          field: 'object1',
          children: [],
        },
      ],
      charged: 1,
    })
  })
})
