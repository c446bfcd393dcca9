import { describe, expect, it } from 'vitest'
import { BUILT_IN_PATTERNS, type Pattern, parsePattern } from '../../../src/cli/simulate/patterns.js'
import {
  type AlgorithmId,
  DEFAULT_LIMIT,
  DEFAULT_WINDOW_MS,
  defaultMaxQueue,
  type Policy,
  replay,
  VirtualClock,
} from '../../../src/cli/simulate/replay.js'
import {
  type AlgorithmSummary,
  formatSummary,
  maxInSpan,
  summarize,
} from '../../../src/cli/simulate/summary.js'
import { escapeXml, niceCeiling, niceStep, renderChart } from '../../../src/cli/simulate/svgChart.js'

/** 100 per minute, leaky bucket queue 10: the defaults of `tollbooth simulate`. */
const POLICY: Policy = {
  limit: DEFAULT_LIMIT,
  windowMs: DEFAULT_WINDOW_MS,
  maxQueue: defaultMaxQueue(DEFAULT_LIMIT),
}

function builtIn(name: string, policy: Policy = POLICY): Pattern {
  const pattern = BUILT_IN_PATTERNS[name]
  if (pattern === undefined) throw new Error(`no built-in pattern ${name}`)
  return pattern.build(policy)
}

async function simulate(pattern: Pattern, policy: Policy = POLICY) {
  const runs = await replay(pattern, policy)
  const summaries = Object.fromEntries(runs.map((run) => [run.algorithm, summarize(run, policy.windowMs)]))
  return { runs, summaries: summaries as Record<AlgorithmId, AlgorithmSummary> }
}

function counts(summaries: Record<AlgorithmId, AlgorithmSummary>) {
  return Object.fromEntries(
    Object.entries(summaries).map(([algorithm, { admitted, refused }]) => [algorithm, [admitted, refused]]),
  )
}

