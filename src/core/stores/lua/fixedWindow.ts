/**
 * Lua twin of `algorithms/fixedWindow.ts`. The key is a hash { w = window index, c = count } expiring with its window
 * (with the next one, while it holds a debt above the limit that carries into it).
 * a1: window µs · a2: limit · a3: amount to consume, debit or refund (1 for peek).
 */
export const fixedWindowFunction = `
local function fixed_window(key, op, now, a1, a2, a3)
  local window = tonumber(a1)
  local limit = tonumber(a2)
  local amount = tonumber(a3)
  local index = math.floor(now / window)
  local until_end = (index + 1) * window - now
  local stored = redis.call('HMGET', key, 'w', 'c')
  local stored_index = tonumber(stored[1])
  local count = 0
  if stored_index == index then
    count = tonumber(stored[2])
  elseif stored_index == index - 1 and tonumber(stored[2]) > limit then
    -- the previous window's debt carries over
    count = tonumber(stored[2]) - limit
  end

  local function lifetime(c)
    if c > limit then return until_end + window end
    return until_end
  end
  local function retry_after(c, a)
    if math.max(0, c - limit) + a > limit then return until_end + window end
    return until_end
  end
  local function count_reply(c)
    local allowed = c + 1 <= limit
    local reset = 0
    if c > 0 then reset = lifetime(c) end
    local retry = 0
    if not allowed then retry = retry_after(c, 1) end
    return reply(allowed, math.floor(limit - c), reset, retry, 0)
  end
  local function save(c)
    return function()
      redis.call('HSET', key, 'w', index, 'c', c)
      redis.call('PEXPIRE', key, to_ms(lifetime(c)))
    end
  end

  if op == 'consume' then
    local next_count = count + amount
    if next_count > limit then
      return reply(false, math.floor(limit - count), lifetime(count), retry_after(count, amount), 0)
    end
    return reply(true, math.floor(limit - next_count), until_end, 0, 0), save(next_count)
  elseif op == 'debit' then
    -- taken whatever is left: at most one limit of debt; allowed when all of it was taken
    local next_count = math.min(count + amount, 2 * limit)
    local retry = 0
    if next_count + 1 > limit then retry = retry_after(next_count, 1) end
    return reply(count + amount <= 2 * limit, math.floor(limit - next_count), lifetime(next_count), retry, 0), save(next_count)
  elseif op == 'peek' then
    return count_reply(count)
  elseif op == 'refund' then
    if count == 0 then return count_reply(0) end
    local next_count = math.max(0, count - amount)
    if next_count == 0 then return count_reply(0), function() redis.call('DEL', key) end end
    return count_reply(next_count), save(next_count)
  end
  error('tollbooth fixedWindow: unknown op ' .. tostring(op))
end
`
