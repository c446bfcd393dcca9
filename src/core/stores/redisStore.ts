// Node's own setImmediate, bound at import: test runners' fake timers (Vitest, Jest, Sinon) replace the global one,
// and a decision waiting for a faked one would never be sent.
import { setImmediate as atEndOfTurn } from 'node:timers'
import calculateSlot from 'cluster-key-slot'
// Types only: ioredis is an optional peer, so a memory-only user can import tollbooth without it.
import type { Cluster, Redis } from 'ioredis'
import { hashKey } from '../../identity/hashKey.js'
import { CircuitBreaker, type CircuitBreakerOptions } from '../circuitBreaker.js'
import type { Clock } from '../clock.js'
import { ErrorCodes, invalidOption, TollboothError } from '../errors.js'
import { emit, type StoreHooks, storeHooksOption } from '../hooks.js'
import { checkOptionKeys, optionNames } from '../knownOptions.js'
import { nonEmptyString, positiveInteger } from '../validate.js'
import { addressOf, ClientReadiness } from './clientReadiness.js'
import { callsByNode, isRedirection, NOT_ON_THIS_NODE } from './clusterCalls.js'
import { allOfLua } from './lua/allOf.js'
import { batchLua } from './lua/batch.js'
import { nodeBatchLua } from './lua/nodeBatch.js'
import type { Reply, Store, StoreRequest } from './store.js'

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
   * Most decisions sent in one script call. Decisions requested within one turn of the event loop travel together
   * (on a standalone Redis; on a cluster, keys of different identities live in different slots, so each decision
   * is its own call). `1` turns batching off.
   * @default 32
   */
  maxBatch?: number
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

const OPTIONS = optionNames<RedisStoreOptions>({
  client: true,
  prefix: true,
  timeoutMs: true,
  maxBatch: true,
  keySecret: true,
  breaker: true,
  clock: true,
  name: true,
  hooks: true,
})

export interface WarmUpOptions {
  /** How long to wait for the client to connect and every master to answer, in milliseconds. @default 10000 */
  timeoutMs?: number
}

const WARM_UP_OPTIONS = optionNames<WarmUpOptions>({ timeoutMs: true })

/** Most requests a cluster store gathers before sending them (else at the end of the turn). */
const MAX_CLUSTER_QUEUE = 1024

type BatchCommand = (numberOfKeys: number, ...keysThenArgs: (number | string)[]) => Promise<number[]>

/** ioredis command names; `defineCommand` sends EVALSHA and falls back to EVAL on NOSCRIPT. */
const batchCommand = 'tollboothBatch'
const nodeBatchCommand = 'tollboothNodeBatch'
const allOfCommand = 'tollboothAllOf'

interface Pending {
  readonly key: string
  readonly request: StoreRequest
  readonly resolve: (reply: Reply) => void
  readonly reject: (error: unknown) => void
}

/**
 * A store on Redis or Redis Cluster: atomic Lua scripts, server time, every key with a TTL.
 * Keys are `<prefix><limiter>:{<hash of identity>}`: the hash tag keeps every key of one identity in one cluster slot.
 */
export class RedisStore implements Store {
  readonly kind = 'remote'
  readonly name: string
  readonly prefix: string
  readonly timeoutMs: number
  readonly maxBatch: number
  readonly breaker: CircuitBreaker
  private readonly client: Redis | Cluster
  private readonly keySecret: string | undefined
  private readonly hooks: StoreHooks
  private readonly clock: Clock | undefined
  private readonly batch: BatchCommand
  private readonly allOf: BatchCommand
  /** On a cluster: the node batch command (see `nodeBatchLua`). */
  private readonly nodeBatch: BatchCommand | undefined
  private readonly readiness: ClientReadiness
  /** Queued requests that are sent without waiting for the end of the turn. */
  private readonly flushAt: number
  private queue: Pending[] = []
  private flushScheduled = false

