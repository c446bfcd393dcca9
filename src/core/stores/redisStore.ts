// Node's own setImmediate, bound at import: test runners' fake timers (Vitest, Jest, Sinon) replace the global one,
// and a decision waiting for a faked one would never be sent.
import { setImmediate as atEndOfTurn } from 'node:timers'
import calculateSlot from 'cluster-key-slot'
import type { CircuitBreakerOptions } from '../circuitBreaker.js'
import type { Clock } from '../clock.js'
import { ErrorCodes, invalidOption, TollboothError } from '../errors.js'
import { hashKey } from '../hashKey.js'
import { emit, type StoreHooks, storeHooksOption } from '../hooks.js'
import { checkOptionKeys, optionNames } from '../knownOptions.js'
import { sleep } from '../sleep.js'
import { nonEmptyString, positiveInteger, timerMs } from '../validate.js'
import { batchSpecs } from './batchSpecs.js'
import { addressOf, ClientReadiness } from './clientReadiness.js'
import { callsByNode, isRedirection, NOT_ON_THIS_NODE, UNKNOWN_NODE } from './clusterCalls.js'
import { allOfLua } from './lua/allOf.js'
import { batchLua } from './lua/batch.js'
import { nodeBatchLua } from './lua/nodeBatch.js'
import { NodeBreakers } from './nodeBreakers.js'
import { isCluster, type RedisClient, type RedisClusterClient, type RedisConnection } from './redisClient.js'
import { PAST_DEADLINE, ServerClocks } from './serverClocks.js'
import type { Reply, Store, StoreRequest } from './store.js'

export interface RedisStoreOptions {
  /**
   * An ioredis (5 or 6) `Redis` or `Cluster` client; typed by what the store uses of it, so that these types need no
   * ioredis. See docs/core.md for the recommended client settings.
   */
  client: RedisClient
  /** Prefix of every key. Must not contain `{` or `}` (the hash tag follows it). @default 'tollbooth:' */
  prefix?: string
  /**
   * Deadline of every store call in milliseconds, whatever the client's own retry and offline-queue settings; a call
   * past it counts as a failure and the limiter's fail policy answers.
   * @default 50
   */
  timeoutMs?: number
  /**
   * Most decisions sent in one script call. Decisions requested within one turn of the event loop travel together:
   * on a cluster, those for one node (in calls of up to `maxBatch`, in one pipeline). `1` turns batching off.
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
  /** How many times a cluster node sent it back to be queued again (see `redirect`). */
  requeued: number
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
  /** A circuit breaker per node (one for a standalone Redis); `breaker.state` is the worst of them. */
  readonly breaker: NodeBreakers
  private readonly client: RedisClient
  private readonly keySecret: string | undefined
  private readonly hooks: StoreHooks
  private readonly clock: Clock | undefined
  private readonly batch: BatchCommand
  private readonly allOf: BatchCommand
  private readonly readiness: ClientReadiness
  private readonly standaloneAddress: string | undefined
  private readonly serverClocks = new ServerClocks()
  /** Queued requests that are sent without waiting for the end of the turn. */
  private readonly flushAt: number
  private queue: Pending[] = []
  /** Requests sent back by a cluster node, waiting for the slot map's refresh (see `redirect`). */
  private awaitingSlots: Pending[] = []
  private slotsRefresh: NodeJS.Timeout | undefined
  private flushScheduled = false

