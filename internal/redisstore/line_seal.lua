-- Closes a line's early crowd (joins now queue at the tail) and, once the drainer has written the
-- draw's places (ARGV[1] = 1), marks it drawn.
-- KEYS: 1 state ({line:ID}: see keys.go)
-- Returns {early, drawn}.
redis.call('HSET', KEYS[1], 'sealed', '1')
if ARGV[1] == '1' then redis.call('HSET', KEYS[1], 'drawn', '1') end
local st = redis.call('HMGET', KEYS[1], 'early', 'drawn')
return {tonumber(st[1]) or 0, st[2] == '1' and 1 or 0}
