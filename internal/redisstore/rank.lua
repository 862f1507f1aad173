-- rank.lua changes a red packet's leaderboard for a batch of grabs, each once however often it
-- is told: a grab removed (its order cancelled, expired or refunded) is remembered in the
-- leaderboard's gone set, so that an add or restore told after the removal (a worker's retry
-- of a placement that failed while Redis failed over, its order cancelled meanwhile) does not
-- put the share back, and a removal told twice does not count it off twice.
--
-- KEYS[1] the sorted set (an exact leaderboard), KEYS[2] the histogram hash (an approximate one),
-- KEYS[3] the gone set: the members removed.
-- ARGV[1] the change: "add", "restore" or "remove"; ARGV[2] the strategy ("exact" or
-- "approximate"); then per grab: its member, its amount (cents), its histogram bucket.
-- An exact leaderboard adds and restores alike (ZADD of a member there already changes
-- nothing); a histogram, which cannot tell whether a share is counted, counts an add and
-- leaves a restore. Returns the number of grabs changed.
local op, strategy = ARGV[1], ARGV[2]
local changed = 0
for i = 3, #ARGV, 3 do
  local member, amount, bucket = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if op == 'remove' then
    if redis.call('SADD', KEYS[3], member) == 1 then
      if strategy == 'exact' then
        redis.call('ZREM', KEYS[1], member)
      else
        redis.call('HINCRBY', KEYS[2], bucket, -1)
      end
      changed = changed + 1
    end
  elseif redis.call('SISMEMBER', KEYS[3], member) == 0 then
    if strategy == 'exact' then
      changed = changed + redis.call('ZADD', KEYS[1], amount, member)
    elseif op == 'add' then
      redis.call('HINCRBY', KEYS[2], bucket, 1)
      changed = changed + 1
    end
  end
end
return changed
