import type { Cluster, Redis } from 'ioredis'
import { hashKey } from '../../identity/hashKey.js'
import { CircuitBreaker, type CircuitBreakerOptions } from '../circuitBreaker.js'
import type { Clock } from '../clock.js'
import { ErrorCodes, invalidOption, TollboothError } from '../errors.js'
import { emit, type StoreHooks } from '../hooks.js'
import { nonEmptyString, positiveInteger } from '../validate.js'
import { allOfLua } from './lua/allOf.js'
import { concurrencyLua } from './lua/concurrency.js'
import { fixedWindowLua } from './lua/fixedWindow.js'
import { gcraLua } from './lua/gcra.js'
import { slidingWindowLua } from './lua/slidingWindow.js'
import type { AlgorithmName, Reply, Store, StoreRequest } from './store.js'

export interface RedisStoreOptions {
  /** An ioredis `Redis` or `Cluster` client. See the README for the recommended client settings. */
  client: Redis | Cluster
  /** Prefix of every key. Must not contain `{` or `}` (the hash tag follows it). @default 'tollbooth:' */
  prefix?: string
  /**
   * Deadline of every store call in milliseconds, whatever the client's own retry and offline-queue settings; a call
   * past it counts as a failure and the limiter's fail policy answers.
   * @default 50
   */
  timeoutMs?: number
  /**
   * Secret for HMAC-hashing identities into keys. Without it identities are hashed with plain SHA-256, which keeps
   * them out of Redis but can be reversed by brute force for small spaces such as IPv4 addresses.
   */
  keySecret?: string
  /** Circuit breaker settings. */
  breaker?: CircuitBreakerOptions
  /**
   * Pins the scripts' clock (microseconds) instead of Redis' own `TIME`. Only for tests and simulations on virtual
   * time: with several instances, leave it unset so all of them read one clock.
   */
  clock?: Clock
  /** Name used in events and metrics. @default 'redis' */
  name?: string
  hooks?: StoreHooks
}

type ScriptCommand = (key: string, op: string, now: number, ...args: (number | string)[]) => Promise<Reply>
type AllOfCommand = (numberOfKeys: number, ...keysThenArgs: (number | string)[]) => Promise<number[]>
const allOfCommand = 'tollboothAllOf'

/** ioredis command names, one per algorithm; `defineCommand` sends EVALSHA and falls back to EVAL on NOSCRIPT. */
const commands: Record<AlgorithmName, { name: string; lua: string }> = {
  gcra: { name: 'tollboothGcra', lua: gcraLua },
  fixedWindow: { name: 'tollboothFixedWindow', lua: fixedWindowLua },
  slidingWindow: { name: 'tollboothSlidingWindow', lua: slidingWindowLua },
  concurrency: { name: 'tollboothConcurrency', lua: concurrencyLua },
}

/**
 * A store on Redis or Redis Cluster: one atomic Lua script per decision, server time, every key with a TTL.
 * Keys are `<prefix><limiter>:{<hash of identity>}`: the hash tag keeps every key of one identity in one cluster slot.
 */
export class RedisStore implements Store {
  readonly kind = 'remote'
  readonly name: string
  readonly prefix: string
  readonly timeoutMs: number
  readonly breaker: CircuitBreaker
  private readonly client: Redis | Cluster
  private readonly keySecret: string | undefined
  private readonly hooks: StoreHooks
  private readonly clock: Clock | undefined
  private readonly scripts = {} as Record<AlgorithmName, ScriptCommand>
  private readonly allOf: AllOfCommand

