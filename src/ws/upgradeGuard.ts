import { type IncomingMessage, STATUS_CODES } from 'node:http'
import type { Duplex } from 'node:stream'
import type { Decision } from '../core/decision.js'
import type { FailPolicy } from '../core/failPolicy.js'
import type { LimiterHooks } from '../core/hooks.js'
import { type ConcurrencyLimiter, concurrencyLimit, type Lease } from '../core/limiters/concurrencyLimit.js'
import { tokenBucket } from '../core/limiters/tokenBucket.js'
import type { RateLimiter } from '../core/rateLimiter.js'
import { rateLimitHeaders } from '../core/rateLimitHeaders.js'
import type { Store } from '../core/stores/store.js'
import { clientIpResolver } from '../identity/clientIp.js'
import { createIpKeyer } from '../identity/ipKey.js'
import type { ResolvedWebSocketOptions } from './options.js'
import type { SharedBudget } from './sharedBudget.js'

/** An admitted upgrade: who it is and the connection slot it holds. */
export interface Admission {
  readonly identity: string
  readonly lease: Lease
}

/**
 * Decides an upgrade before the 101: server-wide cap (503), handshakes per IP (429), identity (401 when `identify`
 * throws), connections per identity (429), then draws the identity's first shared message tokens, if any. A refusal is written as a plain HTTP response on the raw socket, which
 * is then closed: a client never sees 101-then-close for a limit known at upgrade time.
 */
export class UpgradeGuard {
  /** Upgrades being decided now; they count against `maxConnections` like open connections. */
  pending = 0
  readonly connectionLeases: ConcurrencyLimiter
  private readonly handshakes: RateLimiter | undefined
  private readonly clientIp: (req: IncomingMessage) => string
  /** The client's network as handshakes and the default identity count it (IPv6 by `ipv6Prefix`). */
  private readonly ipKey: (ip: string) => string

  constructor(
    private readonly options: ResolvedWebSocketOptions,
    private readonly budget: SharedBudget | undefined,
  ) {
    const { store, failPolicy, name, hooks } = options
    this.clientIp = clientIpResolver('protectWebSocketServer', { trustProxy: options.trustProxy })
    this.ipKey = createIpKeyer({ ipv6Prefix: options.ipv6Prefix, ipv4Prefix: options.ipv4Prefix })
    this.connectionLeases = concurrencyLimit({
      name: `${name}-connections`,
      max: options.maxConnectionsPerIdentity,
      leaseMs: options.leaseMs,
      failPolicy,
      ...(store === undefined ? {} : { store }),
      ...(hooks === undefined ? {} : { hooks }),
    })
    this.handshakes = handshakesLimiter(options)
  }

  /**
   * Admits or refuses the upgrade. Resolves `undefined` when refused (the response is already written) or when the
   * client went away meanwhile (any slot taken for it is given back).
   */
  async admit(req: IncomingMessage, socket: Duplex, openConnections: number): Promise<Admission | undefined> {
    if (openConnections + this.pending >= this.options.maxConnections) {
      refuse(socket, 503, { 'Retry-After': '1' })
      return undefined
    }
    this.pending++
    try {
      const ip = this.ipKey(this.clientIp(req))
      if (this.handshakes !== undefined) {
        const handshake = await this.handshakes.consume(ip)
        if (!handshake.allowed) return refuseDecision(socket, handshake, this.handshakes.policy)
      }
      let identity: string
      try {
        identity = this.options.identify === undefined ? ip : await this.options.identify(req)
      } catch {
        refuse(socket, 401, {})
        return undefined
      }
      if (typeof identity !== 'string' || identity.length === 0) {
        refuse(socket, 401, {})
        return undefined
      }
      if (socket.destroyed) return undefined
      const lease = await this.connectionLeases.acquire(identity)
      if (!lease.allowed) return refuseDecision(socket, lease, connectionPolicy(this.connectionLeases))
      await this.budget?.join(identity)
      if (socket.destroyed) {
        // The client left while we were deciding: no reservation may outlive it.
        this.budget?.leave(identity)
        await lease.release()
        return undefined
      }
      return { identity, lease }
    } finally {
      this.pending--
    }
  }
}

/**
 * The handshakes-per-address token bucket of a realtime guard (`<name>-handshakes`), or `undefined` when
 * `handshakesPerIp` is `false`.
 */
export function handshakesLimiter(options: {
  readonly name: string
  readonly handshakesPerIp: { capacity: number; refillPerSecond: number } | false
  readonly failPolicy: FailPolicy
  readonly store: Store | undefined
  readonly hooks: LimiterHooks | undefined
}): RateLimiter | undefined {
  const { name, handshakesPerIp, failPolicy, store, hooks } = options
  if (handshakesPerIp === false) return undefined
  return tokenBucket({
    name: `${name}-handshakes`,
    ...handshakesPerIp,
    failPolicy,
    ...(store === undefined ? {} : { store }),
    ...(hooks === undefined ? {} : { hooks }),
  })
}

function connectionPolicy(connections: ConcurrencyLimiter) {
  return { name: connections.name, quota: connections.limit, unit: 'concurrent-requests' as const }
}

function refuseDecision(
  socket: Duplex,
  decision: Decision,
  policy: Parameters<typeof rateLimitHeaders>[1],
): undefined {
  refuse(socket, 429, rateLimitHeaders(decision, policy))
  return undefined
}

/** Writes a complete HTTP response on the raw upgrade socket and closes it (what ws' abortHandshake does). */
export function refuse(socket: Duplex, status: number, headers: Record<string, string>): void {
  if (!socket.writable || socket.destroyed) {
    socket.destroy()
    return
  }
  const body = STATUS_CODES[status] ?? 'Refused'
  const lines = [
    `HTTP/1.1 ${status} ${body}`,
    'Connection: close',
    'Content-Type: text/plain',
    `Content-Length: ${Buffer.byteLength(body)}`,
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
  ]
  socket.once('finish', () => socket.destroy())
  socket.end(`${lines.join('\r\n')}\r\n\r\n${body}`)
}

/**
 * Whether ws would accept this request as a WebSocket handshake (method, Upgrade, key, version). Requests it would
 * answer 400 or 405 anyway are left to it without spending any budget.
 */
export function isWebSocketHandshake(req: IncomingMessage): boolean {
  // ws reads the version as a number (`+header`): '013', '13.0', '0xd' and ' 13' are all 13 to it, so they must be
  // here too, or such a handshake would be upgraded unguarded.
  const version = Number(req.headers['sec-websocket-version'])
  return (
    req.method === 'GET' &&
    req.headers.upgrade?.toLowerCase() === 'websocket' &&
    /^[+/0-9A-Za-z]{22}==$/.test(req.headers['sec-websocket-key'] ?? '') &&
    (version === 13 || version === 8)
  )
}
