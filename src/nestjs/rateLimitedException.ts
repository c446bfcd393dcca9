import { HttpException } from '@nestjs/common'
import type { Refusal } from '../http/refusal.js'

/**
 * What `TollboothGuard` throws for a refused request, through Nest's exception layer: status 429 (400 for a cost no
 * budget can ever hold), the problem+json body as its response. The guard has already set `Retry-After`, the
 * RateLimit fields and the problem+json Content-Type on the response, so Nest's default filter sends the answer of
 * tollbooth/http as it is. A filter of your own (`@Catch(RateLimitedException)`) finds all of it in `refusal`.
 */
export class RateLimitedException extends HttpException {
  /** The status, headers, body, decision and policy of the refusal. */
  readonly refusal: Refusal

  constructor(refusal: Refusal) {
    // The body itself, not a copy: the guard knows it by identity when Nest's filter sends it.
    super(refusal.body as Record<string, unknown>, refusal.status)
    this.refusal = refusal
  }
}
