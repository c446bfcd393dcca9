/**
 * fetchWithRetry against a real node:http server on 127.0.0.1 port 0, through Node's own fetch: the server answers
 * 429 or 503 (with Retry-After or the RateLimit field) a set number of times, then 200, and counts every request
 * it receives. Waits go through a `sleep` that records each delay and then really waits 0 ms, so the delays are
 * asserted exactly and the tests do not sleep for the seconds a server asks.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { type FetchWithRetryOptions, fetchWithRetry } from '../../../src/client/index.js'

interface Received {
  readonly method: string
  readonly body: string
  readonly idempotencyKey: string | undefined
}

/** What the server answers to its n-th request (1-based): a status, headers and a body. */
type Script = (n: number, req: IncomingMessage) => { status: number; headers?: Record<string, string> }

const closers: (() => Promise<void>)[] = []
afterEach(async () => {
  for (const close of closers.splice(0)) await close()
})

async function serve(script: Script): Promise<{ url: string; received: Received[] }> {
  const received: Received[] = []
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const key = req.headers['idempotency-key']
      received.push({
        method: req.method ?? '',
        body: Buffer.concat(chunks).toString('utf8'),
        idempotencyKey: typeof key === 'string' ? key : undefined,
      })
      const answer = script(received.length, req)
      res.writeHead(answer.status, { 'content-type': 'text/plain', ...answer.headers })
      res.end(req.method === 'HEAD' ? undefined : `answer ${received.length}`)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  closers.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  )
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/items`, received }
}

/** 429 with `Retry-After: seconds` for the first `refusals` requests, then 200. */
const refuseThenServe =
  (refusals: number, headers: Record<string, string> = { 'Retry-After': '2' }, status = 429): Script =>
  (n) =>
    n <= refusals ? { status, headers } : { status: 200 }

/** A fetchWithRetry whose waits are recorded (and not slept), with a jitter of half the cap. */
function retrying(options: FetchWithRetryOptions = {}) {
  const waits: number[] = []
  const fetchRetrying = fetchWithRetry(fetch, {
    baseMs: 100,
    maxMs: 1_000,
    random: () => 0.5,
    sleep: async (ms, signal) => {
      signal?.throwIfAborted()
      waits.push(ms)
    },
    ...options,
  })
  return { fetchRetrying, waits }
}

describe('fetchWithRetry: what is retried', () => {
  it('retries a GET answered 429 + Retry-After twice, waiting what the server asked, and returns the 200', async () => {
    const server = await serve(refuseThenServe(2))
    const { fetchRetrying, waits } = retrying()
    const response = await fetchRetrying(server.url)
    expect(response.status).toBe(200)
    expect(await response.text()).toBe('answer 3')
    expect(server.received.map((r) => r.method)).toEqual(['GET', 'GET', 'GET'])
    expect(waits).toEqual([2_000, 2_000]) // Retry-After (2 s) is longer than the backoff (50, then 100 ms)
  })

  it("retries a 503 and waits for the RateLimit field's t= when there is no Retry-After", async () => {
    const server = await serve(refuseThenServe(1, { RateLimit: '"api";r=0;t=3' }, 503))
    const { fetchRetrying, waits } = retrying()
    const response = await fetchRetrying(server.url)
    expect(response.status).toBe(200)
    expect(server.received).toHaveLength(2)
    expect(waits).toEqual([3_000])
  })

  it('backs off with full jitter when the server names no wait', async () => {
    const server = await serve(refuseThenServe(2, {}))
    const { fetchRetrying, waits } = retrying()
    expect((await fetchRetrying(server.url)).status).toBe(200)
    expect(waits).toEqual([50, 100]) // 0.5 × 100, 0.5 × 200
  })

  it.each(['HEAD', 'OPTIONS', 'PUT', 'DELETE'])('retries the idempotent method %s', async (method) => {
    const server = await serve(refuseThenServe(1))
    const { fetchRetrying } = retrying()
    const response = await fetchRetrying(server.url, { method, ...(method === 'PUT' ? { body: 'x' } : {}) })
    expect(response.status).toBe(200)
    expect(server.received.map((r) => r.method)).toEqual([method, method])
  })

  it('does not retry a POST without an Idempotency-Key: one request, the 429 returned', async () => {
    const server = await serve(refuseThenServe(1))
    const { fetchRetrying, waits } = retrying()
    const response = await fetchRetrying(server.url, { method: 'POST', body: '{"n":1}' })
    expect(response.status).toBe(429)
    expect(response.headers.get('retry-after')).toBe('2')
    expect(await response.text()).toBe('answer 1')
    expect(server.received).toHaveLength(1)
    expect(waits).toEqual([])
  })

  it('does not retry a PATCH either', async () => {
    const server = await serve(refuseThenServe(1))
    const { fetchRetrying } = retrying()
    expect((await fetchRetrying(server.url, { method: 'PATCH', body: 'x' })).status).toBe(429)
    expect(server.received).toHaveLength(1)
  })

  it('retries a POST carrying an Idempotency-Key, with the same body and key each time', async () => {
    const server = await serve(refuseThenServe(1))
    const { fetchRetrying, waits } = retrying()
    const response = await fetchRetrying(server.url, {
      method: 'POST',
      body: '{"n":1}',
      headers: { 'Idempotency-Key': 'order-42' },
    })
    expect(response.status).toBe(200)
    expect(server.received).toEqual([
      { method: 'POST', body: '{"n":1}', idempotencyKey: 'order-42' },
      { method: 'POST', body: '{"n":1}', idempotencyKey: 'order-42' },
    ])
    expect(waits).toEqual([2_000])
  })

  it('retries a Request object with a body: each attempt sends a copy of it', async () => {
    const server = await serve(refuseThenServe(2))
    const { fetchRetrying } = retrying()
    const request = new Request(server.url, {
      method: 'POST',
      body: 'payload',
      headers: { 'idempotency-key': 'k1' },
    })
    expect((await fetchRetrying(request)).status).toBe(200)
    expect(server.received.map((r) => [r.method, r.body, r.idempotencyKey])).toEqual([
      ['POST', 'payload', 'k1'],
      ['POST', 'payload', 'k1'],
      ['POST', 'payload', 'k1'],
    ])
    expect(request.bodyUsed).toBe(false)
  })

  it('does not retry a body given as a stream (it cannot be sent twice)', async () => {
    const server = await serve(refuseThenServe(1))
    const { fetchRetrying } = retrying()
    const body = new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('streamed'))
        controller.close()
      },
    })
    const response = await fetchRetrying(server.url, {
      method: 'PUT',
      body,
      duplex: 'half',
    } as RequestInit & { duplex: 'half' })
    expect(response.status).toBe(429)
    expect(server.received.map((r) => r.body)).toEqual(['streamed'])
  })

  it('does not retry a body given as an async iterable (a retry would send it empty)', async () => {
    const server = await serve(refuseThenServe(1))
    const { fetchRetrying } = retrying()
    async function* body() {
      yield new TextEncoder().encode('iterated')
    }
    const response = await fetchRetrying(server.url, {
      method: 'PUT',
      body: body() as unknown as BodyInit,
      duplex: 'half',
    } as RequestInit & { duplex: 'half' })
    expect(response.status).toBe(429)
    expect(server.received.map((r) => r.body)).toEqual(['iterated'])
  })

  it('does not retry other errors (500)', async () => {
    const server = await serve(() => ({ status: 500 }))
    const { fetchRetrying } = retrying()
    expect((await fetchRetrying(server.url)).status).toBe(500)
    expect(server.received).toHaveLength(1)
  })
})

describe('fetchWithRetry: when it gives up', () => {
  it('after maxAttempts attempts in all, returning the last response', async () => {
    const server = await serve(refuseThenServe(Number.POSITIVE_INFINITY, {}))
    const { fetchRetrying, waits } = retrying({ maxAttempts: 4 })
    const response = await fetchRetrying(server.url)
    expect(response.status).toBe(429)
    expect(await response.text()).toBe('answer 4')
    expect(server.received).toHaveLength(4)
    expect(waits).toEqual([50, 100, 200])
  })

  it('at once when the wait the server asks would end after maxElapsedMs', async () => {
    const server = await serve(refuseThenServe(1, { 'Retry-After': '3600' }))
    const { fetchRetrying, waits } = retrying({ maxElapsedMs: 60_000 })
    const response = await fetchRetrying(server.url)
    expect(response.status).toBe(429)
    expect(server.received).toHaveLength(1)
    expect(waits).toEqual([])
  })

  it('once the time spent and the next wait would pass maxElapsedMs', async () => {
    // A clock that the recorded sleeps move forward: 2 s per wait, 10 ms per request.
    let clock = 1_000_000
    const server = await serve(refuseThenServe(Number.POSITIVE_INFINITY))
    const { fetchRetrying, waits } = retrying({
      maxAttempts: 10,
      maxElapsedMs: 5_000,
      now: () => {
        clock += 10
        return clock
      },
      sleep: async (ms) => {
        waits.push(ms)
        clock += ms
      },
    })
    const response = await fetchRetrying(server.url)
    expect(response.status).toBe(429)
    // Waits end at ≈2 010 and ≈4 030 ms; a third would end at ≈6 050 ms > 5 000.
    expect(server.received).toHaveLength(3)
    expect(waits).toEqual([2_000, 2_000])
  })
})

describe('fetchWithRetry: AbortSignal', () => {
  it('stops a wait between attempts with the abort reason; no further request is sent', async () => {
    const server = await serve(refuseThenServe(Number.POSITIVE_INFINITY, { 'Retry-After': '30' }))
    // The default sleep: a real 30 s timer that the abort must cut short.
    const fetchRetrying = fetchWithRetry(fetch, { baseMs: 100, maxMs: 1_000 })
    const controller = new AbortController()
    const pending = fetchRetrying(server.url, { signal: controller.signal })
    await waitUntil(() => server.received.length === 1)
    controller.abort(new Error('user left the page'))
    await expect(pending).rejects.toThrow('user left the page')
    expect(server.received).toHaveLength(1)
  })

  it("honours a Request's own signal", async () => {
    const server = await serve(refuseThenServe(Number.POSITIVE_INFINITY, { 'Retry-After': '30' }))
    const fetchRetrying = fetchWithRetry(fetch, { baseMs: 100, maxMs: 1_000 })
    const controller = new AbortController()
    const pending = fetchRetrying(new Request(server.url, { signal: controller.signal }))
    await waitUntil(() => server.received.length === 1)
    controller.abort(new Error('cancelled'))
    await expect(pending).rejects.toThrow('cancelled')
    expect(server.received).toHaveLength(1)
  })
})

describe('fetchWithRetry: options', () => {
  const code = 'TOLLBOOTH_ERR_INVALID_OPTION'
  it.each([
    [{ maxAtempts: 2 }, 'fetchWithRetry: unknown option "maxAtempts" (did you mean "maxAttempts"?)'],
    [{ maxAttempts: 0 }, 'fetchWithRetry: "maxAttempts" must be a positive integer, got 0'],
    [{ maxElapsedMs: -1 }, 'fetchWithRetry: "maxElapsedMs" must be a positive finite number, got -1'],
    [{ baseMs: 10, maxMs: 5 }, 'fetchWithRetry: "maxMs" must be at least baseMs (10), got 5'],
    [{ sleep: 'later' }, 'fetchWithRetry: "sleep" must be a function, got "later"'],
  ])('refuses %j at startup', (options, message) => {
    expect(() => fetchWithRetry(fetch, options as never)).toThrow(expect.objectContaining({ code, message }))
  })

  it('refuses a fetch that is not a function', () => {
    expect(() => fetchWithRetry(undefined as never)).toThrow(
      expect.objectContaining({ code, message: 'fetchWithRetry: "fetch" must be a function, got undefined' }),
    )
  })
})

/** Waits for a condition the server's request handler makes true (one event-loop turn at a time). */
async function waitUntil(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 5_000
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met within 5 s')
    await new Promise((resolve) => setImmediate(resolve))
  }
}
