/**
 * The soak: instances of the example server on a Redis Cluster of 3 masters with a replica each, under load from
 * many identities, through faults in sequence. `runSoak(profile)` returns everything observed; report.ts judges and
 * writes it up. Used by `npm run soak` (the full profile) and by the test suite (the short one).
 */
import { Cluster } from 'ioredis'
import {
  type RedisClusterProcess,
  type RedisProcess,
  startRedisCluster,
} from '../test/helpers/redisServer.js'
import { Instance } from './instances.js'
import { type HttpClass, Load } from './load.js'
import { AdmissionProbe, RedisLatency } from './probes.js'
import { Sampler } from './samples.js'

export type FaultKind = 'kill-master' | 'pause-master' | 'reshard' | 'kill-instance' | 'restart-cluster'

/** Slots the reshard fault moves from one master to another (of 16,384; a third of a master's share). */
export const RESHARD_SLOTS = 1500

/** How much load a profile adds to the identities judged one by one, and what it must reach. */
export interface BusyLoad {
  /** Well-behaved anonymous identities sending a request of cost 2 a second each. */
  readonly crowd: number
  /** Identities keeping GRAPHQL_WS_CAP graphql-ws sockets each, every socket pinging `pingsPerSecond`. */
  readonly pingers: number
  readonly pingsPerSecond: number
  /** Judged in the steady parts: the load reached, and the p99 of decision time. */
  readonly targets: {
    readonly graphqlPerSecond: number
    readonly webSocketMessagesPerSecond: number
    readonly decisionP99Ms: number
  }
}

export interface SoakProfile {
  readonly name: string
  readonly instances: number
  /** The same load on instances in dry-run first, for the latency the limiter adds; 0 to skip. */
  readonly baselineMs: number
  readonly warmMs: number
  /** Steady load before each fault, and after the last. */
  readonly steadyMs: number
  /** How long each fault is watched (from when it is injected) before the next steady part. */
  readonly faultMs: number
  readonly faults: readonly FaultKind[]
  readonly leaseMs: number
  /** Load beyond the judged identities; none in the short profile. */
  readonly busy: BusyLoad | undefined
}

export const FULL: SoakProfile = {
  name: 'full',
  instances: 4,
  baselineMs: 30_000,
  warmMs: 10_000,
  steadyMs: 40_000,
  faultMs: 30_000,
  faults: ['kill-master', 'pause-master', 'reshard', 'kill-instance', 'restart-cluster'],
  leaseMs: 5_000,
  // 480 crowd requests/s + 44 of the judged classes; 40 × 5 sockets × 11 pings/s + the chat's 8 messages/s: a tenth
  // above the targets, which timers that fire a little late and sockets reconnecting after a fault would otherwise miss.
  busy: {
    crowd: 480,
    pingers: 40,
    pingsPerSecond: 11,
    targets: { graphqlPerSecond: 500, webSocketMessagesPerSecond: 2000, decisionP99Ms: 10 },
  },
}

export const SHORT: SoakProfile = {
  name: 'short',
  instances: 2,
  baselineMs: 0,
  warmMs: 4_000,
  steadyMs: 10_000,
  faultMs: 15_000,
  faults: ['kill-instance', 'kill-master'],
  leaseMs: 3_000,
  busy: undefined,
}

/** The example server's budgets (examples/server.ts): what each class is judged against. */
const ANONYMOUS = { capacity: 1000, refillPerSecond: 10 }
const USER = { capacity: 1000, refillPerSecond: 50 }

/** Caps of the example server's WebSocket endpoints, per identity. */
export const CHAT_CAP = 2
export const GRAPHQL_WS_CAP = 5

export function httpClasses(busy: BusyLoad | undefined): HttpClass[] {
  const anonymous = (block: number, count: number) =>
    addresses(block, count).map((address) => ({ name: address, headers: { 'x-forwarded-for': address } }))
  const user = (token: string) => ({ name: token, headers: { authorization: `Bearer ${token}` } })
  const crowd: HttpClass[] =
    busy === undefined || busy.crowd === 0
      ? []
      : [
          {
            name: 'anonymous, crowd',
            budget: ANONYMOUS,
            greedy: false,
            cost: 2,
            perSecond: 1,
            identities: anonymous(110, busy.crowd),
          },
        ]
  return [
    ...crowd,
    {
      name: 'anonymous, greedy',
      budget: ANONYMOUS,
      greedy: true,
      cost: 30,
      perSecond: 8,
      identities: anonymous(100, 4),
    },
    {
      name: 'anonymous, well-behaved',
      budget: ANONYMOUS,
      greedy: false,
      cost: 5,
      perSecond: 1,
      identities: anonymous(101, 6),
    },
    {
      name: 'user, greedy',
      budget: USER,
      greedy: true,
      cost: 100,
      perSecond: 4,
      identities: [user('bob-token')],
    },
    {
      name: 'user, well-behaved',
      budget: USER,
      greedy: false,
      cost: 20,
      perSecond: 1,
      identities: [user('alice-token'), user('carol-token')],
    },
  ]
}

