import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'

const root = fileURLToPath(new URL('../..', import.meta.url))
const tsxLoader = import.meta.resolve('tsx')

/** Starts `examples/core-demo.ts` as `npm start` does (on a free port) and waits for its banner. */
async function startDemo(): Promise<{ child: ChildProcess; url: string; banner: string }> {
  const child = spawn(process.execPath, ['--import', tsxLoader, 'examples/core-demo.ts'], {
    cwd: root,
    env: { ...process.env, PORT: '0', REDIS_URL: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let banner = ''
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      banner += chunk.toString()
      const match = /on (http:\/\/localhost:\d+)/.exec(banner)
      if (match && banner.includes('/expensive')) resolve(match[1] as string)
    })
    child.once('exit', (code) => reject(new Error(`demo exited with ${code} before listening: ${banner}`)))
  })
  return { child, url, banner }
}

describe('npm start (the core demo)', () => {
  let child: ChildProcess | undefined
  afterEach(() => {
    if (child?.exitCode === null) child.kill('SIGKILL')
  })

  it('serves 200 with RateLimit headers, then 429 with Retry-After, and exits 0 on SIGTERM', async () => {
    const demo = await startDemo()
    child = demo.child
    expect(demo.banner).toContain('store: memory')
    const first = await fetch(`${demo.url}/`)
    expect(first.status).toBe(200)
    expect(first.headers.get('ratelimit-policy')).toBe('"demo-ip";q=10;w=10')
    expect(first.headers.get('ratelimit')).toBe('"demo-ip";r=9;t=1')
    const statuses: number[] = []
    for (let i = 0; i < 12; i++) statuses.push((await fetch(`${demo.url}/`)).status)
    // 10 tokens: 1 spent above, 9 more 200s (a token may refill during the loop), then 429s.
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(9)
    expect(statuses.filter((s) => s === 200).length).toBeLessThanOrEqual(10)
    expect(statuses.at(-1)).toBe(429)
    const expensive = await fetch(`${demo.url}/expensive`)
    expect(expensive.status).toBe(429)
    expect(Number(expensive.headers.get('retry-after'))).toBeGreaterThanOrEqual(4)
    expect(expensive.headers.get('content-type')).toBe('application/problem+json')
    expect(await expensive.json()).toMatchObject({ status: 429, 'violated-policies': ['demo-ip'] })
    demo.child.kill('SIGTERM')
    const [code] = await once(demo.child, 'exit')
    expect(code).toBe(0)
  })
})
