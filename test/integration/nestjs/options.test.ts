/**
 * TollboothGuard's and @RateLimit's options are checked where they are written: the guard's when it is constructed,
 * a decorator's when its class is defined, each with `TOLLBOOTH_ERR_INVALID_OPTION` naming the option and the name
 * it was most likely meant to be. A `@RateLimit('name')` the guard does not know fails that route's requests (a 500
 * through Nest's exception layer, logged with the code) rather than leaving it at another budget.
 */
import { Controller, Get, Module } from '@nestjs/common'
import { APP_GUARD } from '@nestjs/core'
import { afterEach, describe, expect, it } from 'vitest'
import { ErrorCodes, TollboothError } from '../../../src/core/errors.js'
import { concurrencyLimit } from '../../../src/core/limiters/concurrencyLimit.js'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import { RateLimit, TollboothGuard, type TollboothGuardOptions } from '../../../src/nestjs/index.js'
import { type NestServer, RecordingLogger, startNest } from '../../helpers/nestApps.js'

const api = tokenBucket({ name: 'api', capacity: 5, refillPerSecond: 1 })
const search = tokenBucket({ name: 'search', capacity: 5, refillPerSecond: 1 })
const leases = concurrencyLimit({ name: 'leases', max: 2, leaseMs: 1000 })

/** What `build` throws: a TollboothError of INVALID_OPTION, by its message. */
function optionError(build: () => unknown): string {
  try {
    build()
  } catch (error) {
    expect(error).toBeInstanceOf(TollboothError)
    expect((error as TollboothError).code).toBe(ErrorCodes.INVALID_OPTION)
    return (error as TollboothError).message
  }
  throw new Error('nothing was thrown')
}

const guardWith = (options: unknown) => () => new TollboothGuard(options as TollboothGuardOptions)

describe('TollboothGuard options', () => {
  it.each([
    [
      'a misspelt key',
      { limiter: { api }, default: 'api' },
      'TollboothGuard: unknown option "limiter" (did you mean "limiters"?)',
    ],
    [
      'a misspelt cost',
      { default: api, cots: 2 },
      'TollboothGuard: unknown option "cots" (did you mean "cost"?)',
    ],
    [
      'a default naming no limiter',
      { limiters: { api, search }, default: 'apj' },
      'TollboothGuard: "default" must be the name of one of "limiters" (did you mean "api"?), got "apj"',
    ],
    [
      'a default name without limiters',
      { default: 'api' },
      'TollboothGuard: "default" must be the name of one of "limiters" (the guard has no "limiters"), got "api"',
    ],
    [
      'no default',
      { limiters: { api } },
      'TollboothGuard: "default" must be a rate limiter, the name of one of "limiters", or false (only routes with @RateLimit are limited), got undefined',
    ],
    [
      'a concurrency limiter as a budget',
      { limiters: { api, leases }, default: 'api' },
      'TollboothGuard: "limiters.leases" must be a rate limiter (a concurrencyLimit is no budget of requests), got a concurrencyLimit limiter ("leases")',
    ],
    [
      'a cost of 0',
      { default: api, cost: 0 },
      'TollboothGuard: "cost" must be a positive finite number or a function (request, context) => number, got 0',
    ],
    [
      'skip not a function',
      { default: api, skip: true },
      'TollboothGuard: "skip" must be a function, got true',
    ],
    [
      'identify not a function',
      { default: api, identify: 'x-user' },
      'TollboothGuard: "identify" must be a function, got "x-user"',
    ],
  ])('%s', (_what, options, message) => {
    expect(optionError(guardWith(options))).toBe(message)
  })

  it('identity options are checked with the guard’s name', () => {
    expect(optionError(guardWith({ default: api, ipv6Prefix: 200 }))).toMatch(/^TollboothGuard: "ipv6Prefix"/)
  })

  it('options that are not an object', () => {
    expect(optionError(guardWith(undefined))).toBe(
      'TollboothGuard: "options" must be an object, got undefined',
    )
  })
})

describe('@RateLimit options', () => {
  it.each([
    [
      'a misspelt key',
      () => RateLimit(api, { costs: 2 } as never),
      '@RateLimit: unknown option "costs" (did you mean "cost"?)',
    ],
    [
      'a negative cost',
      () => RateLimit(api, { cost: -1 }),
      '@RateLimit: "cost" must be a positive finite number or a function (request, context) => number, got -1',
    ],
    [
      'an empty name',
      () => RateLimit(''),
      '@RateLimit: "limiter" must be a rate limiter or a non-empty name, got ""',
    ],
    [
      'a concurrency limiter',
      () => RateLimit(leases as never),
      '@RateLimit: "limiter" must be a rate limiter (a concurrencyLimit is no budget of requests), got a concurrencyLimit limiter ("leases")',
    ],
  ])('%s throws when the decorator is made', (_what, make, message) => {
    expect(optionError(make)).toBe(message)
  })
})

describe('a @RateLimit name the guard does not know', () => {
  const open: NestServer[] = []
  afterEach(async () => {
    await Promise.all(open.splice(0).map((server) => server.close()))
  })

  it('fails the route’s requests with a 500, logged with the code; the handler never runs', async () => {
    let hits = 0
    @Controller()
    class SearchController {
      @RateLimit('serch')
      @Get('search')
      find() {
        hits++
        return 'found'
      }
    }
    @Module({
      controllers: [SearchController],
      providers: [
        { provide: APP_GUARD, useValue: new TollboothGuard({ limiters: { api, search }, default: 'api' }) },
      ],
    })
    class AppModule {}
    const logger = new RecordingLogger()
    const server = await startNest('express', AppModule, { logger })
    open.push(server)

    const response = await fetch(`${server.url}/search`)
    expect(response.status).toBe(500)
    expect(hits).toBe(0)
    const [logged] = logger.errors as TollboothError[]
    expect(logged?.code).toBe(ErrorCodes.INVALID_OPTION)
    expect(logged?.message).toBe(
      `TollboothGuard: "@RateLimit('serch')" must be the name of one of "limiters" (did you mean "search"?), got "serch"`,
    )
  })
})