  constructor(options: RedisStoreOptions) {
    if (
      options === null ||
      typeof options !== 'object' ||
      typeof options.client?.defineCommand !== 'function'
    ) {
      throw invalidOption('RedisStore', 'client', 'an ioredis Redis or Cluster client', options?.client)
    }
    this.client = options.client
    this.prefix = options.prefix ?? 'tollbooth:'
    if (typeof this.prefix !== 'string' || /[{}]/.test(this.prefix)) {
      throw invalidOption('RedisStore', 'prefix', 'a string without "{" or "}"', this.prefix)
    }
    this.timeoutMs = positiveInteger('RedisStore', 'timeoutMs', options.timeoutMs ?? 50)
    this.keySecret =
      options.keySecret === undefined
        ? undefined
        : nonEmptyString('RedisStore', 'keySecret', options.keySecret)
    this.name = options.name ?? 'redis'
    this.hooks = options.hooks ?? {}
    this.clock = options.clock
    this.breaker = new CircuitBreaker('RedisStore', options.breaker ?? {}, (from, to) =>
      emit(this.hooks.onBreakerChange, { store: this.name, from, to }),
    )
    const defined = this.client as unknown as Record<string, ScriptCommand>
    for (const [algorithm, { name, lua }] of Object.entries(commands)) {
      // Several stores may share one client: define each command once.
      if (typeof defined[name] !== 'function') this.client.defineCommand(name, { numberOfKeys: 1, lua })
      this.scripts[algorithm as AlgorithmName] = (defined[name] as ScriptCommand).bind(this.client)
    }
    // The number of keys varies with the number of policies: given at each call.
    if (typeof defined[allOfCommand] !== 'function')
      this.client.defineCommand(allOfCommand, { lua: allOfLua })
    this.allOf = (defined[allOfCommand] as unknown as AllOfCommand).bind(this.client)
  }

  /** The Redis key of an identity for a limiter. */
  keyOf(limiter: string, key: string): string {
    return `${this.prefix}${limiter}:{${hashKey(key, this.keySecret)}}`
  }

  run(request: StoreRequest): Promise<Reply> {
    const command = this.command(request.algorithm)
    const key = this.keyOf(request.limiter, request.key)
    // 0 tells the script to read Redis' clock.
    const now = this.clock === undefined ? 0 : this.clock()
    return this.guarded(request.op, () => command(key, request.op, now, ...request.args))
  }

  async consumeAll(requests: readonly StoreRequest[]): Promise<Reply[]> {
    const keys = requests.map((request) => this.keyOf(request.limiter, request.key))
    const args = requests.flatMap((request) => [request.algorithm, ...request.args])
    const now = this.clock === undefined ? 0 : this.clock()
    const flat = await this.guarded('consumeAll', () => this.allOf(keys.length, ...keys, now, ...args))
    return requests.map((_, i) => flat.slice(i * 5, i * 5 + 5) as unknown as Reply)
  }

  async delete(limiter: string, key: string): Promise<void> {
    await this.guarded('delete', () => this.client.del(this.keyOf(limiter, key)))
  }

  private command(algorithm: AlgorithmName): ScriptCommand {
    return this.scripts[algorithm]
  }

  /** Breaker, deadline and error reporting around one call. */
  private guarded<T>(op: string, call: () => Promise<T>): Promise<T> {
    if (!this.breaker.tryCall()) {
      return Promise.reject(
        new TollboothError(
          ErrorCodes.STORE_UNAVAILABLE,
          `${this.name}: circuit breaker open, store not called`,
        ),
      )
    }
    const started = performance.now()
    return new Promise<T>((resolve, reject) => {
      // Whichever comes first, the answer or the deadline, decides; a late answer is ignored, so a store that
      // answers only after the deadline keeps counting as failing.
      let settled = false
      const fail = (error: TollboothError) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        this.breaker.failed()
        emit(this.hooks.onStoreError, { store: this.name, op, error })
        reject(error)
      }
      const timer = setTimeout(() => {
        fail(
          new TollboothError(ErrorCodes.STORE_TIMEOUT, `${this.name}: no answer within ${this.timeoutMs} ms`),
        )
      }, this.timeoutMs)
      timer.unref()
      let pending: Promise<T>
      try {
        pending = call()
      } catch (cause) {
        pending = Promise.reject(cause)
      }
      pending.then(
        (value) => {
          if (settled) return
          settled = true
          clearTimeout(timer)
          this.breaker.succeeded()
          emit(this.hooks.onStoreLatency, { store: this.name, durationMs: performance.now() - started })
          resolve(value)
        },
        (cause: unknown) => {
          const message = cause instanceof Error ? cause.message : String(cause)
          fail(new TollboothError(ErrorCodes.STORE_ERROR, `${this.name}: ${message}`, { cause }))
        },
      )
    })
  }
}
