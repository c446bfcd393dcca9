import type { IncomingHttpHeaders, IncomingMessage } from 'node:http'
import { isIP, isIPv4 } from 'node:net'
import ipaddr from 'ipaddr.js'
import proxyAddr from 'proxy-addr'
import { ErrorCodes, invalidArgument, invalidOption, TollboothError } from '../core/errors.js'
import { checkOptionKeys, optionNames } from '../core/knownOptions.js'

const OWNER = 'clientIp'

/** Returned when the client address cannot be known (socket already closed, unparsable address). */
export const UNKNOWN_IP = 'unknown'

/**
 * Which hops of `X-Forwarded-For` to believe.
 *
 * - `false` (default): use the socket's peer address only; `X-Forwarded-For` is ignored.
 * - `string | string[]`: addresses or CIDRs of your proxies, or the names `'loopback'`, `'linklocal'`,
 *   `'uniquelocal'` (as `proxy-addr` understands them). The client is the right-most address not in the list.
 * - `number`: trust this many hops, counting the socket peer as hop 0 (`1` = "one proxy in front of me").
 * - function `(addr, hopIndex) => boolean`: hop 0 is the socket peer, hop 1 the right-most
 *   `X-Forwarded-For` entry, and so on; return `true` to trust `addr` and keep walking left.
 *
 * `true` is refused: trusting every hop lets any client pick its own IP by sending `X-Forwarded-For`.
 * Only `X-Forwarded-For` is read (not the RFC 7239 `Forwarded` header).
 */
export type TrustProxy =
  | false
  | string
  | readonly string[]
  | number
  | ((addr: string, hopIndex: number) => boolean)

export interface ClientIpOptions {
  trustProxy?: TrustProxy
}

const OPTIONS = optionNames<ClientIpOptions>({ trustProxy: true })

/** The part of a Node `IncomingMessage` that is read. */
export interface ClientIpRequest {
  readonly socket?: { readonly remoteAddress?: string | undefined } | null | undefined
  readonly headers: IncomingHttpHeaders
}

export type ClientIpResolver = (req: ClientIpRequest) => string

type TrustFn = (addr: string, hopIndex: number) => boolean

/**
 * Compiles `options.trustProxy` once and returns a resolver to call per request.
 * Throws `TOLLBOOTH_ERR_INVALID_OPTION` on an invalid `trustProxy` (including `true`).
 *
 * The resolver returns the client address, normalized: IPv4-mapped IPv6 (`::ffff:1.2.3.4`) becomes `1.2.3.4`,
 * IPv6 is rendered canonically (RFC 5952), an `ip:port` or `[ipv6]:port` hop (written by some proxies) loses its
 * port. It returns `'unknown'` when the socket has no address (it was already closed) or when the chosen hop is
 * not an IP address: every such request then shares one identity, so do not let a misconfigured proxy produce them.
 */
export function createClientIpResolver(options?: ClientIpOptions): ClientIpResolver {
  return clientIpResolver(OWNER, options)
}

/** `createClientIpResolver` for a guard taking `trustProxy` among its own options: errors name `owner`. */
export function clientIpResolver(owner: string, options?: ClientIpOptions): ClientIpResolver {
  if (options != null && typeof options !== 'object') {
    throw invalidOption(owner, 'options', 'an object', options)
  }
  checkOptionKeys(owner, options, OPTIONS)
  const trust = compileTrust(owner, options?.trustProxy)
  if (trust === null) {
    return (req) => {
      const socketAddr = req.socket?.remoteAddress
      return socketAddr ? normalizeIp(socketAddr) : UNKNOWN_IP
    }
  }
  return (req) => {
    const socketAddr = req.socket?.remoteAddress
    if (!socketAddr) return UNKNOWN_IP
    const xff = req.headers['x-forwarded-for']
    if (xff === undefined || xff.length === 0) return normalizeIp(socketAddr)
    // Node joins repeated X-Forwarded-For fields into one string; a hand-built headers object may hold an array.
    const target = Array.isArray(xff)
      ? { socket: { remoteAddress: socketAddr }, headers: { 'x-forwarded-for': xff.join(',') } }
      : req
    return normalizeIp(proxyAddr(target as unknown as IncomingMessage, trust))
  }
}

const defaultResolver = createClientIpResolver()
const resolvers = new WeakMap<ClientIpOptions, ClientIpResolver>()

/**
 * The client's IP address for a Node HTTP request (see {@link createClientIpResolver} for the rules).
 * The trust setting is compiled once per options object and cached: pass the same object each time and do not
 * mutate it afterwards (or hold on to a resolver from `createClientIpResolver`).
 */
