import { invalidOption } from '../../core/errors.js'
import { limiterHooksOption } from '../../core/hooks.js'
import { checkOptionKeys, optionNames } from '../../core/knownOptions.js'
import { storeOption } from '../../core/limiterBase.js'
import type { RateLimiter } from '../../core/rateLimiter.js'
import type { Store } from '../../core/stores/store.js'
import { isOptionsObject, nonNegativeInteger, oneOf, positiveInteger, timerMs } from '../../core/validate.js'
import { type ClientIpResolver, clientIpResolver } from '../../identity/clientIp.js'
import { createIpKeyer, type IpKeyOptions, resolveIpKeyOptions } from '../../identity/ipKey.js'
import { costAnalysisOptionKeys } from '../cost/costAnalyzer.js'
import { checkCostMapKeys } from '../cost/costModel.js'
import { GRAPHQL_OPTIONS_OWNER } from '../optionsOwner.js'
import type {
  FieldLimitConfig,
  GraphQLContext,
  GuardLimits,
  OperationEvent,
  SubscriptionOptions,
  TollboothGraphQLOptions,
} from '../optionTypes.js'
import { ipIdentity } from './contextIdentity.js'

const OWNER = GRAPHQL_OPTIONS_OWNER

const OPTIONS = optionNames<TollboothGraphQLOptions>({
  ...costAnalysisOptionKeys,
  limiter: true,
  identify: true,
  trustProxy: true,
  ipv6Prefix: true,
  ipv4Prefix: true,
  maxCost: true,
  minCost: true,
  exposeLimits: true,
  costExtension: true,
  headers: true,
  limits: true,
  fieldLimits: true,
  store: true,
  name: true,
  hooks: true,
  subscriptions: true,
  mode: true,
  onOperation: true,
})
const LIMITS_OPTIONS = optionNames<GuardLimits>({
  maxCharacters: true,
  maxTokens: true,
  maxNesting: true,
  maxDepth: true,
  maxIntrospectionDepth: true,
  maxAliases: true,
  maxDirectives: true,
  maxRootFields: true,
  maxIntrospectionFields: true,
  maxFragmentsPerSelection: true,
  maxBatchSize: true,
})
const SUBSCRIPTIONS_OPTIONS = optionNames<SubscriptionOptions>({
  limiter: true,
  costPerEvent: true,
  maxPerIdentity: true,
  leaseMs: true,
})
const FIELD_LIMIT_OPTIONS = optionNames<FieldLimitConfig>({
  limit: true,
  windowMs: true,
  by: true,
  failPolicy: true,
  ipv6Prefix: true,
  ipv4Prefix: true,
})

/**
 * Refuses a key unknown to `useTollbooth` anywhere in its options: the top level, `limits`, `subscriptions`, each
 * `fieldLimits` entry, each `costs` entry and its `listSize`. Values that are not objects are left to the checks
 * of their values.
 */
export function checkTollboothOptionKeys(options: TollboothGraphQLOptions): void {
  checkOptionKeys(OWNER, options, OPTIONS)
  checkOptionKeys(OWNER, options.limits, LIMITS_OPTIONS, 'limits')
  checkOptionKeys(OWNER, options.subscriptions, SUBSCRIPTIONS_OPTIONS, 'subscriptions')
  refuseNull(options)
  refuseNull(options.limits, 'limits.')
  refuseNull(options.subscriptions, 'subscriptions.')
  const { fieldLimits, costs } = options
  if (typeof fieldLimits === 'object' && fieldLimits !== null) {
    for (const [coordinate, config] of Object.entries(fieldLimits)) {
      checkOptionKeys(OWNER, config, FIELD_LIMIT_OPTIONS, `fieldLimits["${coordinate}"]`)
      refuseNull(config, `fieldLimits["${coordinate}"].`)
    }
  }
  if (typeof costs === 'object' && costs !== null) checkCostMapKeys(costs)
}

/**
 * Refuses `null` for any option: a default is had by leaving the option out, and `null` taken for one would turn a
 * limit off without a word (`fieldLimits: null`, `limits: { maxDepth: null }`).
 */
function refuseNull(options: unknown, path = ''): void {
  if (typeof options !== 'object' || options === null) return
  for (const [key, value] of Object.entries(options)) {
    if (value === null)
      throw invalidOption(OWNER, `${path}${key}`, 'a value (leave it out for the default)', null)
  }
}

