import { buildSchema, parse, validate } from 'graphql'
import { describe, expect, it } from 'vitest'
import { maxFragmentsPerSelectionRule } from '../../../../src/graphql/rules/maxFragmentsPerSelection.js'

const schema = buildSchema('type T { a: Int, t: T } type Query { t: T }')

function fragments(count: number, prefix = 'F'): string {
  return Array.from({ length: count }, (_, i) => `fragment ${prefix}${i} on T { a }`).join(' ')
}
function spreads(count: number, prefix = 'F'): string {
  return Array.from({ length: count }, (_, i) => `...${prefix}${i}`).join(' ')
}
function codes(source: string, max: number): unknown[] {
  return validate(schema, parse(source), [maxFragmentsPerSelectionRule(max)]).map(
    (error) => error.extensions.code,
  )
}

describe('maxFragmentsPerSelectionRule', () => {
  it('allows exactly the limit of distinct fragments in one selection set and refuses one more', () => {
    expect(codes(`{ t { ${spreads(5)} } } ${fragments(5)}`, 5)).toEqual([])
    expect(codes(`{ t { ${spreads(6)} } } ${fragments(6)}`, 5)).toEqual(['MAX_FRAGMENTS_EXCEEDED'])
  })

  it('counts distinct fragments: the same one spread again is one', () => {
    expect(codes(`{ t { ${spreads(5)} ${spreads(5)} ${spreads(5)} } } ${fragments(5)}`, 5)).toEqual([])
  })

  it('counts per selection set, and looks into the fragments spread, at any depth', () => {
    // Five in each of two sets: within the limit.
    expect(
      codes(`{ t { ${spreads(5)} t { ${spreads(5, 'G')} } } } ${fragments(5)} ${fragments(5, 'G')}`, 5),
    ).toEqual([])
    // The wide set is inside a fragment.
    const nested = `{ t { ...Outer } } fragment Outer on T { t { ${spreads(6)} } } ${fragments(6)}`
    expect(codes(nested, 5)).toEqual(['MAX_FRAGMENTS_EXCEEDED'])
  })

  it('names the limit only when limits are exposed', () => {
    const document = parse(`{ t { ${spreads(3)} } } ${fragments(3)}`)
    const [named] = validate(schema, document, [maxFragmentsPerSelectionRule(2)])
    expect(named?.message).toBe('A selection spreads more than 2 fragments.')
    const [hidden] = validate(schema, document, [maxFragmentsPerSelectionRule(2, { exposeLimits: false })])
    expect(hidden?.message).toBe('A selection spreads too many fragments.')
  })
})
