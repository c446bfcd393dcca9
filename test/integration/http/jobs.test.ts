/**
 * jobAdmission end to end: `POST /jobs` accepts with 202 (at most 2 running jobs and 1000 pending bytes per
 * identity), `POST /jobs/:id/done` releases the ticket in a later request, on node:http and Express 5, with the
 * budgets on memory, Redis and the Redis Cluster.
 */
import { randomUUID } from 'node:crypto'
import { once } from 'node:events'
import http, { type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import express from 'express'
import { afterEach, describe, expect, it } from 'vitest'
import { ErrorCodes } from '../../../src/core/errors.js'
import { concurrencyLimit } from '../../../src/core/limiters/concurrencyLimit.js'
import { fixedWindow } from '../../../src/core/limiters/fixedWindow.js'
import { tokenBucket } from '../../../src/core/limiters/tokenBucket.js'
import {
  type JobAdmission,
  type JobAdmissionOptions,
  type JobTicket,
  jobAdmission,
} from '../../../src/http/jobs.js'
import { sendRefusal } from '../../../src/http/refusal.js'
import { createStore, storeKinds } from '../../helpers/stores.js'

const cleanups: (() => unknown)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

type Flavor = 'node:http' | 'express'

/**
 * The job routes, whatever the server: the identity is the `x-user` header, the job's size its body's length. The
 * body is read whole before admission (a job's input is stored with it).
 */
function jobRoutes(admission: JobAdmission) {
  const running = new Map<string, JobTicket>()
  return {
    async submit(req: IncomingMessage, res: ServerResponse, body: Buffer) {
      const result = await admission.admit(String(req.headers['x-user']), body.length)
      if (!result.allowed) {
        sendRefusal(res, result.refusal)
        return
      }
      const id = randomUUID()
      running.set(id, result)
      res.writeHead(202, { ...result.headers, 'content-type': 'application/json' })
      res.end(JSON.stringify({ id }))
    },
    async done(res: ServerResponse, id: string) {
      const ticket = running.get(id)
      if (ticket === undefined) {
        res.writeHead(404).end()
        return
      }
      // Released twice on purpose: only the first gives the slot and the bytes back.
      await Promise.all([ticket.release(), ticket.release()])
      res.writeHead(200).end()
    },
  }
}

async function startServer(flavor: Flavor, admission: JobAdmission): Promise<number> {
  const routes = jobRoutes(admission)
  let handler: http.RequestListener
  if (flavor === 'express') {
    const app = express()
    app.post('/jobs', express.raw({ type: () => true }), (req, res, next) => {
      routes.submit(req, res, Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0)).catch(next)
    })
    app.post('/jobs/:id/done', (req, res, next) => {
      routes.done(res, String(req.params.id)).catch(next)
    })
    handler = app
  } else {
    handler = (req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (data: Buffer) => chunks.push(data))
      req.on('end', () => {
        const done = /^\/jobs\/([^/]+)\/done$/.exec(req.url ?? '')
        const work =
          done?.[1] !== undefined ? routes.done(res, done[1]) : routes.submit(req, res, Buffer.concat(chunks))
        work.catch(() => res.writeHead(500).end())
      })
    }
  }
  const server = http.createServer(handler)
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  cleanups.push(async () => {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  })
  return (server.address() as AddressInfo).port
}

