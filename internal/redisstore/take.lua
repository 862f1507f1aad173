-- take.lua: take one unit for a grab whose home shard is out of units, from another shard of the
-- same item (a sharded stock). The grab's buyer record stays on its home shard (grab.lua reserved
-- it there); this shard only gives the unit and carries the grab to the workers. Idempotent by
-- the grab's token: a retried call finds its first answer and takes nothing.
--
-- KEYS[1] stock, KEYS[2] grabs, KEYS[3] stream (see keys.go; this shard's)
-- ARGV: 1 token, 2 user, 3 idempotency key, 4 now (Unix ms), 5 price (cents), 6 activity id,
--   7 the W3C traceparent of the grab's publishing span ("" for none, at most 128 bytes)
-- Record and stream entry format: see keys.go.
-- Returns {code, record}: 0 taken, 1 taken before (the first answer), -1 not loaded, -5 no unit
-- here, -9 bad arguments.

local token, user, key, now, price, activity = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local tp = ARGV[7] or ''
if token == '' or user == '' or not now or not price or activity == '' or #tp > 128 then
  return {-9, ''}
end
local seen = redis.call('HGET', KEYS[2], token)
if seen then
  return {1, seen}
end
local left = redis.call('GET', KEYS[1])
if not left then
  return {-1, ''}
end
if tonumber(left) <= 0 then
  return {-5, ''}
end
redis.call('DECR', KEYS[1])
local record = user .. '\n' .. key .. '\n0\n' .. price .. '\n' .. now
redis.call('HSET', KEYS[2], token, record)
if tp == '' then
  redis.call('XADD', KEYS[3], '*', 'token', token, 'activity', activity, 'user', user, 'key', key,
    'share', 0, 'amount', price, 'at', now)
else
  redis.call('XADD', KEYS[3], '*', 'token', token, 'activity', activity, 'user', user, 'key', key,
    'share', 0, 'amount', price, 'at', now, 'tp', tp)
end
return {0, record}
