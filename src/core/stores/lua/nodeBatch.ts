import { concurrencyFunction } from './concurrency.js'
import { fixedWindowFunction } from './fixedWindow.js'
import { gcraFunction } from './gcra.js'
import { helpers } from './prelude.js'
import { slidingWindowFunction } from './slidingWindow.js'

/**
 * The decisions of one turn for one Redis Cluster node, whatever their slots, in one script call: what `batch` is
 * for a standalone Redis. Keys of different identities hash to different slots, and declared keys (KEYS) must share
 * one slot, so only KEYS[1] is declared, to route the call to the node holding it; every request's own key is in
 * ARGV.
 *
 * Redis itself refuses a script any key of a slot the node does not serve, or of a slot being migrated away whose
 * key has left ("Script attempted to access a non local key"). So every key is first looked up with `redis.pcall`:
 * a request whose key is not here is left untouched and answered `-1`, for the client to send again on its own
 * (with its key declared, so that Redis and ioredis redirect it). The look-ups come before any write, so nothing of a
 * request answered `-1` is ever applied. Requests are applied in order, each write made at once, as in `batch`.
 *
 * KEYS[1]: the key of the first request (routing only) · ARGV[1]: time in µs, or 0 to read the server clock ·
 * ARGV[2]: the number of requests · ARGV[3 + 6(i-1) .. 8 + 6(i-1)]: request i's key, algorithm, op and 3 args.
 * Returns the replies, flattened (5 integers each; `-1, 0, 0, 0, 0` for a request whose key is not on this node).
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
local count = tonumber(ARGV[2])
local here = {}
for i = 1, count do
  -- an error reply (a table with err) means the key is not served here
  here[i] = type(redis.pcall('EXISTS', ARGV[3 + (i - 1) * 6])) ~= 'table'
end
local flat = {}
for i = 1, count do
  local at = 3 + (i - 1) * 6
  if here[i] then
    local result, write = algorithms[ARGV[at + 1]](ARGV[at], ARGV[at + 2], now, ARGV[at + 3], ARGV[at + 4], ARGV[at + 5])
    if write then write() end
    for j = 1, 5 do flat[#flat + 1] = result[j] end
  else
    flat[#flat + 1] = -1
    for _ = 2, 5 do flat[#flat + 1] = 0 end
  end
end
return flat
`
