import type { IncomingMessage } from 'node:http'
import { constants as http2Constants, type ServerHttp2Stream } from 'node:http2'

/**
 * What the HTTP guards need to know of a request's body, and how they count it: whether one follows the head,
 * whether something read it already, its declared length, and a count of its bytes as Node's parser hands them over.
 */

export type BodyState = 'reading' | 'complete' | 'cut' | 'stopped'

export interface CountedBody {
  readonly received: number
  readonly state: BodyState
  /** Stops counting and passing on what comes next (a refused upload or a request gone). */
  stop(): void
}

/**
 * Counts the body of `req` as Node's HTTP parser hands it over (`req.push`), before any reader sees it: the count
 * is the same whether the route reads through 'data', `read()`, `pipe` or a body parser, and counting reads nothing
 * (a 'data' listener would switch the stream to flowing mode and race the route for the bytes). Past `maxBytes`
 * nothing more is passed on: not the chunk that went past, not the end of the body.
 */
export function countBody(
  req: IncomingMessage,
  maxBytes: number,
  on: { ended(): void; cut(): void },
): CountedBody {
  // What arrived before this middleware ran, still in the stream's buffer.
  let received = req.readableLength
  let state: BodyState = 'reading'
  const push = req.push
  const counted: CountedBody = {
    get received() {
      return received
    },
    get state() {
      return state
    },
    stop() {
      if (state === 'reading') state = 'stopped'
    },
  }
  req.push = function countingPush(this: IncomingMessage, chunk: unknown, encoding?: BufferEncoding) {
    // Refused: nobody reads this request, and its end may go through (HTTP/2's compatibility layer resumes a request
    // it ends, and asserts it has ended).
    if (state === 'stopped' && chunk === null) return push.call(this, chunk, encoding)
    if (state !== 'reading') {
      // Cut off or refused: read and drop what the client still sends until the connection closes, so that its
      // unread bytes do not turn the close into a reset that could lose the answer. Not the end of a body cut off:
      // the route sees an error, never a clean end.
      return true
    }
    if (chunk === null) {
      state = 'complete'
      const more = push.call(this, chunk, encoding)
      on.ended()
      return more
    }
    received += typeof chunk === 'string' ? Buffer.byteLength(chunk, encoding) : (chunk as Uint8Array).length
    if (received > maxBytes) {
      state = 'cut'
      on.cut()
      return true
    }
    return push.call(this, chunk, encoding)
  }
  if (received > maxBytes) {
    state = 'cut'
    // After the caller has its handlers in place.
    queueMicrotask(() => on.cut())
  } else if (req.complete) {
    state = 'complete'
    queueMicrotask(() => on.ended())
  }
  return counted
}

/** Whether `req` is a request of node:http2's compatibility API (`Http2ServerRequest`). */
export function isHttp2(req: IncomingMessage): boolean {
  return req.httpVersionMajor === 2
}

/**
 * Closes the HTTP/2 stream of `req` once the answer is out (RST_STREAM with NO_ERROR, RFC 9113 §8.1: the client
 * stops sending a body the server will not read), or at once when the answer is out already.
 */
export function closeStreamAfterAnswer(req: IncomingMessage): void {
  const stream = (req as IncomingMessage & { stream?: ServerHttp2Stream }).stream
  if (stream === undefined || stream.closed || stream.destroyed) return
  const close = () => {
    if (!stream.closed && !stream.destroyed) stream.close(http2Constants.NGHTTP2_NO_ERROR)
  }
  if (stream.writableFinished) close()
  else stream.once('finish', close)
}

/**
 * The declared `Content-Length`, when it frames the body (Node's parser has refused malformed and conflicting ones).
 * With a `Transfer-Encoding` the chunked framing wins (RFC 9112 §6.3; Node's `insecureHTTPParser` lets both through):
 * the length says nothing of what will arrive.
 */
export function declaredLength(req: IncomingMessage): number | undefined {
  if (req.headers['transfer-encoding'] !== undefined) return undefined
  const header = req.headers['content-length']
  if (header === undefined) return undefined
  const length = Number(header)
  return Number.isSafeInteger(length) && length >= 0 ? length : undefined
}

/** Whether something read the request's body before the guard (Express's body parsers set `_body` or `body`). */
export function bodyRead(req: IncomingMessage): boolean {
  const parsed = req as IncomingMessage & { _body?: unknown; body?: unknown }
  return (
    req.readableEnded || req.readableFlowing === true || parsed._body === true || parsed.body !== undefined
  )
}

/**
 * Whether a body follows the head of `req`. HTTP/1.1 says so with transfer-encoding or content-length; HTTP/2 frames a
 * body without either, and its stream tells whether the HEADERS frame ended it (RFC 9113 §8.1).
 */
export function hasBody(req: IncomingMessage): boolean {
  if (req.headers['transfer-encoding'] !== undefined) return true
  const length = req.headers['content-length']
  if (length !== undefined) return length !== '0'
  if (req.httpVersionMajor !== 2) return false
  const stream = (req as IncomingMessage & { stream?: { endAfterHeaders?: unknown } }).stream
  return stream?.endAfterHeaders !== true
}

/**
 * Whether `req` carries a body that nothing has read: a body parser after the guard (or none) would let the route see
 * what the guard could not count.
 */
export function unreadBody(req: IncomingMessage): boolean {
  return hasBody(req) && !bodyRead(req)
}
