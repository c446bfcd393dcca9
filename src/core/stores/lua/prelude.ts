/**
 * Shared head of every script. Every script takes KEYS[1] = the key, ARGV[1] = the operation, ARGV[2] = the time in
 * microseconds or 0, and the algorithm's args from ARGV[3] on. Time is read from the server (`TIME`) so instances with
 * skewed clocks agree; a non-zero ARGV[2] pins it, which only the tests comparing Lua with the TypeScript twin do.
 *
 * Numbers are handed to `redis.call` as Lua numbers, never through `tostring` (which keeps 14 digits and would
 * truncate microsecond timestamps); replies are integers because Redis truncates Lua numbers to integers.
 */
export const prelude = `
local key = KEYS[1]
local op = ARGV[1]
local now = tonumber(ARGV[2])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function to_ms(us)
  if us <= 0 then return 0 end
  return math.ceil(us / 1000)
end

local function reply(allowed, remaining, reset_us, retry_us, delay_us)
  return { allowed and 1 or 0, math.max(0, remaining), to_ms(reset_us), to_ms(retry_us), to_ms(delay_us) }
end
`
