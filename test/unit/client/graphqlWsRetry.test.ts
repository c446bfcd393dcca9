/**
 * The decisions of graphqlWsRetry's pair on the events graphql-ws hands to `shouldRetry` (close events, errors,
 * refused upgrades), and the waits of `retryWait`. The same pair against a real server and a real graphql-ws client:
 * test/integration/client/graphqlWs.test.ts.
 */
import { describe, expect, it } from 'vitest'
import { graphqlWsRetry } from '../../../src/client/graphqlWsRetry.js'
import { refusedUpgradeOf, withUpgradeRefusals } from '../../../src/client/upgradeRefusals.js'

const close = (code: number, reason = '') => ({ code, reason, wasClean: true })

/** A pair whose waits are recorded instead of slept. */
function recorded(options: Parameters<typeof graphqlWsRetry>[0] = {}) {
  const waits: number[] = []
  const pair = graphqlWsRetry({
    baseMs: 100,
    maxMs: 1_000,
    random: () => 0.5,
    sleep: async (ms) => {
      waits.push(ms)
    },
    ...options,
  })
  return { pair, waits }
}

describe('graphqlWsRetry: shouldRetry', () => {
  const { pair } = recorded()

  it('retries tollbooth/ws over-quota closes (1013) and transient ones', () => {
    for (const code of [1001, 1005, 1006, 1012, 1013, 1014, 4408, 4499, 4504]) {
      expect(pair.shouldRetry(close(code)), `close ${code}`).toBe(true)
    }
  })

  it('does not retry abuse (1008), too big (1009), protocol errors or graphql-ws refusals', () => {
    for (const code of [1002, 1003, 1007, 1008, 1009, 1010, 1011, 4400, 4401, 4403, 4406, 4409, 4429, 4500]) {
      expect(pair.shouldRetry(close(code)), `close ${code}`).toBe(false)
    }
  })

  it('retries an error that says nothing (a network error, a browser refused upgrade)', () => {
    expect(pair.shouldRetry(new Event('error'))).toBe(true)
    expect(pair.shouldRetry(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }))).toBe(
      true,
    )
  })

  it("reads the status of ws' own refused-upgrade error: 429 and 503 retried, 401 and 403 not", () => {
    const wsError = (status: number) => ({ message: `Unexpected server response: ${status}`, target: {} })
    expect(pair.shouldRetry(wsError(429))).toBe(true)
    expect(pair.shouldRetry(wsError(503))).toBe(true)
    expect(pair.shouldRetry(wsError(401))).toBe(false)
    expect(pair.shouldRetry(wsError(403))).toBe(false)
  })
})

describe('graphqlWsRetry: retryWait', () => {
  it('backs off exponentially with full jitter per retry in a row', async () => {
    const { pair, waits } = recorded()
    for (const retries of [0, 1, 2, 3, 4, 5]) await pair.retryWait(retries)
    expect(waits).toEqual([50, 100, 200, 400, 500, 500])
  })

  it("waits for a refused upgrade's Retry-After once, for the reconnection that follows it", async () => {
    const { pair, waits } = recorded()
    const target = {}
    const socket = new (withUpgradeRefusals(FakeSocket))()
    socket.refuse(429, { 'retry-after': '7' })
    expect(pair.shouldRetry({ message: 'closed before established', target: socket })).toBe(true)
    await pair.retryWait(0)
    expect(pair.shouldRetry(close(1006))).toBe(true)
    await pair.retryWait(1)
    expect(waits).toEqual([7_000, 100])
    expect(refusedUpgradeOf({ target })).toBeUndefined()
  })

  it('does not retry a refused upgrade of another status, headers or not', () => {
    const { pair } = recorded()
    const socket = new (withUpgradeRefusals(FakeSocket))()
    socket.refuse(403, { 'retry-after': '1' })
    expect(refusedUpgradeOf({ target: socket })).toEqual({ status: 403, headers: { 'retry-after': '1' } })
    expect(pair.shouldRetry({ target: socket })).toBe(false)
  })

  it('returns graphql-ws option names only, frozen', () => {
    const pair = graphqlWsRetry({ maxAttempts: 2 })
    expect(Object.keys(pair)).toEqual(['retryAttempts', 'retryWait', 'shouldRetry'])
    expect(pair.retryAttempts).toBe(2)
    expect(Object.isFrozen(pair)).toBe(true)
    expect(graphqlWsRetry().retryAttempts).toBe(5)
  })

  it('raises the default maxMs to a baseMs above it', async () => {
    const { pair, waits } = recorded({ baseMs: 60_000, maxMs: undefined, random: () => 0.5 })
    await pair.retryWait(3)
    expect(waits).toEqual([30_000]) // 0.5 × min(60 000, 60 000 × 2³)
  })
})

describe('withUpgradeRefusals', () => {
  it('keeps the class itself (statics, instanceof) and leaves a class without ws events alone', () => {
    const Wrapped = withUpgradeRefusals(FakeSocket)
    expect(Wrapped.OPEN).toBe(1)
    expect(new Wrapped()).toBeInstanceOf(FakeSocket)
    class Plain {
      readonly url = 'ws://example'
    }
    expect(new (withUpgradeRefusals(Plain))()).toBeInstanceOf(Plain)
  })

  it('ends the handshake of a refused upgrade, as ws does without a listener', () => {
    const socket = new (withUpgradeRefusals(FakeSocket))()
    socket.refuse(503, { 'retry-after': '1' })
    expect(socket.terminated).toBe(1)
  })
})

describe('graphqlWsRetry: options', () => {
  const code = 'TOLLBOOTH_ERR_INVALID_OPTION'
  it.each([
    [{ maxAttemps: 3 }, 'graphqlWsRetry: unknown option "maxAttemps" (did you mean "maxAttempts"?)'],
    [{ maxAttempts: -1 }, 'graphqlWsRetry: "maxAttempts" must be a non-negative integer, got -1'],
    [{ baseMs: 5_000, maxMs: 1_000 }, 'graphqlWsRetry: "maxMs" must be at least baseMs (5000), got 1000'],
    [{ sleep: 10 }, 'graphqlWsRetry: "sleep" must be a function, got 10'],
    [{ now: 'now' }, 'graphqlWsRetry: "now" must be a function, got "now"'],
  ])('refuses %j', (options, message) => {
    expect(() => graphqlWsRetry(options as never)).toThrow(expect.objectContaining({ code, message }))
  })
})

/** The surface of a `ws` client socket that withUpgradeRefusals uses, driven by hand. */
class FakeSocket {
  static readonly OPEN = 1
  terminated = 0
  private readonly listeners = new Map<string, (req: unknown, res: unknown) => void>()
  on(event: string, listener: (req: unknown, res: unknown) => void) {
    this.listeners.set(event, listener)
  }
  terminate() {
    this.terminated++
  }
  refuse(statusCode: number, headers: Record<string, string>) {
    this.listeners.get('unexpected-response')?.({}, { statusCode, headers })
  }
}
