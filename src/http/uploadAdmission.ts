import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Decision } from '../core/decision.js'
import { invalidOption } from '../core/errors.js'
import { isConcurrencyLimiter, isLeakyBucket, isRateLimiter } from '../core/limiterKinds.js'
import type { ConcurrencyLimiter, Lease } from '../core/limiters/concurrencyLimit.js'
import type { RateLimiter } from '../core/rateLimiter.js'
import { mergeRateLimitHeaders, type RateLimitPolicy, rateLimitHeaders } from '../core/rateLimitHeaders.js'
import { positiveInteger } from '../core/validate.js'
import { holdForResponse } from './heldLease.js'
import { validIdentity } from './rateLimit.js'
import { type Refusal, refusal } from './refusal.js'
import {
  type CountedBody,
  closeStreamAfterAnswer,
  countBody,
  declaredLength,
  isHttp2,
} from './requestBody.js'

/** What an admitted upload was charged to its identity's byte budget, reported once per upload. */
export interface UploadCharge {
  /** Body bytes received: all of them when `complete`, else up to the cut or the abort. */
  readonly received: number
  /**
   * Bytes the budget kept: what the route received, at most the reservation made at the door (the declared length, or
   * `maxBytes` for a body without one); the rest of the reservation was given back.
   */
  readonly charged: number
  /** Whether the whole body arrived (false when it was cut off past `maxBytes` or the client went away). */
  readonly complete: boolean
  /** The budget's decision once the upload was settled (the refund's, or the reservation's when nothing came back). */
  readonly decision: Decision
}

/** Name of the per-request size policy in the RateLimit fields of a 413. */
export const UPLOAD_SIZE_POLICY = 'upload-size'

/** The error a route reading a body that was cut off sees on `req` (with `status` 413, as body parsers set it). */
export class UploadTooLargeError extends Error {
  readonly status = 413
  readonly statusCode = 413
  readonly expose = true

  constructor(maxBytes: number) {
    super(`uploadGuard: the body went past maxBytes (${maxBytes}); the upload was cut off`)
    this.name = 'UploadTooLargeError'
  }
}

/** The limits an upload admission enforces: `uploadGuard`'s options without the framework's callbacks. */
export interface UploadLimits {
  maxBytes: number
  bytes?: RateLimiter | undefined
  concurrent?: ConcurrencyLimiter | undefined
}

/**
 * What differs between the servers an upload is admitted for (node:http and Express, Fastify): how the request's
 * identity is read, how answers are sent and the route is reached. The admission owns the raw request and response.
 */
export interface UploadExchange {
  /** The raw response: its 'close' and 'finish' end the upload's lease and the connection of a cut-off upload. */
  readonly res: ServerResponse
  /** The identity of the upload's budget and lease (may be async); what it throws goes to `fail`. */
  identify(): string | Promise<string>
  /** Answers a refusal made before the route got the request (`Connection: close` is already set). */
  refuse(answer: Refusal): void
  /**
   * Answers the 413 of a body cut off past `maxBytes` after the route got the request, before it answered
   * (`Connection: close` is already set; the request is destroyed once the answer is out).
   */
  cutOff(answer: Refusal): void
  /** Sets the RateLimit fields of an admitted upload on the answer to come. */
  setHeaders(fields: Record<string, string>): void
  /** Hands the request to the route. */
  admit(): void
  /** Hands an error of `identify` or of a store to the server's error path. */
  fail(error: unknown): void
  /** Reports what an admitted upload was charged (only with a byte budget); what it throws is ignored. */
  charged?(charge: UploadCharge): void
}

/** An upload admission: `start` it for each request, before anything reads the body. */
export interface UploadAdmission {
  readonly maxBytes: number
  start(req: IncomingMessage, exchange: UploadExchange): void
}

/**
 * The framework-free core of an upload guard: size, byte budget and simultaneous uploads, reserving at the door and
 * counting the body of the raw request as Node's parser hands it over. The limits are checked here (at startup),
 * naming `owner` in errors; adapters check their own callbacks.
 */
export function uploadAdmission(owner: string, limits: UploadLimits): UploadAdmission {
  const door = new UploadDoor(owner, limits)
  return { maxBytes: door.maxBytes, start: (req, exchange) => door.start(req, exchange) }
}

/** 'admitting' until the route gets the request ('admitted') or the upload is answered without it ('refused'). */
type UploadPhase = 'admitting' | 'admitted' | 'refused'

/** The limits of an upload admission, checked once, and the policies and answers every upload shares. */
class UploadDoor {
  readonly maxBytes: number
  readonly bytes: RateLimiter | undefined
  readonly concurrent: ConcurrencyLimiter | undefined
  readonly bytesPolicy: RateLimitPolicy | undefined
  readonly concurrentPolicy: RateLimitPolicy | undefined
  readonly sizeRefusal: Refusal

