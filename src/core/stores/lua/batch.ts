import { concurrencyFunction } from './concurrency.js'
import { fixedWindowFunction } from './fixedWindow.js'
import { gcraFunction } from './gcra.js'
import { helpers } from './prelude.js'
import { slidingWindowFunction } from './slidingWindow.js'

/**
 * Several independent decisions in one script call: the requests a process makes within one turn of the event loop
 * travel together, which saves a command, a reply and a socket write per decision on both sides. Each step is
 * applied in order with its write made at once, so two requests for the same key see each other exactly as two
 * separate calls would. The requests of one limiter and cost share one spec (algorithm, op and 3 args), sent once per
 * call: each request sends only its key and the number of its spec.
 * KEYS[i]: the key of request i · ARGV[1]: time in µs, or 0 to read the server clock · ARGV[2]: the deadline in the
 * server's µs, or 0 · ARGV[3]: the number of specs S · ARGV[4 + 5(s-1) .. 8 + 5(s-1)]: spec s's algorithm
 * (`gcra`, `fixedWindow`, `slidingWindow`, `concurrency`), op and 3 args · ARGV[4 + 5S + (i-1)]: request i's spec.
 * Returns the replies, flattened (5 integers each), then the time; past the deadline, `-2` and the time, having
 * changed nothing.
 */
export const batchLua = `${helpers}
${gcraFunction}
${fixedWindowFunction}
${slidingWindowFunction}
${concurrencyFunction}
local algorithms = {
  gcra = gcra, fixedWindow = fixed_window, slidingWindow = sliding_window, concurrency = concurrency
}
local now = clock(ARGV[1])
if past_deadline(now, ARGV[2]) then return { -2, now } end
local first_request = 4 + 5 * tonumber(ARGV[3])
local flat = {}
for i = 1, #KEYS do
  local at = 4 + 5 * (tonumber(ARGV[first_request + i - 1]) - 1)
  local key = KEYS[i]
  local result, write, w1, w2 = algorithms[ARGV[at]](key, ARGV[at + 1], now, ARGV[at + 2], ARGV[at + 3], ARGV[at + 4])
  if write then write(key, now, w1, w2) end
  local at_reply = 5 * (i - 1)
  for j = 1, 5 do flat[at_reply + j] = result[j] end
end
flat[5 * #KEYS + 1] = now
return flat
`
