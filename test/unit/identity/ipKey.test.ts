import { describe, expect, it } from 'vitest'
import { DEFAULT_IPV6_PREFIX, ipKey } from '../../../src/identity/ipKey.js'

function codeOf(fn: () => unknown): unknown {
  try {
    fn()
  } catch (error) {
    return (error as { code?: unknown }).code
  }
  return undefined
}

describe('ipKey', () => {
  it('keeps an IPv4 address as is by default', () => {
    expect(ipKey('1.2.3.4')).toBe('1.2.3.4')
    expect(ipKey('255.255.255.255')).toBe('255.255.255.255')
  })

  it('groups IPv4 by a shorter prefix', () => {
    expect(ipKey('1.2.3.4', { ipv4Prefix: 24 })).toBe('1.2.3.0/24')
    expect(ipKey('192.168.200.77', { ipv4Prefix: 20 })).toBe('192.168.192.0/20')
    expect(ipKey('255.255.255.255', { ipv4Prefix: 1 })).toBe('128.0.0.0/1')
    expect(ipKey('10.20.30.40', { ipv4Prefix: 31 })).toBe('10.20.30.40/31')
  })

  it('unwraps IPv4-mapped IPv6', () => {
    expect(ipKey('::ffff:10.0.0.1')).toBe('10.0.0.1')
    expect(ipKey('::ffff:a00:1')).toBe('10.0.0.1')
    expect(ipKey('0:0:0:0:0:FFFF:10.0.0.1')).toBe('10.0.0.1')
    expect(ipKey('::ffff:10.0.0.1', { ipv4Prefix: 8 })).toBe('10.0.0.0/8')
  })

  it('reduces IPv6 to its /56 network by default', () => {
    expect(DEFAULT_IPV6_PREFIX).toBe(56)
    expect(ipKey('2001:db8:1:2:3:4:5:6')).toBe('2001:db8:1::/56')
    expect(ipKey('2001:DB8:0001:02ab:aaaa:bbbb:cccc:dddd')).toBe('2001:db8:1:200::/56')
    expect(ipKey('2001:db8::1')).toBe('2001:db8::/56')
  })

  it('puts the 256 /64s of one /56 under one key and the next /56 under another', () => {
    const keys = new Set(
      Array.from({ length: 256 }, (_, i) => ipKey(`2001:db8:abcd:12${i.toString(16).padStart(2, '0')}::1`)),
    )
    expect([...keys]).toEqual(['2001:db8:abcd:1200::/56'])
    expect(ipKey('2001:db8:abcd:1200::1')).not.toBe(ipKey('2001:db8:abcd:1300::1'))
  })

  it('honours other IPv6 prefixes', () => {
    expect(ipKey('2001:db8:abcd:12ff::1', { ipv6Prefix: 56 })).toBe('2001:db8:abcd:1200::/56')
    expect(ipKey('2001:db8:abcd:12ff::1', { ipv6Prefix: 48 })).toBe('2001:db8:abcd::/48')
    expect(ipKey('2001:db8:abcd:12ff::1', { ipv6Prefix: 1 })).toBe('::/1')
    expect(ipKey('ffff::1', { ipv6Prefix: 3 })).toBe('e000::/3')
    expect(ipKey('2001:0db8:0:0:0:0:0:0001', { ipv6Prefix: 128 })).toBe('2001:db8::1')
  })

  it('drops a zone id', () => {
    expect(ipKey('fe80::1:2:3:4%eth0')).toBe('fe80::/56')
  })

  it("returns 'unknown' for anything that is not an address", () => {
    for (const bad of [
      '',
      'unknown',
      'abc',
      '1.2.3',
      '1.2.3.4.5',
      '256.1.1.1',
      '010.0.0.1',
      '1.2.3.4:80',
      ' 1.2.3.4',
    ]) {
      expect(ipKey(bad)).toBe('unknown')
    }
    expect(ipKey('2001:db8::g')).toBe('unknown')
    expect(ipKey(undefined as unknown as string)).toBe('unknown')
  })

  it.each([
    ['ipv6Prefix', 0],
    ['ipv6Prefix', 129],
    ['ipv6Prefix', 64.5],
    ['ipv6Prefix', '64'],
    ['ipv6Prefix', Number.NaN],
    ['ipv4Prefix', 0],
    ['ipv4Prefix', 33],
    ['ipv4Prefix', 24.1],
  ])('refuses %s = %s', (option, value) => {
    expect(codeOf(() => ipKey('1.2.3.4', { [option]: value }))).toBe('TOLLBOOTH_ERR_INVALID_OPTION')
    expect(() => ipKey('1.2.3.4', { [option]: value })).toThrow(new RegExp(`"${option}"`))
  })

  it('refuses an unknown option, naming the closest known one', () => {
    const options = { ipv6prefix: 48 } as never
    expect(() => ipKey('2001:db8::1', options)).toThrow(
      expect.objectContaining({
        code: 'TOLLBOOTH_ERR_INVALID_OPTION',
        message: 'ipKey: unknown option "ipv6prefix" (did you mean "ipv6Prefix"?)',
      }),
    )
  })
})
