import { buildSchema, type ExecutionResult, execute, parse } from 'graphql'
import { describe, expect, it } from 'vitest'
import { hidesWork } from '../../../../src/graphql/engine/settlement.js'

// Results come from graphql-js executing the query, so the nulls and paths are the ones it really produces.
const schema = buildSchema(`
  type Item { id: ID!  name: String!  note: String  tags: [String!] }
  type Query {
    items: [Item!]!
    maybeItems: [Item]
    item: Item
    strict: Item!
    fails: String
  }
`)

const fail = () => {
  throw new Error('failed')
}
const rootValue = {
  items: () => [
    { id: '1', name: 'a' },
    { id: '2', name: fail },
  ],
  maybeItems: () => [{ id: '1', name: 'a' }, { id: '2', name: fail }, null],
  item: () => ({ id: '1', name: fail, note: fail, tags: () => ['x', fail] }),
  strict: () => ({ id: '1', name: fail }),
  fails: fail,
}

function run(query: string): ExecutionResult {
  const result = execute({ schema, document: parse(query), rootValue })
  if (result instanceof Promise) throw new Error('expected a synchronous result')
  return result
}

function hidden(query: string): boolean {
  const result = run(query)
  return hidesWork(result.data, result.errors)
}

describe('hidesWork', () => {
  it('no errors, or only nullable fields whose own resolver threw: nothing hidden', () => {
    expect(hidden('{ item { id } }')).toBe(false)
    expect(hidden('{ fails item { id note } }')).toBe(false)
    expect(run('{ fails item { id note } }').errors).toHaveLength(2)
  })

  it('a non-null field nulls its nullable parent: the siblings that ran are hidden', () => {
    const result = run('{ item { id name } }')
    expect(result.data).toEqual({ item: null })
    expect(hidesWork(result.data, result.errors)).toBe(true)
  })

  it('through a list item: nulled item of a nullable list, or the whole list, or all of data', () => {
    // [Item] of nullable items: item 2 becomes null, with id resolved.
    expect(run('{ maybeItems { id name } }').data).toEqual({
      maybeItems: [{ id: '1', name: 'a' }, null, null],
    })
    expect(hidden('{ maybeItems { id name } }')).toBe(true)
    // [Item!]! : the null goes up to data.
    expect(run('{ items { id name } }').data).toBeNull()
    expect(hidden('{ items { id name } }')).toBe(true)
    // Item!: data null as well.
    expect(hidden('{ fails strict { id name } }')).toBe(true)
  })

  it('a non-null item of a nullable list nulls the list', () => {
    const result = run('{ item { tags } }')
    // name is not selected: tags is [String!] and its second item failed, so tags is null.
    expect(result.data).toEqual({ item: { tags: null } })
    expect(hidesWork(result.data, result.errors)).toBe(true)
  })

  it('errors without a path (before execution) hide nothing', () => {
    expect(hidesWork(undefined, [{}])).toBe(false)
    expect(hidesWork(null, undefined)).toBe(false)
  })
})
