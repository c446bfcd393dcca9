/**
 * The upload guard's behaviour, the same cases on node:http and Express (`uploadGuard`) and Fastify
 * (`tollboothUpload`), each with a route that buffers the body (a body reader, `express.raw`, a Fastify content-type
 * parser) and one that pipes it to a file (test/helpers/uploadApp.ts): clients writing raw bytes on a socket (heads
 * without bodies, chunked bodies) or using fetch, budgets and leases on memory, Redis and the Redis Cluster. What only
 * one server has stays beside its own guard: test/integration/http/uploadGuard.test.ts,
 * test/integration/fastify/tollboothUpload.test.ts.
 */
import { randomUUID } from 'node:crypto'
import { afterEach, describe, expect, it } from 'vitest'
import { concurrencyLimit } from '../../../src/core/limiters/concurrencyLimit.js'
import { CountingStore } from '../../helpers/countingStore.js'
import { serverKinds } from '../../helpers/guardedServers.js'
import { chunk, lastChunk, RawHttpClient, requestHead } from '../../helpers/rawHttp.js'
import { createStore, storeKinds } from '../../helpers/stores.js'
import {
  byteBudget,
  chargeLog,
  chunkedHead,
  IDENTITY,
  MAX_BYTES,
  OCTETS,
  startUploadServer,
  summary,
  type UploadOptions,
  upload,
} from '../../helpers/uploadApp.js'

const flavours = serverKinds.flatMap((kind) =>
  (['buffer', 'stream'] as const).map((reading) => ({
    kind,
    reading,
    name: `${kind}, the body ${reading === 'buffer' ? 'buffered' : 'piped to a file'}`,
  })),
)

const cleanups: (() => unknown)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function connect(port: number): Promise<RawHttpClient> {
  const client = await RawHttpClient.connect(port)
  cleanups.push(() => client.destroy())
  return client
}

/** The upload app, closed after the test. */
async function startServer(...args: Parameters<typeof startUploadServer>) {
  const server = await startUploadServer(...args)
  cleanups.push(() => server.close())
  return server
}

