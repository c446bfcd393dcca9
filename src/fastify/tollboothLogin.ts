import type { FastifyRequest } from 'fastify'
import { type LoginCheck, type LoginGuardOptions, type LoginSuccess, loginGuard } from '../http/loginGuard.js'
import { proceedAfterDelay } from '../http/proceedAfterDelay.js'
import type { TrustedDeviceOptions } from '../http/trustedDevices.js'
import {
  addReplyHeaders,
  answerRefusal,
  bindRequest,
  type FastifyIdentityOptions,
  namingOption,
  ofRaw,
  type RawRequest,
  type RouteHook,
} from './fastifyRequest.js'

const OWNER = 'tollboothLogin'

/**
 * Options of `tollboothLogin`: those of `loginGuard` from tollbooth/http, with `account` and `identify` taking the
 * Fastify request (`account` runs in `preHandler`, after Fastify parsed the body: read `request.body`).
 */
export interface TollboothLoginOptions
  extends Omit<LoginGuardOptions, 'account' | 'identify' | 'trustedDevices'>,
    FastifyIdentityOptions {
  /**
   * The account a login request names, usually from `request.body`. The guard never looks it up; a request that
   * names none (undefined, or empty once normalized) is counted per address only.
   */
  account: (request: FastifyRequest) => string | undefined | Promise<string | undefined>
  /** Trusted devices, as for `loginGuard`; `token` takes the Fastify request. */
  trustedDevices?: Omit<TrustedDeviceOptions, 'token'> & {
    token?: (request: FastifyRequest) => string | undefined | Promise<string | undefined>
  }
}

/**
 * A login guard for Fastify routes: `preHandler` goes in the login route's options, and the handler reports the
 * outcome of the credentials it verified with `failed` or `succeeded`.
 */
export interface TollboothLogin {
  /**
   * The login route's `preHandler`: checks the attempt (refusing it with 429 through the reply), sets the RateLimit
   * fields, waits out the account's delay, then lets the handler run. A client that leaves during its delay never
   * reaches the handler (its attempt stays counted); store errors go to Fastify's error handling.
   */
  readonly preHandler: RouteHook
  /** Decides one attempt and counts it, without waiting (the caller waits `delayMs`). */
  check(request: FastifyRequest): Promise<LoginCheck>
  /** Reports that the credentials of `request` were wrong (counted now if `preHandler` did not check it). */
  failed(request: FastifyRequest, account: string): Promise<void>
  /**
   * Reports a successful login: clears the (address, account) pair's failures and gives back this attempt; with
   * `trustedDevices`, resolves a fresh device token (`deviceCookie` for `reply.header('set-cookie', …)`).
   */
  succeeded(request: FastifyRequest, account: string): Promise<LoginSuccess>
}

/**
 * `loginGuard` from tollbooth/http for Fastify: the same budgets, counting and answers (refusals per address and per
 * (address, account), a growing delay per account, the same answer whether the account exists or not), with the
 * Fastify request in the callbacks and in the outcome reports. Options are checked here, naming this guard.
 *
 * ```ts
 * const login = tollboothLogin({ perIp, perIpAndAccount, perAccount, account: (request) => request.body?.email })
 * app.post('/login', { preHandler: login.preHandler }, async (request, reply) => { … await login.failed(request, email) … })
 * ```
 */
export function tollboothLogin(options: TollboothLoginOptions): TollboothLogin {
  const guard = namingOption(
    OWNER,
    undefined,
    () => {
      // Anything but an object, and callbacks that are not functions, are passed on for loginGuard to refuse.
      if (typeof options !== 'object' || options === null) return loginGuard<RawRequest>(options)
      const { account, identify, trustedDevices, ...rest } = options
      const raw: LoginGuardOptions<RawRequest> = {
        ...rest,
        account: ofRaw(account) as LoginGuardOptions<RawRequest>['account'],
        ...(identify === undefined ? {} : { identify: ofRaw(identify) }),
        ...(trustedDevices === undefined ? {} : { trustedDevices: devicesOfRaw(trustedDevices) }),
      }
      return loginGuard<RawRequest>(raw)
    },
    'loginGuard',
  )

  const check = (request: FastifyRequest) => guard.check(bindRequest(request))

  const preHandler: RouteHook = (request, reply, done) => {
    check(request).then((answer) => {
      if (!('allowed' in answer)) {
        answerRefusal(request, reply, answer, undefined).then(undefined, done)
        return
      }
      addReplyHeaders(reply, answer.headers)
      // A client that hangs up during its delay never reaches the handler; its attempt stays counted.
      proceedAfterDelay(reply.raw, answer.delayMs, () => done())
    }, done)
  }

  return {
    preHandler,
    check,
    failed: (request, account) => guard.failed(bindRequest(request), account),
    succeeded: (request, account) => guard.succeeded(bindRequest(request), account),
  }
}

/** The trusted devices' options with `token` reading the raw request; anything else is left for loginGuard to check. */
function devicesOfRaw(
  options: NonNullable<TollboothLoginOptions['trustedDevices']>,
): TrustedDeviceOptions<RawRequest> {
  if (typeof options !== 'object' || options === null) return options
  const { token, ...rest } = options
  return {
    ...rest,
    ...(token === undefined ? {} : { token: ofRaw(token) as TrustedDeviceOptions<RawRequest>['token'] }),
  }
}
