import http, { type IncomingMessage } from 'node:http'
import { Redis } from 'ioredis'
import { afterEach, describe, expect, it } from 'vitest'
import { leakyBucket } from '../../../src/core/limiters/leakyBucket.js'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import { MemoryStore } from '../../../src/core/stores/memoryStore.js'
import { RedisStore } from '../../../src/core/stores/redisStore.js'
import { loginGuard, normalizeAccount } from '../../../src/http/loginGuard.js'
import { listenOnLoopback } from '../../helpers/httpServer.js'
import {
  ALICE,
  ALICE_PASSWORD,
  ALICE_SPELLINGS,
  HOST,
  HOURLY,
  invalidOption,
  type LoginRequest,
  limiters,
  login,
  loginOptions,
  startLoginApp,
  useLoginStore,
} from '../../helpers/loginApp.js'
import { startRedis } from '../../helpers/redisServer.js'
import { limiterClientOptions, storeKinds, whenReady } from '../../helpers/stores.js'

const cleanups: (() => Promise<void> | void)[] = []

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function listen(server: http.Server): Promise<number> {
  const listening = await listenOnLoopback(server)
  cleanups.push(listening.close)
  return listening.port
}

async function readJsonBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  return chunks.length === 0 ? undefined : JSON.parse(Buffer.concat(chunks).toString('utf8'))
}

describe.each(storeKinds)('loginGuard on the %s store', (kind) => {
  const ctx = useLoginStore(kind)

  it("gives a success's turn in the account's queue back: successes never queue, failures still do", async () => {
    const guard = loginGuard<LoginRequest>(
      loginOptions(
        ctx.fixture.store,
        ctx.name,
        { perAccount: { ratePerSecond: 1, maxQueue: 3 } },
        { trustProxy: 'loopback' },
      ),
    )
    // Checks and settles at once (the virtual clock stands still: a delay is read, never waited out).
    const server = http.createServer(async (req: LoginRequest, res) => {
      req.body = (await readJsonBody(req)) as LoginRequest['body']
      const answer = await guard.check(req)
      if (!('allowed' in answer)) return void res.writeHead(answer.status).end('{}')
      const email = String(req.body?.email)
      if (ALICE_SPELLINGS.has(email) && req.body?.password === ALICE_PASSWORD)
        await guard.succeeded(req, email)
      else await guard.failed(req, email)
      res.writeHead(200).end(JSON.stringify({ delayMs: answer.delayMs }))
    })
    const port = await listen(server)
    const attempt = async (i: number, email: string, password: string) => {
      const answer = await login(port, email, password, `2001:db8:${i}::1`)
      return answer.status === 200 ? answer.body : answer.status
    }
    // Six successes in a row, from six addresses and in two spellings: without the refund the queue would fill
    // (0, 1000, 2000, 3000 ms, then 429).
    const successes: unknown[] = []
    for (let i = 1; i <= 6; i++)
      successes.push(await attempt(i, i % 2 ? ALICE : ' Alice@Example.COM ', ALICE_PASSWORD))
    expect(successes).toEqual(Array(6).fill({ delayMs: 0 }))
    // The queue is as empty as before the first: four failures take its four places, the fifth is refused.
    const failures: unknown[] = []
    for (let i = 7; i <= 11; i++) failures.push(await attempt(i, ALICE, 'wrong'))
    expect(failures).toEqual([{ delayMs: 0 }, { delayMs: 1000 }, { delayMs: 2000 }, { delayMs: 3000 }, 429])
  })

  it('counts a failure reported for a request it did not check', async () => {
    const guard = loginGuard<LoginRequest>(
      loginOptions(ctx.fixture.store, ctx.name, { perIpAndAccount: { capacity: 2 } }),
    )
    const server = http.createServer(async (req: LoginRequest, res) => {
      req.body = (await readJsonBody(req)) as LoginRequest['body']
      if (req.url === '/second-factor') {
        await guard.failed(req, String(req.body?.email))
        res.writeHead(401).end('{}')
        return
      }
      const answer = await guard.check(req)
      res.writeHead('allowed' in answer ? 200 : answer.status).end('{}')
    })
    const port = await listen(server)
    const post = async (path: string) =>
      (
        await fetch(`http://${HOST}:${port}${path}`, {
          method: 'POST',
          body: JSON.stringify({ email: ALICE }),
        })
      ).status
    expect(await post('/second-factor')).toBe(401)
    expect(await post('/second-factor')).toBe(401)
    expect(await post('/login')).toBe(429)
  })
})

