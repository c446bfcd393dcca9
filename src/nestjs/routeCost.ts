import type { ExecutionContext } from '@nestjs/common'
import { invalidOption } from '../core/errors.js'

/**
 * What every Nest HTTP request has, on Express and on Fastify. Give your own request type as the type argument of
 * `TollboothGuard` and `@RateLimit` (`new TollboothGuard<Request>(…)`) to read what your authentication set on it;
 * it is taken on trust, as Nest's own `getRequest<T>()` is.
 */
export interface NestHttpRequest {
  readonly headers: Readonly<Record<string, string | string[] | undefined>>
}

/**
 * What a request costs: a positive finite number, or a function of the request and its execution context returning
 * one (may be async). A function's other answers are errors (a 500 through Nest's exception layer), never a free
 * request.
 */
export type RouteCost<Req = NestHttpRequest> =
  | number
  | ((request: Req, context: ExecutionContext) => number | Promise<number>)

/** Checks a `cost` option at startup (`option` names it in the error, as the user wrote it). */
export function checkCost(owner: string, option: string, cost: unknown): void {
  if (typeof cost === 'function') return
  if (typeof cost !== 'number' || !Number.isFinite(cost) || cost <= 0) {
    throw invalidOption(
      owner,
      option,
      'a positive finite number or a function (request, context) => number',
      cost,
    )
  }
}
