-- Gives an activity's line a revision of the activity: its end, which every join checks from then
-- on, whatever the joiner's copy says. An older revision than the line's changes nothing.
-- KEYS: 1 state ({line:ID}: see keys.go)
-- ARGV: 1 revision, 2 end (ms)
-- Returns 1 if the line took it, 0 if it had it or a later one, -9 on bad arguments.
local rev, ends = tonumber(ARGV[1]), tonumber(ARGV[2])
if not rev or rev < 1 or not ends then
  return -9
end
if (tonumber(redis.call('HGET', KEYS[1], 'revision') or '0')) >= rev then
  return 0
end
redis.call('HSET', KEYS[1], 'revision', rev, 'ends', ends)
return 1