describe.each(storeKinds)('jobAdmission on the %s store', (kind) => {
  it.each<Flavor>(['node:http', 'express'])(
    'through %s: 202 for at most 2 jobs and 1000 pending bytes per identity, given back when each job is done',
    async (flavor) => {
      const fixture = await createStore(kind)
      cleanups.push(() => fixture.close())
      const suffix = randomUUID().slice(0, 8)
      const jobs = concurrencyLimit({ name: `jobs-${suffix}`, store: fixture.store, max: 2, leaseMs: 30_000 })
      // Barely refills: what remains is exactly what no running job holds.
      const pendingBytes = tokenBucket({
        name: `pending-${suffix}`,
        store: fixture.store,
        capacity: 1000,
        refillPerSecond: 0.01,
      })
      const port = await startServer(flavor, jobAdmission({ jobs, pendingBytes }))
      const submit = (user: string, size: number) =>
        fetch(`http://127.0.0.1:${port}/jobs`, {
          method: 'POST',
          headers: { 'x-user': user },
          body: 'j'.repeat(size),
        })
      const done = async (response: Response) => {
        const { id } = (await response.json()) as { id: string }
        return (await fetch(`http://127.0.0.1:${port}/jobs/${id}/done`, { method: 'POST' })).status
      }

      const a = await submit('alice', 400)
      expect(a.status).toBe(202)
      expect(a.headers.get('ratelimit')).toBe(`"${jobs.name}";r=1;t=30, "${pendingBytes.name}";r=600;t=100`)
      const b = await submit('alice', 400)
      expect(b.status).toBe(202)

      // A third job: two are running.
      const third = await submit('alice', 100)
      expect(third.status).toBe(429)
      expect(third.headers.get('ratelimit-policy')).toBe(`"${jobs.name}";q=2;qu="concurrent-requests"`)
      // Another identity has budgets of its own.
      expect((await submit('bob', 1000)).status).toBe(202)

      expect(await done(a)).toBe(200)
      // A slot is free, but 400 + 700 bytes would be pending: refused, and the slot it took is given back.
      const tooMuch = await submit('alice', 700)
      expect(tooMuch.status).toBe(429)
      expect(tooMuch.headers.get('ratelimit')).toMatch(new RegExp(`^"${pendingBytes.name}";r=600;`))
      expect((await jobs.peek('alice')).remaining).toBe(1)
      // More than can ever be pending: the client's error.
      expect((await submit('alice', 1001)).status).toBe(413)

      const c = await submit('alice', 600)
      expect(c.status).toBe(202)
      expect((await pendingBytes.peek('alice')).remaining).toBe(0)
      // b was released twice: its 400 bytes came back once.
      expect(await done(b)).toBe(200)
      expect((await pendingBytes.peek('alice')).remaining).toBe(400)
      expect((await jobs.peek('alice')).remaining).toBe(1)
      expect(await done(c)).toBe(200)
      expect((await pendingBytes.peek('alice')).remaining).toBe(1000)
      expect((await jobs.peek('alice')).remaining).toBe(2)
    },
  )
})

describe('jobAdmission options and arguments', () => {
  const jobs = concurrencyLimit({ name: 'jobs', max: 1, leaseMs: 1000 })

  it('refuses unknown and mistyped options at startup, naming the option', () => {
    const attempts: [unknown, string][] = [
      [
        { jobs, pendingbytes: undefined },
        'jobAdmission: unknown option "pendingbytes" (did you mean "pendingBytes"?)',
      ],
      [{}, '"jobs" must be a concurrency limiter'],
      [
        { jobs: tokenBucket({ name: 't', capacity: 1, refillPerSecond: 1 }) },
        '"jobs" must be a concurrency limiter',
      ],
      [{ jobs, pendingBytes: jobs }, '"pendingBytes" must be a rate limiter counting bytes'],
      // A window gives its whole limit back at its end, pending or not.
      [
        { jobs, pendingBytes: fixedWindow({ name: 'w', limit: 1000, windowMs: 200 }) },
        '"pendingBytes" must be a rate limiter counting bytes (a tokenBucket)',
      ],
    ]
    for (const [options, message] of attempts) {
      expect(() => jobAdmission(options as JobAdmissionOptions)).toThrow(
        expect.objectContaining({
          code: ErrorCodes.INVALID_OPTION,
          message: expect.stringContaining(message),
        }),
      )
    }
  })

  it('refuses an invalid identity or size with TOLLBOOTH_ERR_INVALID_ARGUMENT, taking nothing', async () => {
    const admission = jobAdmission({ jobs })
    await expect(admission.admit('', 1)).rejects.toMatchObject({ code: ErrorCodes.INVALID_ARGUMENT })
    await expect(admission.admit('k', -1)).rejects.toMatchObject({ code: ErrorCodes.INVALID_ARGUMENT })
    await expect(admission.admit('k', 1.5)).rejects.toMatchObject({ code: ErrorCodes.INVALID_ARGUMENT })
    expect((await jobs.peek('k')).remaining).toBe(1)
    // Without pendingBytes, a ticket holds the slot only.
    const ticket = await admission.admit('k', 10)
    expect(ticket).toMatchObject({ allowed: true, bytes: 0 })
    if (ticket.allowed) await ticket.release()
    expect((await jobs.peek('k')).remaining).toBe(1)
  })
})