describe('tollbooth simulate: replay on the real limiters', () => {
  it('defaults the leaky bucket queue to a tenth of the limit', () => {
    expect(POLICY.maxQueue).toBe(10)
    expect(defaultMaxQueue(5)).toBe(1)
  })

  it('starts the virtual clock on a window boundary, so pattern times line up with windows', () => {
    for (const windowMs of [60_000, 10_000, 7, 86_400_000]) {
      const clock = new VirtualClock(windowMs)
      expect(clock.start % (windowMs * 1000)).toBe(0)
      clock.at(1.5)
      expect(clock.now() - clock.start).toBe(1500)
    }
  })

  it('boundary-burst: the fixed window admits 200 in 2 s, the others about the limit', async () => {
    const pattern = builtIn('boundary-burst')
    expect(pattern.requests.filter((r) => r.atMs === 59_000)).toHaveLength(100)
    expect(pattern.requests.filter((r) => r.atMs === 61_000)).toHaveLength(100)
    const { summaries } = await simulate(pattern)
    // Worked out from src/core/algorithms/*.ts; windows are aligned so that t = 60 s is a boundary.
    // - Fixed window: [0, 60 s) and [60 s, 120 s) are separate counters: 100 + 100 = 200 admitted.
    // - Sliding window (two counters): at 61 s, previous = 100, elapsed = 1 s, current = 0, so the estimate is
    //   100 × (1 − 1/60) = 98.33. The first request: 98.33 + 1 ≤ 100, admitted (current 1); the second:
    //   98.33 + 1 + 1 = 100.33 > 100, refused, and so are the rest. 100 + 1 = 101.
    // - Token bucket (GCRA): emission = 60 s / 100 = 600 ms, burst = 100 × 600 ms = 60 s. At 59 s the k-th request
    //   needs k × 0.6 s ≤ 60 s: all 100 pass, TAT = 119 s. At 61 s the backlog is 119 − 61 = 58 s, and the k-th
    //   needs 58 + 0.6k ≤ 60, k ≤ 3.33: 3 more (2 s of refill at 100/min). 100 + 3 = 103.
    // - Leaky bucket (GCRA, queue 10): burst = (10 + 1) × 600 ms = 6.6 s. At 59 s: 0.6k ≤ 6.6, k ≤ 11 (one in
    //   service, ten waiting), TAT = 65.6 s. At 61 s the backlog is 4.6 s: 4.6 + 0.6k ≤ 6.6, k ≤ 3.33: 3. 11 + 3 = 14.
    expect(counts(summaries)).toEqual({
      fixedWindow: [200, 0],
      slidingWindow: [101, 99],
      tokenBucket: [103, 97],
      leakyBucket: [14, 186],
    })
    // All admissions fall within 2 s, so the most in any 60 s span is everything admitted (for the leaky bucket
    // counted on leaving its queue: 59 s to 66.8 s, still one span).
    expect(summaries.fixedWindow.maxAdmittedInWindow).toBe(200)
    expect(summaries.slidingWindow.maxAdmittedInWindow).toBe(101)
    expect(summaries.tokenBucket.maxAdmittedInWindow).toBe(103)
    expect(summaries.leakyBucket.maxAdmittedInWindow).toBe(14)
    expect(summaries.fixedWindow.firstRefusalMs).toBeNull()
    expect(summaries.fixedWindow.longestRefusalStreak).toBeNull()
    expect(summaries.slidingWindow.firstRefusalMs).toBe(61_000)
    expect(summaries.slidingWindow.longestRefusalStreak).toEqual({
      requests: 99,
      fromMs: 61_000,
      toMs: 61_000,
    })
    expect(summaries.tokenBucket.longestRefusalStreak).toEqual({ requests: 97, fromMs: 61_000, toMs: 61_000 })
    // The leaky bucket refuses 89 at 59 s, then 97 at 61 s: the longer streak is reported.
    expect(summaries.leakyBucket.firstRefusalMs).toBe(59_000)
    expect(summaries.leakyBucket.longestRefusalStreak).toEqual({ requests: 97, fromMs: 61_000, toMs: 61_000 })
    // The 11th at 59 s waits behind ten others: 10 × 600 ms. Only the shaper reports waits.
    expect(summaries.leakyBucket.maxDelayMs).toBe(6000)
    expect(summaries.tokenBucket.maxDelayMs).toBe(0)
  })

  it('boundary-burst follows the policy: the limit either side of its own window boundary', async () => {
    const policy: Policy = { limit: 10, windowMs: 10_000, maxQueue: 1 }
    const pattern = builtIn('boundary-burst', policy)
    expect(pattern.durationMs).toBe(20_000)
    expect([...new Set(pattern.requests.map((r) => r.atMs))]).toEqual([9000, 11_000])
    const { summaries } = await simulate(pattern, policy)
    // Fixed: 10 + 10. Sliding: at 11 s the estimate is 10 × (1 − 1/10) = 9, so 9 + 1 ≤ 10 admits one, 9 + 2 does
    // not. Token bucket: emission 1 s, burst 10 s; backlog at 11 s is 19 − 11 = 8 s, 8 + k ≤ 10: 2 more.
    // Leaky (queue 1): burst 2 s, 2 at 9 s (TAT 11 s); at 11 s the backlog is 0: 2 more.
    expect(counts(summaries)).toEqual({
      fixedWindow: [20, 0],
      slidingWindow: [11, 9],
      tokenBucket: [12, 8],
      leakyBucket: [4, 16],
    })
  })

  it('abuser: steady-state rates, and the token bucket spending its burst on top of its refill', async () => {
    const pattern = builtIn('abuser')
    expect(pattern.requests).toHaveLength(1800)
    const { summaries } = await simulate(pattern)
    // One request every 100 ms from t = 0 to 179.9 s.
    // - Fixed window: the first 100 of each of the three windows (t = 0 to 9.9 s, 60 to 69.9 s, 120 to 129.9 s):
    //   300. Refusals start at 10 s and run to 59.9 s: 500 in a row.
    // - Sliding window: 100 in window 0. In window 1 (previous = 100) the k-th admission needs
    //   100 × (1 − e/60) + (k − 1) + 1 ≤ 100, e ≥ 0.6k s: k ≤ 59.9 / 0.6, 99. In window 2 (previous = 99):
    //   99 × (1 − e/60) + k ≤ 100, e ≥ (k − 1) × 60/99: k − 1 ≤ 59.9 × 99/60 = 98.8, 99. 100 + 99 + 99 = 298.
    //   The first admission of window 1 is at e = 0.6 s exactly (100 × 0.99 = 99 in doubles, and 99 + 1 ≤ 100),
    //   so refusals run from 10 s to 60.5 s: 506.
    // - Token bucket: while admitting without pause, after k admissions TAT = 0.6k s and the k-th arrives at
    //   0.1(k − 1) s; it passes while 0.6k − 0.1(k − 1) ≤ 60, k ≤ 119.8: 119 (to 11.8 s), first refusal 11.9 s.
    //   Then one every 600 ms from 12.0 s: 12.0 + 0.6j ≤ 179.9, j = 0 to 279, 280 more. 119 + 280 = 399.
    //   Between two admissions (12.0 s, 12.6 s) five are refused: the longest streak after the first.
    // - Leaky bucket (burst 6.6 s): 0.6k − 0.1(k − 1) ≤ 6.6, k ≤ 13 (to 1.2 s), first refusal 1.3 s. Then one
    //   every 600 ms from 1.8 s: 1.8 + 0.6j ≤ 179.9, j = 0 to 296, 297 more. 13 + 297 = 310.
    expect(counts(summaries)).toEqual({
      fixedWindow: [300, 1500],
      slidingWindow: [298, 1502],
      tokenBucket: [399, 1401],
      leakyBucket: [310, 1490],
    })
    expect(summaries.fixedWindow.firstRefusalMs).toBe(10_000)
    expect(summaries.fixedWindow.longestRefusalStreak).toEqual({
      requests: 500,
      fromMs: 10_000,
      toMs: 59_900,
    })
    expect(summaries.slidingWindow.longestRefusalStreak).toEqual({
      requests: 506,
      fromMs: 10_000,
      toMs: 60_500,
    })
    expect(summaries.tokenBucket.firstRefusalMs).toBe(11_900)
    expect(summaries.tokenBucket.longestRefusalStreak).toEqual({ requests: 5, fromMs: 12_100, toMs: 12_500 })
    expect(summaries.leakyBucket.firstRefusalMs).toBe(1300)
    expect(summaries.leakyBucket.longestRefusalStreak).toEqual({ requests: 5, fromMs: 1300, toMs: 1700 })
    // Most in any 60 s span. Token bucket: [0, 60 s) holds the 119 of the burst and 80 refills (12.0 s to
    // 59.4 s): 199, nearly twice the limit. Fixed window: an admission run is 100 long and the next starts 50 s
    // after it ends, so a span holds at most 1 + 99 (9.9 s and 60 to 69.8 s) = 100. Leaky bucket, counted when
    // requests leave: one every 600 ms, so 100 per 60 s.
    expect(summaries.tokenBucket.maxAdmittedInWindow).toBe(199)
    expect(summaries.fixedWindow.maxAdmittedInWindow).toBe(100)
    expect(summaries.slidingWindow.maxAdmittedInWindow).toBe(100)
    expect(summaries.leakyBucket.maxAdmittedInWindow).toBe(100)
  })

  it('bursty-screen: every algorithm admits all 210 at 100/min; the leaky bucket makes the sixth call wait 3 s', async () => {
    const pattern = builtIn('bursty-screen')
    // 150 steady (every 2 s for 300 s) + 10 bursts of 6 (15 s, 45 s, ..., 285 s).
    expect(pattern.requests).toHaveLength(210)
    const { summaries } = await simulate(pattern)
    // At most 30 + 2 × 6 = 42 requests in any minute: far below 100 for the windows and the token bucket. The
    // leaky bucket's queue is empty when a burst arrives (the last steady call, 1 s earlier, left after 600 ms):
    // six fit in 1 + 10, the sixth waiting 5 × 600 ms.
    for (const summary of Object.values(summaries)) {
      expect([summary.admitted, summary.refused, summary.maxAdmittedInWindow]).toEqual([210, 0, 42])
    }
    expect(summaries.leakyBucket.maxDelayMs).toBe(3000)
  })

  it('counts per key: two clients each at the limit are both admitted in full', async () => {
    const pattern = parsePattern(
      {
        limit: 5,
        windowMs: 10_000,
        events: [
          { at: 0, count: 5, key: 'alice' },
          { at: 0, count: 5, key: 'bob' },
        ],
      },
      'two.json',
    )
    const { summaries } = await simulate(pattern, { limit: 5, windowMs: 10_000, maxQueue: 4 })
    for (const summary of Object.values(summaries)) {
      expect(summary.admitted).toBe(10)
      // Per key: 5, the limit, though 10 passed in all.
      expect(summary.maxAdmittedInWindow).toBe(5)
    }
  })
})

