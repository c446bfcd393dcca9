import type { IncomingMessage, ServerResponse } from 'node:http'
import { ErrorCodes, invalidOption, TollboothError } from '../core/errors.js'
import { checkOptionKeys, optionNames } from '../core/knownOptions.js'
import type { ConcurrencyLimiter } from '../core/limiters/concurrencyLimit.js'
import type { RateLimiter } from '../core/rateLimiter.js'
import { isOptionsObject, orDefault } from '../core/validate.js'
import { clientGone, type Middleware } from './middleware.js'
import { addRateLimitHeaders, type Refusal, sendRefusal } from './refusal.js'
import { bodyRead } from './requestBody.js'
import { type IdentityOptions, requestIdentity } from './requestIdentity.js'
import { type UploadCharge, uploadAdmission } from './uploadAdmission.js'

export { UPLOAD_SIZE_POLICY, type UploadCharge, UploadTooLargeError } from './uploadAdmission.js'

export interface UploadGuardOptions<Req extends IncomingMessage = IncomingMessage>
  extends IdentityOptions<Req> {
  /**
   * Largest body of one request, in bytes. A declared `Content-Length` above it is refused with 413 before any of
   * the body is read; a body that goes past it as it arrives (chunked, or sent without a length) is cut off with
   * 413 and its connection closed.
   */
  maxBytes: number
  /**
   * The byte budget of each identity (a `tokenBucket`, `slidingWindow` or `fixedWindow` counting bytes). An upload
   * reserves its declared `Content-Length` (or `maxBytes` for a body without one) when it is admitted, and is refused
   * with 429 before its body is read when the budget does not hold that much; once its body is over (ended, cut off
   * or aborted), what did not arrive is given back. Its `maxCost` (a bucket's capacity, a window's limit) must be at
   * least `maxBytes`.
   */
  bytes?: RateLimiter
  /**
   * Simultaneous uploads per identity: `concurrencyLimit({ name, max, leaseMs })`. The lease is held until the
   * response is over (renewed every `leaseMs / 3`) and released exactly once: when the response finishes, the client
   * aborts or the socket fails. One more upload is refused with 429 before its body is read.
   */
  concurrent?: ConcurrencyLimiter
  /**
   * Answers a refusal made before the route runs, in place of the default problem+json answer (413 or 429). The
   * guard has already set `Connection: close`: the unread body is not read, the connection ends after the answer.
   * @default sendRefusal
   */
  onLimited?: (req: Req, res: ServerResponse, refusal: Refusal) => void | Promise<void>
  /** Called once per admitted upload with what its identity's byte budget was charged (only with `bytes`). */
  onCharged?: (req: Req, charge: UploadCharge) => void
}

const OWNER = 'uploadGuard'

const OPTIONS = optionNames<UploadGuardOptions>({
  maxBytes: true,
  bytes: true,
  concurrent: true,
  onLimited: true,
  onCharged: true,
  identify: true,
  trustProxy: true,
  ipv6Prefix: true,
  ipv4Prefix: true,
})

/**
 * An Express/Connect middleware (also for plain `node:http`) for upload routes: size, byte budget and simultaneous
 * uploads per identity. An upload reserves its declared length (`maxBytes` without one) from the byte budget when it
 * is admitted and gets back what did not arrive. Refusals made before the body is read (413 for a declared length
 * over `maxBytes`, 429 for a reservation the budget does not hold or for one upload too many) never reach the route
 * and close the connection. The body is counted as the parser hands it to `req`, whoever reads it and however (body
 * parsers, `req.pipe(file)`, async iteration). A body going past `maxBytes` is cut off: nothing more reaches the
 * route, a 413 is answered if the route has not answered yet, then the connection is closed and `req` is destroyed
 * (the route sees an error or an abort, never the end of the body). Errors of `identify` go to `next(error)`.
 */
export function uploadGuard<Req extends IncomingMessage = IncomingMessage>(
  options: UploadGuardOptions<Req>,
): Middleware<Req> {
  if (!isOptionsObject(options)) throw invalidOption(OWNER, 'options', 'an object', options)
  checkOptionKeys(OWNER, options, OPTIONS)
  const admission = uploadAdmission(OWNER, options)
  const onLimited = orDefault(options.onLimited, defaultOnLimited)
  if (typeof onLimited !== 'function') throw invalidOption(OWNER, 'onLimited', 'a function', onLimited)
  const { onCharged } = options
  if (onCharged !== undefined && typeof onCharged !== 'function') {
    throw invalidOption(OWNER, 'onCharged', 'a function', onCharged)
  }
  const identify = requestIdentity(OWNER, options)

  return (req, res, next) => {
    if (clientGone(req)) return
    // A body parser that ran first has read the body already: nothing would be counted, nothing cut off.
    if (bodyRead(req)) {
      next(
        new TollboothError(
          ErrorCodes.INVALID_OPTION,
          `${OWNER}: the request body was read before the guard (a body parser ran first): put uploadGuard before any body parser, app-wide ones included`,
        ),
      )
      return
    }
    admission.start(req, {
      res,
      identify: () => identify(req),
      refuse: (answer) => {
        try {
          const pending = onLimited(req, res, answer)
          if (pending instanceof Promise) pending.then(undefined, next)
        } catch (error) {
          next(error)
        }
      },
      cutOff: (answer) => sendRefusal(res, answer),
      setHeaders: (fields) => {
        addRateLimitHeaders(res, fields)
      },
      admit: () => next(),
      fail: next,
      ...(onCharged === undefined ? {} : { charged: (charge: UploadCharge) => onCharged(req, charge) }),
    })
  }
}

function defaultOnLimited(_req: IncomingMessage, res: ServerResponse, answer: Refusal): void {
  sendRefusal(res, answer)
}