  constructor(options: RedisStoreOptions) {
    if (isClientItself(options)) {
      throw new TollboothError(
        ErrorCodes.INVALID_OPTION,
        'RedisStore: "client" must be given inside the options, as new RedisStore({ client }), got the client itself',
      )
    }
    if (
      options === null ||
      typeof options !== 'object' ||
      typeof options.client?.defineCommand !== 'function'
    ) {
      throw invalidOption('RedisStore', 'client', 'an ioredis Redis or Cluster client', options?.client)
    }
    checkOptionKeys('RedisStore', options, OPTIONS)
    this.client = options.client
    this.readiness = ClientReadiness.of(this.client)
    this.prefix = options.prefix ?? 'tollbooth:'
    if (typeof this.prefix !== 'string' || /[{}]/.test(this.prefix)) {
      throw invalidOption('RedisStore', 'prefix', 'a string without "{" or "}"', this.prefix)
    }
    this.timeoutMs = timerMs('RedisStore', 'timeoutMs', options.timeoutMs ?? 50)
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
    this.breaker = new NodeBreakers('RedisStore', options.breaker ?? {}, (node, from, to) =>
      emit(this.hooks.onBreakerChange, { store: this.name, node, from, to }),
    )
    this.standaloneAddress = isCluster(this.client) ? undefined : addressOf(this.client)
    this.batch = this.defineOnce(batchCommand, batchLua)
    this.allOf = this.defineOnce(allOfCommand, allOfLua)
  }

  /**
   * Connects to every node and loads the scripts there, so the first decisions do not pay for it: ioredis connects
   * to cluster nodes lazily, and a cold node can take longer than `timeoutMs` to answer its first command. Call it
   * once at startup (it is optional: without it the first decisions per node may be answered by the fail policy).
   */
  async warmUp(options: WarmUpOptions = {}): Promise<void> {
    checkOptionKeys('warmUp', options, WARM_UP_OPTIONS)
    const timeoutMs = timerMs('warmUp', 'timeoutMs', options.timeoutMs ?? 10_000)
    const deadline = performance.now() + timeoutMs
    await this.readiness.until(timeoutMs, this.name)
    const masters = isCluster(this.client) ? this.client.nodes('master') : [this.client]
    const waitingFor = new Set<string>()
    const warm = masters.map(async (node) => {
      const address = this.standaloneAddress ?? `${node.options.host}:${node.options.port}`
      waitingFor.add(address)
      await this.loadScripts(node, address)
      // Then one decision's path per master (a peek: it writes nothing).
      await this.probe(this.probeKey(address))
      waitingFor.delete(address)
    })
    await this.withinWarmUp(
      Math.max(1, Math.ceil(deadline - performance.now())),
      Promise.all(warm),
      waitingFor,
    )
  }

  private async loadScripts(node: RedisConnection, address: string): Promise<void> {
    try {
      await node.script('LOAD', batchLua)
      await node.script('LOAD', allOfLua)
      if (isCluster(this.client)) await node.script('LOAD', nodeBatchLua)
    } catch (cause) {
      throw new TollboothError(
        ErrorCodes.STORE_ERROR,
        `${this.name}: loading the scripts on ${address} failed: ${(cause as Error).message}`,
        { cause },
      )
    }
  }

  /** A key the master at `address` holds (any key for a standalone Redis). */
  private probeKey(address: string): string {
    const key = (n: number) => `${this.prefix}warm-up:{${n}}`
    if (!isCluster(this.client)) return key(0)
    // A master holds about 1/n of the slots: a few tries find one of its keys.
    for (let n = 0; n < 100_000; n++) {
      if (this.client.slots[calculateSlot(key(n))]?.[0] === address) return key(n)
    }
    return key(0)
  }

  /**
   * A peek (it writes nothing) the way decisions travel: on a cluster, the node batch on the connection of the master
   * that holds `key`. Its reply teaches the store that server's clock.
   */
  private probe(key: string): Promise<void> {
    const peek = ['gcra', 'peek', 1, 1, 1]
    const node = this.nodeOf(key)
    let call: Promise<number[]>
    if (isCluster(this.client)) {
      const connection = this.connectionOf(node)
      call =
        connection === undefined
          ? Promise.reject(new Error(`no connection to ${node}`))
          : this.nodeBatchOn(connection)(1, key, this.now(), 0, 1, 1, ...peek, key, 1)
    } else call = this.batch(1, key, this.now(), 0, 1, ...peek, 1)
    return call.then(
      (flat) => this.learnClock(node, flat),
      (cause: unknown) => {
        throw new TollboothError(
          ErrorCodes.STORE_ERROR,
          `${this.name}: a decision through ${node} failed: ${(cause as Error).message}`,
          { cause },
        )
      },
    )
  }

