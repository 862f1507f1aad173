-- revise.lua: gives one shard of an activity's stock a revision of the activity
-- (sale.Activity.Revision), with the units it adds, once: a shard that holds the revision (or a
-- later one) already is left as it is, so a revision given twice counts once.
--
-- KEYS[1] stock     string: units left on the shard
-- KEYS[2] revision  string: the revision the shard holds (absent: 1)
-- ARGV 1 the revision, 2 the units to add to this shard's stock, 3 "1" to raise the shard to
--   the revision from any older one (a repair, which wrote the units itself), "0" only from the
--   revision before it.
-- Returns 1 given, 0 held already, -1 the shard is not loaded, -2 the shard holds a revision
-- older than the one before (those between come first), -9 bad arguments.

local rev, add, raise = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
if not rev or rev < 1 or not add or add < 0 or (raise ~= '0' and raise ~= '1') then
  return -9
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
local current = tonumber(redis.call('GET', KEYS[2]) or '1')
if current >= rev then
  return 0
end
if raise ~= '1' and current ~= rev - 1 then
  return -2
end
if add > 0 then
  redis.call('INCRBY', KEYS[1], add)
end
redis.call('SET', KEYS[2], rev)
return 1
