/**
 * Limiters made by another copy of tollbooth in the same tree (two versions in a monorepo): here the built package
 * in dist/ beside these sources, whose classes are not these. Every HTTP guard accepts them as its own, and they
 * limit exactly as they would; an object that only looks like a limiter is refused at startup.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { concurrencyGuard } from '../../../src/http/concurrencyGuard.js'
import { jobAdmission } from '../../../src/http/jobs.js'
import { loginGuard } from '../../../src/http/loginGuard.js'
import { rateLimit } from '../../../src/http/rateLimit.js'
import { uploadGuard } from '../../../src/http/uploadGuard.js'
import { type GuardedServer, serveGuarded } from '../../helpers/guardedServers.js'

/** The built package, imported by its path: another module instance than src/, classes included. */
const built = (await import(
  new URL('../../../dist/index.js', import.meta.url).href
)) as typeof import('../../../src/index.js')
const { concurrencyLimit, leakyBucket, tokenBucket } = built

const open: GuardedServer[] = []
afterEach(async () => {
  await Promise.all(open.splice(0).map((app) => app.close()))
})

describe("another copy's limiters", () => {
  it("are not these sources' classes", async () => {
    const { RateLimiter } = await import('../../../src/core/rateLimiter.js')
    expect(tokenBucket({ name: 'other-copy', capacity: 1, refillPerSecond: 1 })).not.toBeInstanceOf(
      RateLimiter,
    )
  })

  it('rateLimit takes a token bucket from it and admits exactly its capacity: 3 of 5', async () => {
    const limiter = tokenBucket({ name: 'other-copy-rate', capacity: 3, refillPerSecond: 0.001 })
    const app = await serveGuarded('node:http', { middleware: rateLimit({ limiter }) })
    open.push(app)
    const statuses: number[] = []
    for (let i = 0; i < 5; i++) statuses.push((await fetch(app.url)).status)
    expect(statuses).toEqual([200, 200, 200, 429, 429])
  })

  it('concurrencyGuard, loginGuard, uploadGuard and jobAdmission take its limiters at startup', () => {
    const leases = () => concurrencyLimit({ name: 'other-copy-leases', max: 1, leaseMs: 10_000 })
    const bucket = () => tokenBucket({ name: 'other-copy-bucket', capacity: 1000, refillPerSecond: 1 })
    expect(typeof concurrencyGuard({ limiter: leases() })).toBe('function')
    expect(
      typeof loginGuard({
        perIp: bucket(),
        perIpAndAccount: bucket(),
        perAccount: leakyBucket({ name: 'other-copy-queue', ratePerSecond: 1, maxQueue: 10 }),
        account: () => 'alice@example.com',
      }),
    ).toBe('function')
    expect(typeof uploadGuard({ maxBytes: 1000, bytes: bucket(), concurrent: leases() })).toBe('function')
    expect(typeof jobAdmission({ jobs: leases(), pendingBytes: bucket() }).admit).toBe('function')
  })

  it('an object that only looks like a limiter (a wrapper, a mock) is refused at startup, naming the option', () => {
    const real = tokenBucket({ name: 'other-copy-wrapped', capacity: 3, refillPerSecond: 1 })
    const wrapper = {
      consume: (key: string) => real.consume(key),
      refund: (key: string, amount: number) => real.refund(key, amount),
      policy: real.policy,
    }
    const leasesLookalike = { algorithm: 'concurrencyLimit', acquire: async () => ({ allowed: true }) }
    const code = (build: () => unknown) => {
      try {
        build()
      } catch (error) {
        return [(error as { code?: string }).code, (error as Error).message.split(':')[0]]
      }
      return undefined
    }
    expect(code(() => rateLimit({ limiter: wrapper as never }))).toEqual([
      'TOLLBOOTH_ERR_INVALID_OPTION',
      'rateLimit',
    ])
    expect(code(() => concurrencyGuard({ limiter: leasesLookalike as never }))).toEqual([
      'TOLLBOOTH_ERR_INVALID_OPTION',
      'concurrencyGuard',
    ])
    expect(code(() => uploadGuard({ maxBytes: 10, bytes: wrapper as never }))).toEqual([
      'TOLLBOOTH_ERR_INVALID_OPTION',
      'uploadGuard',
    ])
  })
})