/** The options with every default applied and every value checked, built once per plugin (Yoga's or Apollo's). */
export interface ResolvedConfig {
  readonly limiter: (context: GraphQLContext) => RateLimiter | Promise<RateLimiter>
  readonly identify: (context: GraphQLContext) => string | Promise<string>
  readonly resolveIp: ClientIpResolver
  /** How client addresses are grouped into keys (`ipv6Prefix`, `ipv4Prefix`), for field limits to start from. */
  readonly ipKeyOptions: Readonly<Required<IpKeyOptions>>
  readonly maxCost: number
  readonly minCost: number
  readonly exposeLimits: boolean
  readonly costExtension: boolean
  readonly headers: boolean
  readonly dryRun: boolean
  readonly store: Store
  readonly name: string
  readonly maxCharacters: number | undefined
  readonly maxTokens: number | undefined
  readonly maxNesting: number | undefined
  readonly maxDepth: number | undefined
  readonly maxIntrospectionDepth: number
  readonly maxAliases: number | undefined
  readonly maxDirectives: number | undefined
  readonly maxRootFields: number | undefined
  readonly maxIntrospectionFields: number | undefined
  readonly maxFragmentsPerSelection: number | undefined
  readonly maxBatchSize: number
  /** `subscriptions.limiter`; undefined: each operation budget's own twin for events. */
  readonly eventLimiter: ((context: GraphQLContext) => RateLimiter | Promise<RateLimiter>) | undefined
  readonly costPerEvent: number
  readonly maxSubscriptionsPerIdentity: number | undefined
  readonly subscriptionLeaseMs: number
  readonly onOperation: ((event: OperationEvent) => void) | undefined
}

/**
 * Every operation costs at least `minCost`: one above `maxCost`, or above what a fixed budget can ever hold, would
 * refuse every operation, an outage configured by a typo.
 */
function refuseUnpayableMinCost(options: TollboothGraphQLOptions, minCost: number, maxCost: number): void {
  if (minCost > maxCost) {
    throw invalidOption(OWNER, 'minCost', `at most maxCost (${maxCost})`, minCost)
  }
  const { limiter } = options
  if (typeof limiter === 'object' && limiter !== null && minCost > limiter.maxCost) {
    throw invalidOption(
      OWNER,
      'minCost',
      `at most what the limiter can ever hold (${limiter.maxCost})`,
      minCost,
    )
  }
}

