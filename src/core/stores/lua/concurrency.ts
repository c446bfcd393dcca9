/**
 * Lua twin of `algorithms/concurrency.ts`. The key is a sorted set: member = lease id, score = expiry (µs).
 * a1: lease duration µs · a2: max concurrent leases · a3: lease id.
 * Unlike the rate algorithms it writes as it goes (expired leases are dropped before counting) and returns no write:
 * leases are never part of an all-or-nothing `allOf`.
 */
export const concurrencyFunction = `
local function concurrency(key, op, now, a1, a2, a3)
  local lease_us = tonumber(a1)
  local max = tonumber(a2)
  local lease_id = a3
  -- expired leases (their holder died or stopped renewing) no longer count
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)

  local function leases_reply(ok)
    local size = redis.call('ZCARD', key)
    if size == 0 then
      redis.call('DEL', key)
      return reply(ok, max, 0, 0, 0)
    end
    local latest = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
    redis.call('PEXPIRE', key, to_ms(latest - now))
    local retry = 0
    if not ok and size >= max then
      retry = tonumber(redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2]) - now
    end
    return reply(ok, max - size, latest - now, retry, 0)
  end

  if op == 'acquire' then
    if redis.call('ZCARD', key) >= max then return leases_reply(false) end
    redis.call('ZADD', key, now + lease_us, lease_id)
    return leases_reply(true)
  elseif op == 'release' then
    return leases_reply(redis.call('ZREM', key, lease_id) == 1)
  elseif op == 'renew' then
    -- a lease that is gone takes a free slot again
    local held = redis.call('ZSCORE', key, lease_id) ~= false or redis.call('ZCARD', key) < max
    if held then redis.call('ZADD', key, now + lease_us, lease_id) end
    return leases_reply(held)
  elseif op == 'peek' then
    return leases_reply(redis.call('ZCARD', key) < max)
  end
  error('tollbooth concurrency: unknown op ' .. tostring(op))
end
`
