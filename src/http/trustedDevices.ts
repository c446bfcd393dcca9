import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import { invalidOption } from '../core/errors.js'
import { checkOptionKeys, optionNames } from '../core/knownOptions.js'
import type { RateLimiter } from '../core/rateLimiter.js'
import { isOptionsObject, orDefault, positiveInteger } from '../core/validate.js'

/**
 * Trusted devices for a login guard (OWASP, "Slow Down Online Guessing Attacks with Device Cookies"): a client that
 * logged in to an account gets a device token, and its later attempts at that account are counted per (account,
 * device) instead of in the budget every untrusted client of the account shares, so that an attack spending that
 * budget does not lock the owner out.
 */
export interface TrustedDeviceOptions<Req extends IncomingMessage = IncomingMessage> {
  /**
   * The HMAC-SHA-256 key device tokens are signed with: at least 32 bytes (`openssl rand -base64 32`), the same on
   * every instance, kept out of the repository. A list rotates keys: the first signs, every one verifies.
   */
  secret: string | Buffer | readonly (string | Buffer)[]
  /**
   * Attempts per (account, device): a rate limiter that refuses (`tokenBucket`, `slidingWindow`, `fixedWindow`).
   * Spent at the door like the other budgets; a success gives its attempt back, so it counts the device's failures.
   * A device whose budget is spent is refused (429) until it refills: its token is revoked meanwhile.
   */
  perDevice: RateLimiter
  /**
   * How long a device token is valid after the login that issued it.
   * @default 2592000000 (30 days)
   */
  maxAgeMs?: number
  /**
   * The device token a request presents (may be async), e.g. from a header a mobile app sends.
   * @default the value of the cookie `cookieName`
   */
  token?: (req: Req) => string | undefined | Promise<string | undefined>
  /**
   * The cookie the default `token` reads and `deviceCookie` sets. The `__Host-` prefix makes browsers keep it only
   * when it is `Secure`, for this host alone and for every path.
   * @default '__Host-tollbooth-device'
   */
  cookieName?: string
}

const OPTIONS = optionNames<TrustedDeviceOptions>({
  secret: true,
  perDevice: true,
  maxAgeMs: true,
  token: true,
  cookieName: true,
})

const THIRTY_DAYS_MS = 30 * 24 * 3600 * 1000
/** Browsers cap a cookie's lifetime at 400 days (RFC 6265bis); a token outliving its cookie is of no use. */
const MAX_AGE_LIMIT_MS = 400 * 24 * 3600 * 1000
const MIN_SECRET_BYTES = 32
const VERSION = '1'
/**
 * `1.<device id: 16 random bytes>.<expiry: ms since the epoch>.<HMAC-SHA-256>`, all base64url or decimal. The MAC
 * covers the version, the device id, the expiry and the account's normalized name, which the token does not carry:
 * it proves the device logged in to the account the attempt names, and names nobody to whoever reads it.
 */
const TOKEN = /^1\.([A-Za-z0-9_-]{22})\.(\d{13})\.([A-Za-z0-9_-]{43})$/
/** Longer input is refused before any parsing or hashing. */
const MAX_TOKEN_LENGTH = 90
/** Cookie names are RFC 9110 tokens. */
const COOKIE_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/

/** A fresh device token, and the `Set-Cookie` value carrying it. */
export interface IssuedDevice {
  readonly token: string
  readonly cookie: string
}

/** The trusted devices of one guard, their options checked. */
export interface TrustedDevices<Req extends IncomingMessage> {
  readonly perDevice: RateLimiter
  /** The device id of the valid token `req` presents for `account`, or undefined (none, forged, expired, another account's). */
  deviceOf(req: Req, account: string): Promise<string | undefined>
  /** A new device token for `account`, valid `maxAgeMs` from now. */
  issue(account: string): IssuedDevice
}