/** One fault as it happened. */
export interface FaultRecord {
  readonly kind: FaultKind
  readonly at: number
  /** When the fault was repaired (a process resumed or restarted), if the soak repairs it. */
  readonly repairedAt: number | undefined
  /** When the watch of this fault ended. */
  readonly until: number
  readonly detail: string
}

export interface SoakRun {
  readonly profile: SoakProfile
  readonly startedAt: number
  readonly enforceFrom: number
  readonly endedAt: number
  readonly baseline:
    | { readonly from: number; readonly until: number; readonly latenciesMs: number[] }
    | undefined
  readonly faults: readonly FaultRecord[]
  readonly load: Load
  readonly sampler: Sampler
  readonly probe: AdmissionProbe
  readonly redisLatency: RedisLatency
  readonly instanceNames: readonly string[]
  readonly problems: readonly string[]
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

export async function runSoak(
  profile: SoakProfile,
  log: (line: string) => void = () => {},
): Promise<SoakRun> {
  const problems: string[] = []
  const onUnhandled = (reason: unknown) => problems.push(`the soak process: unhandled ${String(reason)}`)
  process.on('unhandledRejection', onUnhandled)
  const startedAt = Date.now()
  log(`starting a Redis Cluster of 3 masters + 3 replicas`)
  // The settings docs/operations.md recommends: a failed master stops only its own slots.
  const cluster = await startRedisCluster({
    masters: 3,
    replicas: 1,
    nodeTimeoutMs: 1000,
    requireFullCoverage: false,
  })
  const clusterNodes = cluster.startupNodes.map(({ host, port }) => `${host}:${port}`).join(',')
  const prefix = `soak-${process.pid}-${startedAt}:`
  let instances: Instance[] = []
  const start = async (mode: 'enforce' | 'dry-run') => {
    const started = Array.from(
      { length: profile.instances },
      (_, i) => new Instance(`instance-${i + 1}`, { clusterNodes, prefix, leaseMs: profile.leaseMs, mode }),
    )
    instances = await Promise.all(started.map((instance) => instance.started()))
  }
  const targets = { urls: () => instances.filter((i) => i.alive).map((i) => ({ name: i.name, url: i.url })) }
  const client = new Cluster(cluster.startupNodes, {
    redisOptions: { maxRetriesPerRequest: 1, connectTimeout: 1000 },
    enableOfflineQueue: false,
  })
  const probe = new AdmissionProbe(client, `${prefix}probe:`, 60, 5)
  const redisLatency = new RedisLatency(client)
  const faults: FaultRecord[] = []
  let load: Load | undefined
  let sampler: Sampler | undefined
  let baseline: SoakRun['baseline']
  try {
    await probe.start()
    if (profile.baselineMs > 0) {
      log(
        `baseline: ${profile.instances} instances in dry-run, ${profile.baselineMs / 1000} s of the same load`,
      )
      await start('dry-run')
      const dryLoad = new Load(targets, httpClasses(profile.busy))
      dryLoad.startHttp()
      const from = Date.now()
      await sleep(profile.baselineMs)
      dryLoad.stop()
      baseline = { from, until: Date.now(), latenciesMs: wellBehavedLatencies(dryLoad) }
      await Promise.all(instances.map((instance) => instance.stop()))
      problems.push(...instances.flatMap((instance) => instance.problems()))
    }
    log(`enforce: ${profile.instances} instances`)
    await start('enforce')
    const enforceFrom = Date.now()
    const running = new Load(targets, httpClasses(profile.busy))
    load = running
    sampler = new Sampler(() => instances, running)
    running.startHttp()
    running.startWebSockets('chat', addresses(200, 4), CHAT_CAP, CHAT_CAP)
    running.startWebSockets('graphql-ws', addresses(201, 3), GRAPHQL_WS_CAP, GRAPHQL_WS_CAP)
    if (profile.busy !== undefined && profile.busy.pingers > 0) {
      const { pingers, pingsPerSecond } = profile.busy
      running.startWebSockets(
        'graphql-ws',
        addresses(202, pingers),
        GRAPHQL_WS_CAP,
        GRAPHQL_WS_CAP,
        pingsPerSecond,
      )
    }
    await sleep(profile.warmMs + profile.steadyMs)
    for (const kind of profile.faults) {
      log(`fault: ${kind}`)
      faults.push(await inject(kind, cluster, instances, running, profile))
      await sleep(profile.steadyMs)
    }
    running.stop()
    sampler.stop()
    probe.stop()
    redisLatency.stop()
    problems.push(...instances.flatMap((instance) => instance.problems()))
    return {
      profile,
      startedAt,
      enforceFrom,
      endedAt: Date.now(),
      baseline,
      faults,
      load: running,
      sampler,
      probe,
      redisLatency,
      instanceNames: instances.map((instance) => instance.name),
      problems,
    }
  } finally {
    load?.stop()
    sampler?.stop()
    probe.stop()
    redisLatency.stop()
    process.off('unhandledRejection', onUnhandled)
    await Promise.all(instances.map((instance) => instance.stop().catch(() => undefined)))
    client.disconnect()
    await cluster.stop()
  }
}

/**
 * Anonymous identities from address block `block` on, one /56 each (the network an address-keyed limiter counts as
 * one client; their addresses are their names): 256 to a block, the next ones in the blocks that follow.
 */
function addresses(block: number, count: number): string[] {
  return Array.from(
    { length: count },
    (_, i) => `2001:db8:${block + Math.floor(i / 256)}:${((i % 256) * 256).toString(16)}::1`,
  )
}

/** Latencies of the well-behaved classes' requests (never refused): what the limiter adds is judged on these. */
export function wellBehavedLatencies(load: Load, from = 0, until = Number.POSITIVE_INFINITY): number[] {
  const names = new Set(load.classes.filter((c) => !c.greedy).flatMap((c) => c.identities.map((i) => i.name)))
  return [...load.sent]
    .filter(([name]) => names.has(name))
    .flatMap(([, records]) => records.filter((r) => r.at >= from && r.at < until && r.status === 200))
    .map((r) => r.latencyMs)
}

async function inject(
  kind: FaultKind,
  cluster: RedisClusterProcess,
  instances: Instance[],
  load: Load,
  profile: SoakProfile,
): Promise<FaultRecord> {
  const at = Date.now()
  const watchUntil = at + profile.faultMs
  /** The fault, once it has been watched to the end of its faultMs. */
  const watched = async (repairedAt: number | undefined, detail: string): Promise<FaultRecord> => {
    await sleep(Math.max(0, watchUntil - Date.now()))
    return { kind, at, repairedAt, until: Date.now(), detail }
  }
  switch (kind) {
    case 'kill-master': {
      const master = await someMaster(cluster)
      await master.kill()
      // Watched for faultMs; then the old master comes back, as a replica of the one promoted in its place.
      await sleep(Math.max(0, watchUntil - Date.now()))
      await master.restart()
      await cluster.waitUntilOk()
      return {
        kind,
        at,
        repairedAt: undefined,
        until: Date.now(),
        detail: `SIGKILL to the master on :${master.port}`,
      }
    }
    case 'pause-master': {
      const master = await someMaster(cluster)
      master.pause()
      await sleep(5000)
      master.resume()
      const repairedAt = Date.now()
      await sleep(Math.max(0, watchUntil - Date.now()))
      await cluster.waitUntilOk()
      return {
        kind,
        at,
        repairedAt,
        until: Date.now(),
        detail: `SIGSTOP for 5 s to the master on :${master.port}`,
      }
    }
    case 'reshard': {
      // What `redis-cli --cluster reshard` does for an operator: slot by slot, keys MIGRATEd under the load, the
      // clients redirected (ASK while a slot moves, MOVED once it has).
      const [from, to] = await cluster.masters()
      if (from === undefined || to === undefined) throw new Error('fewer than two masters answer')
      await cluster.moveSlots(from, to, RESHARD_SLOTS)
      return watched(
        Date.now(),
        `${RESHARD_SLOTS} slots moved from the master on :${from.port} to the one on :${to.port}`,
      )
    }
    case 'kill-instance': {
      // The instance holding the most WebSocket sockets.
      const held = (name: string) => load.sockets.filter((s) => s.open && s.instance === name).length
      const victim = [...instances]
        .filter((i) => i.alive)
        .sort((a, b) => held(b.name) - held(a.name))[0] as Instance
      const sockets = held(victim.name)
      load.lostWith(victim.name, Date.now())
      victim.kill()
      return watched(undefined, `SIGKILL to ${victim.name}, holding ${sockets} WebSocket sockets`)
    }
    case 'restart-cluster': {
      await cluster.restart()
      return watched(Date.now(), 'every node stopped and started again (the data is lost)')
    }
  }
}

async function someMaster(cluster: RedisClusterProcess): Promise<RedisProcess> {
  const masters = await cluster.masters()
  const master = masters[0]
  if (master === undefined) throw new Error('no master answers')
  return master
}