describe('tollbooth simulate: summary', () => {
  it('measures spans half-open: requests exactly one window apart are in different spans', () => {
    expect(maxInSpan([], 60_000)).toBe(0)
    expect(maxInSpan([0, 60_000], 60_000)).toBe(1)
    expect(maxInSpan([0, 59_999], 60_000)).toBe(2)
    expect(maxInSpan([0, 1, 2, 70_000, 70_001, 70_002, 70_003], 60_000)).toBe(4)
  })

  it('prints a table per pattern and calls out admissions beyond the limit', async () => {
    const pattern = builtIn('boundary-burst')
    const { runs } = await simulate(pattern)
    const text = formatSummary({
      pattern,
      policy: POLICY,
      chart: 'out/boundary-burst.svg',
      algorithms: runs.map((run) => summarize(run, POLICY.windowMs)),
    })
    expect(text).toMatch(/^boundary-burst: 100 requests at t = 59 s and 100 at t = 61 s/)
    expect(text).toMatch(/fixed window +200 +0 +200 +none +none/)
    expect(text).toMatch(/sliding window +101 +99 +101 +61 s +99 \(at 61 s\)/)
    expect(text).toContain(
      '! fixed window let one key 200 requests through within one 60 s span: 2x the limit',
    )
    expect(text).toContain('leaky bucket: 1.667/s, queue 10 (wait up to 6 s)')
    expect(text).toContain('chart: out/boundary-burst.svg')
  })
})

