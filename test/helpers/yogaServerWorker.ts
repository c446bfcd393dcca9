/**
 * A Yoga server protected by `useTollbooth` in a process of its own, for the multi-process field-limit test of
 * test/integration/graphql/graphqlHttp.test.ts: several such servers share one Redis, so a `login` limit holds across
 * them.
 *
 * Run it as `node --import <absolute URL of tsx's loader> test/helpers/yogaServerWorker.ts` (see childProcess.ts),
 * with the job as JSON in the TOLLBOOTH_YOGA_WORKER_JOB environment variable.
 *
 * Protocol, one JSON line each on stdout:
 * 1. `{"ready":true,"port":N}` once the server listens on 127.0.0.1 and the store's scripts are loaded;
 * 2. for each line `stats` on stdin, the resolver counts (a `ResolverCalls`).
 * The process closes its server and exits when its stdin closes.
 */
import { createServer } from 'node:http'
import { createInterface } from 'node:readline'
import { createYoga } from 'graphql-yoga'
import { Redis } from 'ioredis'
import { useTollbooth } from '../../src/graphql/index.js'
import { RedisStore, tokenBucket } from '../../src/index.js'
import { jobFromEnvironment, runScript, send } from './childScript.js'
import { createTestSchema, resolverCalls } from './yogaSchema.js'

export interface YogaWorkerJob {
  redisUrl: string
  /** RedisStore key prefix: unique per test. */
  prefix: string
  /** `fieldLimits['Mutation.login']`, keyed by the e-mail. */
  loginLimit: number
  loginWindowMs: number
}

async function main(): Promise<void> {
  const job = jobFromEnvironment<YogaWorkerJob>('TOLLBOOTH_YOGA_WORKER_JOB')
  const client = new Redis(job.redisUrl, { enableOfflineQueue: true, maxRetriesPerRequest: 1 })
  client.on('error', (error: Error) =>
    process.stderr.write(`yoga worker ${process.pid}: redis error: ${error.message}\n`),
  )
  // A deadline far above any reply time, so that no decision falls to the fail policy.
  const store = new RedisStore({ client, prefix: job.prefix, timeoutMs: 5000 })
  await store.warmUp()

  const calls = resolverCalls()
  const yoga = createYoga({
    schema: createTestSchema(calls),
    logging: false,
    plugins: [
      useTollbooth({
        // A budget far above what the test spends: only the login limit refuses.
        limiter: tokenBucket({ name: 'budget', capacity: 10_000, refillPerSecond: 100, store }),
        store,
        fieldLimits: {
          'Mutation.login': { limit: job.loginLimit, windowMs: job.loginWindowMs, by: ['email'] },
        },
      }),
    ],
  })
  const server = createServer(yoga)
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => resolve())
  })
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('the server has no TCP address')
  await send({ ready: true, port: address.port })

  const lines = createInterface({ input: process.stdin })
  lines.on('line', (line) => {
    if (line.trim() === 'stats') void send(calls)
  })
  lines.on('close', () => {
    server.closeAllConnections()
    server.close()
    client.disconnect()
    process.exit(0)
  })
}

runScript('yoga worker', main)
