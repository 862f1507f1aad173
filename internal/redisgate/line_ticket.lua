-- Reads a ticket and its line's state in one step, so that its place and the head agree.
-- KEYS: 1 tickets, 2 drawn, 3 state (all {line:ID})
-- ARGV: 1 ticket id
-- Returns {record or false, drawn place or false, sealed, drawn, early, tail, head, rate}.
local rec = redis.call('HGET', KEYS[1], ARGV[1])
if not rec then return {false} end
local out = {rec, redis.call('HGET', KEYS[2], ARGV[1])}
local st = redis.call('HMGET', KEYS[3], 'sealed', 'drawn', 'early', 'tail', 'head', 'rate')
for i = 1, 6 do out[#out + 1] = st[i] end
return out
