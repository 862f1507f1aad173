-- release.lua: give back the unit of a cancelled grab, once. The grab's record in the grabs hash
-- is the proof that it holds a unit here: deleting it succeeds for exactly one caller, however
-- many nodes' sweepers race, and only that caller restocks.
--
-- KEYS[1] stock, KEYS[2] shares, KEYS[3] held, KEYS[4] grabs (see keys.go)
-- ARGV: 1 token, 2 user, 3 share index, 4 amount (cents), 5 kind, 6 "unit" to give back only the
-- unit (a grab that took it here from another shard, whose user's hold is on that home shard:
-- home.lua "release" gives that back), anything else to give back the hold too
-- Returns 1 if this call restocked, 0 if the grab holds nothing here (released before, or
-- unknown to this cache), -1 if the shard is not loaded (the cache lost it: the restock waits
-- for its rebuild, which may have read the unit as held), -9 on bad arguments.

local token, user, kind = ARGV[1], ARGV[2], ARGV[5]
if token == '' or user == '' or not tonumber(ARGV[3]) or not tonumber(ARGV[4])
    or (kind ~= 'item' and kind ~= 'redpacket') then
  return -9
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
if redis.call('HDEL', KEYS[4], token) == 0 then
  return 0
end
redis.call('INCR', KEYS[1])
if kind == 'redpacket' then
  redis.call('RPUSH', KEYS[2], ARGV[3] .. ':' .. ARGV[4])
end
if ARGV[6] ~= 'unit' and redis.call('HINCRBY', KEYS[3], user, -1) <= 0 then
  redis.call('HDEL', KEYS[3], user)
end
return 1
