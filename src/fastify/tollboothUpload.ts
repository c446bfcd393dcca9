import type { FastifyPluginAsync, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { invalidOption } from '../core/errors.js'
import { checkOptionKeys, type OptionKeys, optionNames } from '../core/knownOptions.js'
import type { ConcurrencyLimiter } from '../core/limiters/concurrencyLimit.js'
import type { RateLimiter } from '../core/rateLimiter.js'
import { isOptionsObject } from '../core/validate.js'
import { type UploadCharge, uploadAdmission } from '../http/uploadAdmission.js'
import {
  addReplyHeaders,
  answerRefusal,
  type FastifyIdentityOptions,
  type FastifyOnLimited,
  fastifyIdentity,
  namingOption,
  type RouteHook,
  sendRefusalReply,
} from './fastifyRequest.js'
import { guardEachRoute } from './perRoute.js'

const OWNER = 'tollboothUpload'
const CONFIG_KEY = 'tollboothUpload'

/**
 * Options of `tollboothUpload`: those of `uploadGuard` from tollbooth/http, with Fastify's request and reply in the
 * callbacks. A route's `config.tollboothUpload` changes any of them for that route, or is `false` to leave it
 * unguarded.
 */
export interface TollboothUploadOptions extends FastifyIdentityOptions {
  /**
   * Largest body of one request, in bytes. A declared `Content-Length` above it is refused with 413 before any of
   * the body is read; a body that goes past it as Fastify's content-type parser reads it (chunked, or sent without a
   * length) is cut off with 413 and its connection closed. Fastify's own `bodyLimit` still applies on its own.
   */
  maxBytes: number
  /**
   * The byte budget of each identity (a `tokenBucket`, `slidingWindow` or `fixedWindow` counting bytes): an upload
   * reserves its declared length (`maxBytes` without one) when admitted, or is refused with 429 before its body is
   * read, and gets back what did not arrive. Its `maxCost` must be at least `maxBytes`.
   */
  bytes?: RateLimiter
  /**
   * Simultaneous uploads per identity: `concurrencyLimit({ name, max, leaseMs })`, each lease held until the response
   * is over and released exactly once. One more upload is refused with 429 before its body is read.
   */
  concurrent?: ConcurrencyLimiter
  /**
   * Answers a refusal made before the handler runs through `reply`, in place of the default problem+json answer (413
   * or 429); if it sends nothing, the default answer is sent. `Connection: close` is already set.
   * @default reply with the refusal's status, headers and body
   */
  onLimited?: FastifyOnLimited
  /** Called once per admitted upload with what its identity's byte budget was charged (only with `bytes`). */
  onCharged?: (request: FastifyRequest, charge: UploadCharge) => void
}

/** A route's `config.tollboothUpload`: any of the plugin's options, for this route only. */
export type TollboothUploadRouteOptions = Partial<TollboothUploadOptions>

declare module 'fastify' {
  interface FastifyContextConfig {
    /** tollbooth's upload limits for this route: options replacing the plugin's, or `false` for none. */
    tollboothUpload?: TollboothUploadRouteOptions | false
  }
}

const OPTIONS = optionNames<TollboothUploadOptions>({
  maxBytes: true,
  bytes: true,
  concurrent: true,
  onLimited: true,
  onCharged: true,
  identify: true,
  trustProxy: true,
  ipv6Prefix: true,
  ipv4Prefix: true,
} satisfies OptionKeys<TollboothUploadRouteOptions>)

/** The `onRequest` hook of one set of options, every option checked; `path` names a route's config in errors. */
function uploadHook(options: TollboothUploadOptions, path?: string): RouteHook {
  const name = (option: string) => (path === undefined ? option : `${path}.${option}`)
  const admission = namingOption(OWNER, path, () => uploadAdmission(OWNER, options))
  const { onLimited, onCharged } = options
  if (onLimited !== undefined && typeof onLimited !== 'function') {
    throw invalidOption(OWNER, name('onLimited'), 'a function', onLimited)
  }
  if (onCharged !== undefined && typeof onCharged !== 'function') {
    throw invalidOption(OWNER, name('onCharged'), 'a function', onCharged)
  }
  const identify = namingOption(OWNER, path, () => fastifyIdentity(OWNER, options))

  // In onRequest, before Fastify's content-type parser reads `request.raw`: the admission counts the body as Node
  // hands it to the raw request, whatever parser reads it.
  return (request, reply, done) => {
    admission.start(request.raw, {
      res: reply.raw,
      identify: () => identify(request),
      refuse: (answer) => {
        answerRefusal(request, reply, answer, onLimited).then(undefined, done)
      },
      // The handler has the request, its body still being parsed: the parser sees the request destroyed after this
      // answer, and its error finds the reply sent.
      cutOff: (answer) => {
        if (!reply.sent) sendRefusalReply(reply, answer)
      },
      setHeaders: (fields) => {
        addReplyHeaders(reply, fields)
      },
      admit: () => done(),
      fail: (error) => done(error as Error),
      ...(onCharged === undefined ? {} : { charged: (charge: UploadCharge) => onCharged(request, charge) }),
    })
  }
}

/**
 * Size, byte budget and simultaneous uploads per identity for every route registered after it in its scope and
 * below (register it in the scope of the upload routes). Runs in `onRequest`: a declared length over `maxBytes` is
 * answered 413, one whose reservation the byte budget does not hold or one upload too many 429, through Fastify's
 * reply and before the body is read. The body is then counted as Fastify's parser reads it; past `maxBytes` it is cut
 * off with 413 and the connection closed; the reservation keeps what arrived. What `identify` throws goes to Fastify's
 * error handling.
 */
const plugin: FastifyPluginAsync<TollboothUploadOptions> = async (fastify, options) => {
  if (!isOptionsObject(options)) throw invalidOption(OWNER, 'options', 'an object', options)
  checkOptionKeys(OWNER, options, OPTIONS)
  guardEachRoute(fastify, options, {
    owner: OWNER,
    configKey: CONFIG_KEY,
    known: OPTIONS,
    stage: 'onRequest',
    build: uploadHook,
  })
}

/**
 * tollbooth's upload limits as a Fastify plugin (fastify-plugin: it applies to the scope it is registered in).
 * `app.register(tollboothUpload, { maxBytes, bytes, concurrent })`, before the routes it guards.
 */
export const tollboothUpload = fp(plugin, { fastify: '5.x', name: 'tollbooth-upload' })
