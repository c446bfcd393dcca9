/**
 * TollboothGuard in real NestJS applications on Express and on Fastify, through real `fetch` requests: a route over
 * its budget answered 429 with Retry-After, the RateLimit fields and problem+json through Nest's default exception
 * filter; the guard global (APP_GUARD) and per controller (@UseGuards); @SkipRateLimit on a controller and a
 * handler; @RateLimit by name and by object, with a cost, a handler's over its controller's; identities; a cost no
 * budget can hold; a filter of the application catching RateLimitedException.
 *
 * Budgets refill one unit every 100 s: within a test nothing comes back, so every count is exact.
 */
import { randomUUID } from 'node:crypto'
import {
  type ArgumentsHost,
  Catch,
  Controller,
  type ExceptionFilter,
  Get,
  type HttpServer,
  Module,
  UseGuards,
} from '@nestjs/common'
import { APP_GUARD } from '@nestjs/core'
import { Redis } from 'ioredis'
import { afterEach, describe, expect, it } from 'vitest'
import type { DecisionEvent } from '../../../src/core/hooks.js'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import type { RateLimiter } from '../../../src/core/rateLimiter.js'
import { RedisStore } from '../../../src/core/stores/redisStore.js'
import {
  type NestHttpRequest,
  RateLimit,
  RateLimitedException,
  SkipRateLimit,
  TollboothGuard,
} from '../../../src/nestjs/index.js'
import { limitHeaders } from '../../helpers/httpServer.js'
import { type NestServer, nestPlatforms, RecordingLogger, startNest } from '../../helpers/nestApps.js'
import { startRedis } from '../../helpers/redisServer.js'
import { limiterClientOptions, whenReady } from '../../helpers/stores.js'

/** Both platforms send JSON media types with their charset. */
const PROBLEM_JSON = 'application/problem+json; charset=utf-8'

const QUOTA_EXCEEDED = {
  type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
  title: 'Request cannot be satisfied as assigned quota has been exceeded',
  status: 429,
}

/** `capacity` requests, then one more every 100 s: `t` and `Retry-After` are 100 within a test. */
function slowBucket(what: string, capacity: number): RateLimiter {
  return tokenBucket({ name: `${what}-${randomUUID().slice(0, 8)}`, capacity, refillPerSecond: 0.01 })
}

/** Requests in sequence; their statuses. */
async function statuses(url: string, count: number, init?: RequestInit): Promise<number[]> {
  const out: number[] = []
  for (let i = 0; i < count; i++) {
    const response = await fetch(url, init)
    await response.arrayBuffer()
    out.push(response.status)
  }
  return out
}

const open: NestServer[] = []
afterEach(async () => {
  await Promise.all(open.splice(0).map((server) => server.close()))
})

