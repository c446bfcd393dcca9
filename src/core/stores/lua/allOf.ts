import { fixedWindowFunction } from './fixedWindow.js'
import { gcraFunction } from './gcra.js'
import { helpers } from './prelude.js'
import { slidingWindowFunction } from './slidingWindow.js'

/**
 * Consumes from several rate policies of one identity atomically, all or nothing: every policy is checked first,
 * and only when all allow are their writes made. The keys share the identity's hash tag, so on a cluster they live
 * in one slot.
 * KEYS[i]: the key of policy i · ARGV[1]: time in µs, or 0 to read the server clock · ARGV[2]: the deadline in the
 * server's µs, or 0 · ARGV[3 + 4(i-1) .. 6 + 4(i-1)]: policy i's algorithm name (`gcra`, `fixedWindow`,
 * `slidingWindow`) and its 3 args. Returns the replies of all policies, flattened (5 integers each), then the time;
 * past the deadline, `-2` and the time, having changed nothing.
 */
export const allOfLua = `${helpers}
${gcraFunction}
${fixedWindowFunction}
${slidingWindowFunction}
local algorithms = { gcra = gcra, fixedWindow = fixed_window, slidingWindow = sliding_window }
local now = clock(ARGV[1])
if past_deadline(now, ARGV[2]) then return { -2, now } end
local replies = {}
local writes = {}
local all_allowed = true
for i = 1, #KEYS do
  local at = 3 + (i - 1) * 4
  local result, write, w1, w2 = algorithms[ARGV[at]](KEYS[i], 'consume', now, ARGV[at + 1], ARGV[at + 2], ARGV[at + 3])
  replies[i] = result
  writes[i] = { write, w1, w2 }
  if result[1] == 0 then all_allowed = false end
end
if all_allowed then
  for i = 1, #KEYS do
    local write = writes[i]
    if write[1] then write[1](KEYS[i], now, write[2], write[3]) end
  end
end
local flat = {}
for i = 1, #KEYS do
  for j = 1, 5 do flat[#flat + 1] = replies[i][j] end
end
flat[#flat + 1] = now
return flat
`