describe('loginGuard on a Redis that stops', () => {
  it('refuses limiters failing open on a remote store at startup, unless allowFailOpen', async () => {
    const redis = await startRedis()
    cleanups.push(() => redis.stop())
    const client = new Redis(redis.url, limiterClientOptions)
    client.on('error', () => {})
    cleanups.push(() => client.disconnect())
    await whenReady(client)
    const store = new RedisStore({ client, timeoutMs: 200 })
    const open = {
      perIp: tokenBucket({ name: 'ip', store, capacity: 5, refillPerSecond: HOURLY }),
      perIpAndAccount: tokenBucket({ name: 'pair', store, capacity: 5, refillPerSecond: HOURLY }),
      perAccount: leakyBucket({ name: 'account', store, ratePerSecond: 1, maxQueue: 3 }),
      account: (req: LoginRequest) => String(req.body?.email),
    }
    expect(() => loginGuard(open)).toThrow(
      expect.objectContaining({
        code: 'TOLLBOOTH_ERR_INVALID_OPTION',
        message: expect.stringContaining('loginGuard: "perIp" must be a limiter with failPolicy \'closed\''),
      }),
    )
    const app = await startLoginApp('node:http', { ...open, allowFailOpen: true })
    cleanups.push(() => app.close())
    await redis.stop()
    // Chosen, and so it is: every attempt reaches the credential check while Redis is down.
    expect((await login(app.port, ALICE)).status).toBe(401)
    expect((await login(app.port, ALICE, ALICE_PASSWORD)).status).toBe(200)
    expect(app.routeHits).toBe(2)
  })
})

