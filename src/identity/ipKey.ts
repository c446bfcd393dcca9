import { isIP } from 'node:net'
import ipaddr from 'ipaddr.js'
import { invalidOption } from '../core/errors.js'
import { checkOptionKeys, optionNames } from '../core/knownOptions.js'

const OWNER = 'ipKey'
const OPTIONS = optionNames<IpKeyOptions>({ ipv6Prefix: true, ipv4Prefix: true })

/**
 * The network every address-keyed limiter of tollbooth counts an IPv6 client by, unless its `ipv6Prefix` says
 * otherwise: one home line or small site is usually delegated a /56 (RIPE-690 recommends a /56 or a /48 per end
 * site), so a /64 per client would let one subscriber rotate through 256 budgets.
 */
export const DEFAULT_IPV6_PREFIX = 56
/** IPv4 addresses are scarce and shared (NAT): each address is one client unless `ipv4Prefix` says otherwise. */
export const DEFAULT_IPV4_PREFIX = 32

export interface IpKeyOptions {
  /** IPv6 addresses are grouped by this network prefix (integer 1..128). Default 56: one key per /56 network. */
  ipv6Prefix?: number
  /** IPv4 addresses are grouped by this network prefix (integer 1..32). Default 32: one key per address. */
  ipv4Prefix?: number
}

/**
 * The rate-limit identity of an IP address.
 *
 * - IPv4: `1.2.3.4`, or the network `1.2.3.0/24` when `ipv4Prefix` < 32.
 * - IPv4-mapped IPv6 (`::ffff:1.2.3.4`): treated as the IPv4 address it carries.
 * - IPv6: the `/ipv6Prefix` network in RFC 5952 form, e.g. `2001:db8:1:200::/56` (one subscriber usually gets a
 *   whole /56, so per-address keys would let one client rotate through 2^72 identities). With `ipv6Prefix: 128`
 *   the plain address is returned. A zone id (`%eth0`) is dropped.
 * - Anything else (empty, garbage, `ip:port`, non-canonical IPv4 such as `010.0.0.1`): `'unknown'`, so that
 *   unparsable input cannot mint unbounded distinct keys; all such requests share one budget. Addresses from
 *   `clientIp` are always parsable unless `trustProxy` trusts a hop that writes garbage.
 *
 * Throws `TOLLBOOTH_ERR_INVALID_OPTION` on an invalid prefix option.
 */
export function ipKey(ip: string, options?: IpKeyOptions): string {
  checkOptionKeys(OWNER, options, OPTIONS)
  const { ipv6Prefix, ipv4Prefix } = resolveIpKeyOptions(options)
  return keyOf(ip, ipv6Prefix, ipv4Prefix)
}

/**
 * `ipKey` with its options checked once: the function to call per request. Every limiter tollbooth keys by client
 * address (the GraphQL budget's default identity, field limits, WebSocket handshakes and connections) uses one.
 * Throws `TOLLBOOTH_ERR_INVALID_OPTION` on an invalid prefix option.
 */
export function createIpKeyer(options?: IpKeyOptions): (ip: string) => string {
  checkOptionKeys(OWNER, options, OPTIONS)
  const { ipv6Prefix, ipv4Prefix } = resolveIpKeyOptions(options)
  return (ip) => keyOf(ip, ipv6Prefix, ipv4Prefix)
}

/**
 * The prefixes of `options` with their defaults, checked. `owner` and `path` name them in errors when they are
 * another factory's options (`useTollbooth: "fieldLimits[\"Mutation.login\"].ipv6Prefix" must be …`).
 */
export function resolveIpKeyOptions(
  options: IpKeyOptions | undefined,
  owner = OWNER,
  path = '',
): Required<IpKeyOptions> {
  return {
    ipv6Prefix: prefixOption(owner, `${path}ipv6Prefix`, options?.ipv6Prefix, DEFAULT_IPV6_PREFIX, 128),
    ipv4Prefix: prefixOption(owner, `${path}ipv4Prefix`, options?.ipv4Prefix, DEFAULT_IPV4_PREFIX, 32),
  }
}

function keyOf(ip: string, v6Prefix: number, v4Prefix: number): string {
  if (typeof ip !== 'string') return 'unknown'
  const kind = isIP(ip)
  if (kind === 4) return v4Prefix === 32 ? ip : ipv4Network(ipv4ToInt(ip), v4Prefix)
  if (kind !== 6) return 'unknown'

  const zone = ip.indexOf('%')
  let parsed: ipaddr.IPv6
  try {
    parsed = ipaddr.IPv6.parse(zone === -1 ? ip : ip.slice(0, zone))
  } catch {
    return 'unknown'
  }
  const parts = parsed.parts
  if (parsed.isIPv4MappedAddress()) {
    const n = (((parts[6] ?? 0) << 16) | (parts[7] ?? 0)) >>> 0
    return v4Prefix === 32 ? intToIPv4(n) : ipv4Network(n, v4Prefix)
  }
  if (v6Prefix === 128) return parsed.toRFC5952String()
  const masked = new Array<number>(8)
  for (let i = 0; i < 8; i++) {
    const bits = v6Prefix - i * 16
    const part = parts[i] ?? 0
    masked[i] = bits >= 16 ? part : bits <= 0 ? 0 : part & ((0xffff << (16 - bits)) & 0xffff)
  }
  return `${new ipaddr.IPv6(masked).toRFC5952String()}/${v6Prefix}`
}

function prefixOption(owner: string, option: string, value: unknown, fallback: number, max: number): number {
  if (value === undefined) return fallback
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max) {
    throw invalidOption(owner, option, `an integer from 1 to ${max}`, value)
  }
  return value
}

/** `ip` has passed `net.isIP(ip) === 4`: four canonical decimal octets. */
function ipv4ToInt(ip: string): number {
  let n = 0
  let octet = 0
  for (let i = 0; i < ip.length; i++) {
    const c = ip.charCodeAt(i)
    if (c === 0x2e /* . */) {
      n = n * 256 + octet
      octet = 0
    } else {
      octet = octet * 10 + (c - 0x30)
    }
  }
  return n * 256 + octet
}

function intToIPv4(n: number): string {
  return `${n >>> 24}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`
}

function ipv4Network(n: number, prefix: number): string {
  const mask = (0xffffffff << (32 - prefix)) >>> 0
  return `${intToIPv4((n & mask) >>> 0)}/${prefix}`
}
