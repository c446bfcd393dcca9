import { describe, expect, it } from 'vitest'
import { hashKey } from '../../../src/core/hashKey.js'

/** Published digest (hex) → the expected key: base64url, first 22 characters. */
function expectedKey(hex: string): string {
  return Buffer.from(hex, 'hex').toString('base64url').slice(0, 22)
}

describe('hashKey', () => {
  it('is SHA-256 in base64url truncated to 22 characters (FIPS 180-2 "abc" vector)', () => {
    const key = hashKey('abc')
    expect(key).toBe(expectedKey('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad'))
    expect(key).toBe('ungWv48Bz-pBQUDeXa4iI7')
  })

  it('is HMAC-SHA-256 when a secret is given (RFC 4231 test case 2)', () => {
    const key = hashKey('what do ya want for nothing?', 'Jefe')
    expect(key).toBe(expectedKey('5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843'))
  })

  it('hashes the empty identity (SHA-256 of "")', () => {
    expect(hashKey('')).toBe(expectedKey('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'))
  })

  it('is deterministic and depends on the secret', () => {
    expect(hashKey('user@example.com')).toBe(hashKey('user@example.com'))
    expect(hashKey('user@example.com', 's1')).toBe(hashKey('user@example.com', 's1'))
    expect(hashKey('user@example.com', 's1')).not.toBe(hashKey('user@example.com', 's2'))
    expect(hashKey('user@example.com', 's1')).not.toBe(hashKey('user@example.com'))
  })

  it('has 22 base64url characters and never a hash-tag brace', () => {
    for (const identity of ['1.2.3.4', '{tag}', 'é', 'a'.repeat(5000), '2001:db8::/64']) {
      const key = hashKey(identity, 'secret')
      expect(key).toMatch(/^[A-Za-z0-9_-]{22}$/)
      expect(key).not.toMatch(/[{}]/)
    }
  })

  it('refuses an empty or non-string secret', () => {
    for (const secret of ['', 42]) {
      let code: unknown
      try {
        hashKey('x', secret as string)
      } catch (error) {
        code = (error as { code?: unknown }).code
      }
      expect(code).toBe('TOLLBOOTH_ERR_INVALID_OPTION')
    }
  })
})
