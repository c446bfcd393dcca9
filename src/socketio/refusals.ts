import type { SocketIoRefusal, SocketIoRefusalCode } from '../client/socketIoRefusals.js'

/** A wait in ms as the whole seconds a refusal carries: at least 1, so a client never comes back at once. */
export function retryAfterSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000))
}

/** A refusal for the wire; `retryAfterMs` undefined when trying again cannot help. */
export function refusal(code: SocketIoRefusalCode, message: string, retryAfterMs?: number): SocketIoRefusal {
  return retryAfterMs === undefined
    ? { code, message }
    : { code, message, retryAfter: retryAfterSeconds(retryAfterMs) }
}

/** The error a namespace middleware refuses a connection with: the client's `connect_error`, `data` the refusal. */
export function connectError(refused: SocketIoRefusal): Error & { data: SocketIoRefusal } {
  return Object.assign(new Error(refused.message), { data: refused })
}
