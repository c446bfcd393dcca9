/**
 * What `tollboothUpload` (tollbooth/fastify) does on Fastify 5 beyond the cases every server runs
 * (test/integration/httpGuards/upload.test.ts): route `config.tollboothUpload` (a route's own maxBytes, a route left
 * unguarded), and option validation at startup.
 */
import Fastify, { type FastifyRequest } from 'fastify'
import { afterEach, describe, expect, it } from 'vitest'
import { ErrorCodes } from '../../../src/core/errors.js'
import { tollboothUpload } from '../../../src/fastify/index.js'
import { fastifyStartupError } from '../../helpers/fastifyStartup.js'
import { byteBudget, MAX_BYTES } from '../../helpers/uploadApp.js'

const cleanups: (() => unknown)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

describe('tollboothUpload route config and options', () => {
  it("a route's own maxBytes, and a route left unguarded", async () => {
    const app = Fastify({ logger: false })
    cleanups.push(() => app.close())
    app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body))
    await app.register(tollboothUpload, { maxBytes: MAX_BYTES })
    const stored = async (request: FastifyRequest) => ({ stored: (request.body as Buffer).length })
    app.post('/upload', stored)
    app.post('/small', { config: { tollboothUpload: { maxBytes: 10 } } }, stored)
    app.post('/free', { config: { tollboothUpload: false } }, stored)
    const url = await app.listen({ port: 0, host: '127.0.0.1' })
    const upload = async (path: string, size: number) => {
      const response = await fetch(`${url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/octet-stream' },
        body: 'x'.repeat(size),
      })
      return [response.status, await response.json()]
    }
    expect(await upload('/upload', 11)).toEqual([200, { stored: 11 }])
    expect(await upload('/small', 11)).toEqual([
      413,
      { type: 'about:blank', title: 'Content Too Large', status: 413 },
    ])
    expect(await upload('/free', 2000)).toEqual([200, { stored: 2000 }])
    expect((await upload('/upload', 2000))[0]).toBe(413)
  })

  /** Registers the plugin with `options` (and `routeConfig` on its route) and returns what `ready()` rejects with. */
  const startupError = (options: unknown, routeConfig?: unknown) =>
    fastifyStartupError(
      tollboothUpload,
      options,
      { method: 'POST', url: '/upload', configKey: 'tollboothUpload' },
      routeConfig,
    )

  it.each([
    [{ maxBytes: 10, maxbytes: 10 }, 'tollboothUpload: unknown option "maxbytes" (did you mean "maxBytes"?)'],
    [{ maxBytes: 0 }, 'tollboothUpload: "maxBytes" must be a positive integer, got 0'],
    [
      { maxBytes: 10, bytes: {} },
      'tollboothUpload: "bytes" must be a tokenBucket, slidingWindow or fixedWindow',
    ],
    [
      { maxBytes: 2000, bytes: byteBudget() },
      'tollboothUpload: "maxBytes" must be at most the capacity of "bytes" (1000)',
    ],
    [
      { maxBytes: 10, concurrent: byteBudget() },
      'tollboothUpload: "concurrent" must be a concurrency limiter',
    ],
    [{ maxBytes: 10, onLimited: 'no' }, 'tollboothUpload: "onLimited" must be a function'],
    [{ maxBytes: 10, onCharged: 1 }, 'tollboothUpload: "onCharged" must be a function'],
    [{ maxBytes: 10, identify: 'x-user' }, 'tollboothUpload: "identify" must be a function'],
    [{ maxBytes: 10, ipv6Prefix: 200 }, 'tollboothUpload: "ipv6Prefix" must be'],
    ['big', 'tollboothUpload: "options" must be an object'],
  ])('plugin options %j are refused', async (options, message) => {
    const error = await startupError(options)
    expect(error.code).toBe(ErrorCodes.INVALID_OPTION)
    expect(error.message.startsWith(message)).toBe(true)
  })

  it.each([
    [
      { maxByte: 10 },
      'tollboothUpload: unknown option "config.tollboothUpload.maxByte" (did you mean "maxBytes"?)',
    ],
    [
      { maxBytes: -1 },
      'tollboothUpload: "config.tollboothUpload.maxBytes" must be a positive integer, got -1',
    ],
    [{ onLimited: 1 }, 'tollboothUpload: "config.tollboothUpload.onLimited" must be a function'],
    [{ ipv4Prefix: 40 }, 'tollboothUpload: "config.tollboothUpload.ipv4Prefix" must be'],
    [true, 'tollboothUpload: "config.tollboothUpload" must be an object of options or false, got true'],
  ])('route config %j is refused', async (routeConfig, message) => {
    const error = await startupError({ maxBytes: 100 }, routeConfig)
    expect(error.code).toBe(ErrorCodes.INVALID_OPTION)
    expect(error.message.startsWith(message)).toBe(true)
  })
})