export function clientIp(req: ClientIpRequest, options?: ClientIpOptions): string {
  // Most often a GraphQL context without the request in it (Apollo Server's context holds only what you put there).
  if (typeof req !== 'object' || req === null) {
    throw invalidArgument('clientIp', 'req', 'a Node request (put `req` in your GraphQL context)', req)
  }
  if (options == null) return defaultResolver(req)
  let resolve = resolvers.get(options)
  if (resolve === undefined) {
    resolve = createClientIpResolver(options)
    resolvers.set(options, resolve)
  }
  return resolve(req)
}

/** Most proxies a hop count may trust: real chains are a few (a CDN, a load balancer, an ingress). */
export const MAX_PROXY_HOPS = 32

function compileTrust(owner: string, value: unknown): TrustFn | null {
  if (value === undefined || value === false) return null
  if (value === true) {
    throw new TollboothError(
      ErrorCodes.INVALID_OPTION,
      `${owner}: "trustProxy" must not be true: trusting every hop lets any client choose its own IP by sending ` +
        `X-Forwarded-For. List your proxies instead (e.g. trustProxy: ['loopback', '10.0.0.0/8']) or give the ` +
        `number of proxies in front of the server (e.g. trustProxy: 1)`,
    )
  }
  if (typeof value === 'number') {
    // A count past any real chain of proxies trusts every hop, as `true` would: the client writes its own address.
    if (!Number.isSafeInteger(value) || value < 0 || value > MAX_PROXY_HOPS) {
      throw invalidOption(owner, 'trustProxy', `a number of hops from 0 to ${MAX_PROXY_HOPS}`, value)
    }
    if (value === 0) return null
    return (_addr, hopIndex) => hopIndex < value
  }
  if (typeof value === 'function') return value as TrustFn
  if (typeof value === 'string' || Array.isArray(value)) {
    const list: unknown[] = typeof value === 'string' ? [value] : value
    if (list.length === 0) return null
    for (const entry of list) {
      if (typeof entry !== 'string' || entry.length === 0) {
        throw invalidOption(owner, 'trustProxy', 'a list of proxy addresses or CIDRs', entry)
      }
    }
    try {
      return proxyAddr.compile(list as string[])
    } catch (cause) {
      throw new TollboothError(
        ErrorCodes.INVALID_OPTION,
        `${owner}: "trustProxy" must list IP addresses, CIDRs, 'loopback', 'linklocal' or 'uniquelocal': ${
          (cause as Error).message
        }`,
        { cause },
      )
    }
  }
  throw invalidOption(
    owner,
    'trustProxy',
    'false, a number of hops, an address/CIDR or list of them, or a function',
    value,
  )
}

/** Canonical text of an address; `'unknown'` when it is not one. */
function normalizeIp(addr: string): string {
  const kind = isIP(addr)
  if (kind === 4) return addr
  if (kind === 6) {
    // Fast path for the common dual-stack form written by Node.
    if (addr.startsWith('::ffff:')) {
      const rest = addr.slice(7)
      if (isIPv4(rest)) return rest
    }
    return canonicalIPv6(addr)
  }
  return stripPort(addr)
}

function canonicalIPv6(addr: string): string {
  try {
    const parsed = ipaddr.IPv6.parse(addr)
    return parsed.isIPv4MappedAddress() ? parsed.toIPv4Address().toString() : parsed.toRFC5952String()
  } catch {
    return UNKNOWN_IP
  }
}

/** `1.2.3.4:5678` → `1.2.3.4`, `[2001:db8::1]:443` / `[2001:db8::1]` → `2001:db8::1`; anything else → unknown. */
function stripPort(addr: string): string {
  if (addr.charCodeAt(0) === 0x5b /* [ */) {
    const close = addr.indexOf(']')
    if (close === -1) return UNKNOWN_IP
    const rest = addr.slice(close + 1)
    if (rest.length > 0 && !isPort(rest)) return UNKNOWN_IP
    const inner = addr.slice(1, close)
    return isIP(inner) === 6 ? normalizeIp(inner) : UNKNOWN_IP
  }
  const colon = addr.indexOf(':')
  if (colon === -1 || addr.indexOf(':', colon + 1) !== -1) return UNKNOWN_IP
  const host = addr.slice(0, colon)
  return isIPv4(host) && isPort(addr.slice(colon)) ? host : UNKNOWN_IP
}

/** `:` followed by 1 to 5 digits. */
function isPort(suffix: string): boolean {
  if (suffix.length < 2 || suffix.length > 6 || suffix.charCodeAt(0) !== 0x3a) return false
  for (let i = 1; i < suffix.length; i++) {
    const c = suffix.charCodeAt(i)
    if (c < 0x30 || c > 0x39) return false
  }
  return true
}
