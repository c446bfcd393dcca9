import { type IncomingMessage, ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import type { SocketIoRefusal } from '../client/socketIoRefusals.js'
import type { Decision } from '../core/decision.js'
import type { RateLimiter } from '../core/rateLimiter.js'
import { rateLimitHeaders } from '../core/rateLimitHeaders.js'
import { clientIpResolver } from '../identity/clientIp.js'
import { createIpKeyer } from '../identity/ipKey.js'
import { handshakesLimiter, refuse } from '../ws/upgradeGuard.js'
import type { ResolvedSocketIoOptions } from './options.js'
import { refusal } from './refusals.js'

/** The request engine.io hands its middlewares: its query is parsed already. */
type EngineRequest = IncomingMessage & { _query?: Record<string, string> }

/** What engine.io passes a middleware as the response: a real one for polling, a stand-in holding the socket for upgrades. */
type EngineResponse = ServerResponse | { socket: Duplex }

/** Count of open engine.io connections (engine.io's `clientsCount`). */
export type OpenConnections = () => number

/**
 * Decides a new engine.io connection before its handshake, on both transports: the server-wide cap (503), then
 * handshakes per client address (429). It runs as an engine.io middleware — the stage before `allowRequest` where
 * the answer is written by us, so it carries `Retry-After` and the RateLimit fields (`allowRequest` can only
 * answer 403). Requests of an existing session (`sid`) pass untouched.
 */
export class HandshakeGuard {
  /**
   * Handshakes admitted or being decided, until engine.io opens their session or refuses it (`settle`): they count
   * against `maxConnections` like open connections, also while the app's `allowRequest` or `generateId` run.
   */
  private readonly opening = new Map<IncomingMessage, () => void>()
  private readonly handshakes: RateLimiter | undefined
  private readonly clientIp: (req: IncomingMessage) => string
  private readonly ipKey: (ip: string) => string
  closed = false

  constructor(
    private readonly options: ResolvedSocketIoOptions,
    private readonly openConnections: OpenConnections,
  ) {
    this.clientIp = clientIpResolver('protectSocketIo', { trustProxy: options.trustProxy })
    this.ipKey = createIpKeyer({ ipv6Prefix: options.ipv6Prefix, ipv4Prefix: options.ipv4Prefix })
    this.handshakes = handshakesLimiter(options)
  }

  /** The client's network as handshakes and the default identity count it (IPv6 by `ipv6Prefix`). */
  addressOf(req: IncomingMessage): string {
    return this.ipKey(this.clientIp(req))
  }

  /** The engine.io middleware (`engine.use`). */
  readonly middleware = (req: EngineRequest, res: EngineResponse, next: (err?: unknown) => void): void => {
    // engine.io takes a request for a handshake unless its `sid` is truthy (an empty `sid=` is a handshake).
    if (req._query?.sid) {
      next()
      return
    }
    const socket = res instanceof ServerResponse ? undefined : res.socket
    // Node took its own error listener off the socket before 'upgrade': a client resetting it while we decide would
    // otherwise be an uncaught 'error'.
    socket?.on('error', () => socket.destroy())
    if (this.closed || this.openConnections() + this.opening.size >= this.options.maxConnections) {
      answer(res, 503, { 'Retry-After': '1' }, refusal('UNAVAILABLE', 'Server full', 1000))
      return
    }
    // Whatever engine.io does with the request, it is settled once its connection is gone.
    const gone = () => this.settle(req)
    this.opening.set(req, gone)
    req.socket.once('close', gone)
    if (this.handshakes === undefined) {
      next()
      return
    }
    this.spend(req).then(
      (decision) => {
        if (decision.allowed) {
          next()
          return
        }
        this.settle(req)
        answerDecision(res, decision, this.handshakes as RateLimiter)
      },
      () => {
        this.settle(req)
        answer(res, 503, { 'Retry-After': '1' }, refusal('UNAVAILABLE', 'Unavailable', 1000))
      },
    )
  }

  /** Handshakes admitted whose session engine.io has not opened or refused yet. */
  get pending(): number {
    return this.opening.size
  }

  /** The handshake of `req` is over: its session is open (engine.io's `connection`), or refused. */
  settle(req: IncomingMessage): void {
    const gone = this.opening.get(req)
    if (gone === undefined) return
    this.opening.delete(req)
    req.socket.off('close', gone)
  }

  /** Spends one handshake token for the client of `req` (allowed when handshakes are not limited). */
  spend(req: IncomingMessage): Promise<Decision> {
    if (this.handshakes === undefined) return Promise.resolve(ALLOWED)
    return this.handshakes.consume(this.addressOf(req))
  }
}

const ALLOWED: Decision = {
  allowed: true,
  limit: 0,
  remaining: 0,
  resetMs: 0,
  retryAfterMs: 0,
  delayMs: 0,
  neverAllowed: false,
  source: 'guard',
}

function answerDecision(res: EngineResponse, decision: Decision, limiter: RateLimiter): void {
  const headers = rateLimitHeaders(decision, limiter.policy)
  answer(res, 429, headers, refusal('RATE_LIMITED', 'Too many handshakes', decision.retryAfterMs))
}

/**
 * Writes the refusal: a JSON body on polling (a browser reads the headers only if they are exposed to it), a plain
 * HTTP response on the raw socket of an upgrade, which is then closed.
 */
function answer(
  res: EngineResponse,
  status: number,
  headers: Record<string, string>,
  body: SocketIoRefusal,
): void {
  if (!(res instanceof ServerResponse)) {
    refuse(res.socket, status, headers)
    return
  }
  if (res.headersSent) {
    res.end()
    return
  }
  const text = JSON.stringify(body)
  res.writeHead(status, {
    ...headers,
    'Content-Type': 'application/json',
    'Content-Length': String(Buffer.byteLength(text)),
    'Access-Control-Expose-Headers': Object.keys(headers).join(', '),
    Connection: 'close',
  })
  res.end(text)
}
