/**
 * Helpers shared by every script. Numbers are handed to `redis.call` as Lua numbers, never through `tostring`
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

local function to_ms(us)
  if us <= 0 then return 0 end
  return math.ceil(us / 1000)
end

local function reply(allowed, remaining, reset_us, retry_us, delay_us)
  return { allowed and 1 or 0, math.max(0, remaining), to_ms(reset_us), to_ms(retry_us), to_ms(delay_us) }
end
`

/**
 * A script running one step of one rate algorithm on one key. The algorithm is a Lua function
 * `(key, op, now, a1, a2, a3) -> reply, write` that reads but does not write; `write`, when present, is the write
 * the step decided on.
 * KEYS[1]: the key · ARGV[1]: op · ARGV[2]: time in µs, or 0 to read the server clock · ARGV[3..5]: the algorithm's args.
 */
export function singleStepScript(functionName: string, definition: string): string {
  return `${helpers}
${definition}
local result, write = ${functionName}(KEYS[1], ARGV[1], clock(ARGV[2]), ARGV[3], ARGV[4], ARGV[5])
if write then write() end
return result
`
}
