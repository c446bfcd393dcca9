/**
 * A node:http server guarded by `concurrencyGuard` on a RedisStore, in a process of its own, for the test that
 * SIGKILLs a process holding leases (test/integration/http/concurrencyGuard.test.ts). Its route never answers: each
 * request holds its lease (renewed every leaseMs / 3) until the process dies.
 *
 * Run through test/helpers/childProcess.ts with the job in TOLLBOOTH_HTTP_GUARD_JOB. Protocol, one JSON line each
 * on stdout: `{"port": <n>}` once listening, then `{"held": <identity>}` each time a request reaches the route.
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Cluster, Redis } from 'ioredis'
import { concurrencyLimit } from '../../src/core/limiters/concurrencyLimit.js'
import { RedisStore } from '../../src/core/stores/redisStore.js'
import { concurrencyGuard } from '../../src/http/concurrencyGuard.js'
import { jobFromEnvironment, runScript, send } from './childScript.js'

export interface HttpGuardJob {
  readonly mode: 'redis' | 'cluster'
  readonly url?: string
  readonly nodes?: { host: string; port: number }[]
  readonly prefix: string
  readonly name: string
  readonly max: number
  readonly leaseMs: number
}

runScript('http guard worker', async () => {
  const job = jobFromEnvironment<HttpGuardJob>('TOLLBOOTH_HTTP_GUARD_JOB')
  const redisOptions = { maxRetriesPerRequest: 1 }
  const client =
    job.mode === 'redis'
      ? new Redis(job.url as string, redisOptions)
      : new Cluster(job.nodes ?? [], { redisOptions })
  client.on('error', () => {})
  const store = new RedisStore({ client, prefix: job.prefix, timeoutMs: 2000 })
  await store.warmUp()
  const guard = concurrencyGuard({
    limiter: concurrencyLimit({ name: job.name, store, max: job.max, leaseMs: job.leaseMs }),
    identify: (req) => String(req.headers['x-user'] ?? 'anonymous'),
  })
  const server = createServer((req, res) => {
    guard(req, res, (error) => {
      if (error !== undefined) {
        res.statusCode = 500
        res.end()
        return
      }
      res.writeHead(200, { 'content-type': 'text/plain' })
      res.write('holding\n')
      void send({ held: req.headers['x-user'] })
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  await send({ port: (server.address() as AddressInfo).port })
})