  constructor(
    readonly owner: string,
    limits: UploadLimits,
  ) {
    const maxBytes = positiveInteger(owner, 'maxBytes', limits.maxBytes)
    const { bytes, concurrent } = limits
    if (bytes !== undefined && (!isRateLimiter(bytes) || isLeakyBucket(bytes))) {
      throw invalidOption(owner, 'bytes', 'a tokenBucket, slidingWindow or fixedWindow counting bytes', bytes)
    }
    // An upload the budget can never be charged for would be refused (or undercharged) whatever the budget holds.
    if (bytes !== undefined && maxBytes > bytes.maxCost) {
      throw invalidOption(owner, 'maxBytes', `at most the capacity of "bytes" (${bytes.maxCost})`, maxBytes)
    }
    if (concurrent !== undefined && !isConcurrencyLimiter(concurrent)) {
      throw invalidOption(owner, 'concurrent', 'a concurrency limiter (concurrencyLimit)', concurrent)
    }
    this.maxBytes = maxBytes
    this.bytes = bytes
    this.concurrent = concurrent
    this.bytesPolicy =
      bytes === undefined ? undefined : Object.freeze({ ...bytes.policy, unit: 'content-bytes' })
    this.concurrentPolicy =
      concurrent === undefined
        ? undefined
        : Object.freeze({ name: concurrent.name, quota: concurrent.limit, unit: 'concurrent-requests' })
    this.sizeRefusal = sizeRefusal(maxBytes)
  }

  /** Refuses a declared length over `maxBytes` at once; any other upload is admitted in steps (`Upload`). */
  start(req: IncomingMessage, exchange: UploadExchange): void {
    const declared = declaredLength(req)
    if (declared !== undefined && declared > this.maxBytes) {
      this.refuse(req, exchange, this.sizeRefusal)
      return
    }
    // Spent at the door: all that the body may bring. A body without a length may bring up to maxBytes.
    const need = this.bytes === undefined ? 0 : (declared ?? this.maxBytes)
    new Upload(this, req, exchange, need).admit()
  }

  refuse(req: IncomingMessage, exchange: UploadExchange, answer: Refusal): void {
    // The body is not read: ending the connection after the answer is what keeps Node from reading it to reuse it.
    // HTTP/2 has no connection of the request's own (and refuses the header): its stream is closed instead.
    if (isHttp2(req)) closeStreamAfterAnswer(req)
    else if (!exchange.res.headersSent) exchange.res.setHeader('connection', 'close')
    exchange.refuse(answer)
  }

  /**
   * Settles a reservation once the upload is decided and, when admitted, its body is over: the budget keeps what the
   * route received (never more than was reserved), the rest goes back. Reported to `exchange.charged` when admitted.
   */
  async settle(
    exchange: UploadExchange,
    identity: string,
    reservation: Decision,
    reserved: number,
    admitted: { received: number; complete: boolean } | undefined,
  ): Promise<void> {
    const { bytes } = this
    if (bytes === undefined) return
    const kept = admitted === undefined ? 0 : Math.min(admitted.received, reserved)
    const decision = kept < reserved ? await bytes.refund(identity, reserved - kept) : reservation
    if (admitted === undefined) return
    try {
      const pending: unknown = exchange.charged?.({ ...admitted, charged: kept, decision })
      // An async observer that fails later must not become an unhandled rejection (it would end the process).
      if (pending instanceof Promise) pending.catch(() => {})
    } catch {
      // A throwing observer changes nothing about the upload.
    }
  }
}

/**
 * One upload past the size check at the door: its identity, the reservation made from the byte budget and the lease,
 * the body counted as it streams, the cut-off past `maxBytes`, and the settlement once, when it is over.
 */
class Upload {
  private identity: string | undefined
  private phase: UploadPhase = 'admitting'
  private reservation: Decision | undefined
  private settled = false
  private responseClosed = false
  private readonly body: CountedBody

  constructor(
    private readonly door: UploadDoor,
    private readonly req: IncomingMessage,
    private readonly exchange: UploadExchange,
    /** What is reserved from the byte budget (0 without one). */
    private readonly need: number,
  ) {
    exchange.res.once('close', () => {
      this.responseClosed = true
    })
    this.body = countBody(req, door.maxBytes, {
      ended: () => this.settleWhenOver(),
      cut: () => this.cutOff(),
    })
    // The client went away before the body was over: an admitted upload keeps what came.
    req.once('close', () => {
      this.body.stop()
      this.settleWhenOver()
    })
  }

  /** Resolves the identity, reserves its bytes, takes its lease, then hands the request to the route. */
  admit(): void {
    const { door, exchange } = this
    if (door.bytes === undefined && door.concurrent === undefined) {
      if (this.body.state === 'cut') return
      this.phase = 'admitted'
      exchange.admit()
      return
    }
    this.admitWithLimits().catch((error: unknown) => {
      if (this.phase === 'admitting') this.phase = 'refused'
      this.body.stop()
      this.settleWhenOver()
      exchange.fail(error)
    })
  }

