/**
 * What the soak measures on the cluster itself, beside the instances:
 * - an admission probe: greedy identities spending from a token bucket through a RedisStore of their own on the
 *   cluster, failing closed, so that every admission comes from the store; what they were admitted beyond their
 *   budget around a fault is what the fault cost (a master's acknowledged writes that never reached its replica,
 *   or all of them when the whole cluster restarts empty);
 * - Redis latency: a PING to every master, four times a second.
 */
import type { Cluster } from 'ioredis'
import { tokenBucket } from '../src/core/limiters/tokenBucket.js'
import type { RateLimiter } from '../src/core/rateLimiter.js'
import { RedisStore } from '../src/core/stores/redisStore.js'

/** One probe decision: when, whose, whether admitted and what the bucket had left. */
export interface ProbeDecision {
  readonly at: number
  readonly identity: number
  readonly allowed: boolean
  readonly remaining: number
  readonly fromStore: boolean
}

export const PROBE_BUDGET = { capacity: 20, refillPerSecond: 2 }

export class AdmissionProbe {
  readonly decisions: ProbeDecision[] = []
  private readonly limiter: RateLimiter
  private readonly timers: NodeJS.Timeout[] = []

  constructor(
    private readonly client: Cluster,
    prefix: string,
    private readonly identities: number,
    private readonly perSecond: number,
  ) {
    const store = new RedisStore({ client, prefix, timeoutMs: 500 })
    this.limiter = tokenBucket({
      name: 'probe',
      store,
      ...PROBE_BUDGET,
      failPolicy: 'closed',
      denyCache: false,
    })
  }

  async start(): Promise<void> {
    await new RedisStore({ client: this.client }).warmUp()
    for (let identity = 0; identity < this.identities; identity++) {
      const timer = setInterval(() => void this.decide(identity), 1000 / this.perSecond)
      this.timers.push(timer)
    }
  }

  private async decide(identity: number): Promise<void> {
    const decision = await this.limiter.consume(`probe-${identity}`)
    this.decisions.push({
      at: Date.now(),
      identity,
      allowed: decision.allowed,
      remaining: decision.remaining,
      fromStore: decision.source === 'store',
    })
  }

  stop(): void {
    for (const timer of this.timers) clearInterval(timer)
  }
}

/** Round trips of a PING to each master, in ms, with when they were taken; failures count as undefined. */
export class RedisLatency {
  readonly samples: { at: number; ms: number | undefined }[] = []
  private readonly timer: NodeJS.Timeout

  constructor(private readonly client: Cluster) {
    this.timer = setInterval(() => void this.sample(), 250)
  }

  private async sample(): Promise<void> {
    await Promise.all(
      this.client.nodes('master').map(async (node) => {
        const started = performance.now()
        const at = Date.now()
        try {
          await Promise.race([
            node.ping(),
            new Promise((_, reject) => setTimeout(() => reject(new Error('timeout')), 1000).unref()),
          ])
          this.samples.push({ at, ms: performance.now() - started })
        } catch {
          this.samples.push({ at, ms: undefined })
        }
      }),
    )
  }

  stop(): void {
    clearInterval(this.timer)
  }
}
