import { prelude } from './prelude.js'

/**
 * Lua twin of `algorithms/fixedWindow.ts`. The key is a hash { w = window index, c = count } expiring with its window.
 * ARGV[3]: window µs · ARGV[4]: limit · ARGV[5]: amount to consume or refund (1 for peek).
 */
export const fixedWindowLua = `${prelude}
local window = tonumber(ARGV[3])
local limit = tonumber(ARGV[4])
local amount = tonumber(ARGV[5])
local index = math.floor(now / window)
local until_end = (index + 1) * window - now
local stored = redis.call('HMGET', key, 'w', 'c')
local count = 0
if tonumber(stored[1]) == index then count = tonumber(stored[2]) end

local function count_reply(c)
  local allowed = c + 1 <= limit
  local reset = 0
  if c > 0 then reset = until_end end
  local retry = until_end
  if allowed then retry = 0 end
  return reply(allowed, math.floor(limit - c), reset, retry, 0)
end

if op == 'consume' then
  local next_count = count + amount
  if next_count > limit then
    return reply(false, math.floor(limit - count), until_end, until_end, 0)
  end
  redis.call('HSET', key, 'w', index, 'c', next_count)
  redis.call('PEXPIRE', key, to_ms(until_end))
  return reply(true, math.floor(limit - next_count), until_end, 0, 0)
elseif op == 'peek' then
  return count_reply(count)
elseif op == 'refund' then
  if count == 0 then return count_reply(0) end
  local next_count = math.max(0, count - amount)
  if next_count == 0 then
    redis.call('DEL', key)
    return count_reply(0)
  end
  redis.call('HSET', key, 'w', index, 'c', next_count)
  redis.call('PEXPIRE', key, to_ms(until_end))
  return count_reply(next_count)
end
return redis.error_reply('tollbooth fixedWindow: unknown op ' .. tostring(op))
`