describe.each(flavours)('the upload guard on $name', ({ kind, reading }) => {
  async function setup(options: Partial<UploadOptions> = {}) {
    const bytes = byteBudget()
    const charged = chargeLog()
    const server = await startServer(kind, reading, {
      maxBytes: MAX_BYTES,
      bytes,
      onCharged: charged.onCharged,
      ...options,
    })
    return { bytes, charged, server }
  }

  it('hands the whole body to the route and charges exactly what arrived, with or without a length', async () => {
    const { bytes, charged, server } = await setup()
    // Without a length first: it may bring up to maxBytes, so it needs the whole budget free, and is charged 300.
    const client = await connect(server.port)
    await client.write(chunkedHead() + chunk(100) + chunk(200) + lastChunk())
    expect(await client.response).toMatchObject({ status: 201, body: '{"stored":300}' })
    await charged.waitFor(1)

    const response = await upload(server, 700)
    expect(response.status).toBe(201)
    expect(await response.json()).toEqual({ stored: 700 })
    expect(response.headers.get('ratelimit-policy')).toBe(
      `"${bytes.name}";q=1000;qu="content-bytes";w=100000`,
    )
    // What the budget holds once the upload's 700 are reserved: empty, the next byte back in 100 s.
    expect(response.headers.get('ratelimit')).toBe(`"${bytes.name}";r=0;t=100`)

    await charged.waitFor(2)
    expect(summary(charged.charges)).toEqual([
      { received: 300, charged: 300, complete: true },
      { received: 700, charged: 700, complete: true },
    ])
    // onCharged is given the server's own request (the Fastify request on Fastify).
    expect(charged.requests.map((req) => server.isServerRequest(req))).toEqual([true, true])
    expect(charged.requests.map((req) => (req as { url: string }).url)).toEqual(['/upload', '/upload'])
    expect((await bytes.peek(IDENTITY)).remaining).toBe(0)
    expect(server.stored).toEqual([300, 700])
  })

  it('refuses a declared Content-Length over maxBytes with 413 before reading a byte of the body', async () => {
    const { charged, server } = await setup()
    const client = await connect(server.port)
    // The head only: the answer comes while the client still holds its whole body.
    await client.write(requestHead('POST', '/upload', { 'Content-Length': MAX_BYTES + 1, ...OCTETS }))
    const response = await client.response
    expect(response.status).toBe(413)
    expect(response.headers['content-type']).toBe(server.jsonType('application/problem+json'))
    expect(response.headers.connection).toBe('close')
    expect(response.headers['ratelimit-policy']).toBe('"upload-size";q=1000;qu="content-bytes"')
    expect(response.headers['retry-after']).toBeUndefined()
    expect(JSON.parse(response.body)).toEqual({
      type: 'about:blank',
      title: 'Content Too Large',
      status: 413,
    })
    await client.closed
    expect([server.passed, charged.charges.length]).toEqual([0, 0])
  })

  it('refuses a declared length over the remaining byte budget with 429 before reading the body', async () => {
    const { bytes, charged, server } = await setup()
    expect((await upload(server, 700)).status).toBe(201)
    await charged.waitFor(1)

    const client = await connect(server.port)
    await client.write(requestHead('POST', '/upload', { 'Content-Length': 400, ...OCTETS }))
    const response = await client.response
    expect(response.status).toBe(429)
    // 100 bytes short at one byte per 100 s; the next byte comes back in 100 s.
    expect(response.headers['retry-after']).toBe('10000')
    expect(response.headers.ratelimit).toBe(`"${bytes.name}";r=300;t=100`)
    expect(response.headers.connection).toBe('close')
    expect(JSON.parse(response.body)).toMatchObject({ status: 429, 'violated-policies': [bytes.name] })
    await client.closed
    expect([server.passed, charged.charges.length]).toEqual([1, 1])
    expect((await bytes.peek(IDENTITY)).remaining).toBe(300)
  })

  it('cuts off a chunked body past maxBytes with 413 and closes the connection; charges what fits', async () => {
    const { bytes, charged, server } = await setup()
    const client = await connect(server.port)
    await client.write(chunkedHead() + chunk(600) + chunk(600))
    const response = await client.response
    expect(response.status).toBe(413)
    expect(response.headers.connection).toBe('close')
    expect(JSON.parse(response.body)).toEqual({
      type: 'about:blank',
      title: 'Content Too Large',
      status: 413,
    })
    await client.closed
    await charged.waitFor(1)
    // 1200 bytes arrived; the budget holds 1000 at most: it is emptied.
    expect(summary(charged.charges)).toEqual([{ received: 1200, charged: 1000, complete: false }])
    expect((await bytes.peek(IDENTITY)).remaining).toBe(0)
    expect(server.stored).toEqual([])
  })

  it('cuts off a body the route is already reading when it passes maxBytes, and charges maxBytes', async () => {
    const { charged, server } = await setup({ bytes: byteBudget(undefined, 5000) })
    const client = await connect(server.port)
    await client.write(chunkedHead() + chunk(600))
    await server.waitForPassed(1)
    await client.write(chunk(600))
    const response = await client.response
    expect(response.status).toBe(413)
    expect(response.headers.connection).toBe('close')
    await client.closed
    await charged.waitFor(1)
    expect(summary(charged.charges)).toEqual([{ received: 1200, charged: 1000, complete: false }])
    // The route never sees the end of the body: nothing is stored. Its reader fails, where the route reads: Fastify's
    // own buffering parser drops its failure once the reply was sent, and so never calls the route.
    if (!(kind === 'fastify' && reading === 'buffer')) await server.waitForErrors(1)
    expect(server.stored).toEqual([])
    expect(server.routeHits).toBe(reading === 'buffer' ? 0 : 1)
  })
})

