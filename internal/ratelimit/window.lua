-- window.lua: one request against a sliding window of one second, estimated from two fixed
-- seconds (see ratelimit.Windows). Both keys carry the limited key's hash tag.
--
-- KEYS[1] the current second's counter, KEYS[2] the previous second's
-- ARGV[1] the limit per second, ARGV[2] the share of the current second elapsed (0 to 1)
-- Returns {allowed (1 or 0), previous count, current count before this request}.

local limit, elapsed = tonumber(ARGV[1]), tonumber(ARGV[2])
if not limit or limit < 1 or not elapsed or elapsed < 0 or elapsed > 1 then
  return redis.error_reply('window.lua: bad arguments')
end
local curr = tonumber(redis.call('GET', KEYS[1]) or '0')
local prev = tonumber(redis.call('GET', KEYS[2]) or '0')
if prev * (1 - elapsed) + curr >= limit then
  return {0, prev, curr}
end
redis.call('INCR', KEYS[1])
redis.call('EXPIRE', KEYS[1], 3)
return {1, prev, curr}
