import { prelude } from './prelude.js'

/**
 * Lua twin of `algorithms/gcra.ts`. The key holds the theoretical arrival time (TAT, µs).
 * ARGV[3]: emission interval µs · ARGV[4]: burst tolerance µs · ARGV[5]: µs the cost adds (consume) or gives back (refund).
 */
export const gcraLua = `${prelude}
local emission = tonumber(ARGV[3])
local burst = tonumber(ARGV[4])
local amount = tonumber(ARGV[5])
local tat = tonumber(redis.call('GET', key))
local base = now
if tat ~= nil and tat > now then base = tat end

local function peek_reply(b)
  local wait = b + emission - now - burst
  return reply(wait <= 0, math.floor((burst - (b - now)) / emission), b - now, wait, 0)
end

if op == 'consume' then
  local next_tat = base + amount
  if next_tat - now > burst then
    -- denied: nothing written, so a denied request consumes nothing
    return reply(false, math.floor((burst - (base - now)) / emission), base - now, next_tat - now - burst, 0)
  end
  redis.call('SET', key, next_tat, 'PX', to_ms(next_tat - now))
  return reply(true, math.floor((burst - (next_tat - now)) / emission), next_tat - now, 0, base - now)
elseif op == 'peek' then
  return peek_reply(base)
elseif op == 'refund' then
  if tat == nil or tat <= now then return peek_reply(now) end
  local next_tat = tat - amount
  if next_tat <= now then
    -- a TAT at or before now is a full bucket: delete rather than store credit beyond capacity
    redis.call('DEL', key)
    return peek_reply(now)
  end
  redis.call('SET', key, next_tat, 'PX', to_ms(next_tat - now))
  return peek_reply(next_tat)
end
return redis.error_reply('tollbooth gcra: unknown op ' .. tostring(op))
`
