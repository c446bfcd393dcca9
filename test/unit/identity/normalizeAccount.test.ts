/**
 * `normalizeAccount`, the login guard's default: one account however it is spelt, and idempotent (`n(n(x)) === n(x)`)
 * over a corpus of confusables, compatibility forms, combining marks and invisible characters, so that a name stored
 * normalized and looked up again meets the budget it was counted in.
 */
import { describe, expect, it } from 'vitest'
import { normalizeAccount } from '../../../src/identity/normalizeAccount.js'

/**
 * Characters that move under NFKC, case mapping or stripping: compatibility forms (full-width, ligatures, letterlike
 * symbols, circled digits, squared units), combining marks and the characters they compose with, case oddities
 * (dotted and dotless i, final sigma, sharp s, Kelvin and Ångström signs, title-case digraphs, iota subscript),
 * Hangul jamo and fillers, invisible and control characters, bidi controls, tags, lone and paired surrogates.
 */
const ALPHABET = [
  ...'aeiIsSΣςßẞİıKÅΩǅǆǄϴϑΙ@.',
  ...['\u212a', '\u212b', '\u2126', '\u1fbe', '\u0345', '\u1e9b', 'ᾈ', 'ᾳ', 'ῼ'],
  ...['ﬁ', 'ﬃ', 'ﬀ', 'ℌ', '①', '㎏', 'Ａ', 'ａ', '＠', '．', 'ﹰ', 'ﹱ', '\u0640'],
  ...['\u0301', '\u0300', '\u0307', '\u0327', '\u0323', '\u0340', '\u0344', '\u0f73', '\u0f77'],
  ...['\u1100', '\u1161', '\u11a8', '\u3131', '\u314f', '\u3164', '\uffa0', '\u115f', '\u1160'],
  ...['\u200b', '\u200c', '\u200d', '\u00ad', '\u2060', '\ufe0f', '\ufe00', '\u180e', '\u{e0041}'],
  ...[' ', '\t', '\n', '\u00a0', '\u3000', '\u2028', '\u202e', '\u061c', '\u0000', '\u007f'],
  ...['\ud800', '\udc00', '\ud83d\ude00'],
]

/** A deterministic xorshift32 stream in [0, 1). */
function random(seed: number): () => number {
  let state = seed
  return () => {
    state ^= state << 13
    state ^= state >>> 17
    state ^= state << 5
    return (state >>> 0) / 2 ** 32
  }
}

describe('normalizeAccount', () => {
  it('is idempotent over 200,000 names drawn from confusables and invisible characters', () => {
    const next = random(25)
    const failures: string[] = []
    for (let i = 0; i < 200_000; i++) {
      let name = ''
      const length = 1 + Math.floor(next() * 8)
      for (let c = 0; c < length; c++) name += ALPHABET[Math.floor(next() * ALPHABET.length)]
      const once = normalizeAccount(name)
      if (normalizeAccount(once) !== once) failures.push(JSON.stringify(name))
    }
    expect(failures.slice(0, 5)).toEqual([])
  })

  it('composes across an invisible character: `e`, a zero-width joiner and a combining acute are one é', () => {
    const once = normalizeAccount('cafe\u200d\u0301@example.com')
    expect(once).toBe('caf\u00e9@example.com')
    expect(normalizeAccount(once)).toBe(once)
  })

  it('turns lone surrogates into U+FFFD, as a UTF-8 encoder does, keeping paired ones', () => {
    expect(normalizeAccount('\ud800'.repeat(256))).toBe('\ufffd'.repeat(256))
    expect(normalizeAccount('al\udfffice')).toBe('al\ufffdice')
    expect(normalizeAccount('\ud83d\ude00@example.com')).toBe('\ud83d\ude00@example.com')
  })

  it('counts spellings of one name as one account', () => {
    const alice = 'alice@example.com'
    for (const spelling of [
      ' Alice@Example.COM ',
      'ＡＬＩＣＥ＠ｅｘａｍｐｌｅ．ｃｏｍ\u3000',
      'al\u200bice@example.com',
      '\u2060alice@exam\u00adple.com\ufe0f',
      'alice@example.com\u0000',
    ]) {
      expect(normalizeAccount(spelling)).toBe(alice)
    }
  })
})
