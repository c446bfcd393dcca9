/**
 * The token bucket's and the leaky bucket's script: the Lua twin of `algorithms/gcra.ts`. The key holds the theoretical arrival time (TAT, µs).
 * a1: emission interval µs · a2: burst tolerance µs · a3: µs the cost adds (consume, debit) or gives back (refund).
 *
 * The key expires at the end of the second (of the server's clock) its TAT falls in, not at the TAT itself: a TAT
 * at or before now reads as a full bucket, so a key that outlives its TAT by less than a second changes no decision,
 * while a TTL to the TAT itself, counted by Redis from its own reading of the clock, can end a fraction of a
 * millisecond before it. A key written by an earlier version (a rolling upgrade) expires at its TAT and is read the
 * same. The helpers are top-level functions, not closures made on every call.
 */
export const gcraFunction = `
local GCRA_EXPIRY_STEP_US = 1000000

local function gcra_expiry_step(tat)
  return math.ceil(tat / GCRA_EXPIRY_STEP_US)
end

-- write(key, now, next_tat): the key expires at the end of the step its TAT falls in
local function gcra_save(key, now, next_tat)
  redis.call('SET', key, next_tat, 'PX', to_ms(gcra_expiry_step(next_tat) * GCRA_EXPIRY_STEP_US - now))
end

local function gcra_delete(key)
  redis.call('DEL', key)
end

local function gcra_peek_reply(b, now, emission, burst)
  local wait = b + emission - now - burst
  return reply(wait <= 0, math.floor((burst - (b - now)) / emission), b - now, wait, 0)
end

local function gcra(key, op, now, a1, a2, a3)
  local emission = tonumber(a1)
  local burst = tonumber(a2)
  local amount = tonumber(a3)
  local tat = tonumber(redis.call('GET', key))
  local base = now
  if tat ~= nil and tat > now then base = tat end

  if op == 'consume' then
    local next_tat = base + amount
    if next_tat - now > burst then
      -- denied: nothing written, so a denied request consumes nothing
      return reply(false, math.floor((burst - (base - now)) / emission), base - now, next_tat - now - burst, 0)
    end
    return reply(true, math.floor((burst - (next_tat - now)) / emission), next_tat - now, 0, base - now), gcra_save, next_tat
  elseif op == 'debit' then
    -- taken whatever is left: at most one burst of debt past a full bucket; allowed when all of it was taken
    local wanted = base + amount
    local cap = now + 2 * burst
    local next_tat = math.min(wanted, cap)
    return reply(wanted <= cap, math.floor((burst - (next_tat - now)) / emission), next_tat - now, next_tat + emission - now - burst, 0), gcra_save, next_tat
  elseif op == 'peek' then
    return gcra_peek_reply(base, now, emission, burst)
  elseif op == 'refund' then
    if tat == nil or tat <= now then return gcra_peek_reply(now, now, emission, burst) end
    local next_tat = tat - amount
    if next_tat <= now then
      -- a TAT at or before now is a full bucket: delete rather than store credit beyond capacity
      return gcra_peek_reply(now, now, emission, burst), gcra_delete
    end
    return gcra_peek_reply(next_tat, now, emission, burst), gcra_save, next_tat
  end
  error('tollbooth gcra: unknown op ' .. tostring(op))
end
`
