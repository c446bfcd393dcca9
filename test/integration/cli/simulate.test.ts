import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { REPO_ROOT, type Run, tollbooth } from './bin.js'

/** Runs `tollbooth simulate ...` as a user would (the package's bin, in a process of its own). */
function simulate(args: string[], cwd = REPO_ROOT): Promise<Run> {
  return tollbooth(['simulate', ...args], { cwd })
}

/**
 * Checks the SVG is well-formed as far as this chart's markup goes: every element closed in order, attribute
 * values quoted, no markup characters left unescaped in text. Returns the element names in document order.
 */
function checkXml(svg: string): string[] {
  const stack: string[] = []
  const elements: string[] = []
  const tag = /<(\/?)([a-zA-Z][\w:-]*)((?:\s+[\w:-]+="[^"<]*")*)\s*(\/?)>/g
  let last = 0
  for (const match of svg.matchAll(tag)) {
    const between = svg.slice(last, match.index)
    expect(between, `text before ${match[0]}`).not.toMatch(/[<>]|&(?!(amp|lt|gt|quot|apos);)/)
    last = match.index + match[0].length
    const [, closing, name, , selfClosing] = match as unknown as [string, string, string, string, string]
    if (closing) expect(stack.pop(), `closing </${name}>`).toBe(name)
    else {
      elements.push(name)
      if (!selfClosing) stack.push(name)
    }
  }
  expect(svg.slice(last).trim()).toBe('')
  expect(stack).toEqual([])
  return elements
}

function panels(svg: string): string[] {
  return [...svg.matchAll(/<g class="panel" data-algorithm="(\w+)">/g)].map((match) => match[1] as string)
}

describe('tollbooth simulate (CLI)', () => {
  let dir: string
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tollbooth-simulate-'))
  })
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true })
  })

  it('simulates the three built-in patterns: a summary on stdout and one SVG chart each', async () => {
    const out = join(dir, 'all')
    const result = await simulate(['--out', out])
    expect(result.stderr).toBe('')
    expect(result.code).toBe(0)
    expect((await readdir(out)).sort()).toEqual(['abuser.svg', 'boundary-burst.svg', 'bursty-screen.svg'])
    for (const name of ['boundary-burst', 'bursty-screen', 'abuser']) {
      const svg = await readFile(join(out, `${name}.svg`), 'utf8')
      expect(svg.startsWith('<svg ')).toBe(true)
      expect(checkXml(svg)[0]).toBe('svg')
      expect(panels(svg)).toEqual(['fixedWindow', 'slidingWindow', 'tokenBucket', 'leakyBucket'])
      expect(result.stdout).toContain(`chart: ${join(out, `${name}.svg`)}`)
    }
    // The boundary burst: the fixed window lets 200 through within 2 s, the others about the limit.
    expect(result.stdout).toMatch(/fixed window +200 +0 +200 +none +none/)
    expect(result.stdout).toMatch(/sliding window +101 +99 +101 +61 s +99 \(at 61 s\)/)
    expect(result.stdout).toMatch(/token bucket +103 +97 +103 +61 s +97 \(at 61 s\)/)
    expect(result.stdout).toMatch(/leaky bucket +14 +186 +14 +59 s +97 \(at 61 s\)/)
    expect(result.stdout).toContain(
      '! fixed window let one key 200 requests through within one 60 s span: 2x the limit of 100',
    )
    // The abuser.
    expect(result.stdout).toMatch(/fixed window +300 +1500 +100 +10 s +500 \(10 s to 59.9 s\)/)
    expect(result.stdout).toMatch(/token bucket +399 +1401 +199 +11.9 s/)
  })

  it('--json: a machine-readable summary; --out file.svg for a single pattern', async () => {
    const chart = join(dir, 'charts', 'burst.svg')
    const result = await simulate(['--pattern', 'boundary-burst', '--out', chart, '--json'])
    expect(result.stderr).toBe('')
    expect(result.code).toBe(0)
    const json = JSON.parse(result.stdout) as {
      patterns: {
        name: string
        requests: number
        chart: string
        policy: { limit: number; windowMs: number; maxQueue: number }
        algorithms: { algorithm: string; admitted: number; refused: number; maxAdmittedInWindow: number }[]
      }[]
    }
    expect(json.patterns).toHaveLength(1)
    const [pattern] = json.patterns
    expect(pattern).toMatchObject({
      name: 'boundary-burst',
      requests: 200,
      chart,
      policy: { limit: 100, windowMs: 60_000, maxQueue: 10 },
    })
    expect(
      pattern?.algorithms.map((a) => [a.algorithm, a.admitted, a.refused, a.maxAdmittedInWindow]),
    ).toEqual([
      ['fixedWindow', 200, 0, 200],
      ['slidingWindow', 101, 99, 101],
      ['tokenBucket', 103, 97, 103],
      ['leakyBucket', 14, 186, 14],
    ])
    expect(panels(await readFile(chart, 'utf8'))).toHaveLength(4)
  })

  it('reads a pattern file, with its own policy, overridden by --limit', async () => {
    const file = join(dir, 'login-storm.json')
    await writeFile(
      file,
      JSON.stringify({
        limit: 5,
        windowMs: 10_000,
        events: [
          { at: 9000, count: 5 },
          { at: 11_000, count: 5 },
        ],
      }),
    )
    const own = await simulate(['--pattern-file', file, '--out', dir, '--json'])
    expect(own.stderr).toBe('')
    expect(own.code).toBe(0)
    const [pattern] = (
      JSON.parse(own.stdout) as { patterns: { name: string; algorithms: { admitted: number }[] }[] }
    ).patterns
    expect(pattern?.name).toBe('login-storm')
    // 5 either side of the 10 s boundary: the fixed window admits all 10.
    expect(pattern?.algorithms[0]?.admitted).toBe(10)
    const svg = await readFile(join(dir, 'login-storm.svg'), 'utf8')
    checkXml(svg)

    const overridden = await simulate(['--pattern-file', file, '--out', dir, '--limit', '3'])
    expect(overridden.code).toBe(0)
    expect(overridden.stdout).toContain('every algorithm allows 3 per 10 s')
    expect(overridden.stdout).toMatch(/fixed window +6 +4 /)
  })

  it('writes charts to the current directory by default', async () => {
    const cwd = await mkdtemp(join(dir, 'cwd-'))
    const result = await simulate(['--pattern', 'abuser'], cwd)
    expect(result.code).toBe(0)
    expect(result.stdout).toContain('chart: abuser.svg')
    expect(await readdir(cwd)).toEqual(['abuser.svg'])
  })

  it('--help prints the usage and exits 0', async () => {
    const result = await simulate(['--help'])
    expect(result.code).toBe(0)
    expect(result.stdout).toContain('Usage: tollbooth simulate')
    expect(result.stdout).toContain('boundary-burst')
  })

  it.each([
    [
      ['--pattern', 'thundering-herd'],
      'unknown pattern "thundering-herd" (built-in patterns: boundary-burst',
    ],
    [['--limit', 'ten'], '--limit must be a positive whole number, got "ten"'],
    [['--window', '1 fortnight'], '--window must be a duration'],
    [['--out', 'one.svg'], '--out one.svg names one file, but 3 patterns are simulated'],
  ])('exits 1 on an invalid option value: %j', async (args, message) => {
    const result = await simulate([...args])
    expect(result.code).toBe(1)
    expect(result.stdout).toBe('')
    expect(result.stderr).toContain(`tollbooth simulate: ${message}`)
    expect(result.stderr).not.toContain('--help')
  })

  it('exits 2 on an unknown option, naming the closest one', async () => {
    expect(await simulate(['--paterrn', 'abuser'])).toEqual({
      code: 2,
      stdout: '',
      stderr:
        'tollbooth simulate: unknown option --paterrn (did you mean --pattern?)\n' +
        'Run "tollbooth simulate --help" for usage.\n',
    })
  })

  it('exits 1 on a pattern file that is missing, not JSON or invalid, naming the file and the problem', async () => {
    const missing = join(dir, 'missing.json')
    const notJson = join(dir, 'not-json.json')
    const invalid = join(dir, 'invalid.json')
    await writeFile(notJson, '{ "events": [')
    await writeFile(invalid, JSON.stringify({ events: [{ at: 0 }, { at: 100, count: -3 }] }))
    for (const [file, message] of [
      [missing, 'cannot read the pattern file (no such file)'],
      [notJson, 'not valid JSON'],
      [invalid, 'events[1].count must be a positive integer, got -3'],
    ] as const) {
      const result = await simulate(['--pattern-file', file, '--out', dir])
      expect(result.code).toBe(1)
      expect(result.stdout).toBe('')
      expect(result.stderr).toContain(`tollbooth simulate: ${file}: ${message}`)
    }
  })
})
