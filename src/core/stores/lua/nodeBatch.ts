import { concurrencyFunction } from './concurrency.js'
import { fixedWindowFunction } from './fixedWindow.js'
import { gcraFunction } from './gcra.js'
import { helpers } from './prelude.js'
import { slidingWindowFunction } from './slidingWindow.js'

/**
 * The decisions of one turn for one Redis Cluster node, whatever their slots, in one script call: what `batch` is
 * for a standalone Redis. Keys of different identities hash to different slots, and declared keys (KEYS) must share
 * one slot, so only KEYS[1] is declared; the client sends the call on the node's own connection, and every request's
 * own key is in ARGV.
 *
 * Redis itself refuses a script any key of a slot the node does not serve, or of a slot being migrated away whose
 * key has left or was just deleted ("Script attempted to access a non local key"). So each request runs under
 * `pcall`: a request whose key is not here is answered `-1`, for the client to send again on its own (with its key
 * declared, so that Redis and ioredis redirect it). Its reads come before its writes, so nothing of a request
 * answered `-1` is applied (but the concurrency step's removal of expired leases, which changes no decision).
 * Requests are applied in order, each write made at once, as in `batch`.
 *
 * Specs are shared as in `batch`.
 * KEYS[1]: the key of the first request (routing only) · ARGV[1]: time in µs, or 0 to read the server clock ·
 * ARGV[2]: the deadline in the server's µs, or 0 · ARGV[3]: the number of requests · ARGV[4]: the number of specs
 * S · ARGV[5 + 5(s-1) .. 9 + 5(s-1)]: spec s's algorithm, op and 3 args · ARGV[5 + 5S + 2(i-1)] and the next:
 * request i's key and spec.
 * Returns the replies, flattened (5 integers each; `-1, 0, 0, 0, 0` for a request whose key is not on this node),
 * then the time; past the deadline, `-2` and the time, having changed nothing.
 */
export const nodeBatchLua = `${helpers}
${gcraFunction}
${fixedWindowFunction}
${slidingWindowFunction}
${concurrencyFunction}
local algorithms = {
  gcra = gcra, fixedWindow = fixed_window, slidingWindow = sliding_window, concurrency = concurrency
}
local now = clock(ARGV[1])
if past_deadline(now, ARGV[2]) then return { -2, now } end
local count = tonumber(ARGV[3])
local first_request = 5 + 5 * tonumber(ARGV[4])
local flat = {}
for i = 1, count do
  local key = ARGV[first_request + 2 * (i - 1)]
  local at = 5 + 5 * (tonumber(ARGV[first_request + 2 * (i - 1) + 1]) - 1)
  local ok, result, write, w1, w2 = pcall(algorithms[ARGV[at]], key, ARGV[at + 1], now, ARGV[at + 2], ARGV[at + 3], ARGV[at + 4])
  if ok and write then ok = pcall(write, key, now, w1, w2) end
  local at_reply = 5 * (i - 1)
  if ok then
    for j = 1, 5 do flat[at_reply + j] = result[j] end
  else
    flat[at_reply + 1] = -1
    for j = 2, 5 do flat[at_reply + j] = 0 end
  end
end
flat[5 * count + 1] = now
return flat
`
