/**
 * Helpers shared by every script. Each algorithm is a Lua function `(key, op, now, a1, a2, a3) -> reply, write, w1, w2`;
 * the rate algorithms only read, and return the write they decided on as `write` (a function, called
 * `write(key, now, w1, w2)`), so that `allOf` can check several policies before writing any. Numbers are handed to `redis.call` as Lua numbers, never through `tostring`
 * (which keeps 14 digits and would truncate microsecond timestamps); replies are integers because Redis truncates
 * Lua numbers to integers.
 */
export const helpers = `
-- The time in microseconds: the server's clock, or the one pinned by ARGV (only tests on virtual time pin it),
-- so that instances with skewed clocks agree.
local function clock(pinned)
  local now = tonumber(pinned)
  if now ~= 0 then return now end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- A call whose client has given up on it (its deadline, in this server's time, has passed) must change nothing:
-- its decisions were already answered by the fail policy. It can reach here late from a client's retry or resend,
-- or from the socket of a server that was paused. 0: no deadline.
local function past_deadline(now, not_after)
  local limit = tonumber(not_after)
  return limit ~= 0 and now > limit
end

local function to_ms(us)
  if us <= 0 then return 0 end
  return math.ceil(us / 1000)
end

local function reply(allowed, remaining, reset_us, retry_us, delay_us)
  return { allowed and 1 or 0, math.max(0, remaining), to_ms(reset_us), to_ms(retry_us), to_ms(delay_us) }
end
`
