import { ErrorCodes, TollboothError } from '../errors.js'
import { isCluster, type RedisClient } from './redisClient.js'

/**
 * Whether an ioredis client can take commands now, and waiting until it can. With `enableOfflineQueue: false` (the
 * recommended setting), a command sent before the client is `ready` fails at once ("Stream isn't writeable",
 * "Cluster isn't ready"): a decision asked while the client connects, or reconnects after a blip, would go to the
 * fail policy although the store is moments away. A `Cluster` is ready once it has loaded the slot map.
 */
export class ClientReadiness {
  private static readonly byClient = new WeakMap<RedisClient, ClientReadiness>()
  private readonly waiters = new Set<() => void>()
  /** Pending `until()` calls, which share one `error` listener. */
  private watchingErrors = 0
  private lastError: string | undefined

  private constructor(private readonly client: RedisClient) {}

  /** The readiness of `client`, shared by every store on it: one listener per event, however many stores. */
  static of(client: RedisClient): ClientReadiness {
    let readiness = ClientReadiness.byClient.get(client)
    if (readiness === undefined) {
      readiness = new ClientReadiness(client)
      ClientReadiness.byClient.set(client, readiness)
    }
    return readiness
  }

  /** Ready, or never going to be (`end`: the client was closed for good, so waiting would not help). */
  get settled(): boolean {
    const status = this.client.status
    return status === 'ready' || status === 'end'
  }

  /**
   * Calls `onReady` when the client becomes ready; answers a function that cancels the wait (the caller's deadline
   * passed). One `ready` listener serves every waiter, and is removed when none is left.
   */
  wait(onReady: () => void): () => void {
    if (this.waiters.size === 0) this.client.once('ready', this.wake)
    this.waiters.add(onReady)
    this.connectIfLazy()
    return () => {
      this.waiters.delete(onReady)
      if (this.waiters.size === 0) this.client.off('ready', this.wake)
    }
  }

  /**
   * Resolves when the client is ready; rejects after `timeoutMs` with `TOLLBOOTH_ERR_STORE_TIMEOUT` naming the
   * address and the last connection error, or at once with `TOLLBOOTH_ERR_STORE_ERROR` when the client has ended.
   */
  until(timeoutMs: number, storeName: string): Promise<void> {
    if (this.client.status === 'ready') return Promise.resolve()
    if (this.client.status === 'end') {
      return Promise.reject(
        new TollboothError(
          ErrorCodes.STORE_ERROR,
          `${storeName}: the client to ${addressOf(this.client)} has ended (closed with quit() or disconnect(), or ` +
            'out of reconnection attempts): give the store a connected client',
        ),
      )
    }
    if (this.watchingErrors++ === 0) {
      this.lastError = undefined
      this.client.on('error', this.onError)
    }
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        cancel()
        const cause = this.lastError === undefined ? '' : ` (last error: ${this.lastError})`
        reject(
          new TollboothError(
            ErrorCodes.STORE_TIMEOUT,
            `${storeName}: ${addressOf(this.client)} not ready within ${timeoutMs} ms${cause}`,
          ),
        )
      }, timeoutMs)
      timer.unref()
      const cancel = this.wait(() => {
        clearTimeout(timer)
        resolve()
      })
    }).finally(() => {
      if (--this.watchingErrors !== 0) return
      this.client.off('error', this.onError)
    })
  }

  private readonly onError = (error: Error) => {
    this.lastError = error.message
  }

  private readonly wake = () => {
    const waiters = [...this.waiters]
    this.waiters.clear()
    for (const waiter of waiters) waiter()
  }

  /** A client made with `lazyConnect` connects on its first command, which the offline queue setting may refuse. */
  private connectIfLazy(): void {
    if (this.client.status === 'wait') this.client.connect().catch(() => {})
  }
}

/** Where the client connects, for messages: `host:port`, or the cluster's nodes (its startup nodes until known). */
export function addressOf(client: RedisClient): string {
  if (!isCluster(client)) return endpoint(client.options)
  let nodes = client.nodes('all').map((node) => endpoint(node.options))
  if (nodes.length === 0) {
    // Not public in ioredis' types, but what the Cluster was given: host:port strings, ports or { host, port }.
    const startup = (client as unknown as { startupNodes?: unknown }).startupNodes
    nodes = Array.isArray(startup) ? startup.map(startupNode) : []
  }
  return `the Redis Cluster (${nodes.join(', ') || 'no nodes'})`
}

function startupNode(node: unknown): string {
  if (typeof node === 'string' || typeof node === 'number') return String(node)
  return endpoint((node ?? {}) as Parameters<typeof endpoint>[0])
}

function endpoint(options: {
  host?: string | undefined
  port?: number | undefined
  path?: string | undefined
}) {
  return options.path ?? `${options.host ?? 'localhost'}:${options.port ?? 6379}`
}