  constructor(options: RedisStoreOptions) {
    if (
      options === null ||
      typeof options !== 'object' ||
      typeof options.client?.defineCommand !== 'function'
    ) {
      throw invalidOption('RedisStore', 'client', 'an ioredis Redis or Cluster client', options?.client)
    }
    checkOptionKeys('RedisStore', options, OPTIONS)
    this.client = options.client
    this.readiness = new ClientReadiness(this.client)
    this.prefix = options.prefix ?? 'tollbooth:'
    if (typeof this.prefix !== 'string' || /[{}]/.test(this.prefix)) {
      throw invalidOption('RedisStore', 'prefix', 'a string without "{" or "}"', this.prefix)
    }
    this.timeoutMs = positiveInteger('RedisStore', 'timeoutMs', options.timeoutMs ?? 50)
    this.maxBatch = positiveInteger('RedisStore', 'maxBatch', options.maxBatch ?? 32)
    // On a cluster a batch is per slot, and keys of different identities rarely share one: the turn's requests
    // are gathered, then grouped by slot and node.
    this.flushAt = isCluster(this.client) ? MAX_CLUSTER_QUEUE : this.maxBatch
    this.keySecret =
      options.keySecret === undefined
        ? undefined
        : nonEmptyString('RedisStore', 'keySecret', options.keySecret)
    this.name = options.name ?? 'redis'
    this.hooks = storeHooksOption('RedisStore', options.hooks)
    this.clock = options.clock
    this.breaker = new CircuitBreaker('RedisStore', options.breaker ?? {}, (from, to) =>
      emit(this.hooks.onBreakerChange, { store: this.name, from, to }),
    )
    this.batch = this.defineOnce(batchCommand, batchLua)
    this.nodeBatch = isCluster(this.client) ? this.defineOnce(nodeBatchCommand, nodeBatchLua) : undefined
    this.allOf = this.defineOnce(allOfCommand, allOfLua)
  }

  /**
   * Connects to every node and loads the scripts there, so the first decisions do not pay for it: ioredis connects
   * to cluster nodes lazily, and a cold node can take longer than `timeoutMs` to answer its first command. Call it
   * once at startup (it is optional: without it the first decisions per node may be answered by the fail policy).
   */
  async warmUp(options: WarmUpOptions = {}): Promise<void> {
    checkOptionKeys('warmUp', options, WARM_UP_OPTIONS)
    const timeoutMs = positiveInteger('warmUp', 'timeoutMs', options.timeoutMs ?? 10_000)
    const deadline = performance.now() + timeoutMs
    await this.readiness.until(timeoutMs, this.name)
    const nodes = isCluster(this.client) ? this.client.nodes('master') : [this.client]
    const left = () => Math.max(1, Math.ceil(deadline - performance.now()))
    await this.withinWarmUp(
      left(),
      Promise.all(
        nodes.map(async (node) => {
          try {
            await node.script('LOAD', batchLua)
            await node.script('LOAD', allOfLua)
            if (isCluster(this.client)) await node.script('LOAD', nodeBatchLua)
          } catch (cause) {
            throw new TollboothError(
              ErrorCodes.STORE_ERROR,
              `${this.name}: loading the scripts on ${addressOf(node)} failed: ${(cause as Error).message}`,
              { cause },
            )
          }
        }),
      ),
    )
    // Then one decision's path through the client's own routing per master (a peek: it writes nothing).
    await this.withinWarmUp(left(), Promise.all(this.probeKeys().map((key) => this.probe(key))))
  }

  /** A key for each master (one for a standalone Redis), so that a probe of each travels the client's routing. */
  private probeKeys(): string[] {
    const key = (n: number) => `${this.prefix}warm-up:{${n}}`
    if (!isCluster(this.client)) return [key(0)]
    const client = this.client
    const keys: string[] = []
    for (const node of client.nodes('master')) {
      const owner = `${node.options.host}:${node.options.port}`
      // A master holds about 1/n of the slots: a few tries find one of its keys.
      for (let n = 0; n < 100_000; n++) {
        if (client.slots[calculateSlot(key(n))]?.[0] === owner) {
          keys.push(key(n))
          break
        }
      }
    }
    return keys
  }

  /** A peek (it writes nothing) through the command decisions take: the node batch on a cluster. */
  private probe(key: string): Promise<void> {
    const peek = ['gcra', 'peek', 1, 1, 1]
    const call =
      this.nodeBatch === undefined
        ? this.batch(1, key, this.now(), ...peek)
        : this.nodeBatch(1, key, this.now(), 1, key, ...peek)
    return call.then(
      () => undefined,
      (cause: unknown) => {
        throw new TollboothError(
          ErrorCodes.STORE_ERROR,
          `${this.name}: a decision through ${addressOf(this.client)} failed: ${(cause as Error).message}`,
          { cause },
        )
      },
    )
  }