describe('tollbooth simulate: pattern files', () => {
  it('expands events into requests, sorted by time, with defaults', () => {
    const pattern = parsePattern(
      { events: [{ at: 500, count: 2, key: 'a' }, { at: 100 }], durationMs: 1000, limit: 3 },
      '/tmp/spiky.json',
    )
    expect(pattern.name).toBe('spiky')
    expect(pattern.durationMs).toBe(1000)
    expect(pattern.policy).toEqual({ limit: 3 })
    expect(pattern.requests).toEqual([
      { atMs: 100, key: 'client' },
      { atMs: 500, key: 'a' },
      { atMs: 500, key: 'a' },
    ])
  })

  it.each([
    [[1, 2], 'f.json: expected an object like { "events": [{ "at": 0, "count": 1 }] }, got an array'],
    [{ events: [] }, 'f.json: "events" must be a non-empty array'],
    [{ event: [{ at: 0 }] }, 'f.json: unknown field "event" (did you mean "events"?)'],
    [{ events: [{ at: 0 }], window: 1 }, 'f.json: unknown field "window" (did you mean "windowMs"?)'],
    [
      { events: [{ at: 0 }], speed: 1 },
      'f.json: unknown field "speed" (allowed: name, description, limit, windowMs, durationMs, events)',
    ],
    [{ events: [{ at: -1 }] }, 'f.json: events[0].at must be a time in milliseconds since the start'],
    [
      { events: [{ at: 0 }, { at: '5' }] },
      'events[1].at must be a time in milliseconds since the start (a number >= 0), got "5"',
    ],
    [{ events: [{ at: 0, count: 0 }] }, 'f.json: events[0].count must be a positive integer, got 0'],
    [{ events: [{ at: 0, key: '' }] }, 'f.json: events[0].key must be a string of 1 to 256 characters'],
    [{ events: [{ at: 0, when: 1 }] }, 'f.json: events[0]: unknown field "when" (allowed: at, count, key)'],
    [{ events: [{ at: 0, Count: 2 }] }, 'f.json: events[0]: unknown field "Count" (did you mean "count"?)'],
    [{ events: [{ at: 0 }], limit: 1.5 }, 'f.json: "limit" must be a positive integer, got 1.5'],
    [
      { events: [{ at: 5000 }], durationMs: 5000 },
      'f.json: "durationMs" (5000) must be after the last event',
    ],
    [{ events: [{ at: 0 }], name: '../x' }, 'f.json: "name" must be 1 to 64 letters'],
    [{ events: [{ at: 0, count: 2_000_000 }] }, 'f.json: more than 1000000 requests'],
  ])('refuses %j with a message naming the file and the problem', (json, message) => {
    expect(() => parsePattern(json, 'f.json')).toThrow(message)
  })
})

describe('tollbooth simulate: SVG chart', () => {
  it('draws one panel per algorithm on shared axes, with escaped text', async () => {
    const pattern: Pattern = { ...builtIn('abuser'), name: 'a&b', description: '<script>' }
    const { runs, summaries } = await simulate(pattern)
    const svg = renderChart(
      { pattern, policy: POLICY, algorithms: Object.values(summaries) },
      runs.map((run) => ({ summary: summaries[run.algorithm], outcomes: run.outcomes })),
    )
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true)
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true)
    expect([...svg.matchAll(/<g class="panel" data-algorithm="(\w+)">/g)].map((m) => m[1])).toEqual([
      'fixedWindow',
      'slidingWindow',
      'tokenBucket',
      'leakyBucket',
    ])
    expect(svg).toContain('a&amp;b')
    expect(svg).toContain('&lt;script&gt;')
    expect(svg).not.toContain('<script>')
    // 180 s in 2 s buckets: 90 bars per panel; the fixed window's first bucket is all admitted (20), its sixth
    // (10 to 12 s) all refused.
    expect(svg).toContain('each bar: requests arriving within 2 s')
  })

  it('picks round bucket sizes and scales', () => {
    expect(niceStep(120_000 / 150)).toBe(1000)
    expect(niceStep(300_000 / 150)).toBe(2000)
    expect(niceStep(10 * 3_600_000)).toBe(10 * 3_600_000)
    expect(niceCeiling(7)).toBe(10)
    expect(niceCeiling(20)).toBe(20)
    expect(niceCeiling(21)).toBe(25)
    expect(niceCeiling(101)).toBe(200)
    expect(niceCeiling(1)).toBe(1)
    expect(escapeXml(`"'`)).toBe('&quot;&apos;')
  })
})
