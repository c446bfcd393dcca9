import { describe, expect, it } from 'vitest'
import { batchSpecs } from '../../../src/core/stores/batchSpecs.js'
import type { StoreRequest } from '../../../src/core/stores/store.js'

const consume = (limiter: string, cost: number): StoreRequest => ({
  algorithm: 'gcra',
  op: 'consume',
  limiter,
  key: 'k',
  args: [1000, 99_000, 1000 * cost],
})

describe('batchSpecs', () => {
  it('sends a spec once for all the requests of one limiter and cost, in the order first met', () => {
    const requests = [consume('a', 1), consume('a', 2), consume('a', 1), consume('b', 1), consume('a', 2)]
    const specs = batchSpecs(requests)
    // 'a' and 'b' at cost 1 share their args: the spec is the step, not the limiter's name.
    expect(specs.count).toBe(2)
    expect(specs.args).toEqual(['gcra', 'consume', 1000, 99_000, 1000, 'gcra', 'consume', 1000, 99_000, 2000])
    expect(specs.numbers).toEqual([1, 2, 1, 1, 2])
  })

  it('tells ops, algorithms and lease ids apart', () => {
    const lease = (id: string): StoreRequest => ({
      algorithm: 'concurrency',
      op: 'acquire',
      limiter: 'c',
      key: 'k',
      args: [30_000_000, 5, id],
    })
    const specs = batchSpecs([
      consume('a', 1),
      { ...consume('a', 1), op: 'refund' },
      lease('x'),
      lease('y'),
      lease('x'),
    ])
    expect(specs.count).toBe(4)
    expect(specs.numbers).toEqual([1, 2, 3, 4, 3])
  })

  it('past 8 distinct specs, gives each further request its own: every request still names its own step', () => {
    const requests = [
      ...Array.from({ length: 10 }, (_, i) => consume('a', i + 1)),
      consume('a', 10),
      consume('a', 3),
    ]
    const specs = batchSpecs(requests)
    expect(specs.count).toBe(11)
    expect(specs.numbers).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 3])
    for (const [i, request] of requests.entries()) {
      const at = ((specs.numbers[i] as number) - 1) * 5
      expect(specs.args.slice(at, at + 5)).toEqual([request.algorithm, request.op, ...request.args])
    }
  })
})