  /** `work`, or a `TOLLBOOTH_ERR_STORE_TIMEOUT` once `ms` pass. */
  private withinWarmUp<T>(ms: number, work: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        reject(
          new TollboothError(
            ErrorCodes.STORE_TIMEOUT,
            `${this.name}: warm-up of ${addressOf(this.client)} did not finish in time`,
          ),
        )
      }, ms)
      timer.unref()
    })
    return Promise.race([work, timeout]).finally(() => clearTimeout(timer))
  }

  /** The Redis key of an identity for a limiter. */
  keyOf(limiter: string, key: string): string {
    return `${this.prefix}${limiter}:{${hashKey(key, this.keySecret)}}`
  }

  run(request: StoreRequest): Promise<Reply> {
    if (!this.breaker.tryCall()) return Promise.reject(this.breakerOpen())
    const key = this.keyOf(request.limiter, request.key)
    return new Promise<Reply>((resolve, reject) => {
      this.queue.push({ key, request, resolve, reject })
      if (this.queue.length >= this.flushAt) this.flush()
      else if (!this.flushScheduled) {
        this.flushScheduled = true
        // At the end of this turn of the event loop, as ioredis' auto-pipelining does: under load Node reads each
        // socket's request in a callback of its own, so a batch of one tick holds one decision, while the requests
        // read in one poll phase all get here before it ends. The deadline counts from the send, not from here.
        // Not unref'd: queued decisions keep the process alive until they are sent.
        atEndOfTurn(() => this.flush())
      }
    })
  }

  async consumeAll(requests: readonly StoreRequest[]): Promise<Reply[]> {
    if (!this.breaker.tryCall()) throw this.breakerOpen()
    const keys = requests.map((request) => this.keyOf(request.limiter, request.key))
    const args = requests.flatMap((request) => [request.algorithm, ...request.args])
    const flat = await this.guarded('consumeAll', () => this.allOf(keys.length, ...keys, this.now(), ...args))
    return requests.map((_, i) => flat.slice(i * 5, i * 5 + 5) as unknown as Reply)
  }

  async delete(limiter: string, key: string): Promise<void> {
    if (!this.breaker.tryCall()) throw this.breakerOpen()
    await this.guarded('delete', () => this.client.del(this.keyOf(limiter, key)))
  }

  /** Sends the queued requests, `maxBatch` per script call; on a cluster, grouped by node. */
  private flush(): void {
    this.flushScheduled = false
    const queued = this.queue
    this.queue = []
    if (isCluster(this.client)) {
      for (const calls of callsByNode(this.client, queued, this.maxBatch)) this.sendToNode(calls)
      return
    }
    for (let start = 0; start < queued.length; start += this.maxBatch) {
      this.send(queued.slice(start, start + this.maxBatch))
    }
  }

  /**
   * A cluster node's calls of this turn (see `nodeBatchLua`), in one pipeline: one socket write and one deadline
   * for them all. A request whose key the node turns out not to hold (the slot map changed under a failover, or its
   * slot is being migrated) is sent again on its own, its key declared, so that Redis and ioredis redirect it; so
   * is every request of a call the node redirected as a whole.
   */
  private sendToNode(calls: readonly (readonly Pending[])[]): void {
    this.guarded('batch', () => {
      const pipeline = this.client.pipeline() as unknown as Record<string, BatchCommand> & {
        exec(): Promise<[Error | null, number[]][] | null>
      }
      for (const call of calls) {
        ;(pipeline[nodeBatchCommand] as BatchCommand)(
          1,
          (call[0] as Pending).key,
          ...this.nodeBatchArgs(call),
        )
      }
      return pipeline.exec()
    }).then(
      (results) => {
        for (const [i, call] of calls.entries()) {
          const [error, flat] = results?.[i] ?? [new Error('no reply in the pipeline'), []]
          if (error === null) this.answer(call, flat)
          else if (isRedirection(error)) for (const p of call) this.send([p])
          else {
            const failure = new TollboothError(ErrorCodes.STORE_ERROR, `${this.name}: ${error.message}`, {
              cause: error,
            })
            emit(this.hooks.onStoreError, { store: this.name, op: 'batch', error: failure })
            for (const p of call) p.reject(failure)
          }
        }
      },
      (error: unknown) => {
        for (const call of calls) for (const p of call) p.reject(error)
      },
    )
  }

  /** ARGV of the node batch script: the time, the count, and each request's key, algorithm, op and args. */
  private nodeBatchArgs(pending: readonly Pending[]): (number | string)[] {
    const args: (number | string)[] = [this.now(), pending.length]
    for (const { key, request } of pending) args.push(key, request.algorithm, request.op, ...request.args)
    return args
  }

  /** KEYS then ARGV of the batch script for these requests. */
  private scriptArgs(pending: readonly Pending[]): (number | string)[] {
    const keysThenArgs: (number | string)[] = pending.map((p) => p.key)
    keysThenArgs.push(this.now())
    for (const { request } of pending) keysThenArgs.push(request.algorithm, request.op, ...request.args)
    return keysThenArgs
  }

  /**
   * Hands each request its reply: the scripts answer 5 integers per request, flattened. A request a cluster node
   * did not hold the key of is sent again on its own.
   */
  private answer(pending: readonly Pending[], flat: readonly number[]): void {
    for (let i = 0; i < pending.length; i++) {
      const p = pending[i] as Pending
      if (flat[i * 5] === NOT_ON_THIS_NODE) this.send([p])
      else p.resolve(flat.slice(i * 5, i * 5 + 5) as unknown as Reply)
    }
  }

  private send(pending: readonly Pending[]): void {
    const op = pending.length === 1 ? (pending[0] as Pending).request.op : 'batch'
    this.guarded(op, () => this.batch(pending.length, ...this.scriptArgs(pending))).then(
      (flat) => this.answer(pending, flat),
      (error: unknown) => {
        for (const p of pending) p.reject(error)
      },
    )
  }

  /** 0 tells the scripts to read Redis' clock. */
  private now(): number {
    return this.clock === undefined ? 0 : this.clock()
  }

  private defineOnce(name: string, lua: string): BatchCommand {
    const commands = this.client as unknown as Record<string, BatchCommand>
    // Several stores may share one client. The number of keys is given at each call.
    if (typeof commands[name] !== 'function') this.client.defineCommand(name, { lua })
    return (commands[name] as BatchCommand).bind(this.client)
  }

  private breakerOpen(): TollboothError {
    return new TollboothError(
      ErrorCodes.STORE_UNAVAILABLE,
      `${this.name}: circuit breaker open, store not called`,
    )
  }

  /** Deadline, breaker accounting and error reporting around one call. */
  private guarded<T>(op: string, call: () => Promise<T>): Promise<T> {
    const started = performance.now()
    return new Promise<T>((resolve, reject) => {
      // Whichever comes first, the answer or the deadline, decides; a late answer is ignored, so a store that
      // answers only after the deadline keeps counting as failing.
      let settled = false
      let expired = false
      let cancelWait: (() => void) | undefined
      const fail = (error: TollboothError) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        cancelWait?.()
        this.breaker.failed()
        emit(this.hooks.onStoreError, { store: this.name, op, error })
        reject(error)
      }
      const timer = setTimeout(() => {
        expired = true
        // Node runs due timers before it reads sockets: after a stall of the event loop longer than the deadline,
        // the reply may already be waiting. Let the I/O phase read it first.
        setImmediate(() =>
          fail(
            new TollboothError(
              ErrorCodes.STORE_TIMEOUT,
              `${this.name}: no answer within ${this.timeoutMs} ms`,
            ),
          ),
        )
      }, this.timeoutMs)
      timer.unref()
      const send = () => {
        cancelWait = undefined
        let answer: Promise<T>
        try {
          answer = call()
        } catch (cause) {
          answer = Promise.reject(cause)
        }
        answer.then(
          (value) => {
            if (settled) return
            settled = true
            clearTimeout(timer)
            this.breaker.succeeded()
            if (this.hooks.onStoreLatency !== undefined) {
              emit(this.hooks.onStoreLatency, { store: this.name, durationMs: performance.now() - started })
            }
            resolve(value)
          },
          (cause: unknown) => {
            const message = cause instanceof Error ? cause.message : String(cause)
            fail(new TollboothError(ErrorCodes.STORE_ERROR, `${this.name}: ${message}`, { cause }))
          },
        )
      }
      // Still connecting, or reconnecting after a blip: sent once the client is ready, within the same deadline
      // (a call past it is never sent: its decision was already answered by the fail policy).
      if (this.readiness.settled) send()
      else
        cancelWait = this.readiness.wait(() => {
          if (!expired) send()
        })
    })
  }
}

function isCluster(client: Redis | Cluster): client is Cluster {
  return client.isCluster
}
