import { GraphQLError, Lexer, parse, Source, TokenKind } from 'graphql'
import type { ParseFunction } from '../optionTypes.js'
import { limitRefusal, RefusalCodes, refusal } from '../refusal.js'

export interface ParseLimits {
  readonly maxTokens: number | undefined
  readonly maxNesting: number | undefined
  readonly exposeLimits: boolean
}

/**
 * Wraps a parse function with the parse-time guards:
 * - `maxNesting`: graphql-js's parser is recursive, and 5,000 tokens of `{a{a{a…` (or `[[[…`) reach about 2,500
 *   levels, enough to overflow the stack before the token limit is seen. A linear scan of bracket nesting refuses
 *   them first.
 * - `maxTokens`: graphql-js stops parsing there, before the AST is built.
 * Each refusal is a GraphQLError with a stable code; a stack overflow that still happens becomes a refusal too.
 */
export function guardParse(parseFn: ParseFunction | undefined, limits: ParseLimits): ParseFunction {
  const inner = parseFn ?? parse
  return (source, options) => {
    const text = typeof source === 'string' ? source : source.body
    checkNesting(text, limits)
    try {
      return limits.maxTokens === undefined
        ? inner(source, options)
        : inner(source, { ...options, maxTokens: limits.maxTokens })
    } catch (error) {
      if (
        limits.maxTokens !== undefined &&
        error instanceof GraphQLError &&
        /contains more tha[nt] \d+ tokens/.test(error.message)
      ) {
        throw tooManyTokens(limits, limits.maxTokens)
      }
      if (error instanceof RangeError) {
        throw refusal(RefusalCodes.MAX_DEPTH_EXCEEDED, 'The query nests too deeply to parse.', 400)
      }
      throw error
    }
  }
}

/**
 * The parse-time guards for a parser that cannot be wrapped (Apollo Server parses itself): `maxNesting` by the same
 * scan, and `maxTokens` by running graphql-js' lexer over the text, up to one token past the limit, without
 * building the AST. Text the lexer cannot read is left to the parser, which reports the syntax error.
 */
export function checkSourceBeforeParse(text: string, limits: ParseLimits): void {
  checkNesting(text, limits)
  const { maxTokens } = limits
  if (maxTokens === undefined) return
  const lexer = new Lexer(new Source(text))
  let tokens = 0
  try {
    // Comments are skipped by `advance`; graphql-js' parser does not count them either.
    while (lexer.advance().kind !== TokenKind.EOF) {
      if (++tokens > maxTokens) throw tooManyTokens(limits, maxTokens)
    }
  } catch (error) {
    if (error instanceof GraphQLError && error.extensions.code === RefusalCodes.TOO_MANY_TOKENS) throw error
  }
}

function checkNesting(text: string, limits: ParseLimits): void {
  if (limits.maxNesting !== undefined && bracketNesting(text, limits.maxNesting) > limits.maxNesting) {
    throw limitRefusal(
      limits,
      RefusalCodes.MAX_DEPTH_EXCEEDED,
      400,
      limits.maxNesting,
      `The query nests brackets deeper than ${limits.maxNesting}.`,
      'The query nests brackets too deeply.',
    )
  }
}

function tooManyTokens(limits: ParseLimits, maxTokens: number): GraphQLError {
  return limitRefusal(
    limits,
    RefusalCodes.TOO_MANY_TOKENS,
    400,
    maxTokens,
    `The query has more than ${maxTokens} tokens.`,
    'The query has too many tokens.',
  )
}

/**
 * The deepest nesting of `{`, `[` and `(` in GraphQL source, outside strings, block strings and comments; stops
 * counting once past `cap`. One pass, no allocation.
 */
export function bracketNesting(text: string, cap: number): number {
  let depth = 0
  let deepest = 0
  const length = text.length
  for (let i = 0; i < length; i++) {
    const code = text.charCodeAt(i)
    if (code === 0x7b || code === 0x5b || code === 0x28) {
      // { [ (
      depth++
      if (depth > deepest) {
        deepest = depth
        if (deepest > cap) return deepest
      }
    } else if (code === 0x7d || code === 0x5d || code === 0x29) {
      // } ] )
      if (depth > 0) depth--
    } else if (code === 0x23) {
      // # comment, to the end of the line
      while (i < length && text.charCodeAt(i) !== 0x0a && text.charCodeAt(i) !== 0x0d) i++
    } else if (code === 0x22) {
      // " string, or """ block string
      if (text.startsWith('"""', i)) {
        i += 3
        while (i < length && !text.startsWith('"""', i)) i += text.startsWith('\\"""', i) ? 4 : 1
        i += 2
      } else {
        i++
        while (i < length && text.charCodeAt(i) !== 0x22 && text.charCodeAt(i) !== 0x0a) {
          if (text.charCodeAt(i) === 0x5c) i++ // backslash escapes the next character
          i++
        }
      }
    }
  }
  return deepest
}