  private async admitWithLimits(): Promise<void> {
    const { door, exchange } = this
    const { bytes, bytesPolicy, concurrent, concurrentPolicy } = door
    const key = exchange.identify()
    const identity = validIdentity(door.owner, typeof key === 'string' ? key : await key)
    this.identity = identity
    // Cut off past maxBytes while the identity was being resolved: already answered.
    if (this.phase !== 'admitting') return
    if (bytes !== undefined && bytesPolicy !== undefined && this.need > 0) {
      if (!this.reserved(await bytes.consume(identity, this.need), bytesPolicy)) return
    }
    let lease: Lease | undefined
    if (concurrent !== undefined && concurrentPolicy !== undefined) {
      lease = await concurrent.acquire(identity)
      if (!this.leased(lease, concurrentPolicy)) return
      holdForResponse(lease, concurrent.leaseMs, exchange.res)
    }
    const fields: Record<string, string>[] = []
    if (this.reservation !== undefined && bytesPolicy !== undefined) {
      fields.push(rateLimitHeaders(this.reservation, bytesPolicy))
    }
    if (lease !== undefined && concurrentPolicy !== undefined) {
      fields.push(rateLimitHeaders(lease, concurrentPolicy))
    }
    exchange.setHeaders(mergeRateLimitHeaders(fields))
    this.phase = 'admitted'
    exchange.admit()
    // The body may be over already (a small one arrives with the headers).
    this.settleWhenOver()
  }

  /** Takes the byte budget's answer to the reservation: whether the upload goes on. */
  private reserved(decision: Decision, policy: RateLimitPolicy): boolean {
    if (!decision.allowed) {
      if (this.phase === 'admitting') this.refuseUnread(refusal(decision, policy))
      return false
    }
    this.reservation = decision
    if (this.phase !== 'admitting' || this.responseClosed) {
      // Cut off past maxBytes, or the client went away, while the reservation was being made: given back.
      this.phase = 'refused'
      this.settleWhenOver()
      return false
    }
    return true
  }

  /** Takes the concurrency limit's lease: whether the upload goes on. */
  private leased(lease: Lease, policy: RateLimitPolicy): boolean {
    if (this.phase !== 'admitting' || this.responseClosed) {
      void lease.release()
      this.phase = 'refused'
      this.settleWhenOver()
      return false
    }
    if (!lease.allowed) {
      this.refuseUnread(refusal(lease, policy))
      return false
    }
    return true
  }

  private refuseUnread(answer: Refusal): void {
    this.phase = 'refused'
    this.body.stop()
    this.door.refuse(this.req, this.exchange, answer)
    this.settleWhenOver()
  }

  /** A reservation is settled once: when the upload is refused, or when an admitted upload's body is over. */
  private settleWhenOver(): void {
    const { identity, reservation, phase, body } = this
    if (this.settled || reservation === undefined || identity === undefined || phase === 'admitting') return
    if (phase === 'admitted' && body.state === 'reading') return
    this.settled = true
    const admitted =
      phase === 'admitted' ? { received: body.received, complete: body.state === 'complete' } : undefined
    void this.door.settle(this.exchange, identity, reservation, this.need, admitted).catch(() => {
      // refund rejects only on an invalid key or amount, both checked before.
    })
  }

  /** The body went past `maxBytes`: nothing more reaches the route, a 413 is answered, the connection ends. */
  private cutOff(): void {
    const { req, exchange, door } = this
    const { res } = exchange
    const admitted = this.phase === 'admitted'
    if (this.phase === 'admitting') this.phase = 'refused'
    this.settleWhenOver()
    const destroy = () => req.destroy(new UploadTooLargeError(door.maxBytes))
    if (isHttp2(req)) {
      // No connection to close: the request ends in an error at once, its stream once the answer is out.
      destroy()
      if (admitted) exchange.cutOff(door.sizeRefusal)
      else exchange.refuse(door.sizeRefusal)
      closeStreamAfterAnswer(req)
      return
    }
    if (admitted && res.headersSent) {
      // The route has answered already: only the connection can stop the flood.
      destroy()
      return
    }
    // The answer first, then the end of the connection (destroying the request closes its socket).
    res.once('finish', destroy)
    res.once('close', destroy)
    if (admitted) {
      res.setHeader('connection', 'close')
      exchange.cutOff(door.sizeRefusal)
    } else {
      door.refuse(req, exchange, door.sizeRefusal)
    }
  }
}

/** The 413 of a body over `maxBytes`, with the RateLimit fields of the per-request size policy. */
function sizeRefusal(maxBytes: number): Refusal {
  const sizePolicy: RateLimitPolicy = Object.freeze({
    name: UPLOAD_SIZE_POLICY,
    quota: maxBytes,
    unit: 'content-bytes',
  })
  // A size refusal comes from no store: a synthetic decision, for the RateLimit fields of the 413.
  const tooLarge: Decision = Object.freeze({
    allowed: false,
    limit: maxBytes,
    remaining: maxBytes,
    resetMs: 0,
    retryAfterMs: 0,
    delayMs: 0,
    neverAllowed: true,
    source: 'guard',
  })
  return refusal(tooLarge, sizePolicy, 413)
}
