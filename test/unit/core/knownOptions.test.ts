import { describe, expect, it } from 'vitest'
import {
  checkOptionKeys,
  closestName,
  editDistance,
  type OptionKeys,
  optionNames,
} from '../../../src/core/knownOptions.js'

const KNOWN = ['name', 'store', 'failPolicy', 'failClosedRetryAfterMs', 'capacity', 'refillPerSecond']

/** The error `fn` throws (failing the test when it throws nothing). */
function thrownBy(fn: () => unknown): { code?: string; message: string } {
  try {
    fn()
  } catch (error) {
    return error as { code?: string; message: string }
  }
  throw new Error('expected a throw')
}

describe('editDistance', () => {
  it.each([
    ['', '', 0],
    ['abc', '', 3],
    ['', 'abc', 3],
    ['kitten', 'sitting', 3],
    ['maxdepht', 'maxdepth', 1], // a transposition is one edit
    ['ca', 'abc', 3], // optimal string alignment: no substring is edited twice
    ['cooldown', 'cooldownms', 2],
  ])('%j → %j: %i', (a, b, distance) => {
    expect(editDistance(a, b)).toBe(distance)
  })
})

describe('closestName', () => {
  it('prefers a name equal but for case, even over a closer one', () => {
    expect(closestName('failpolicy', KNOWN)).toBe('failPolicy')
    expect(closestName('CAPACITY', KNOWN)).toBe('capacity')
    // 'maxCosts' is listed first and one edit away, but 'maxCost' is the same name in another case.
    expect(closestName('maxcost', ['maxCosts', 'maxCost'])).toBe('maxCost')
  })

  it('otherwise the smallest edit distance within max(2, ⌊length / 3⌋), case ignored', () => {
    expect(closestName('capacty', KNOWN)).toBe('capacity')
    expect(closestName('refillPerSec', KNOWN)).toBe('refillPerSecond') // 3 edits, 12 characters: within 4
    expect(closestName('messagesPerSec', ['messagesPerSecond', 'messageBurst'])).toBe('messagesPerSecond')
    expect(closestName('maxDepht', ['maxDepth', 'maxTokens'])).toBe('maxDepth')
    expect(closestName('Stroe', KNOWN)).toBe('store')
  })

  it('a name cut short: its one completion, though many edits away; two completions fall back to edit distance', () => {
    expect(closestName('refill', KNOWN)).toBe('refillPerSecond') // 9 edits
    expect(closestName('rate', ['name', 'ratePerSecond', 'maxQueue'])).toBe('ratePerSecond') // not 'name', 2 edits
    expect(closestName('fail', KNOWN)).toBeUndefined() // failPolicy or failClosedRetryAfterMs
    expect(closestName('na', KNOWN)).toBeUndefined() // too short to be a name cut short
  })

  it('the first listed wins a tie', () => {
    expect(closestName('ab', ['ax', 'ay'])).toBe('ax')
    expect(closestName('ab', ['ay', 'ax'])).toBe('ay')
  })

  it('suggests nothing when no name is close', () => {
    expect(closestName('limit', KNOWN)).toBeUndefined()
    expect(closestName('when', ['at', 'count', 'key'])).toBeUndefined()
    // Two short names with nothing in common are not a typo of each other, though within 2 edits.
    expect(closestName('id', ['by'])).toBeUndefined()
    expect(closestName('x', KNOWN)).toBeUndefined()
  })
})

describe('checkOptionKeys', () => {
  it('refuses an unknown key with TOLLBOOTH_ERR_INVALID_OPTION, naming the owner, the key and the suggestion', () => {
    const options = { name: 'login', capacity: 5, refillPerSecond: 1, failpolicy: 'closed' }
    const error = thrownBy(() => checkOptionKeys('tokenBucket', options, KNOWN))
    expect(error.code).toBe('TOLLBOOTH_ERR_INVALID_OPTION')
    expect(error.message).toBe('tokenBucket: unknown option "failpolicy" (did you mean "failPolicy"?)')
  })

  it('names a nested key with its path', () => {
    const error = thrownBy(() => checkOptionKeys('useTollbooth', { maxDepht: 3 }, ['maxDepth'], 'limits'))
    expect(error.message).toBe('useTollbooth: unknown option "limits.maxDepht" (did you mean "maxDepth"?)')
  })

  it('lists the known names when none is close, at most twelve', () => {
    expect(thrownBy(() => checkOptionKeys('MemoryStore', { size: 1 }, ['maxKeys', 'clock'])).message).toBe(
      'MemoryStore: unknown option "size" (known options: maxKeys, clock)',
    )
    const many = Array.from({ length: 14 }, (_, i) => `option${i}`)
    expect(thrownBy(() => checkOptionKeys('x', { zzzzzzzzzz: 1 }, many)).message).toBe(
      `x: unknown option "zzzzzzzzzz" (known options: ${many.slice(0, 12).join(', ')}, …)`,
    )
  })

  it('allows undefined in a known key but refuses an unknown key holding undefined', () => {
    expect(() => checkOptionKeys('o', { store: undefined, name: 'n' }, KNOWN)).not.toThrow()
    expect(thrownBy(() => checkOptionKeys('o', { stroe: undefined }, KNOWN)).message).toBe(
      'o: unknown option "stroe" (did you mean "store"?)',
    )
  })

  it('ignores symbol keys, and leaves anything but an object to the caller', () => {
    expect(() => checkOptionKeys('o', { [Symbol('private')]: 1, name: 'n' }, KNOWN)).not.toThrow()
    for (const value of [undefined, null, 5, 'text', false, [1, 2]]) {
      expect(() => checkOptionKeys('o', value, KNOWN)).not.toThrow()
    }
  })

  it('checks own keys, not inherited ones', () => {
    const inherited = Object.create({ stroe: 1 }) as object
    expect(() => checkOptionKeys('o', inherited, KNOWN)).not.toThrow()
  })
})

describe('optionNames', () => {
  interface Example {
    required: string
    optional?: number
  }

  it('lists the keys in order', () => {
    expect(optionNames<Example>({ required: true, optional: true })).toEqual(['required', 'optional'])
  })

  it('does not compile when the list and the type differ (checked by `npm run typecheck`)', () => {
    // @ts-expect-error: `optional` is missing
    const missing: OptionKeys<Example> = { required: true }
    // @ts-expect-error: `extra` is not a key of Example
    const extra: OptionKeys<Example> = { required: true, optional: true, extra: true }
    // @ts-expect-error: the same checks apply to a list given to optionNames
    optionNames<Example>({ required: true, optional: true, typo: true })
    expect([missing, extra]).toHaveLength(2)
  })
})