  /** `work`, or a `TOLLBOOTH_ERR_STORE_TIMEOUT` naming the nodes still `waitingFor` once `ms` pass. */
  private withinWarmUp<T>(ms: number, work: Promise<T>, waitingFor: ReadonlySet<string>): Promise<T> {
    let timer: NodeJS.Timeout | undefined
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        reject(
          new TollboothError(
            ErrorCodes.STORE_TIMEOUT,
            `${this.name}: warm-up did not finish in time: no answer from ${[...waitingFor].join(', ')}`,
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
    const key = this.keyOf(request.limiter, request.key)
    const node = this.nodeOf(key)
    if (!this.breaker.of(node).tryCall()) return Promise.reject(this.breakerOpen(node))
    return new Promise<Reply>((resolve, reject) => {
      this.queue.push({ key, request, resolve, reject, requeued: 0 })
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
    const keys = requests.map((request) => this.keyOf(request.limiter, request.key))
    // The keys of one identity share a hash tag, hence a slot and a node.
    const node = this.nodeOf(keys[0] ?? '')
    if (!this.breaker.of(node).tryCall()) throw this.breakerOpen(node)
    const args = requests.flatMap((request) => [request.algorithm, ...request.args])
    const answered = isCluster(this.client)
      ? await this.allOfOnCluster(node, keys, args)
      : {
          node,
          countsOnBreaker: true,
          flat: await this.guarded('consumeAll', node, (notAfter) =>
            this.allOf(keys.length, ...keys, this.now(), notAfter, ...args),
          ),
        }
    const { flat } = answered
    this.learnClock(answered.node, flat)
    if (flat[0] === PAST_DEADLINE && flat.length === 2) {
      throw this.pastDeadline(answered.node, 'consumeAll', answered.countsOnBreaker)
    }
    return requests.map((_, i) => flat.slice(i * 5, i * 5 + 5) as unknown as Reply)
  }

  /**
   * `allOf` on a cluster, on the connection of the node the slot map names (a pipeline of one command, so that a
   * redirection comes back as an answer rather than being followed by the cluster client, with its own delays: 100
   * ms for TRYAGAIN). Only that node's own answer counts on its breaker. A redirection is followed here within the
   * same deadline, counted on no breaker: MOVED, to the node of the refreshed slot map; ASK, to the importing node
   * under ASKING; TRYAGAIN (the identity's keys split between the two nodes of a slot being moved), again after a
   * short pause.
   */
  private async allOfOnCluster(
    node: string,
    keys: readonly string[],
    args: readonly (number | string)[],
  ): Promise<{ node: string; countsOnBreaker: boolean; flat: number[] }> {
    const deadline = performance.now() + this.timeoutMs
    let target = node
    let asking = false
    for (let redirections = 0; ; redirections++) {
      const countsOnBreaker = redirections === 0
      const connection = this.connectionOf(target)
      if (connection === undefined) {
        throw new TollboothError(ErrorCodes.STORE_UNAVAILABLE, `${this.name}: no connection to ${target}`)
      }
      this.defineOn(connection, allOfCommand, allOfLua)
      const [error, flat] = await this.guarded(
        'consumeAll',
        target,
        async (notAfter) => {
          const pipeline = connection.pipeline() as unknown as Record<string, BatchCommand> & {
            asking(): unknown
            exec(): Promise<[Error | null, number[]][] | null>
          }
          if (asking) pipeline.asking()
          ;(pipeline[allOfCommand] as BatchCommand)(keys.length, ...keys, this.now(), notAfter, ...args)
          const [failure, reply] = (await pipeline.exec())?.[asking ? 1 : 0] ?? [new Error('no reply'), []]
          // A redirection is where the slot is, an answer; any other error is the node's (and its breaker's).
          if (failure !== null && !isRedirection(failure)) throw failure
          return [failure, reply] as const
        },
        countsOnBreaker,
        deadline,
      )
      if (error === null) return { node: target, countsOnBreaker, flat }
      const remaining = deadline - performance.now()
      if (redirections >= MAX_ALL_OF_REDIRECTIONS || remaining <= 0) {
        const failure = new TollboothError(
          ErrorCodes.STORE_TIMEOUT,
          `${this.name}: still redirected when the deadline came: ${error.message}`,
          { cause: error },
        )
        emit(this.hooks.onStoreError, { store: this.name, op: 'consumeAll', error: failure })
        throw failure
      }
      asking = error.message.startsWith('ASK ')
      if (asking) target = error.message.split(' ')[2] ?? UNKNOWN_NODE
      else {
        // MOVED, TRYAGAIN, CLUSTERDOWN, READONLY: where the slot is, once the map is fresh (and the move settled).
        if (!error.message.startsWith('MOVED ')) await sleep(Math.min(TRYAGAIN_PAUSE_MS, remaining))
        await this.refreshSlots(deadline - performance.now())
        target = this.nodeOf(keys[0] ?? '')
      }
    }
  }

  /** Refreshes the cluster client's slot map, waiting at most `ms`. */
  private refreshSlots(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, Math.max(1, ms))
      timer.unref()
      ;(this.client as RedisClusterClient).refreshSlotsCache(() => {
        clearTimeout(timer)
        resolve()
      })
    })
  }

  async delete(limiter: string, key: string): Promise<void> {
    const redisKey = this.keyOf(limiter, key)
    const node = this.nodeOf(redisKey)
    if (!this.breaker.of(node).tryCall()) throw this.breakerOpen(node)
    await this.guarded('delete', node, () => this.client.del(redisKey))
  }

  /** The address of the node that holds `key` by the client's slot map (the Redis for a standalone one). */
  private nodeOf(key: string): string {
    if (this.standaloneAddress !== undefined) return this.standaloneAddress
    return (this.client as RedisClusterClient).slots[calculateSlot(key)]?.[0] ?? UNKNOWN_NODE
  }

  /** Sends the queued requests, `maxBatch` per script call; on a cluster, grouped by node. */
  private flush(): void {
    this.flushScheduled = false
    const queued = this.queue
    this.queue = []
    if (isCluster(this.client)) {
      const connections = this.connectionsByAddress()
      for (const { node, calls } of callsByNode(this.client, queued, this.maxBatch)) {
        const connection = connections.get(node)
        if (connection === undefined) for (const call of calls) for (const p of call) this.send([p])
        else this.sendToNode(node, connection, calls)
      }
      return
    }
    for (let start = 0; start < queued.length; start += this.maxBatch) {
      this.send(queued.slice(start, start + this.maxBatch))
    }
  }

  /** The own connection of the master at `address` (as in the client's slot map), found without a map per call. */
  private connectionOf(address: string): RedisConnection | undefined {
    return (this.client as RedisClusterClient)
      .nodes('master')
      .find((node) => `${node.options.host}:${node.options.port}` === address)
  }

  /** The cluster's masters' own connections, by address (as in the client's slot map). */
  private connectionsByAddress(): Map<string, RedisConnection> {
    const connections = new Map<string, RedisConnection>()
    for (const node of (this.client as RedisClusterClient).nodes('master')) {
      connections.set(`${node.options.host}:${node.options.port}`, node)
    }
    return connections
  }

  /**
   * A cluster node's calls of this turn (see `nodeBatchLua`), in one pipeline on the node's own connection: one
   * socket write and one deadline for them all. Not through the cluster client, which would follow a redirection
   * with the whole pipeline: under ASK, the importing node takes every key of the slot for its own, even those still
   * on the migrating one. Here a redirection comes back to the store instead: a MOVED call, and a request whose key
   * the node turned out not to hold, are queued again once the slot map is fresh (`redirect`); under ASK, each
   * request of the call's slot is asked on its own where its key is (`route`: `redirected`, then `asked`).
   */
  private sendToNode(
    node: string,
    connection: RedisConnection,
    calls: readonly (readonly Pending[])[],
    route: NodeRoute = 'own',
  ): void {
    const asking = route === 'asked'
    // A redirection is not the node's failure: calls sent after one count neither way on its breaker.
    const countsOnBreaker = route === 'own'
    // Defined on the connection first: a pipeline takes the commands its connection has when it is made.
    this.nodeBatchOn(connection)
    this.guarded(
      'batch',
      node,
      (notAfter) => {
        const pipeline = connection.pipeline() as unknown as Record<string, BatchCommand> & {
          asking(): unknown
          exec(): Promise<[Error | null, number[]][] | null>
        }
        for (const call of calls) {
          // ASKING lets the next command alone into a slot the node is importing.
          if (asking) pipeline.asking()
          ;(pipeline[nodeBatchCommand] as BatchCommand)(
            1,
            (call[0] as Pending).key,
            ...this.nodeBatchArgs(call, notAfter),
          )
        }
        return pipeline.exec()
      },
      countsOnBreaker,
    ).then(
      (results) => {
        /** By importing node: the first request of each call answered ASK. */
        const asked = new Map<string, Pending[]>()
        for (const [i, call] of calls.entries()) {
          const [error, flat] = results?.[asking ? 2 * i + 1 : i] ?? [
            new Error('no reply in the pipeline'),
            [],
          ]
          if (error === null) this.answer(node, call, flat, countsOnBreaker)
          // Sent where Redis said and refused again: ioredis routes it from here.
          else if (asking) for (const p of call) this.sendRedirected(p)
          else if (error.message.startsWith('ASK ')) {
            // The call's first key is being imported by the node named. The other keys of its slot may be on
            // either node: each is asked here on its own (with its key declared, the node says ASK or answers),
            // all in one pipeline. The keys of other slots go in the next batch.
            const [first, ...rest] = call as [Pending, ...Pending[]]
            const importer = error.message.split(' ')[2] ?? UNKNOWN_NODE
            const toImporter = asked.get(importer)
            if (toImporter === undefined) asked.set(importer, [first])
            else toImporter.push(first)
            const slot = calculateSlot(first.key)
            const migrating = rest.filter((p) => calculateSlot(p.key) === slot)
            if (migrating.length > 0) {
              this.sendToNode(
                node,
                connection,
                migrating.map((p) => [p]),
                'redirected',
              )
            }
            this.requeue(rest.filter((p) => calculateSlot(p.key) !== slot))
          } else if (error.message.startsWith('MOVED ')) this.redirect(call)
          else if (isRedirection(error)) for (const p of call) this.sendRedirected(p)
          else {
            const failure = new TollboothError(ErrorCodes.STORE_ERROR, `${this.name}: ${error.message}`, {
              cause: error,
            })
            emit(this.hooks.onStoreError, { store: this.name, op: 'batch', error: failure })
            for (const p of call) p.reject(failure)
          }
        }
        if (asked.size === 0) return
        const connections = this.connectionsByAddress()
        for (const [importer, pending] of asked) {
          const connection = connections.get(importer)
          if (connection === undefined) for (const p of pending) this.sendRedirected(p)
          else
            this.sendToNode(
              importer,
              connection,
              pending.map((p) => [p]),
              'asked',
            )
        }
      },
      (error: unknown) => {
        for (const call of calls) for (const p of call) p.reject(error)
      },
    )
  }

  /** The node batch command on a cluster node's own connection (defined there once). */
  private nodeBatchOn(connection: RedisConnection): BatchCommand {
    return this.defineOn(connection, nodeBatchCommand, nodeBatchLua)
  }

  /** A script command on a cluster node's own connection, defined there once (before any pipeline is made). */
  private defineOn(connection: RedisConnection, name: string, lua: string): BatchCommand {
    const commands = connection as unknown as Record<string, BatchCommand>
    if (typeof commands[name] !== 'function') connection.defineCommand(name, { lua })
    return (commands[name] as BatchCommand).bind(connection)
  }

  /** ARGV of the node batch script: the time, the deadline, the count, the specs, and each request's key and spec. */
  private nodeBatchArgs(pending: readonly Pending[], notAfter: number): (number | string)[] {
    const specs = batchSpecs(pending.map((p) => p.request))
    const args: (number | string)[] = [this.now(), notAfter, pending.length, specs.count, ...specs.args]
    for (const [i, { key }] of pending.entries()) args.push(key, specs.numbers[i] as number)
    return args
  }

  /** KEYS then ARGV of the batch script for these requests: the time, the deadline, the specs, each request's spec. */
  private scriptArgs(pending: readonly Pending[], notAfter: number): (number | string)[] {
    const specs = batchSpecs(pending.map((p) => p.request))
    const keysThenArgs: (number | string)[] = pending.map((p) => p.key)
    keysThenArgs.push(this.now(), notAfter, specs.count, ...specs.args, ...specs.numbers)
    return keysThenArgs
  }

  /**
   * Hands each request its reply: the scripts answer 5 integers per request, flattened, then the server's time. A
   * request a cluster node did not hold the key of is redirected (see `redirect`). A call that reached Redis past its
   * deadline changed nothing: its requests fail, and their decisions are the fail policy's.
   */
  private answer(
    node: string,
    pending: readonly Pending[],
    flat: readonly number[],
    countsOnBreaker = true,
  ): void {
    this.learnClock(node, flat)
    if (flat[0] === PAST_DEADLINE && flat.length === 2) {
      const error = this.pastDeadline(
        node,
        pending.length === 1 ? (pending[0] as Pending).request.op : 'batch',
        countsOnBreaker,
      )
      for (const p of pending) p.reject(error)
      return
    }
    const elsewhere: Pending[] = []
    for (let i = 0; i < pending.length; i++) {
      const p = pending[i] as Pending
      if (flat[i * 5] === NOT_ON_THIS_NODE) elsewhere.push(p)
      else p.resolve(flat.slice(i * 5, i * 5 + 5) as unknown as Reply)
    }
    if (elsewhere.length > 0) this.redirect(elsewhere)
  }

  /**
   * Requests a cluster node sent back because their slot lives elsewhere now (MOVED, or a key of a slot it does
   * not serve): queued again once the client's slot map is fresh, so that they travel batched to their new node
   * with the other requests of the turn. A request sent back once already (its key mid-migration, where only an
   * ASK reaches it) goes on its own, for ioredis to follow. Redirections say where a slot is, not how a node is:
   * none of this counts for or against a node's breaker.
   */
  private redirect(pending: readonly Pending[]): void {
    for (const p of pending) {
      if (p.requeued >= MAX_REQUEUES) this.sendRedirected(p)
      else this.awaitingSlots.push(p)
    }
    if (this.slotsRefresh !== undefined || this.awaitingSlots.length === 0) return
    const done = () => {
      if (this.slotsRefresh === undefined) return
      clearTimeout(this.slotsRefresh)
      this.slotsRefresh = undefined
      const waiting = this.awaitingSlots
      this.awaitingSlots = []
      this.requeue(waiting)
    }
    // A refresh that does not end within the deadline (the cluster unreachable) lets the requests go on as they are.
    this.slotsRefresh = setTimeout(done, this.timeoutMs)
    this.slotsRefresh.unref()
    ;(this.client as RedisClusterClient).refreshSlotsCache(() => done())
  }

  /** Queues requests again for the next flush, which groups them by the node the slot map now names. */
  private requeue(pending: readonly Pending[]): void {
    for (const p of pending) {
      if (p.requeued >= MAX_REQUEUES) {
        this.sendRedirected(p)
        continue
      }
      p.requeued++
      this.queue.push(p)
    }
    if (this.queue.length > 0 && !this.flushScheduled) {
      this.flushScheduled = true
      atEndOfTurn(() => this.flush())
    }
  }

  /** A redirected request on its own, its key declared, for ioredis to route; not counted on a node's breaker. */
  private sendRedirected(p: Pending): void {
    this.send([p], false)
  }

  /** `countsOnBreaker`: false for a redirected request, whose outcome says nothing of the node's health. */
  private send(pending: readonly Pending[], countsOnBreaker = true): void {
    const op = pending.length === 1 ? (pending[0] as Pending).request.op : 'batch'
    const node = this.nodeOf((pending[0] as Pending).key)
    this.guarded(
      op,
      node,
      (notAfter) => this.batch(pending.length, ...this.scriptArgs(pending, notAfter)),
      countsOnBreaker,
    ).then(
      (flat) => this.answer(node, pending, flat, countsOnBreaker),
      (error: unknown) => {
        for (const p of pending) p.reject(error)
      },
    )
  }

  /** The last number of every script reply is the server's time (unless the scripts' clock is pinned). */
  private learnClock(node: string, flat: readonly number[]): void {
    const serverUs = flat.at(-1)
    if (this.clock === undefined && serverUs !== undefined) this.serverClocks.observe(node, serverUs)
  }

  /**
   * The error of a call that reached Redis after its deadline and changed nothing: a timeout like any other,
   * reported to `onStoreError` and counted against the node's breaker. (The reply can be read before the deadline's
   * own timer runs, as after a stall of the event loop: then this is the only report of it.)
   */
  private pastDeadline(node: string, op: string, countsOnBreaker = true): TollboothError {
    const error = new TollboothError(
      ErrorCodes.STORE_TIMEOUT,
      `${this.name}: the call reached Redis after its deadline and changed nothing`,
    )
    if (countsOnBreaker) this.breaker.of(node).failed()
    emit(this.hooks.onStoreError, { store: this.name, op, error })
    return error
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

  private breakerOpen(node: string): TollboothError {
    const where = this.standaloneAddress === undefined ? ` for ${node}` : ''
    return new TollboothError(
      ErrorCodes.STORE_UNAVAILABLE,
      `${this.name}: circuit breaker open${where}, store not called`,
    )
  }

  /**
   * Deadline, breaker accounting (the breaker of `node`) and error reporting around one call. `call` gets the
   * deadline in the server's clock for its script (0 when the store pins its own clock).
   */
  private guarded<T>(
    op: string,
    node: string,
    call: (notAfter: number) => Promise<T>,
    countsOnBreaker = true,
    deadlineAt?: number,
  ): Promise<T> {
    const breaker = countsOnBreaker ? this.breaker.of(node) : undefined
    const started = performance.now()
    const deadline = deadlineAt ?? started + this.timeoutMs
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
        breaker?.failed()
        emit(this.hooks.onStoreError, { store: this.name, op, error })
        reject(error)
      }
      const timer = setTimeout(
        () => {
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
        },
        Math.max(1, deadline - started),
      )
      timer.unref()
      const send = () => {
        cancelWait = undefined
        let answer: Promise<T>
        try {
          answer = call(this.clock === undefined ? this.serverClocks.notAfter(node, deadline) : 0)
        } catch (cause) {
          answer = Promise.reject(cause)
        }
        answer.then(
          (value) => {
            if (settled) return
            settled = true
            clearTimeout(timer)
            breaker?.succeeded()
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

/**
 * How a node batch is sent: `own`, to the node the slot map names; `redirected`, there again after a redirection
 * (each request on its own); `asked`, to the node an ASK named, each request under ASKING.
 */
type NodeRoute = 'own' | 'redirected' | 'asked'

/** Times a request may be queued again after a cluster node sent it back, before it goes on its own. */
const MAX_REQUEUES = 1

/** Redirections an `allOf` follows on a cluster (within its deadline) before it fails. */
const MAX_ALL_OF_REDIRECTIONS = 8

/** Pause before an `allOf` is sent again after TRYAGAIN: the keys it wants are being moved right now. */
const TRYAGAIN_PAUSE_MS = 5

/** Whether the constructor was handed an ioredis client where its options belong: `new RedisStore(client)`. */
function isClientItself(options: unknown): boolean {
  if (options === null || typeof options !== 'object') return false
  const client = options as { defineCommand?: unknown; isCluster?: unknown }
  return typeof client.defineCommand === 'function' || typeof client.isCluster === 'boolean'
}
