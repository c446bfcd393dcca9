import { describe, expect, it } from 'vitest'
import { type ClientIpRequest, clientIp, createClientIpResolver } from '../../../src/identity/clientIp.js'

function req(remoteAddress: string | undefined, xff?: string | string[]): ClientIpRequest {
  return { socket: { remoteAddress }, headers: xff === undefined ? {} : { 'x-forwarded-for': xff } }
}

function codeOf(fn: () => unknown): unknown {
  try {
    fn()
  } catch (error) {
    return (error as { code?: unknown }).code
  }
  return undefined
}

describe('clientIp without trustProxy', () => {
  it('refuses what is not a request, saying where the request belongs', () => {
    // A GraphQL context without `req` hands clientIp undefined.
    expect(codeOf(() => clientIp(undefined as unknown as ClientIpRequest))).toBe(
      'TOLLBOOTH_ERR_INVALID_ARGUMENT',
    )
    expect(() => clientIp(undefined as unknown as ClientIpRequest)).toThrow(
      /put `req` in your GraphQL context/,
    )
  })

  it('returns the socket address', () => {
    expect(clientIp(req('203.0.113.7'))).toBe('203.0.113.7')
  })

  it('ignores X-Forwarded-For', () => {
    expect(clientIp(req('203.0.113.7', '198.51.100.1'))).toBe('203.0.113.7')
    expect(clientIp(req('203.0.113.7', '198.51.100.1'), { trustProxy: false })).toBe('203.0.113.7')
    expect(clientIp(req('203.0.113.7', '198.51.100.1'), {})).toBe('203.0.113.7')
  })

  it('unwraps IPv4-mapped IPv6', () => {
    expect(clientIp(req('::ffff:10.0.0.1'))).toBe('10.0.0.1')
    expect(clientIp(req('::FFFF:10.0.0.1'))).toBe('10.0.0.1')
    expect(clientIp(req('::ffff:a00:1'))).toBe('10.0.0.1')
  })

  it('renders IPv6 canonically', () => {
    expect(clientIp(req('2001:db8::1'))).toBe('2001:db8::1')
    expect(clientIp(req('2001:DB8:0:0:0:0:0:1'))).toBe('2001:db8::1')
  })

  it("returns 'unknown' without a socket address", () => {
    expect(clientIp(req(undefined))).toBe('unknown')
    expect(clientIp({ socket: null, headers: {} })).toBe('unknown')
    expect(clientIp(req(undefined, '198.51.100.1'), { trustProxy: 'loopback' })).toBe('unknown')
  })
})

describe('clientIp behind trusted proxies', () => {
  const trustLoopback = { trustProxy: 'loopback' as const }

  it('honours X-Forwarded-For through one trusted proxy', () => {
    expect(clientIp(req('127.0.0.1', '198.51.100.1'), trustLoopback)).toBe('198.51.100.1')
  })

  it('picks the right-most untrusted address and ignores spoofed left-most entries', () => {
    // The client sent "X-Forwarded-For: 1.1.1.1, 2.2.2.2"; the proxy appended the real peer 198.51.100.1.
    expect(clientIp(req('127.0.0.1', '1.1.1.1, 2.2.2.2, 198.51.100.1'), trustLoopback)).toBe('198.51.100.1')
  })

  it('walks through every trusted hop', () => {
    const options = { trustProxy: ['loopback', '10.0.0.0/8'] }
    expect(clientIp(req('127.0.0.1', '6.6.6.6, 198.51.100.1, 10.1.2.3'), options)).toBe('198.51.100.1')
  })

  it('does not trust X-Forwarded-For from an untrusted peer', () => {
    expect(clientIp(req('203.0.113.7', '198.51.100.1'), trustLoopback)).toBe('203.0.113.7')
  })

  it('returns the last trusted hop when the whole chain is trusted', () => {
    expect(clientIp(req('127.0.0.1', '10.0.0.5'), { trustProxy: ['loopback', '10.0.0.0/8'] })).toBe(
      '10.0.0.5',
    )
  })

  it('uses the socket address when there is no X-Forwarded-For', () => {
    expect(clientIp(req('127.0.0.1'), trustLoopback)).toBe('127.0.0.1')
    expect(clientIp(req('127.0.0.1', ''), trustLoopback)).toBe('127.0.0.1')
  })

  it('trusts a number of hops, counting the socket peer as hop 0', () => {
    const xff = '6.6.6.6, 198.51.100.1, 10.0.0.2'
    expect(clientIp(req('10.0.0.1', xff), { trustProxy: 1 })).toBe('10.0.0.2')
    expect(clientIp(req('10.0.0.1', xff), { trustProxy: 2 })).toBe('198.51.100.1')
    expect(clientIp(req('10.0.0.1', xff), { trustProxy: 0 })).toBe('10.0.0.1')
  })

  it('accepts a trust function with hop indexes', () => {
    const seen: Array<[string, number]> = []
    const options = {
      trustProxy: (addr: string, hop: number) => {
        seen.push([addr, hop])
        return addr === '10.0.0.1' || addr === '10.0.0.2'
      },
    }
    expect(clientIp(req('10.0.0.1', '198.51.100.1, 10.0.0.2'), options)).toBe('198.51.100.1')
    expect(seen).toEqual([
      ['10.0.0.1', 0],
      ['10.0.0.2', 1],
    ])
  })

  it('trusts an IPv4 proxy seen through an IPv4-mapped socket address and unwraps the result', () => {
    expect(clientIp(req('::ffff:127.0.0.1', '::ffff:198.51.100.1'), trustLoopback)).toBe('198.51.100.1')
  })

  it('joins repeated X-Forwarded-For fields given as an array', () => {
    expect(clientIp(req('127.0.0.1', ['1.1.1.1', '198.51.100.1']), trustLoopback)).toBe('198.51.100.1')
  })

  it('strips a port written by the proxy and maps garbage to unknown', () => {
    expect(clientIp(req('127.0.0.1', '198.51.100.1:5678'), trustLoopback)).toBe('198.51.100.1')
    expect(clientIp(req('127.0.0.1', '[2001:db8::1]:443'), trustLoopback)).toBe('2001:db8::1')
    expect(clientIp(req('127.0.0.1', 'not-an-ip'), trustLoopback)).toBe('unknown')
    expect(clientIp(req('127.0.0.1', '1.2.3.4:99999999'), trustLoopback)).toBe('unknown')
  })
})

