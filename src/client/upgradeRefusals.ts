/** What a refused WebSocket upgrade answered, as far as the client could see it. */
export interface RefusedUpgrade {
  /** The HTTP status of the refusal (429 and 503 are worth retrying; 401, 403, 400 are not). */
  readonly status: number
  /** Its headers (`Retry-After`, the RateLimit fields), when the WebSocket implementation exposes them. */
  readonly headers?: Readonly<Record<string, unknown>>
}

/** Refusals seen by sockets of `withUpgradeRefusals` classes; weak, so a socket's entry goes with the socket. */
const refusals = new WeakMap<object, RefusedUpgrade>()

/** The listener API of a `ws` WebSocket that is used here (Node's `EventEmitter`). */
interface EmitterSocket {
  on(event: 'unexpected-response', listener: (req: unknown, res: UpgradeResponse) => void): unknown
  terminate(): void
}

interface UpgradeResponse {
  readonly statusCode?: number
  readonly headers?: Readonly<Record<string, unknown>>
}

// biome-ignore lint/suspicious/noExplicitAny: a mixin's base constructor must take `any[]` (TS2545).
type WebSocketClass = new (...args: any[]) => object

/**
 * A subclass of a `ws` WebSocket class (Node) whose sockets keep the status and headers of a refused upgrade, so
 * that `graphqlWsRetry`'s `shouldRetry` can honour its `Retry-After` and tell a 429 or 503 (retried) from a 401 or
 * 403 (not). Pass it as graphql-ws' `webSocketImpl`. A class without ws' `unexpected-response` event is returned
 * unchanged in behaviour: browsers and WHATWG WebSockets never show a refused upgrade's answer to scripts (the
 * page sees an `error` event and a close with code 1006), so there the backoff alone applies.
 */
export function withUpgradeRefusals<C extends WebSocketClass>(WebSocket: C): C {
  return class extends WebSocket {
    // biome-ignore lint/suspicious/noExplicitAny: the constructor of the mixin takes what the base takes.
    constructor(...args: any[]) {
      super(...args)
      const socket = this as unknown as Partial<EmitterSocket>
      if (typeof socket.on !== 'function' || typeof socket.terminate !== 'function') return
      const emitter = socket as EmitterSocket
      emitter.on('unexpected-response', (_req, res) => {
        const status = typeof res.statusCode === 'number' ? res.statusCode : 0
        refusals.set(this, res.headers === undefined ? { status } : { status, headers: res.headers })
        // With a listener on this event, ws leaves the handshake to it: end it as ws would have, which emits the
        // 'error' (then the 1006 close) that graphql-ws passes to `shouldRetry`.
        emitter.terminate()
      })
    }
  }
}

/**
 * The refused upgrade behind a graphql-ws `error` or `closed` event, if its socket saw one: from a
 * `withUpgradeRefusals` socket (status and headers), else from ws' own error message (status only).
 */
export function refusedUpgradeOf(event: unknown): RefusedUpgrade | undefined {
  if (typeof event !== 'object' || event === null) return undefined
  const target = (event as { target?: unknown }).target
  if (typeof target === 'object' && target !== null) {
    const seen = refusals.get(target)
    if (seen !== undefined) return seen
  }
  // ws without the subclass: "Unexpected server response: 429", on the ErrorEvent and on its `error`.
  const message = (event as { message?: unknown }).message
  const match = typeof message === 'string' ? /^Unexpected server response: (\d{3})$/.exec(message) : null
  return match === null ? undefined : { status: Number(match[1]) }
}
