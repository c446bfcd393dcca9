import { buildSchema, parse, validate } from 'graphql'
import { describe, expect, it } from 'vitest'
import { maxAliasesRule } from '../../../../src/graphql/rules/maxAliases.js'
import { maxDepthRule } from '../../../../src/graphql/rules/maxDepth.js'
import { maxDirectivesRule } from '../../../../src/graphql/rules/maxDirectives.js'
import { maxIntrospectionFieldsRule } from '../../../../src/graphql/rules/maxIntrospectionFields.js'
import { maxRootFieldsRule } from '../../../../src/graphql/rules/maxRootFields.js'
import { firstStructuralError } from '../../../../src/graphql/rules/structuralCheck.js'

const schema = buildSchema(`
  type Query { node: Node, hello: String }
  type Node { child: Node, name: String }
`)
const rules = [
  maxDepthRule(4, 6),
  maxAliasesRule(3),
  maxDirectivesRule(3),
  maxRootFieldsRule(3),
  maxIntrospectionFieldsRule(1),
]

const documents = [
  '{ hello }',
  '{ node { child { child { child { name } } } } }',
  'query A { hello } query B { a: hello b: hello c: hello d: hello }',
  '{ ...F } fragment F on Query { a: hello b: hello c: hello d: hello }',
  '{ hello @include(if: true) @skip(if: false) node @include(if: true) { name @skip(if: false) } }',
  '{ a: hello b: hello c: hello d: node { name } }',
  '{ __schema { types { name } } __type(name: "Node") { name } }',
  '{ node { ...N } } fragment N on Node { child { ...M } } fragment M on Node { child { child { name } } }',
  '{ node { ...C } } fragment C on Node { child { ...C } }',
  '{ hello hello hello hello }',
]

describe('firstStructuralError', () => {
  it("reports the first error graphql-js' validate would report with the same rules, or none", () => {
    for (const source of documents) {
      const document = parse(source)
      const expected = validate(schema, document, rules)[0]
      const found = firstStructuralError(document, rules)
      expect({ source, found: found?.message }).toEqual({ source, found: expected?.message })
      expect(found?.extensions).toEqual(expected?.extensions)
    }
  })

  it('finds each kind of refusal in this corpus', () => {
    const codes = documents.map((source) => firstStructuralError(parse(source), rules)?.extensions.code)
    expect(new Set(codes)).toEqual(
      new Set([
        undefined,
        'MAX_DEPTH_EXCEEDED',
        'MAX_ALIASES_EXCEEDED',
        'MAX_DIRECTIVES_EXCEEDED',
        'MAX_ROOT_FIELDS_EXCEEDED',
        'MAX_INTROSPECTION_FIELDS_EXCEEDED',
      ]),
    )
  })
})
