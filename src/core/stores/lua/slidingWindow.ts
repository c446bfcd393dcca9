/**
 * Lua twin of `algorithms/slidingWindow.ts`. The key is a hash { w = window index, c = current count, p = previous
 * window's count }. The arithmetic is written in the same order as the TypeScript so both round alike.
 * a1: window µs · a2: limit · a3: amount to consume, debit or refund (1 for peek).
 */
export const slidingWindowFunction = `
local function sliding_window(key, op, now, a1, a2, a3)
  local window = tonumber(a1)
  local limit = tonumber(a2)
  local amount = tonumber(a3)
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
  -- the reply's last field: until one unit more than remaining fits (RateLimit t), 0 when nothing is spent
  local function more_after(e, c, p)
    if c == 0 and p == 0 then return 0 end
    local wanted = math.max(0, math.floor(limit - e)) + 1
    if wanted > limit then return 0 end
    return retry_after(c, p, wanted)
  end
  local function estimate_reply(e, c, p)
    local allowed = e + 1 <= limit
    local retry = 0
    if not allowed then retry = retry_after(c, p, 1) end
    return reply(allowed, math.floor(limit - e), reset_after(c, p), retry, more_after(e, c, p))
  end
  local function save(c, p)
    return function()
      redis.call('HSET', key, 'w', index, 'c', c, 'p', p)
      redis.call('PEXPIRE', key, to_ms(2 * window - elapsed))
    end
  end

  if op == 'consume' then
    if estimate + amount > limit then
      -- rejected before incrementing
      local retry = retry_after(current, previous, amount)
      return reply(false, math.floor(limit - estimate), reset_after(current, previous), retry, more_after(estimate, current, previous))
    end
    return reply(true, math.floor(limit - estimate - amount), 2 * window - elapsed, 0, more_after(estimate + amount, current + amount, previous)), save(current + amount, previous)
  elseif op == 'debit' then
    -- taken whatever is left: at most one limit of debt; allowed when all of it was taken
    local taken = math.min(amount, math.max(0, 2 * limit - estimate))
    local next_count = current + taken
    local retry = 0
    if estimate + taken + 1 > limit then retry = retry_after(next_count, previous, 1) end
    return reply(taken == amount, math.floor(limit - estimate - taken), reset_after(next_count, previous), retry, more_after(estimate + taken, next_count, previous)), save(next_count, previous)
  elseif op == 'peek' then
    return estimate_reply(estimate, current, previous)
  elseif op == 'refund' then
    if current == 0 then return estimate_reply(estimate, current, previous) end
    local next_count = math.max(0, current - amount)
    local result = estimate_reply(estimate - (current - next_count), next_count, previous)
    if next_count == 0 and previous == 0 then return result, function() redis.call('DEL', key) end end
    return result, save(next_count, previous)
  end
  error('tollbooth slidingWindow: unknown op ' .. tostring(op))
end
`
