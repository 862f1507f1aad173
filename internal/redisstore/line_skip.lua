-- Answers every placed ticket from the head to the tail, if the head is still at ARGV[1] and the
-- line is drawn: the gate has nothing left for them.
-- KEYS: 1 state ({line:ID}: see keys.go)
-- ARGV: 1 from
-- Returns the head.
local st = redis.call('HMGET', KEYS[1], 'drawn', 'early', 'tail', 'head')
local head = tonumber(st[4]) or 0
if st[1] ~= '1' or head ~= tonumber(ARGV[1]) then return head end
head = (tonumber(st[2]) or 0) + (tonumber(st[3]) or 0)
redis.call('HSET', KEYS[1], 'head', head)
return head
