/**
 * The token bucket's and the leaky bucket's script: the Lua twin of `algorithms/gcra.ts`. The key holds the theoretical arrival time (TAT, µs).
 * a1: emission interval µs · a2: burst tolerance µs · a3: µs the cost adds (consume, debit) or gives back (refund).
 */
export const gcraFunction = `
local function gcra(key, op, now, a1, a2, a3)
  local emission = tonumber(a1)
  local burst = tonumber(a2)
  local amount = tonumber(a3)
  local tat = tonumber(redis.call('GET', key))
  local base = now
  if tat ~= nil and tat > now then base = tat end

  local function peek_reply(b)
    local wait = b + emission - now - burst
    return reply(wait <= 0, math.floor((burst - (b - now)) / emission), b - now, wait, 0)
  end
  local function save(value)
    return function() redis.call('SET', key, value, 'PX', to_ms(value - now)) end
  end

  if op == 'consume' then
    local next_tat = base + amount
    if next_tat - now > burst then
      -- denied: nothing written, so a denied request consumes nothing
      return reply(false, math.floor((burst - (base - now)) / emission), base - now, next_tat - now - burst, 0)
    end
    return reply(true, math.floor((burst - (next_tat - now)) / emission), next_tat - now, 0, base - now), save(next_tat)
  elseif op == 'debit' then
    -- taken whatever is left: at most one burst of debt past a full bucket; allowed when all of it was taken
    local wanted = base + amount
    local cap = now + 2 * burst
    local next_tat = math.min(wanted, cap)
    return reply(wanted <= cap, math.floor((burst - (next_tat - now)) / emission), next_tat - now, next_tat + emission - now - burst, 0), save(next_tat)
  elseif op == 'peek' then
    return peek_reply(base)
  elseif op == 'refund' then
    if tat == nil or tat <= now then return peek_reply(now) end
    local next_tat = tat - amount
    if next_tat <= now then
      -- a TAT at or before now is a full bucket: delete rather than store credit beyond capacity
      return peek_reply(now), function() redis.call('DEL', key) end
    end
    return peek_reply(next_tat), save(next_tat)
  end
  error('tollbooth gcra: unknown op ' .. tostring(op))
end
`
