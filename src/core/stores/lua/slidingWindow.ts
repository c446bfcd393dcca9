import { prelude } from './prelude.js'

/**
 * Lua twin of `algorithms/slidingWindow.ts`. The key is a hash { w = window index, c = current count, p = previous
 * window's count }. The arithmetic is written in the same order as the TypeScript so both round alike.
 * ARGV[3]: window µs · ARGV[4]: limit · ARGV[5]: amount to consume or refund (1 for peek).
 */
export const slidingWindowLua = `${prelude}
local window = tonumber(ARGV[3])
local limit = tonumber(ARGV[4])
local amount = tonumber(ARGV[5])
local index = math.floor(now / window)
local elapsed = now - index * window
local stored = redis.call('HMGET', key, 'w', 'c', 'p')
local stored_index = tonumber(stored[1])
local current = 0
local previous = 0
if stored_index == index then
  current = tonumber(stored[2])
  previous = tonumber(stored[3])
elseif stored_index == index - 1 then
  previous = tonumber(stored[2])
end
local estimate = previous * (1 - elapsed / window) + current
local ttl = to_ms(2 * window - elapsed)

local function reset_after(c, p)
  if c > 0 then return 2 * window - elapsed end
  if p > 0 then return window - elapsed end
  return 0
end

local function retry_after(c, p, a)
  if a > limit then return 2 * window - elapsed end
  local room = limit - c - a
  if room >= 0 and p > 0 then return window * (1 - room / p) - elapsed end
  return window + window * (1 - (limit - a) / c) - elapsed
end

local function estimate_reply(e, c, p)
  local allowed = e + 1 <= limit
  local retry = 0
  if not allowed then retry = retry_after(c, p, 1) end
  return reply(allowed, math.floor(limit - e), reset_after(c, p), retry, 0)
end

local function save(c, p)
  redis.call('HSET', key, 'w', index, 'c', c, 'p', p)
  redis.call('PEXPIRE', key, ttl)
end

if op == 'consume' then
  if estimate + amount > limit then
    -- rejected before incrementing
    local retry = retry_after(current, previous, amount)
    return reply(false, math.floor(limit - estimate), reset_after(current, previous), retry, 0)
  end
  save(current + amount, previous)
  return reply(true, math.floor(limit - estimate - amount), 2 * window - elapsed, 0, 0)
elseif op == 'peek' then
  return estimate_reply(estimate, current, previous)
elseif op == 'refund' then
  if current == 0 then return estimate_reply(estimate, current, previous) end
  local next_count = math.max(0, current - amount)
  local result = estimate_reply(estimate - (current - next_count), next_count, previous)
  if next_count == 0 and previous == 0 then
    redis.call('DEL', key)
  else
    save(next_count, previous)
  end
  return result
end
return redis.error_reply('tollbooth slidingWindow: unknown op ' .. tostring(op))
`