describe.each(storeKinds)('the upload guard budgets and leases on the %s store', (storeKind) => {
  async function fixture() {
    const store = await createStore(storeKind)
    cleanups.push(() => store.close())
    return store.store
  }

  describe.each(serverKinds)('on %s', (kind) => {
    it('reserves at the door: of two overlapping uploads without a length, the second is refused before its body', async () => {
      const bytes = byteBudget(await fixture())
      const charged = chargeLog()
      const server = await startServer(kind, 'stream', {
        maxBytes: MAX_BYTES,
        bytes,
        onCharged: charged.onCharged,
      })
      const first = await connect(server.port)
      await first.write(chunkedHead() + chunk(300))
      // Admitted: it holds maxBytes (the whole budget) until its body is over.
      await server.waitForPassed(1)
      const second = await connect(server.port)
      await second.write(chunkedHead() + chunk(300))
      expect((await second.response).status).toBe(429)
      await first.write(chunk(300) + lastChunk())
      expect((await first.response).status).toBe(201)
      await charged.waitFor(1)
      // It brought 600: the 400 it did not bring are given back.
      expect(charged.charges.map(({ received, charged }) => [received, charged])).toEqual([[600, 600]])
      expect((await bytes.peek(IDENTITY)).remaining).toBe(400)
      expect(server.passed).toBe(1)
      expect((await upload(server, 400)).status).toBe(201)
      expect(server.passed).toBe(2)
    })

    it('an upload without a declared length needs room for maxBytes: chunked uploads cannot drain past the budget', async () => {
      const bytes = byteBudget(await fixture(), 2500)
      const charged = chargeLog()
      const server = await startServer(kind, 'stream', {
        maxBytes: MAX_BYTES,
        bytes,
        onCharged: charged.onCharged,
      })
      for (let i = 0; i < 2; i++) {
        const client = await connect(server.port)
        await client.write(chunkedHead() + chunk(1000) + lastChunk())
        expect((await client.response).status).toBe(201)
      }
      await charged.waitFor(2)
      expect((await bytes.peek(IDENTITY)).remaining).toBe(500)
      // 500 left: a body of unknown length may bring 1000, so it is refused before it is read.
      const third = await connect(server.port)
      await third.write(chunkedHead())
      expect((await third.response).status).toBe(429)
      expect(server.passed).toBe(2)
    })

    it('caps simultaneous uploads exactly; each lease is released once: on end, on abort, on a socket error', async () => {
      const store = new CountingStore(await fixture())
      const concurrent = concurrencyLimit({
        name: `up-${randomUUID().slice(0, 8)}`,
        store,
        max: 2,
        leaseMs: 30_000,
      })
      const server = await startServer(kind, 'buffer', { maxBytes: MAX_BYTES, concurrent })
      const releases = (count: number) => store.until(() => store.count('release') === count)

      const [a, b] = [await connect(server.port), await connect(server.port)]
      await a.write(chunkedHead() + chunk(10))
      await b.write(chunkedHead() + chunk(10))
      await server.waitForPassed(2)

      const third = await connect(server.port)
      await third.write(chunkedHead())
      const refused = await third.response
      expect(refused.status).toBe(429)
      expect(refused.headers['ratelimit-policy']).toBe(`"${concurrent.name}";q=2;qu="concurrent-requests"`)
      expect(refused.headers['retry-after']).toBe('30')
      await third.closed
      expect(server.passed).toBe(2)

      // End: the response is over.
      await a.write(chunk(10) + lastChunk())
      expect(await a.response).toMatchObject({ status: 201, body: '{"stored":20}' })
      await releases(1)
      expect((await concurrent.peek(IDENTITY)).remaining).toBe(1)

      // Abort: the client goes away mid-body.
      const c = await connect(server.port)
      await c.write(chunkedHead() + chunk(10))
      await server.waitForPassed(3)
      b.destroy()
      await releases(2)
      expect((await concurrent.peek(IDENTITY)).remaining).toBe(1)

      // Socket error: a malformed chunk size makes Node's parser fail and destroy the socket.
      await c.write('zz\r\n')
      await c.closed
      await releases(3)
      expect((await concurrent.peek(IDENTITY)).remaining).toBe(2)

      // Three leases granted, three releases: a fourth upload takes one and gives it back, once.
      const d = await connect(server.port)
      await d.write(chunkedHead() + chunk(5) + lastChunk())
      expect((await d.response).status).toBe(201)
      await releases(4)
      expect((await concurrent.peek(IDENTITY)).remaining).toBe(2)
      expect([store.count('acquire'), store.count('release')]).toEqual([5, 4])
    })
  })
})
