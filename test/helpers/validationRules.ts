/**
 * The schema and readings the unit tests of the structural rules share (test/unit/graphql/rules/): the codes a
 * document gets from one rule, nested documents of a chosen depth, and a refusal that names no limit.
 */
import { buildSchema, parse, specifiedRules, type ValidationRule, validate } from 'graphql'
import { expect } from 'vitest'

export const schema = buildSchema(`
  type Query { node: Node, hello: String }
  type Node { child: Node, name: String }
`)

/** Codes of the errors a document gets from one rule (plus graphql-js's own rules when `withSpecified`). */
export function codes(source: string, rule: ValidationRule, withSpecified = false): unknown[] {
  const rules = withSpecified ? [...specifiedRules, rule] : [rule]
  return validate(schema, parse(source), rules).map((error) => error.extensions.code ?? error.message)
}

/** `{ node { child { child { … name } } } }` with `depth` fields on the deepest path. */
export function nested(depth: number): string {
  return `{ node ${'{ child '.repeat(depth - 2)}{ name }${' }'.repeat(depth - 2)} }`
}

/** With exposeLimits: false, the one refusal `source` gets names no limit, in its message or its extensions. */
export function expectRefusalNamingNoLimit(source: string, rule: ValidationRule, code: string): void {
  const errors = validate(schema, parse(source), [rule])
  expect(errors).toHaveLength(1)
  const [error] = errors
  expect(error?.extensions.code).toBe(code)
  expect(error?.extensions.limit).toBeUndefined()
  expect(error?.message).not.toMatch(/\d/)
}
