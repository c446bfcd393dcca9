import { type GraphQLError, parse } from 'graphql'
import { describe, expect, it } from 'vitest'
import { bracketNesting, guardParse } from '../../../../src/graphql/rules/parseGuard.js'

describe('bracketNesting', () => {
  it('counts { [ ( nesting', () => {
    // { → 1, { → 2, ( → 3, [ → 4, [ → 5
    expect(bracketNesting('{ a { b(x: [[1]]) } }', 100)).toBe(5)
  })

  it('ignores brackets in strings, block strings (with escaped quotes) and comments', () => {
    const source = ['{ a(s: "{{{[[[", t: "\\"{{{") # {{{{{{', '  b(d: """ {{{ \\""" {{{ """) }'].join('\n')
    // { then ( on line 1 (2), closed; ( on line 2 inside { (2); nothing in strings or the comment counts.
    expect(bracketNesting(source, 100)).toBe(2)
  })

  it('stops counting past the cap', () => {
    expect(bracketNesting('{'.repeat(1_000_000), 10)).toBe(11)
  })
})

describe('guardParse', () => {
  const guarded = guardParse(parse, { maxTokens: 5000, maxNesting: 100, exposeLimits: true })

  it('refuses deep nesting before the recursive parser can overflow', () => {
    const deep = `{ ${'a { '.repeat(2400)}b${' }'.repeat(2400)} }`
    expect(() => guarded(deep)).toThrow(
      expect.objectContaining({
        extensions: expect.objectContaining({ code: 'MAX_DEPTH_EXCEEDED', limit: 100 }),
      }),
    )
  })

  it('refuses token floods with TOO_MANY_TOKENS', () => {
    expect(() => guarded(`{ ${'a '.repeat(6000)}}`)).toThrow(
      expect.objectContaining({
        extensions: expect.objectContaining({ code: 'TOO_MANY_TOKENS', limit: 5000 }),
      }),
    )
  })

  it('parses ordinary documents unchanged', () => {
    expect(guarded('query Q { a { b } }').definitions).toHaveLength(1)
  })
})

describe('guardParse with exposeLimits: false', () => {
  const guarded = guardParse(parse, { maxTokens: 50, maxNesting: 10, exposeLimits: false })

  it.each([
    ['MAX_DEPTH_EXCEEDED', `{ ${'a { '.repeat(20)}b${' }'.repeat(20)} }`],
    ['TOO_MANY_TOKENS', `{ ${'a '.repeat(60)}}`],
  ])('%s names no limit, in its message or its extensions', (code, source) => {
    let thrown: unknown
    try {
      guarded(source)
    } catch (error) {
      thrown = error
    }
    const error = thrown as GraphQLError
    expect(error.extensions.code).toBe(code)
    expect(error.extensions.limit).toBeUndefined()
    expect(error.message).not.toMatch(/\d/)
  })
})
