import type { IncomingMessage } from 'node:http'
import { invalidOption } from '../core/errors.js'
import { type ClientIpRequest, clientIpResolver, type TrustProxy } from '../identity/clientIp.js'
import { createIpKeyer, resolveIpKeyOptions } from '../identity/ipKey.js'

/** How a guard names the identity a request's budget belongs to. */
export interface IdentityOptions<Req extends IncomingMessage = IncomingMessage> {
  /**
   * The identity of a request: a user id, API key or tenant from your authentication (may be async). Default: the
   * client address through `trustProxy`, IPv6 grouped by `ipv6Prefix` (one client usually holds a whole /56).
   */
  identify?: (req: Req) => string | Promise<string>
  /** Which `X-Forwarded-For` hops to believe for the default identity, as in `clientIp`. Default: none. */
  trustProxy?: TrustProxy
  /** Prefix IPv6 client addresses are grouped by (1..128). Default 56. */
  ipv6Prefix?: number
  /** Prefix IPv4 client addresses are grouped by (1..32). Default 32. */
  ipv4Prefix?: number
}

/**
 * The identity function of a guard's options, checked at startup: the user's `identify`, or the client address
 * grouped by prefix (the one keyer every address-keyed limiter of tollbooth uses). `owner` names the guard in errors.
 */
export function requestIdentity<Req extends IncomingMessage>(
  owner: string,
  options: IdentityOptions<Req>,
): (req: Req) => string | Promise<string> {
  if (options.identify !== undefined) {
    if (typeof options.identify !== 'function')
      throw invalidOption(owner, 'identify', 'a function', options.identify)
    return options.identify
  }
  const { ipv6Prefix, ipv4Prefix } = resolveIpKeyOptions(options, owner)
  const keyOf = createIpKeyer({ ipv6Prefix, ipv4Prefix })
  const resolveIp = clientIpResolver(
    owner,
    options.trustProxy === undefined ? {} : { trustProxy: options.trustProxy },
  )
  return (req) => keyOf(resolveIp(req as ClientIpRequest))
}