export function resolveConfig(options: TollboothGraphQLOptions): ResolvedConfig {
  if (!isOptionsObject(options)) throw invalidOption(OWNER, 'options', 'an object', options)
  checkTollboothOptionKeys(options)
  // Passed on to the plugin's own limiters (field limits, subscription leases), which may never be created.
  limiterHooksOption(OWNER, options.hooks)
  const limits = options.limits ?? {}
  if (!isOptionsObject(limits)) throw invalidOption(OWNER, 'limits', 'an object', limits)
  const subscriptions = options.subscriptions ?? {}
  if (!isOptionsObject(subscriptions)) {
    throw invalidOption(OWNER, 'subscriptions', 'an object', subscriptions)
  }
  const resolveIp = clientIpResolver(OWNER, { trustProxy: options.trustProxy ?? false })
  const ipKeyOptions = Object.freeze(resolveIpKeyOptions(options, OWNER))
  const maxCost = positiveInteger(OWNER, 'maxCost', options.maxCost ?? 5000)
  const minCost = nonNegativeInteger(OWNER, 'minCost', options.minCost ?? 1)
  refuseUnpayableMinCost(options, minCost, maxCost)
  return Object.freeze({
    limiter: limiterOption('limiter', options.limiter),
    identify:
      functionOption('identify', options.identify) ?? ipIdentity(resolveIp, createIpKeyer(ipKeyOptions)),
    resolveIp,
    ipKeyOptions,
    maxCost,
    minCost,
    exposeLimits: booleanOption('exposeLimits', options.exposeLimits, true),
    costExtension: booleanOption('costExtension', options.costExtension, true),
    headers: booleanOption('headers', options.headers, true),
    dryRun: oneOf(OWNER, 'mode', options.mode ?? 'enforce', ['enforce', 'dry-run']) === 'dry-run',
    store: storeOption(OWNER, options.store),
    name: nameOption(options.name),
    maxCharacters: optionalLimit('limits.maxCharacters', limits.maxCharacters, 100_000),
    maxTokens: optionalLimit('limits.maxTokens', limits.maxTokens, 5000),
    maxNesting: optionalLimit('limits.maxNesting', limits.maxNesting, 100),
    maxDepth: optionalLimit('limits.maxDepth', limits.maxDepth, 15),
    maxIntrospectionDepth: positiveInteger(
      OWNER,
      'limits.maxIntrospectionDepth',
      limits.maxIntrospectionDepth ?? 15,
    ),
    maxAliases: optionalLimit('limits.maxAliases', limits.maxAliases, 30),
    maxDirectives: optionalLimit('limits.maxDirectives', limits.maxDirectives, 50),
    maxRootFields: optionalLimit('limits.maxRootFields', limits.maxRootFields, 20),
    maxIntrospectionFields: optionalLimit('limits.maxIntrospectionFields', limits.maxIntrospectionFields, 1),
    maxFragmentsPerSelection: optionalLimit(
      'limits.maxFragmentsPerSelection',
      limits.maxFragmentsPerSelection,
      50,
    ),
    maxBatchSize: positiveInteger(OWNER, 'limits.maxBatchSize', limits.maxBatchSize ?? 10),
    eventLimiter:
      subscriptions.limiter === undefined
        ? undefined
        : limiterOption('subscriptions.limiter', subscriptions.limiter as TollboothGraphQLOptions['limiter']),
    costPerEvent: nonNegativeInteger(OWNER, 'subscriptions.costPerEvent', subscriptions.costPerEvent ?? 0),
    maxSubscriptionsPerIdentity:
      subscriptions.maxPerIdentity === undefined
        ? undefined
        : positiveInteger(OWNER, 'subscriptions.maxPerIdentity', subscriptions.maxPerIdentity),
    subscriptionLeaseMs: timerMs(OWNER, 'subscriptions.leaseMs', subscriptions.leaseMs ?? 60_000),
    onOperation: functionOption('onOperation', options.onOperation),
  })
}

function limiterOption(
  option: string,
  limiter: TollboothGraphQLOptions['limiter'],
): ResolvedConfig['limiter'] {
  if (isRateLimiter(limiter)) return () => limiter
  if (typeof limiter === 'function') {
    return async (context) => {
      const chosen = await limiter(context)
      if (!isRateLimiter(chosen)) {
        throw invalidOption(
          OWNER,
          option,
          'a function returning a tokenBucket (or another RateLimiter)',
          chosen,
        )
      }
      return chosen
    }
  }
  throw invalidOption(
    OWNER,
    option,
    'a tokenBucket (or another RateLimiter), or a function returning one',
    limiter,
  )
}

function functionOption<T>(option: string, value: T | undefined): T | undefined {
  if (value !== undefined && typeof value !== 'function')
    throw invalidOption(OWNER, option, 'a function', value)
  return value
}

function booleanOption(option: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback
  if (typeof value !== 'boolean') throw invalidOption(OWNER, option, 'a boolean', value)
  return value
}

function optionalLimit(
  option: string,
  value: number | false | undefined,
  fallback: number,
): number | undefined {
  if (value === false) return undefined
  return positiveInteger(OWNER, option, value ?? fallback)
}

function nameOption(name: unknown): string {
  if (name === undefined) return 'gql'
  if (typeof name !== 'string' || name.length === 0 || name.length > 64 || /[{}:]/.test(name)) {
    throw invalidOption(OWNER, 'name', 'a string of 1 to 64 characters without "{", "}" or ":"', name)
  }
  return name
}

/**
 * Duck-typed: anything that consumes and refunds serves as the budget (another copy of tollbooth's limiters, an
 * `allOf`, a wrapper of one); the engine uses the memory store's synchronous paths only where they exist.
 */
function isRateLimiter(value: unknown): value is RateLimiter {
  const candidate = value as Partial<RateLimiter> | null
  return (
    typeof candidate === 'object' &&
    candidate !== null &&
    typeof candidate.consume === 'function' &&
    typeof candidate.refund === 'function' &&
    typeof candidate.policy === 'object'
  )
}
