import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Cluster, Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest'
import { type RedisProcess, startRedis } from '../helpers/redisServer.js'

const clients: (Redis | Cluster)[] = []

function client(port: number): Redis {
  const redis = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 1 })
  redis.on('error', () => {}) // connection failures are asserted through command results
  clients.push(redis)
  return redis
}

function clusterClient(): Cluster {
  const cluster = new Cluster(inject('redisClusterNodes'), {
    lazyConnect: true,
    redisOptions: { maxRetriesPerRequest: 1 },
  })
  clients.push(cluster)
  return cluster
}

function timeout(ms: number): Promise<'timeout'> {
  return new Promise((resolve) => setTimeout(() => resolve('timeout'), ms))
}

afterEach(() => {
  for (const c of clients.splice(0)) c.disconnect()
})

describe('startRedis', () => {
  let server: RedisProcess

  beforeAll(async () => {
    server = await startRedis()
  })

  afterAll(async () => {
    await server.stop()
  })

  it('answers PING and SET/GET on a fresh local port', async () => {
    expect(server.host).toBe('127.0.0.1')
    expect(server.port).not.toBe(6379)
    expect(server.url).toBe(`redis://127.0.0.1:${server.port}`)
    const redis = client(server.port)
    expect(await redis.ping()).toBe('PONG')
    expect(await redis.set('greeting', 'hello')).toBe('OK')
    expect(await redis.get('greeting')).toBe('hello')
  })

  it('pause() makes the server hang and resume() brings it back', async () => {
    const redis = client(server.port)
    await redis.connect()
    server.pause()
    try {
      expect(await Promise.race([redis.ping(), timeout(300)])).toBe('timeout')
    } finally {
      server.resume()
    }
    expect(await Promise.race([redis.ping(), timeout(1_000)])).toBe('PONG')
  })

  it('stop() then restart() serves an empty dataset on the same port', async () => {
    const port = server.port
    const firstPid = server.pid
    await client(port).set('survives', 'no')

    await server.stop()
    await server.stop() // idempotent
    await expect(client(port).ping()).rejects.toThrow()

    await server.restart()
    expect(server.port).toBe(port)
    expect(server.pid).not.toBe(firstPid)
    const redis = client(port)
    expect(await redis.ping()).toBe('PONG')
    expect(await redis.dbsize()).toBe(0)
  })

  it('kill() then restart() works, and stop() after kill() is a no-op', async () => {
    await server.kill()
    await server.kill()
    await server.stop()
    await server.restart()
    expect(await client(server.port).ping()).toBe('PONG')
  })

  it('stop() ends a paused server', async () => {
    server.pause()
    await server.stop()
    await expect(client(server.port).ping()).rejects.toThrow()
    await server.restart()
  })
})

describe('missing binaries', () => {
  it('fails with install instructions when redis-server is not on PATH', async () => {
    const emptyDir = mkdtempSync(join(tmpdir(), 'tollbooth-empty-path-'))
    const path = process.env.PATH
    process.env.PATH = emptyDir
    try {
      await expect(startRedis()).rejects.toThrow(
        'redis-server not found on PATH: install it with "apt-get install -y redis-server" (Debian/Ubuntu)',
      )
    } finally {
      process.env.PATH = path
      rmSync(emptyDir, { recursive: true, force: true })
    }
  })
})

describe('globalSetup', () => {
  it('provides a standalone Redis that answers PING', async () => {
    const url = new URL(inject('redisUrl'))
    expect(url.hostname).toBe('127.0.0.1')
    expect(url.port).not.toBe('6379')
    expect(await client(Number(url.port)).ping()).toBe('PONG')
  })

  it('provides a 3-master cluster covering all 16384 slots', async () => {
    const nodes = inject('redisClusterNodes')
    expect(nodes).toHaveLength(3)
    for (const { port } of nodes) {
      const info = String(await client(port).call('CLUSTER', ['INFO']))
      expect(info).toContain('cluster_state:ok')
      expect(info).toContain('cluster_slots_ok:16384')
      expect(info).toContain('cluster_size:3')
    }

    const slots = (await client(nodes[0]?.port ?? 0).call('CLUSTER', ['SLOTS'])) as [
      number,
      number,
      [string, number, ...unknown[]],
    ][]
    const covered = slots.reduce((sum, [start, end]) => sum + end - start + 1, 0)
    const masterPorts = new Set(slots.map(([, , [, port]]) => port))
    expect(covered).toBe(16384)
    expect([...masterPorts].sort()).toEqual(nodes.map((node) => node.port).sort())
  })

  it('serves SET/GET through an ioredis Cluster client on every master', async () => {
    const cluster = clusterClient()
    await cluster.connect()
    const prefix = `harness-test:${process.pid}:`
    const keys = Array.from({ length: 30 }, (_, i) => `${prefix}${i}`)
    for (const key of keys) await cluster.set(key, key, 'EX', 60)
    for (const key of keys) expect(await cluster.get(key)).toBe(key)

    const masters = cluster.nodes('master')
    expect(masters).toHaveLength(3)
    // KEYS on a single node only sees that node's slots: 30 keys must land on all three masters.
    const keysPerMaster = await Promise.all(masters.map((node) => node.keys(`${prefix}*`)))
    expect(keysPerMaster.map((found) => found.length > 0)).toEqual([true, true, true])
    expect(keysPerMaster.flat().sort()).toEqual([...keys].sort())
    await Promise.all(keys.map((key) => cluster.del(key)))
  })
})