describe.each(nestPlatforms)('TollboothGuard on %s', (platform) => {
  async function serve(
    ...args: Parameters<typeof startNest> extends [unknown, ...infer Rest] ? Rest : never
  ) {
    const server = await startNest(platform, ...args)
    open.push(server)
    return server
  }

  it('a route over its budget (capacity 3): exactly 3 of 5 admitted, the 4th and 5th 429 with Retry-After, RateLimit fields and problem+json', async () => {
    const api = slowBucket('api', 3)
    let hits = 0
    @Controller()
    class ItemsController {
      @Get('items')
      items() {
        hits++
        return { ok: true }
      }
    }
    @Module({
      controllers: [ItemsController],
      providers: [{ provide: APP_GUARD, useValue: new TollboothGuard({ default: api }) }],
    })
    class AppModule {}
    const logger = new RecordingLogger()
    const server = await serve(AppModule, { logger })

    const responses: Response[] = []
    for (let i = 0; i < 5; i++) responses.push(await fetch(`${server.url}/items`))

    expect(responses.map((response) => response.status)).toEqual([200, 200, 200, 429, 429])
    expect(hits).toBe(3)
    for (const [i, response] of responses.slice(0, 3).entries()) {
      expect(limitHeaders(response)).toEqual({
        'ratelimit-policy': `"${api.name}";q=3;w=300`,
        ratelimit: `"${api.name}";r=${2 - i};t=100`,
        'retry-after': null,
        'content-type': 'application/json; charset=utf-8',
      })
      expect(await response.json()).toEqual({ ok: true })
    }
    for (const response of responses.slice(3)) {
      expect(limitHeaders(response)).toEqual({
        'ratelimit-policy': `"${api.name}";q=3;w=300`,
        ratelimit: `"${api.name}";r=0;t=100`,
        'retry-after': '100',
        'content-type': PROBLEM_JSON,
      })
      expect(await response.json()).toEqual({
        ...QUOTA_EXCEEDED,
        'violated-policies': [api.name],
        retryAfter: 100,
      })
    }
    // Nest's adapter found nothing to correct (it warns when it replaces an error's Content-Type).
    expect(logger.warnings).toEqual([])
    expect(logger.errors).toEqual([])
  })

  it('@UseGuards on one controller: its routes spend (2 of 3 admitted), another controller is not limited (3 of 3)', async () => {
    const guard = new TollboothGuard({ default: slowBucket('per-controller', 2) })
    @UseGuards(guard)
    @Controller('guarded')
    class GuardedController {
      @Get()
      get() {
        return 'guarded'
      }
    }
    @Controller('open')
    class OpenController {
      @Get()
      get() {
        return 'open'
      }
    }
    @Module({ controllers: [GuardedController, OpenController] })
    class AppModule {}
    const server = await serve(AppModule)

    expect(await statuses(`${server.url}/guarded`, 3)).toEqual([200, 200, 429])
    const unguarded = await fetch(`${server.url}/open`)
    expect(unguarded.headers.get('ratelimit')).toBeNull()
    expect(await statuses(`${server.url}/open`, 2)).toEqual([200, 200])
  })

  it('a global guard and a @UseGuards guard: a route spends from both, its response carries both budgets’ items; what the second refuses gets the first’s spend back', async () => {
    const global = slowBucket('global', 5)
    const reports = slowBucket('reports', 1)
    @UseGuards(new TollboothGuard({ default: reports }))
    @Controller('reports')
    class ReportsController {
      @Get()
      list() {
        return []
      }
    }
    @Controller('elsewhere')
    class ElsewhereController {
      @Get()
      get() {
        return []
      }
    }
    @Module({
      controllers: [ReportsController, ElsewhereController],
      providers: [{ provide: APP_GUARD, useValue: new TollboothGuard({ default: global }) }],
    })
    class AppModule {}
    const server = await serve(AppModule)

    const admitted = await fetch(`${server.url}/reports`)
    expect(limitHeaders(admitted)).toMatchObject({
      'ratelimit-policy': `"${global.name}";q=5;w=500, "${reports.name}";q=1;w=100`,
      ratelimit: `"${global.name}";r=4;t=100, "${reports.name}";r=0;t=100`,
    })
    for (let i = 0; i < 3; i++) {
      const refused = await fetch(`${server.url}/reports`)
      expect(refused.status).toBe(429)
      // The global guard ran first and spent; the controller's refused, and the global spend was given back.
      expect(limitHeaders(refused)).toMatchObject({
        ratelimit: `"${global.name}";r=4;t=100, "${reports.name}";r=0;t=100`,
        'retry-after': '100',
      })
    }
    // Where only the global guard runs, its budget reads as the one admitted request left it.
    const elsewhere = await fetch(`${server.url}/elsewhere`)
    expect(limitHeaders(elsewhere).ratelimit).toBe(`"${global.name}";r=3;t=100`)
  })

  it('what a later guard refuses gets back only what the earlier one spent in the store: nothing after a fail-open admission', async () => {
    const redis = await startRedis()
    const client = new Redis(redis.url, { ...limiterClientOptions, retryStrategy: () => 50 })
    try {
      await whenReady(client)
      const events: DecisionEvent[] = []
      const store = new RedisStore({ client, prefix: `nest-refund-${randomUUID()}:`, timeoutMs: 500 })
      const shared = tokenBucket({
        name: 'shared',
        store,
        capacity: 10,
        refillPerSecond: 0.01,
        failPolicy: 'open',
        hooks: { onDecision: (event) => events.push(event) },
      })
      const reports = slowBucket('reports', 1)
      @UseGuards(new TollboothGuard({ default: reports }))
      @Controller('reports')
      class ReportsController {
        @Get()
        list() {
          return []
        }
      }
      @Module({
        controllers: [ReportsController],
        providers: [{ provide: APP_GUARD, useValue: new TollboothGuard({ default: shared }) }],
      })
      class AppModule {}
      const server = await serve(AppModule)
      const refunds = () => events.filter((event) => event.op === 'refund').map((event) => event.source)

      // With Redis up: the 2nd request is refused by "reports", and its spend from "shared" goes back, once.
      expect(await statuses(`${server.url}/reports`, 2)).toEqual([200, 429])
      expect(refunds()).toEqual(['store'])
      // Redis down: "shared" admits by its fail policy, spending nothing; "reports" refuses; nothing is refunded.
      await redis.stop()
      expect(await statuses(`${server.url}/reports`, 3)).toEqual([429, 429, 429])
      expect(events.filter((event) => event.op === 'consume').map((event) => event.source)).toEqual([
        'store',
        'store',
        'fail-open',
        'fail-open',
        'fail-open',
      ])
      expect(refunds()).toEqual(['store'])
    } finally {
      client.disconnect()
      await redis.stop()
    }
  })

  it('two guards reading one @RateLimit spend its budget once: 3 of capacity 3 admitted, not 1', async () => {
    const exports = slowBucket('exports', 3)
    @UseGuards(new TollboothGuard({ default: false }))
    @Controller('exports')
    class ExportsController {
      @RateLimit(exports)
      @Get()
      get() {
        return []
      }
    }
    @Module({
      controllers: [ExportsController],
      providers: [{ provide: APP_GUARD, useValue: new TollboothGuard({ default: false }) }],
    })
    class AppModule {}
    const server = await serve(AppModule)
    expect(await statuses(`${server.url}/exports`, 5)).toEqual([200, 200, 200, 429, 429])
  })

  it('two guards on one limiter with other identities each spend their own: per address and per user, 1 of 4 admitted', async () => {
    const api = slowBucket('api', 3)
    @UseGuards(
      new TollboothGuard({
        default: api,
        cost: 2,
        identify: (request: NestHttpRequest) => `user:${String(request.headers['x-user'])}`,
      }),
    )
    @Controller('mine')
    class MineController {
      @Get()
      get() {
        return []
      }
    }
    @Module({
      controllers: [MineController],
      providers: [{ provide: APP_GUARD, useValue: new TollboothGuard({ default: api }) }],
    })
    class AppModule {}
    const server = await serve(AppModule)
    // One user: its budget (3, at 2 a request) admits one request, whatever the address does.
    expect(await statuses(`${server.url}/mine`, 4, { headers: { 'x-user': 'u1' } })).toEqual([
      200, 429, 429, 429,
    ])
  })

  it('two guards on one limiter at other costs each spend theirs: cost 1 then 5 on capacity 10, 1 of 4 admitted', async () => {
    const api = slowBucket('api', 10)
    @UseGuards(new TollboothGuard({ default: api, cost: 5 }))
    @Controller('heavy')
    class HeavyController {
      @Get()
      get() {
        return []
      }
    }
    @Module({
      controllers: [HeavyController],
      providers: [{ provide: APP_GUARD, useValue: new TollboothGuard({ default: api }) }],
    })
    class AppModule {}
    const server = await serve(AppModule)
    // 1 + 5 = 6 of 10; the next request's 1 + 5 would be 12: refused, its 1 given back.
    expect(await statuses(`${server.url}/heavy`, 4)).toEqual([200, 429, 429, 429])
    expect(limitHeaders(await fetch(`${server.url}/heavy`)).ratelimit).toContain(`"${api.name}";r=4;`)
  })

  it('the same guard as APP_GUARD and in @UseGuards decides once: 3 of capacity 3 admitted, not 1', async () => {
    const api = slowBucket('api', 3)
    const guard = new TollboothGuard({ default: api })
    @UseGuards(guard)
    @Controller('twice')
    class TwiceController {
      @Get()
      get() {
        return []
      }
    }
    @Module({ controllers: [TwiceController], providers: [{ provide: APP_GUARD, useValue: guard }] })
    class AppModule {}
    const server = await serve(AppModule)
    expect(await statuses(`${server.url}/twice`, 5)).toEqual([200, 200, 200, 429, 429])
  })

  it('@SkipRateLimit on a controller and on a handler: 4 of 4 admitted without RateLimit fields; a handler’s @RateLimit in a skipped controller is limited (1 of 3)', async () => {
    const api = slowBucket('skip-default', 1)
    const login = slowBucket('skip-login', 1)
    @SkipRateLimit()
    @Controller('health')
    class HealthController {
      @Get()
      health() {
        return 'up'
      }
      @RateLimit(login)
      @Get('deep')
      deep() {
        return 'deep'
      }
    }
    @Controller('api')
    class ApiController {
      @SkipRateLimit()
      @Get('public')
      public() {
        return 'public'
      }
      @Get('private')
      private() {
        return 'private'
      }
    }
    @Module({
      controllers: [HealthController, ApiController],
      providers: [{ provide: APP_GUARD, useValue: new TollboothGuard({ default: api }) }],
    })
    class AppModule {}
    const server = await serve(AppModule)

    const skipped = await fetch(`${server.url}/health`)
    expect(skipped.status).toBe(200)
    expect(limitHeaders(skipped)).toMatchObject({ ratelimit: null, 'ratelimit-policy': null })
    expect(await statuses(`${server.url}/health`, 3)).toEqual([200, 200, 200])
    expect(await statuses(`${server.url}/api/public`, 4)).toEqual([200, 200, 200, 200])
    expect(await statuses(`${server.url}/health/deep`, 3)).toEqual([200, 429, 429])
    // Nothing of the skipped routes was spent from the default budget: its 1 request is still there.
    expect(await statuses(`${server.url}/api/private`, 2)).toEqual([200, 429])
  })

  it('@RateLimit with cost 2 on capacity 5, by name and by object: exactly 2 of 4 admitted on each, the default untouched', async () => {
    const api = slowBucket('api', 5)
    const search = slowBucket('search', 5)
    const exports = slowBucket('exports', 5)
    @Controller()
    class ReportsController {
      @RateLimit('search', { cost: 2 })
      @Get('search')
      search() {
        return 'found'
      }
      @RateLimit(exports, { cost: 2 })
      @Get('export')
      export() {
        return 'exported'
      }
      @Get('plain')
      plain() {
        return 'plain'
      }
    }
    @Module({
      controllers: [ReportsController],
      providers: [
        { provide: APP_GUARD, useValue: new TollboothGuard({ limiters: { api, search }, default: 'api' }) },
      ],
    })
    class AppModule {}
    const server = await serve(AppModule)

    const byName = await fetch(`${server.url}/search`)
    expect(limitHeaders(byName)).toMatchObject({
      'ratelimit-policy': `"${search.name}";q=5;w=500`,
      ratelimit: `"${search.name}";r=3;t=100`,
    })
    expect(await statuses(`${server.url}/search`, 3)).toEqual([200, 429, 429])
    expect(await statuses(`${server.url}/export`, 4)).toEqual([200, 200, 429, 429])
    expect(await statuses(`${server.url}/plain`, 6)).toEqual([200, 200, 200, 200, 200, 429])
  })

  it('a handler’s @RateLimit replaces its controller’s: the class budget (capacity 2) and the handler’s (capacity 1) are spent apart', async () => {
    const classBudget = slowBucket('class', 2)
    const handlerBudget = slowBucket('handler', 1)
    @RateLimit(classBudget)
    @Controller()
    class MixedController {
      @Get('a')
      a() {
        return 'a'
      }
      @RateLimit(handlerBudget)
      @Get('b')
      b() {
        return 'b'
      }
    }
    @Module({
      controllers: [MixedController],
      providers: [{ provide: APP_GUARD, useValue: new TollboothGuard({ default: false }) }],
    })
    class AppModule {}
    const server = await serve(AppModule)

    expect(await statuses(`${server.url}/b`, 2)).toEqual([200, 429])
    expect(await statuses(`${server.url}/a`, 3)).toEqual([200, 200, 429])
  })

  it('default: false limits only routes with @RateLimit (5 of 5 admitted elsewhere)', async () => {
    @Controller()
    class OpenController {
      @Get('open')
      open() {
        return 'open'
      }
    }
    @Module({
      controllers: [OpenController],
      providers: [{ provide: APP_GUARD, useValue: new TollboothGuard({ default: false }) }],
    })
    class AppModule {}
    const server = await serve(AppModule)
    const first = await fetch(`${server.url}/open`)
    expect(first.headers.get('ratelimit')).toBeNull()
    expect(await statuses(`${server.url}/open`, 4)).toEqual([200, 200, 200, 200])
  })

  it('identify, with the platform’s request: each identity spends its own budget (2 each)', async () => {
    const seen: boolean[] = []
    @Controller()
    class MeController {
      @Get('me')
      me() {
        return 'me'
      }
    }
    const guard = new TollboothGuard<NestHttpRequest>({
      default: slowBucket('per-user', 2),
      identify: (request, context) => {
        seen.push(context.switchToHttp().getRequest() === request)
        return `user:${String(request.headers['x-user'])}`
      },
    })
    @Module({ controllers: [MeController], providers: [{ provide: APP_GUARD, useValue: guard }] })
    class AppModule {}
    const server = await serve(AppModule)
    const as = (user: string) => ({ headers: { 'x-user': user } })

    expect(await statuses(`${server.url}/me`, 3, as('alice'))).toEqual([200, 200, 429])
    expect(await statuses(`${server.url}/me`, 3, as('bob'))).toEqual([200, 200, 429])
    expect(seen).toEqual([true, true, true, true, true, true])
  })

  it('a cost no budget can hold (6 on capacity 5): 400 problem+json without Retry-After, nothing spent', async () => {
    const api = slowBucket('too-big', 5)
    let hits = 0
    @Controller()
    class BulkController {
      @RateLimit(api, { cost: (request: NestHttpRequest) => Number(request.headers['x-cost']) })
      @Get('bulk')
      bulk() {
        hits++
        return 'done'
      }
    }
    @Module({
      controllers: [BulkController],
      providers: [{ provide: APP_GUARD, useValue: new TollboothGuard({ default: false }) }],
    })
    class AppModule {}
    const server = await serve(AppModule)

    const tooBig = await fetch(`${server.url}/bulk`, { headers: { 'x-cost': '6' } })
    expect(tooBig.status).toBe(400)
    expect(limitHeaders(tooBig)).toEqual({
      'ratelimit-policy': `"${api.name}";q=5;w=500`,
      ratelimit: `"${api.name}";r=5;t=0`,
      'retry-after': null,
      'content-type': PROBLEM_JSON,
    })
    expect(await tooBig.json()).toEqual({
      type: 'about:blank',
      title: 'Request exceeds what the quota can ever admit',
      status: 400,
    })
    expect(await statuses(`${server.url}/bulk`, 2, { headers: { 'x-cost': '5' } })).toEqual([200, 429])
    expect(hits).toBe(1)
  })

  it('a refusal goes through Nest’s exception layer: a filter of the application catches RateLimitedException', async () => {
    @Catch(RateLimitedException)
    class TooManyFilter implements ExceptionFilter {
      constructor(private readonly adapter: HttpServer) {}
      catch(exception: RateLimitedException, host: ArgumentsHost) {
        const { refusal } = exception
        this.adapter.reply(
          host.switchToHttp().getResponse(),
          { error: 'slow down', status: exception.getStatus(), retryAfter: refusal.body.retryAfter },
          503,
        )
      }
    }
    @Controller()
    class PingController {
      @Get('ping')
      ping() {
        return 'pong'
      }
    }
    @Module({
      controllers: [PingController],
      providers: [
        { provide: APP_GUARD, useValue: new TollboothGuard({ default: slowBucket('filtered', 1) }) },
      ],
    })
    class AppModule {}
    const server = await serve(AppModule, {
      configure: (app) => app.useGlobalFilters(new TooManyFilter(app.getHttpAdapter())),
    })

    expect((await fetch(`${server.url}/ping`)).status).toBe(200)
    const refused = await fetch(`${server.url}/ping`)
    expect(refused.status).toBe(503)
    // The guard set the refusal's headers before throwing; the filter kept them.
    expect(refused.headers.get('retry-after')).toBe('100')
    expect(await refused.json()).toEqual({ error: 'slow down', status: 429, retryAfter: 100 })
  })
})
