/**
 * What `RedisStore` uses of an ioredis client, as types of our own: ioredis is an optional peer, and the published
 * declarations must compile for a user who never installed it. ioredis 5 and 6 `Redis` and `Cluster` instances
 * have all of it (test/unit/types/redisClient.types.test.ts passes real ones).
 */

/** Where a connection goes, as ioredis' `RedisOptions` holds it. */
export interface RedisEndpoint {
  readonly host?: string | undefined
  readonly port?: number | undefined
  /** A Unix socket, instead of host and port. */
  readonly path?: string | undefined
}

/** The commands of one pipeline, sent in one write; `exec` answers `[error, reply]` per command. */
export interface RedisPipeline {
  exec(): Promise<[Error | null, unknown][] | null>
}

/** What `RedisStore` uses of any ioredis client, standalone or cluster. */
export interface RedisClientBase {
  readonly isCluster: boolean
  /** ioredis' connection status: `'wait'` (lazyConnect), `'connecting'`, `'ready'`, `'end'`, … */
  readonly status: string
  /** Defines a Lua script as a command of the client (sent with EVALSHA, EVAL on NOSCRIPT). */
  defineCommand(name: string, definition: { lua: string }): void
  del(key: string): Promise<number>
  connect(): Promise<void>
  on(event: 'error', listener: (error: Error) => void): unknown
  once(event: 'ready', listener: () => void): unknown
  off(event: 'ready', listener: () => void): unknown
  off(event: 'error', listener: (error: Error) => void): unknown
}

/** A connection to one Redis server: an ioredis `Redis`, also each node of a `Cluster`. */
export interface RedisConnection extends RedisClientBase {
  readonly options: RedisEndpoint
  script(subcommand: 'LOAD', script: string): Promise<unknown>
  pipeline(): RedisPipeline
}

/** An ioredis `Cluster`. */
export interface RedisClusterClient extends RedisClientBase {
  /** By slot: the addresses (`host:port`) of the nodes serving it, the master first. */
  readonly slots: readonly (readonly string[])[]
  nodes(role: 'master' | 'all'): RedisConnection[]
  /** Reads the slot map again from the cluster; `callback` once it is read (or failed to be). */
  refreshSlotsCache(callback?: (error?: Error | null) => void): void
}

/** An ioredis `Redis` or `Cluster` client, as `RedisStore` takes it. */
export type RedisClient = RedisConnection | RedisClusterClient

export function isCluster(client: RedisClient): client is RedisClusterClient {
  return client.isCluster
}