describe('loginGuard options', () => {
  const store = new MemoryStore()
  const base = () => ({
    ...limiters(store, 'options'),
    account: (req: LoginRequest) => String(req.body?.email),
  })
  const invalid = invalidOption

  it('refuses an unknown key with the closest name', () => {
    expect(() => loginGuard({ ...base(), perIP: base().perIp } as never)).toThrow(
      invalid('loginGuard: unknown option "perIP" (did you mean "perIp"?)'),
    )
  })

  it('refuses a limiter of the wrong kind, naming the option', () => {
    const { perIp, perAccount } = base()
    expect(() => loginGuard({ ...base(), perAccount: perIp as never })).toThrow(
      invalid('loginGuard: "perAccount" must be a leakyBucket'),
    )
    expect(() => loginGuard({ ...base(), perIp: perAccount })).toThrow(
      invalid('loginGuard: "perIp" must be a rate limiter that refuses'),
    )
    expect(() => loginGuard({ ...base(), perIpAndAccount: undefined as never })).toThrow(
      invalid('loginGuard: "perIpAndAccount" must be a rate limiter that refuses'),
    )
  })

  it('refuses two budgets sharing a name and a store', () => {
    const { perIp } = base()
    const twin = tokenBucket({ name: perIp.name, store, capacity: 5, refillPerSecond: 1 })
    expect(() => loginGuard({ ...base(), perIpAndAccount: twin })).toThrow(
      invalid('loginGuard: "perIpAndAccount" must be a limiter of its own'),
    )
  })

  it('refuses functions and flags of the wrong type', () => {
    expect(() => loginGuard({ ...base(), account: 'email' as never })).toThrow(
      invalid('loginGuard: "account" must be a function, got "email"'),
    )
    expect(() => loginGuard({ ...base(), normalize: true as never })).toThrow(
      invalid('loginGuard: "normalize" must be a function, got true'),
    )
    expect(() => loginGuard({ ...base(), allowFailOpen: 'yes' as never })).toThrow(
      invalid('loginGuard: "allowFailOpen" must be a boolean, got "yes"'),
    )
    expect(() => loginGuard({ ...base(), ipv6Prefix: 200 })).toThrow(invalid('"ipv6Prefix"'))
    expect(() => loginGuard(null as never)).toThrow(invalid('loginGuard: "options" must be an object'))
  })

  it('refuses trusted-device options it cannot use, naming the option and never the secret', () => {
    const perDevice = tokenBucket({ name: 'options-device', store, capacity: 5, refillPerSecond: HOURLY })
    const secret = 's'.repeat(32)
    const devices = (trustedDevices: unknown) => () =>
      loginGuard({ ...base(), trustedDevices: trustedDevices as never })
    expect(devices({ secret, perDevice, maxAge: 1 })).toThrow(
      invalid('loginGuard: unknown option "trustedDevices.maxAge" (did you mean "maxAgeMs"?)'),
    )
    expect(devices({ secret: 'short secret', perDevice })).toThrow(
      invalid(
        'loginGuard: "trustedDevices.secret" must be a string or Buffer of at least 32 bytes, got "12 characters"',
      ),
    )
    expect(devices({ secret: [], perDevice })).toThrow(invalid('"trustedDevices.secret" must be a secret'))
    expect(devices({ secret: [secret, Buffer.alloc(8)], perDevice })).toThrow(
      invalid('"trustedDevices.secret"'),
    )
    expect(devices({ secret })).toThrow(
      invalid('loginGuard: "trustedDevices.perDevice" must be a rate limiter that refuses'),
    )
    expect(devices({ secret, perDevice, maxAgeMs: 0 })).toThrow(
      invalid('"trustedDevices.maxAgeMs" must be a positive integer'),
    )
    expect(devices({ secret, perDevice, maxAgeMs: 401 * 86_400_000 })).toThrow(invalid('at most 400 days'))
    expect(devices({ secret, perDevice, cookieName: 'a b' })).toThrow(invalid('"trustedDevices.cookieName"'))
    expect(devices({ secret, perDevice, token: 'cookie' })).toThrow(
      invalid('"trustedDevices.token" must be a function'),
    )
    expect(devices('on')).toThrow(invalid('loginGuard: "trustedDevices" must be an object'))
    const twin = tokenBucket({ name: base().perIp.name, store, capacity: 5, refillPerSecond: 1 })
    expect(devices({ secret, perDevice: twin })).toThrow(
      invalid('"trustedDevices.perDevice" must be a limiter of its own'),
    )
  })

  it('refuses a device budget failing open on a remote store, as the others', async () => {
    const client = new Redis({ lazyConnect: true })
    cleanups.push(() => client.disconnect())
    const remote = new RedisStore({ client })
    const perDevice = tokenBucket({ name: 'device', store: remote, capacity: 5, refillPerSecond: HOURLY })
    expect(() => loginGuard({ ...base(), trustedDevices: { secret: 's'.repeat(32), perDevice } })).toThrow(
      invalid('loginGuard: "trustedDevices.perDevice" must be a limiter with failPolicy \'closed\''),
    )
  })

  it('normalizes account names by default', () => {
    expect(normalizeAccount(' Alice@Example.COM ')).toBe(ALICE)
    expect(normalizeAccount('ＡＬＩＣＥ＠ｅｘａｍｐｌｅ．ｃｏｍ\u3000')).toBe(ALICE)
    // Invisible and control characters many lookups ignore: each would otherwise be a fresh budget.
    for (const hidden of ['\u200b', '\u200d', '\u00ad', '\u2060', '\ufe0f', '\u0000', '\u180e']) {
      expect(normalizeAccount(`al${hidden}ice@example.com`)).toBe(ALICE)
    }
  })
})
