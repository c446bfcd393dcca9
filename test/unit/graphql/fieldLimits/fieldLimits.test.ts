import { buildSchema, type OperationDefinitionNode, parse } from 'graphql'
import { describe, expect, it } from 'vitest'
import { MemoryStore } from '../../../../src/core/stores/memoryStore.js'
import { FieldLimits } from '../../../../src/graphql/fieldLimits/fieldLimits.js'
import { costDirectivesTypeDefs } from '../../../../src/graphql/index.js'

function schemaWith(mutationFields: string) {
  return buildSchema(
    `${costDirectivesTypeDefs}\ntype Query { hello: String }\ntype Mutation { ${mutationFields} }`,
  )
}

describe('FieldLimits', () => {
  it('plans per schema: the same document after a schema change is judged by the new schema', async () => {
    const limited = schemaWith(
      'login(email: String!): Boolean @rateLimit(limit: 1, window: "1m", by: ["email"])',
    )
    // Still a schema with limits (another field's), so the plan cache is consulted.
    const unlimited = schemaWith(
      'login(email: String!): Boolean, reset(email: String!): Boolean @rateLimit(limit: 1, window: "1m", by: ["email"])',
    )
    const limits = new FieldLimits({
      configs: {},
      store: new MemoryStore(),
      prefix: 'field-limits-test',
      hooks: undefined,
      ipKeyOptions: { ipv6Prefix: 64, ipv4Prefix: 32 },
    })
    // One DocumentNode for both schemas, as Yoga's parse cache (keyed by the query text) hands out.
    const document = parse('mutation { login(email: "a@example.com") }')
    const operation = document.definitions[0] as OperationDefinitionNode
    // What the engine does per operation: the limited fields it selects, then one unit spent for each.
    const check = (schema: ReturnType<typeof schemaWith>) =>
      limits.spend(limits.selected(schema, document, operation), {}, '192.0.2.1', {})

    expect(await check(limited)).toBeUndefined()
    expect((await check(limited))?.coordinate).toBe('Mutation.login')
    // There login has no @rateLimit: nothing of this operation is selected.
    expect(limits.selected(unlimited, document, operation)).toEqual([])
  })
})
