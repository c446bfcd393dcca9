/**
 * `node --import tsx test/helpers/collectCostVectors.ts <vectors.jsonl>`: the vectors costVectorRecorder.ts
 * recorded, each once, with each schema once, written to test/fixtures/cost/sdl-vectors.json. A vector whose price
 * a fresh analyzer does not give again is left out: it was priced from the cache of an analyzer that had seen
 * other operations (a presence variable the cache does not coerce again, say).
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { buildSchema, type GraphQLSchema, parse } from 'graphql'
import { type CostAnalysisOptions, CostAnalyzer } from '../../src/graphql/cost/costAnalyzer.js'
import type { CostVector } from './costVectorRecorder.js'

/** The fixture: the schemas' SDL, and each vector with its schema as an index into them. */
export interface CostVectorTable {
  readonly schemas: readonly string[]
  readonly vectors: readonly (Omit<CostVector, 'schema'> & { readonly schema: number })[]
}

export const SDL_VECTORS = fileURLToPath(new URL('../fixtures/cost/sdl-vectors.json', import.meta.url))

/** What a fresh analyzer makes of the vector on `schema`: its price, or the refusal. */
export function priceVector(
  schema: GraphQLSchema,
  vector: Omit<CostVector, 'schema' | 'source'>,
): CostVector['expected'] {
  try {
    const analyzer = new CostAnalyzer(vector.options as CostAnalysisOptions)
    const input = {
      schema,
      document: parse(vector.query),
      operationName: vector.operationName,
      variables: vector.variables,
    }
    if (vector.kind === 'actual') return analyzer.actual(input, vector.data)
    if (vector.kind === 'explain') return analyzer.explain(input).total
    return analyzer.estimate(input)
  } catch (error) {
    const { message, code } = error as { message: string; code?: unknown }
    return { error: message, ...(typeof code === 'string' ? { code } : {}) }
  }
}

function collect(file: string): CostVectorTable {
  const built = new Map<string, GraphQLSchema>()
  const schemas: string[] = []
  const vectors: CostVectorTable['vectors'][number][] = []
  const seen = new Set<string>()
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (line === '') continue
    const { source, schema, ...rest } = JSON.parse(line) as CostVector
    const key = JSON.stringify([schema, rest])
    if (seen.has(key)) continue
    seen.add(key)
    const schemaObject = built.get(schema) ?? buildSchema(schema)
    built.set(schema, schemaObject)
    if (JSON.stringify(priceVector(schemaObject, rest)) !== JSON.stringify(rest.expected)) {
      console.log(`left out (priced from a cache): ${source} ${rest.kind} ${rest.query.replace(/\s+/g, ' ')}`)
      continue
    }
    let index = schemas.indexOf(schema)
    if (index === -1) index = schemas.push(schema) - 1
    vectors.push({ source, schema: index, ...rest })
  }
  return { schemas, vectors }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [file] = process.argv.slice(2)
  if (file === undefined) throw new Error('usage: collectCostVectors.ts <vectors.jsonl>')
  const table = collect(file)
  writeFileSync(SDL_VECTORS, `${JSON.stringify(table, null, 1)}\n`)
  console.log(`${table.vectors.length} vectors on ${table.schemas.length} schemas → ${SDL_VECTORS}`)
}
