import { once } from 'node:events'
import net from 'node:net'
import { performance } from 'node:perf_hooks'
import { Redis } from 'ioredis'
import { afterEach, describe, expect, it } from 'vitest'
import type { DecisionEvent } from '../../../src/core/hooks.js'
import { RedisStore } from '../../../src/core/stores/redisStore.js'
import type { LoginGuardOptions } from '../../../src/http/loginGuard.js'
import type { GuardedServer } from '../../helpers/guardedServers.js'
import { serverKinds } from '../../helpers/guardedServers.js'
import {
  ALICE,
  ALICE_PASSWORD,
  type Budgets,
  HOST,
  type LoginApp,
  type LoginRequest,
  login,
  loginOptions,
  rawLogin,
  startLoginApp,
  useLoginStore,
} from '../../helpers/loginApp.js'
import { startRedis } from '../../helpers/redisServer.js'
import { limiterClientOptions, storeKinds, whenReady } from '../../helpers/stores.js'

const cleanups: (() => Promise<void> | void)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function started(app: Promise<LoginApp>): Promise<LoginApp> {
  const server: GuardedServer = await app
  cleanups.push(() => server.close())
  return server
}

describe.each(storeKinds)('the login guard on the %s store', (storeKind) => {
  const ctx = useLoginStore(storeKind)

  describe.each(serverKinds)('on %s', (kind) => {
    const start = (budgets?: Budgets, extra?: Partial<LoginGuardOptions<LoginRequest>>) =>
      started(startLoginApp(kind, loginOptions(ctx.fixture.store, ctx.name, budgets, extra)))

    it('refuses the 6th attempt from one address when perIp allows 5, before the route', async () => {
      const app = await start({ perIp: { capacity: 5 } })
      // A spray: a different account each time, so only the per-address budget can stop it.
      const statuses: number[] = []
      for (let i = 1; i <= 5; i++) statuses.push((await login(app.port, `user${i}@example.com`)).status)
      expect(statuses).toEqual([401, 401, 401, 401, 401])

      const sixth = await login(app.port, 'user6@example.com')
      expect(sixth.status).toBe(429)
      expect(sixth.headers.get('retry-after')).toBe('3600')
      expect(sixth.headers.get('content-type')).toBe(app.jsonType('application/problem+json'))
      expect(sixth.headers.get('ratelimit')).toBe(`"${ctx.name}-ip";r=0;t=3600`)
      expect(sixth.body).toEqual({
        type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
        title: 'Request cannot be satisfied as assigned quota has been exceeded',
        status: 429,
        'violated-policies': [`${ctx.name}-ip`],
        retryAfter: 3600,
      })
      expect(app.routeHits).toBe(5)
    })

    it('admits exactly the budget of 10 parallel attempts: each is counted at the door', async () => {
      const app = await start({ perIp: { capacity: 5 } })
      const answers = await Promise.all(
        Array.from({ length: 10 }, (_, i) => login(app.port, `user${i}@example.com`)),
      )
      const statuses = answers.map((answer) => answer.status).sort()
      expect(statuses).toEqual([401, 401, 401, 401, 401, 429, 429, 429, 429, 429])
      expect(app.routeHits).toBe(5)
    })

    it('counts IPv6 addresses rotating within one /56 as one address', async () => {
      const app = await start({ perIp: { capacity: 5 } }, { trustProxy: 'loopback' })
      const statuses: number[] = []
      // Six /64s of the /56 2001:db8:1::/56.
      for (let i = 1; i <= 6; i++) {
        statuses.push(
          (await login(app.port, `user${i}@example.com`, 'wrong', `2001:db8:1:${i}::${i}`)).status,
        )
      }
      expect(statuses).toEqual([401, 401, 401, 401, 401, 429])
      // The next /56 is another client.
      expect((await login(app.port, 'user7@example.com', 'wrong', '2001:db8:1:100::1')).status).toBe(401)
      expect(app.routeHits).toBe(6)
    })

    it('clears the (address, account) pair on success, and gives back the attempt per address', async () => {
      const app = await start({ perIp: { capacity: 7 }, perIpAndAccount: { capacity: 3 } })
      const statuses: number[] = []
      statuses.push((await login(app.port, ALICE)).status)
      statuses.push((await login(app.port, ALICE)).status)
      statuses.push((await login(app.port, ALICE, ALICE_PASSWORD)).status)
      // Without the reset the pair would be spent (3 attempts): these three would not reach the route.
      for (let i = 0; i < 3; i++) statuses.push((await login(app.port, ALICE)).status)
      const refused = await login(app.port, ALICE)
      expect(statuses).toEqual([401, 401, 200, 401, 401, 401])
      expect(refused.status).toBe(429)
      expect(refused.body).toMatchObject({ 'violated-policies': [`${ctx.name}-pair`] })

      // Per address: 5 failures counted; the success and the pair's refusal were given back. 2 left of 7.
      expect((await login(app.port, 'bob@example.com')).status).toBe(401)
      expect((await login(app.port, 'carol@example.com')).status).toBe(401)
      const last = await login(app.port, 'dave@example.com')
      expect(last.status).toBe(429)
      expect(last.body).toMatchObject({ 'violated-policies': [`${ctx.name}-ip`] })
      expect(app.routeHits).toBe(8)
    })

    it('answers an existing and an unknown account byte for byte alike, after the same store calls', async () => {
      const events: DecisionEvent[] = []
      const app = await start({ perIpAndAccount: { capacity: 2 }, onDecision: (event) => events.push(event) })
      const ghost = 'ghost@example.com'
      for (const email of [ALICE, ALICE, ghost, ghost])
        expect((await login(app.port, email)).status).toBe(401)
      expect(app.routeHits).toBe(4)

      /** The store calls one refused request makes, without the keys (which name the account). */
      const callsOf = async (email: string) => {
        events.length = 0
        const raw = await rawLogin(app.port, email)
        return {
          raw,
          calls: events.map(({ limiter, op, allowed, source, cost }) => ({
            limiter,
            op,
            allowed,
            source,
            cost,
          })),
        }
      }
      const existing = await callsOf(ALICE)
      const unknown = await callsOf(ghost)
      expect(existing.raw.startsWith('HTTP/1.1 429 Too Many Requests\r\n')).toBe(true)
      expect(unknown.raw).toBe(existing.raw)
      expect(unknown.calls).toEqual(existing.calls)
      // Per address spent then given back, the pair refused; the account's queue is never touched.
      expect(existing.calls).toEqual([
        { limiter: `${ctx.name}-ip`, op: 'consume', allowed: true, source: 'store', cost: 1 },
        { limiter: `${ctx.name}-pair`, op: 'consume', allowed: false, source: 'store', cost: 1 },
        { limiter: `${ctx.name}-ip`, op: 'refund', allowed: true, source: 'store', cost: 1 },
      ])
      expect(app.routeHits).toBe(4)
    })

    it('waits out the delay before the route; a client that hangs up during it never reaches the route', async () => {
      let queued: (() => void) | undefined
      const app = await start({
        perAccount: { ratePerSecond: 10, maxQueue: 5 },
        onDecision: (event) => {
          if (event.limiter === `${ctx.name}-account` && event.op === 'consume') queued?.()
        },
      })
      expect((await login(app.port, ALICE)).status).toBe(401)

      // The second attempt on the account waits 100 ms: hang up once it is queued.
      const inQueue = new Promise<void>((resolve) => {
        queued = resolve
      })
      const payload = JSON.stringify({ email: ALICE, password: ALICE_PASSWORD })
      const socket = net.connect(app.port, HOST)
      await once(socket, 'connect')
      socket.write(
        `POST /login HTTP/1.1\r\nHost: ${HOST}\r\nContent-Type: application/json\r\n` +
          `Content-Length: ${payload.length}\r\n\r\n${payload}`,
      )
      await inQueue
      queued = undefined
      socket.destroy()

      // The third waits 200 ms (the virtual clock stands still), behind the abandoned one: had that one gone on,
      // it would have reached the route first.
      const sentAt = performance.now()
      expect((await login(app.port, ALICE)).status).toBe(401)
      expect(performance.now() - sentAt).toBeGreaterThanOrEqual(199)
      expect(app.routeHits).toBe(2)
    })

    it('counts variants of one account name as one account (trimmed, NFKC, lowercased)', async () => {
      const app = await start({ perIpAndAccount: { capacity: 2 } })
      expect((await login(app.port, ' Alice@Example.COM ')).status).toBe(401)
      // Full-width letters and at sign, with an ideographic space.
      expect((await login(app.port, 'ＡＬＩＣＥ＠ｅｘａｍｐｌｅ．ｃｏｍ\u3000')).status).toBe(401)
      const third = await login(app.port, ALICE)
      expect(third.status).toBe(429)
      expect(third.body).toMatchObject({ 'violated-policies': [`${ctx.name}-pair`] })
      expect(app.routeHits).toBe(2)
    })

    it('a success in another spelling clears the pair the other spellings spent', async () => {
      const app = await start({ perIpAndAccount: { capacity: 3 } })
      const statuses: number[] = []
      statuses.push((await login(app.port, ALICE)).status)
      statuses.push((await login(app.port, ' Alice@Example.COM ')).status)
      statuses.push(
        (await login(app.port, 'ＡＬＩＣＥ＠ｅｘａｍｐｌｅ．ｃｏｍ\u3000', ALICE_PASSWORD)).status,
      )
      // Cleared: three more failures in any spelling reach the route, the fourth is refused.
      for (const spelling of [ALICE, ' Alice@Example.COM ', ALICE])
        statuses.push((await login(app.port, spelling)).status)
      const refused = await login(app.port, ' Alice@Example.COM ')
      expect(statuses).toEqual([401, 401, 200, 401, 401, 401])
      expect(refused.status).toBe(429)
      expect(refused.body).toMatchObject({ 'violated-policies': [`${ctx.name}-pair`] })
      expect(app.routeHits).toBe(6)
    })

    it('counts an account sent as a JSON array as the account it names (no way around its budgets)', async () => {
      // The account as the body has it, not checked for a string: as a route whose own check coerces it would.
      const app = await start(
        { perIpAndAccount: { capacity: 2 } },
        { account: (req) => req.body?.email as string | undefined },
      )
      expect((await login(app.port, ALICE)).status).toBe(401)
      expect((await login(app.port, [ALICE])).status).toBe(401)
      const third = await login(app.port, [ALICE])
      expect(third.status).toBe(429)
      expect(third.body).toMatchObject({ 'violated-policies': [`${ctx.name}-pair`] })
      expect(app.routeHits).toBe(2)
    })

    it('slows one account down with a growing delay from any address, then refuses it once its queue is full', async () => {
      const app = await start({ perAccount: { ratePerSecond: 1, maxQueue: 3 } }, { trustProxy: 'loopback' })
      // check(): the delay each attempt gets, without waiting it out.
      const attempt = (i: number) =>
        login(app.port, 'victim@example.com', 'wrong', `2001:db8:${i}::1`, '/check')
      const delays: unknown[] = []
      for (let i = 1; i <= 4; i++) delays.push((await attempt(i)).body)
      // One second per attempt queued.
      expect(delays).toEqual([{ delayMs: 0 }, { delayMs: 1000 }, { delayMs: 2000 }, { delayMs: 3000 }])
      // With 3 waiting, attempts are refused until a turn frees (1 s), from any address, sent one after the other or
      // at once: never "wait, then pass".
      const refused = [await attempt(5), ...(await Promise.all([attempt(6), attempt(7)]))]
      for (const answer of refused) {
        expect(answer.status).toBe(429)
        expect(answer.headers.get('retry-after')).toBe('1')
        expect(answer.body).toMatchObject({ 'violated-policies': [`${ctx.name}-account`], retryAfter: 1 })
      }
      ctx.clock.advance(1000)
      expect((await attempt(8)).body).toEqual({ delayMs: 3000 })
      expect((await attempt(9)).status).toBe(429)
      // Another account is not slowed down.
      expect((await login(app.port, ALICE, 'wrong', '2001:db8:99::1', '/check')).body).toEqual({ delayMs: 0 })
    })
  })
})

describe.each(serverKinds)('the login guard on %s, on a Redis that stops', (kind) => {
  it('fails closed: an attempt while the store is down is refused before the route', async () => {
    const redis = await startRedis()
    cleanups.push(() => redis.stop())
    const client = new Redis(redis.url, limiterClientOptions)
    client.on('error', () => {})
    cleanups.push(() => client.disconnect())
    await whenReady(client)
    const store = new RedisStore({ client, timeoutMs: 200 })
    const app = await started(startLoginApp(kind, loginOptions(store, 'login')))
    expect((await login(app.port, ALICE)).status).toBe(401)

    await redis.stop()
    const refused = await login(app.port, ALICE)
    expect(refused.status).toBe(429)
    expect(refused.headers.get('retry-after')).toBe('1')
    expect(refused.body).toMatchObject({ 'violated-policies': ['login-ip'], retryAfter: 1 })
    // A correct password changes nothing: the credentials are never checked.
    expect((await login(app.port, ALICE, ALICE_PASSWORD)).status).toBe(429)
    expect(app.routeHits).toBe(1)
  })
})
