/**
 * The servers bench:graphql compares: their keys, names, and what each is read against. Building them is
 * bench/graphql/server.ts' job, in a process per server.
 */

/** The servers of a default run. */
const DEFAULT_KEYS = [
  'yogaPlain',
  'yogaPlainAgain',
  'yogaMemory',
  'yogaRedis',
  'yogaArmor',
  'apolloPlain',
  'apolloMemory',
  'apolloRedis',
  'apolloArmor',
] as const
/** Added by `--breakdown`. */
const BREAKDOWN_KEYS = ['yogaMemoryNoExtension', 'yogaMemoryNoHeaders', 'yogaMemoryNoReporting'] as const
/** Added by `--calibrate`. */
const CALIBRATION_KEYS = ['yogaBurn', 'yogaDeferred', 'yogaHooks', 'apolloHooks'] as const

export const CONTENDER_KEYS = [...DEFAULT_KEYS, ...BREAKDOWN_KEYS, ...CALIBRATION_KEYS] as const
export type ContenderKey = (typeof CONTENDER_KEYS)[number]

/** CPU a `yogaBurn` server spends per operation, in µs (`--calibrate`). */
export const BURN_MICROS = 15

export const CONTENDER_NAMES: Record<ContenderKey, string> = {
  yogaPlain: 'plain Yoga',
  yogaPlainAgain: 'plain Yoga again (A/A control)',
  yogaMemory: 'Yoga + tollbooth, MemoryStore',
  yogaRedis: 'Yoga + tollbooth, RedisStore',
  yogaArmor: 'Yoga + graphql-armor (defaults)',
  apolloPlain: 'plain Apollo',
  apolloMemory: 'Apollo + tollbooth, MemoryStore',
  apolloRedis: 'Apollo + tollbooth, RedisStore',
  apolloArmor: 'Apollo + graphql-armor (defaults)',
  yogaMemoryNoExtension: 'Yoga MemoryStore, no extensions.cost',
  yogaMemoryNoHeaders: 'Yoga MemoryStore, no headers',
  yogaMemoryNoReporting: 'Yoga MemoryStore, neither',
  yogaBurn: `Yoga + ${BURN_MICROS} µs busy loop`,
  yogaDeferred: 'Yoga + execution deferred',
  yogaHooks: 'Yoga + no-op plugin, same hooks',
  apolloHooks: 'Apollo + no-op plugin, same hooks',
}

/** What a contender's rate is divided by, round by round: the plain server of its framework. */
export function baselineOf(key: ContenderKey): ContenderKey {
  return key.startsWith('apollo') ? 'apolloPlain' : 'yogaPlain'
}

/** Ratio targets against the plain server of the same framework; the other contenders are references. */
export const TARGETS: Partial<Record<ContenderKey, number>> = {
  yogaMemory: 0.95,
  yogaRedis: 0.9,
  apolloMemory: 0.95,
  apolloRedis: 0.9,
}

/** The contenders that need `tollbooth/apollo` (skipped, with a line saying so, while it is not built). */
export function needsApolloPlugin(key: ContenderKey): boolean {
  return key === 'apolloMemory' || key === 'apolloRedis'
}

/** The contenders that need the bench's private redis-server. */
export function needsRedis(key: ContenderKey): boolean {
  return key === 'yogaRedis' || key === 'apolloRedis'
}

/** The contenders of a default run, then those of `--breakdown` and `--calibrate`. */
export function defaultContenders(options: { breakdown: boolean; calibrate: boolean }): ContenderKey[] {
  return [
    ...DEFAULT_KEYS,
    ...(options.breakdown ? BREAKDOWN_KEYS : []),
    ...(options.calibrate ? CALIBRATION_KEYS : []),
  ]
}

/** The module of tollbooth's Apollo plugin, imported by name (dist/graphql/apollo once built). */
export const APOLLO_PLUGIN_MODULE = 'tollbooth/apollo'

/** Whether `tollbooth/apollo` can be imported: built into dist/graphql/apollo and exported by package.json. */
export async function apolloPluginBuilt(): Promise<boolean> {
  try {
    await import(APOLLO_PLUGIN_MODULE)
    return true
  } catch {
    return false
  }
}

/**
 * On light requests, where a few microseconds are below what this machine's noise lets a rate tell apart, the
 * verdict is on bytes allocated per request (a figure the load does not move): tollbooth's extra over its plain
 * server at most graphql-armor's extra plus `marginBytes`.
 */
export const ALLOCATION_TARGETS: Partial<
  Record<ContenderKey, { reference: ContenderKey; marginBytes: number }>
> = {
  yogaMemory: { reference: 'yogaArmor', marginBytes: 3000 },
  apolloMemory: { reference: 'apolloArmor', marginBytes: 3000 },
}

/** The workload the allocation verdicts are for. */
export const ALLOCATION_WORKLOAD = 'light'
