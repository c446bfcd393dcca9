import { describe, expect, it } from 'vitest'
import { ownValue, withValueKey } from '../../../../src/graphql/cost/valueKey.js'

const key = (value: unknown, maxLength = 256) => withValueKey('k:', value, maxLength)

describe('withValueKey: the text of a variable in a price cache key', () => {
  it('keeps apart what JSON.stringify writes alike, at any depth', () => {
    // JSON.parse('1e400') is Infinity, which JSON.stringify writes null.
    const alike: unknown[][] = [
      [Number.POSITIVE_INFINITY, null],
      [Number.NEGATIVE_INFINITY, null],
      [Number.NaN, null],
      [-0, 0],
      [{ limit: JSON.parse('1e400') }, { limit: null }],
      [[JSON.parse('-1e400')], [null]],
      [{ a: { b: [Number.NaN] } }, { a: { b: [null] } }],
      [{ a: undefined }, {}],
    ]
    for (const [one, other] of alike) {
      expect(JSON.stringify(one) ?? 'undefined').toBe(JSON.stringify(other) ?? 'undefined')
      expect(key(one)).not.toBe(key(other))
    }
  })

  it('keeps an absent variable apart from a null one', () => {
    expect(key(undefined)).toBe('k:~')
    expect(key(null)).toBe('k:null')
  })

  it('writes JSON values as JSON does', () => {
    expect(key({ first: 10, after: 'c1', tags: ['a', true, null], nested: { x: 1.5 } })).toBe(
      'k:{"first":10,"after":"c1","tags":["a",true,null,],"nested":{"x":1.5,},}',
    )
    expect(key('a"b')).toBe('k:"a\\"b"')
  })

  it('keys nothing that no JSON request holds, nor past maxLength', () => {
    class Upload {}
    for (const value of [
      new Upload(),
      new Date(0),
      () => 1,
      10n,
      Symbol('s'),
      { file: new Upload() },
      [new Map()],
    ]) {
      expect(key(value)).toBeUndefined()
    }
    expect(key('x'.repeat(300))).toBeUndefined()
    expect(key(Array(200).fill(1))).toBeUndefined()
    expect(key('x'.repeat(250))).toBe(`k:"${'x'.repeat(250)}"`)
    expect(key(Object.create(null))).toBe('k:{}')
  })
})

describe('ownValue: a variable as the request sent it', () => {
  it('reads an absent $__proto__ as absent, not as Object.prototype', () => {
    expect(ownValue({}, '__proto__')).toBeUndefined()
    expect(ownValue({}, 'constructor')).toBeUndefined()
    expect(ownValue(JSON.parse('{"__proto__":{"limit":5}}'), '__proto__')).toEqual({ limit: 5 })
    expect(ownValue({ first: 3 }, 'first')).toBe(3)
    expect(ownValue(null, 'first')).toBeUndefined()
    expect(ownValue(undefined, 'first')).toBeUndefined()
  })
})