/** Checks `options` (naming `owner` and `trustedDevices.*` in errors) and builds the guard's trusted devices. */
export function trustedDevices<Req extends IncomingMessage>(
  owner: string,
  options: TrustedDeviceOptions<Req>,
  refusingLimiter: (option: string, limiter: unknown) => RateLimiter,
): TrustedDevices<Req> {
  if (!isOptionsObject(options)) throw invalidOption(owner, 'trustedDevices', 'an object', options)
  checkOptionKeys(owner, options, OPTIONS, 'trustedDevices')
  const secrets = secretsOption(owner, options.secret)
  const perDevice = refusingLimiter('trustedDevices.perDevice', options.perDevice)
  const maxAgeMs = positiveInteger(
    owner,
    'trustedDevices.maxAgeMs',
    orDefault(options.maxAgeMs, THIRTY_DAYS_MS),
  )
  if (maxAgeMs > MAX_AGE_LIMIT_MS) {
    throw invalidOption(owner, 'trustedDevices.maxAgeMs', `at most 400 days (${MAX_AGE_LIMIT_MS})`, maxAgeMs)
  }
  const cookieName = orDefault(options.cookieName, '__Host-tollbooth-device')
  if (typeof cookieName !== 'string' || !COOKIE_NAME.test(cookieName)) {
    throw invalidOption(owner, 'trustedDevices.cookieName', 'a cookie name (an RFC 9110 token)', cookieName)
  }
  const { token } = options
  if (token !== undefined && typeof token !== 'function') {
    throw invalidOption(owner, 'trustedDevices.token', 'a function', token)
  }
  const readToken = token ?? ((req: Req) => cookieValue(req.headers.cookie, cookieName))
  const signing = secrets[0] as Buffer
  const cookieAttributes = `; Max-Age=${Math.floor(maxAgeMs / 1000)}; Path=/; HttpOnly; Secure; SameSite=Strict`

  return {
    perDevice,
    async deviceOf(req, account) {
      const presented = await readToken(req)
      if (typeof presented !== 'string' || presented.length > MAX_TOKEN_LENGTH) return undefined
      const parts = TOKEN.exec(presented)
      if (parts === null) return undefined
      const [, device = '', expiry = '', mac = ''] = parts
      if (Number(expiry) <= Date.now()) return undefined
      // The text is compared, not what it decodes to: base64url decoding drops the 2 low bits of the 43rd
      // character, so 3 other spellings of every MAC decode to it. TOKEN fixes the length at 43 on both sides.
      const given = Buffer.from(mac, 'latin1')
      for (const secret of secrets) {
        const expected = Buffer.from(sign(secret, device, expiry, account).toString('base64url'), 'latin1')
        if (timingSafeEqual(given, expected)) return device
      }
      return undefined
    },
    issue(account) {
      const device = randomBytes(16).toString('base64url')
      const expiry = String(Date.now() + maxAgeMs)
      const issued = `${VERSION}.${device}.${expiry}.${sign(signing, device, expiry, account).toString('base64url')}`
      return { token: issued, cookie: `${cookieName}=${issued}${cookieAttributes}` }
    },
  }
}

function sign(secret: Buffer, device: string, expiry: string, account: string): Buffer {
  // The account goes last: the fields before it hold no ':', so no two inputs share a message.
  return createHmac('sha256', secret)
    .update(`tollbooth-device:${VERSION}:${device}:${expiry}:${account}`)
    .digest()
}

function secretsOption(owner: string, value: unknown): Buffer[] {
  const list = Array.isArray(value) ? value : [value]
  if (list.length === 0)
    throw invalidOption(owner, 'trustedDevices.secret', 'a secret or a non-empty list', value)
  return list.map((secret: unknown) => {
    const bytes = typeof secret === 'string' ? Buffer.from(secret, 'utf8') : secret
    if (!Buffer.isBuffer(bytes) || bytes.length < MIN_SECRET_BYTES) {
      throw invalidOption(
        owner,
        'trustedDevices.secret',
        `a string or Buffer of at least ${MIN_SECRET_BYTES} bytes`,
        // Never the secret itself in a message.
        typeof secret === 'string' ? `${secret.length} characters` : secret,
      )
    }
    return bytes
  })
}

/** The value of the cookie `name` in a `Cookie` header (Node joins several into one, with '; '). */
function cookieValue(header: string | undefined, name: string): string | undefined {
  if (header === undefined) return undefined
  for (const pair of header.split(';')) {
    const eq = pair.indexOf('=')
    if (eq !== -1 && pair.slice(0, eq).trim() === name) return pair.slice(eq + 1).trim()
  }
  return undefined
}
