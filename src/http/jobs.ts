import { invalidArgument, invalidOption } from '../core/errors.js'
import { checkOptionKeys, optionNames } from '../core/knownOptions.js'
import { isConcurrencyLimiter, isLeakyBucket, isRateLimiter } from '../core/limiterKinds.js'
import type { ConcurrencyLimiter } from '../core/limiters/concurrencyLimit.js'
import type { RateLimiter } from '../core/rateLimiter.js'
import { mergeRateLimitHeaders, type RateLimitPolicy, rateLimitHeaders } from '../core/rateLimitHeaders.js'
import { isOptionsObject } from '../core/validate.js'
import { renewWhileHeld } from './heldLease.js'
import { validIdentity } from './rateLimit.js'
import { type Refusal, refusal } from './refusal.js'

export interface JobAdmissionOptions {
  /**
   * Running jobs per identity: `concurrencyLimit({ name, max, leaseMs })`. A ticket's lease is renewed every
   * `leaseMs / 3` until it is released; a process that dies holding tickets frees their slots after `leaseMs`.
   */
  jobs: ConcurrencyLimiter
  /**
   * Bytes of accepted, unfinished jobs per identity: a `tokenBucket` whose `capacity` is the most pending bytes.
   * Admission takes a job's bytes, its release gives them back. The refill is what brings back the bytes of tickets
   * never released (a process that died): choose it slow, e.g. `capacity` over the longest job's duration; while
   * jobs run, it lets the pending bytes exceed `capacity` by at most the refill over their duration.
   */
  pendingBytes?: RateLimiter
}

/** An accepted job: hold it while the job runs, `release()` it when the job ends, whichever request or tick that is. */
export interface JobTicket {
  readonly allowed: true
  readonly identity: string
  /** The bytes this job holds of its identity's `pendingBytes` (0 without `pendingBytes`). */
  readonly bytes: number
  /** RateLimit fields of the admission (jobs as `concurrent-requests`, pending bytes as `content-bytes`). */
  readonly headers: Readonly<Record<string, string>>
  /** Frees the job's slot and gives its bytes back. Safe to call more than once: only the first call counts. */
  release(): Promise<void>
}

/** A job refused: too many running (429), too many pending bytes (429), or more bytes than can ever be pending (413). */
export interface JobRefused {
  readonly allowed: false
  readonly refusal: Refusal
}

export type JobAdmissionResult = JobTicket | JobRefused

export interface JobAdmission {
  /** Admits one job of `identity` holding `bytes` (a non-negative integer, default 0) until its ticket is released. */
  admit(identity: string, bytes?: number): Promise<JobAdmissionResult>
}

const OWNER = 'jobAdmission'

const OPTIONS = optionNames<JobAdmissionOptions>({ jobs: true, pendingBytes: true })

/**
 * "Accept with 202, at most N running jobs and B pending bytes per identity". A job takes a concurrency lease (the
 * count) and its size from a byte budget (the volume); refusing either takes neither. The ticket, released when the
 * job ends, gives both back, exactly once. Release tickets in the process that admitted them (it renews the lease);
 * what a dead process held comes back by itself: the slots after `leaseMs`, the bytes by the budget's refill.
 */
export function jobAdmission(options: JobAdmissionOptions): JobAdmission {
  if (!isOptionsObject(options)) throw invalidOption(OWNER, 'options', 'an object', options)
  checkOptionKeys(OWNER, options, OPTIONS)
  const { jobs, pendingBytes } = options
  if (!isConcurrencyLimiter(jobs)) {
    throw invalidOption(OWNER, 'jobs', 'a concurrency limiter (concurrencyLimit)', jobs)
  }
  if (
    pendingBytes !== undefined &&
    (!isRateLimiter(pendingBytes) ||
      isLeakyBucket(pendingBytes) ||
      // A window gives its whole limit back at its end, pending or not: only a bucket bounds what is pending.
      pendingBytes.algorithm !== 'tokenBucket')
  ) {
    throw invalidOption(OWNER, 'pendingBytes', 'a rate limiter counting bytes (a tokenBucket)', pendingBytes)
  }
  const jobsPolicy: RateLimitPolicy = Object.freeze({
    name: jobs.name,
    quota: jobs.limit,
    unit: 'concurrent-requests',
  })
  const bytesPolicy: RateLimitPolicy | undefined =
    pendingBytes === undefined ? undefined : Object.freeze({ ...pendingBytes.policy, unit: 'content-bytes' })

  return {
    async admit(identity, bytes = 0) {
      validIdentity(OWNER, identity)
      if (typeof bytes !== 'number' || !Number.isSafeInteger(bytes) || bytes < 0) {
        throw invalidArgument(OWNER, 'bytes', 'a non-negative integer', bytes)
      }
      const lease = await jobs.acquire(identity)
      if (!lease.allowed) return { allowed: false, refusal: refusal(lease, jobsPolicy) }
      const headers = [rateLimitHeaders(lease, jobsPolicy)]
      if (pendingBytes !== undefined && bytesPolicy !== undefined && bytes > 0) {
        const taken = await pendingBytes.consume(identity, bytes)
        if (!taken.allowed) {
          await lease.release()
          // More bytes than can ever be pending is the client's error, not one waiting cures.
          return { allowed: false, refusal: refusal(taken, bytesPolicy, taken.neverAllowed ? 413 : 429) }
        }
        headers.push(rateLimitHeaders(taken, bytesPolicy))
      }

      const stopRenewing = renewWhileHeld(lease, jobs.leaseMs)
      let released: Promise<void> | undefined
      return {
        allowed: true,
        identity,
        bytes: pendingBytes === undefined ? 0 : bytes,
        headers: Object.freeze(mergeRateLimitHeaders(headers)),
        release() {
          if (released !== undefined) return released
          stopRenewing()
          const refund =
            pendingBytes !== undefined && bytes > 0
              ? pendingBytes.refund(identity, bytes).then(() => undefined)
              : Promise.resolve()
          released = Promise.all([lease.release(), refund]).then(() => undefined)
          return released
        },
      }
    },
  }
}
