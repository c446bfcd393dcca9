import type { StoreRequest } from './store.js'

/**
 * A batch sends each distinct spec (algorithm, op and args) once and each request the number of its spec, so the
 * requests of one limiter at one cost, most of a batch, cost Redis one argument each beside their key instead of five.
 * A request whose spec is not among the first `MAX_SHARED` is given its own: sharing saves arguments, it is never
 * needed for a right answer, and the search stays a few comparisons per request.
 */
const MAX_SHARED = 8

export interface BatchSpecs {
  /** How many specs `args` holds. */
  readonly count: number
  /** The specs, each as `algorithm, op, ...args`, flattened. */
  readonly args: (number | string)[]
  /** For each request in order, the number of its spec, from 1 (Lua's first index). */
  readonly numbers: number[]
}

export function batchSpecs(requests: readonly StoreRequest[]): BatchSpecs {
  const specs: StoreRequest[] = []
  const args: (number | string)[] = []
  const numbers: number[] = []
  for (const request of requests) {
    let number = specs.findIndex((spec, i) => i < MAX_SHARED && sameSpec(spec, request)) + 1
    if (number === 0) {
      specs.push(request)
      args.push(request.algorithm, request.op, ...request.args)
      number = specs.length
    }
    numbers.push(number)
  }
  return { count: specs.length, args, numbers }
}

function sameSpec(a: StoreRequest, b: StoreRequest): boolean {
  if (a.algorithm !== b.algorithm || a.op !== b.op || a.args.length !== b.args.length) return false
  for (let i = 0; i < a.args.length; i++) if (a.args[i] !== b.args[i]) return false
  return true
}
