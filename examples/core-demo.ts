/**
 * A small HTTP API protected by tollbooth's core, until the full example server (GraphQL + WebSocket) lands:
 * every request pays 1 token from its client IP's bucket; GET /expensive pays 5.
 *
 *   PORT=4000 (default) · REDIS_URL=redis://… to share budgets through Redis instead of the embedded memory store
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Redis } from 'ioredis'
import {
  clientIp,
  ipKey,
  MemoryStore,
  PROBLEM_JSON_CONTENT_TYPE,
  quotaExceededProblem,
  RedisStore,
  rateLimitHeaders,
  type Store,
  tokenBucket,
} from '../src/index.js'

const port = Number(process.env.PORT ?? 4000)
const redisUrl = process.env.REDIS_URL
const client = redisUrl
  ? new Redis(redisUrl, { maxRetriesPerRequest: 1, enableOfflineQueue: false })
  : undefined
const store: Store = client ? new RedisStore({ client }) : new MemoryStore()

const budget = tokenBucket({ name: 'demo-ip', store, capacity: 10, refillPerSecond: 1, failPolicy: 'open' })

const server = createServer(async (req, res) => {
  const cost = req.url === '/expensive' ? 5 : 1
  // The socket address only: this demo trusts no proxy, so X-Forwarded-For cannot choose the budget.
  const decision = await budget.consume(ipKey(clientIp(req)), cost)
  const headers = rateLimitHeaders(decision, budget.policy)
  if (!decision.allowed) {
    res.writeHead(429, { ...headers, 'content-type': PROBLEM_JSON_CONTENT_TYPE })
    res.end(JSON.stringify(quotaExceededProblem(decision, budget.name)))
    return
  }
  res.writeHead(200, { ...headers, 'content-type': 'application/json' })
  res.end(JSON.stringify({ ok: true, cost, remaining: decision.remaining, source: decision.source }))
})

server.listen(port, () => {
  // PORT=0 picks a free port (the test does): print the one actually bound.
  const url = `http://localhost:${(server.address() as AddressInfo).port}`
  console.log(
    `tollbooth core demo on ${url} — store: ${client ? `Redis (${redisUrl})` : 'memory'}, fail policy: open`,
  )
  console.log(`budget: ${budget.limit} tokens per client IP, refilling 1/s; /expensive costs 5`)
  console.log('\nTry:')
  console.log(`  curl -i ${url}/                                   # 200 with RateLimit headers`)
  console.log(
    `  for i in $(seq 12); do curl -s -o /dev/null -w '%{http_code} ' ${url}/; done; echo   # 200s then 429s`,
  )
  console.log(
    `  curl -i ${url}/expensive                          # 429 + Retry-After once the bucket is low`,
  )
})

function shutdown() {
  server.close(() => {
    client?.disconnect()
    process.exit(0)
  })
  server.closeAllConnections()
}
process.once('SIGINT', shutdown)
process.once('SIGTERM', shutdown)
