import { describe, expect, it } from 'vitest'
import { didYouMean } from '../../../src/cli/didYouMean.js'

const OPTIONS = ['pattern', 'pattern-file', 'out', 'limit', 'window', 'max-queue', 'json', 'help', 'version']

describe('didYouMean', () => {
  it('takes the closest name within an edit distance of 2, the first listed on a tie', () => {
    expect(didYouMean('paterrn', OPTIONS)).toBe('pattern')
    expect(didYouMean('patern-flie', OPTIONS)).toBe('pattern-file')
    expect(didYouMean('lmiit', OPTIONS)).toBe('limit')
    expect(didYouMean('JSON', OPTIONS)).toBe('json')
    expect(didYouMean('simulat', ['cost', 'simulate', 'help'])).toBe('simulate')
    expect(didYouMean('cots', ['cost', 'simulate', 'help'])).toBe('cost')
  })

  it('else a name the typed one abbreviates or extends', () => {
    expect(didYouMean('sim', ['cost', 'simulate', 'help'])).toBe('simulate')
    expect(didYouMean('max', OPTIONS)).toBe('max-queue')
    expect(didYouMean('windowms', OPTIONS)).toBe('window')
  })

  it('nothing when no name is close, and never from a single character', () => {
    expect(didYouMean('frobnicate', OPTIONS)).toBeUndefined()
    expect(didYouMean('x', OPTIONS)).toBeUndefined()
    expect(didYouMean('o', OPTIONS)).toBeUndefined()
    expect(didYouMean('ab', ['out'])).toBeUndefined()
  })
})