describe('clientIp options', () => {
  it('refuses trustProxy: true with a clear error', () => {
    const options = { trustProxy: true } as unknown as Parameters<typeof clientIp>[1]
    expect(codeOf(() => clientIp(req('127.0.0.1'), options))).toBe('TOLLBOOTH_ERR_INVALID_OPTION')
    expect(() => createClientIpResolver(options)).toThrow(/trustProxy.*list your proxies/is)
  })

  it.each([
    ['a negative hop count', -1],
    ['a fractional hop count', 1.5],
    ['infinite hops', Number.POSITIVE_INFINITY],
    // Past any real chain of proxies, a count trusts every hop, as true would.
    ['33 hops', 33],
    ['a billion hops', 1e9],
    ['an invalid address', 'not-an-ip'],
    ['an invalid range', '10.0.0.0/33'],
    ['an empty string', ''],
    ['a list with a non-string', ['loopback', 42]],
    ['an object', { proxies: [] }],
    ['null', null],
  ])('refuses %s', (_label, trustProxy) => {
    const options = { trustProxy } as unknown as Parameters<typeof clientIp>[1]
    expect(codeOf(() => createClientIpResolver(options))).toBe('TOLLBOOTH_ERR_INVALID_OPTION')
  })

  it('accepts a hop count up to 32', () => {
    const chain = Array.from({ length: 40 }, (_, i) => `198.51.100.${i + 1}`).join(', ')
    // The socket peer is hop 0, the right-most X-Forwarded-For entry hop 1: 32 hops trusted name the 32nd from the right.
    expect(clientIp(req('10.0.0.1', chain), { trustProxy: 32 })).toBe('198.51.100.9')
  })

  it('refuses an unknown option, naming the closest known one', () => {
    const options = { trustProxy: 1, trustproxy: 2 }
    const message = 'clientIp: unknown option "trustproxy" (did you mean "trustProxy"?)'
    expect(() => createClientIpResolver(options)).toThrow(
      expect.objectContaining({ code: 'TOLLBOOTH_ERR_INVALID_OPTION', message }),
    )
    expect(() => clientIp(req('127.0.0.1'), options)).toThrow(message)
  })

  it('names the option in the message', () => {
    expect(() => createClientIpResolver({ trustProxy: '10.0.0.0/33' })).toThrow(/"trustProxy"/)
  })

  it('compiles the trust setting once per options object', () => {
    let calls = 0
    const options = {
      trustProxy: (_addr: string, hop: number) => {
        calls++
        return hop === 0
      },
    }
    expect(clientIp(req('10.0.0.1', '198.51.100.1'), options)).toBe('198.51.100.1')
    expect(clientIp(req('10.0.0.1', '198.51.100.2'), options)).toBe('198.51.100.2')
    expect(calls).toBe(2)
  })

  it('a resolver gives the same answers as clientIp', () => {
    const resolve = createClientIpResolver({ trustProxy: 'loopback' })
    expect(resolve(req('127.0.0.1', '1.1.1.1, 198.51.100.1'))).toBe('198.51.100.1')
    expect(resolve(req('203.0.113.7', '198.51.100.1'))).toBe('203.0.113.7')
  })
})
