-- home.lua: the home shard's side of a grab that looked for its unit on another shard of a
-- sharded stock, and of its release. Each operation is guarded by a delete that succeeds once, so
-- racing callers (the grab itself and the sweeper that settles abandoned reservations, or two
-- releases) change the holdings once.
--
-- KEYS[1] held, KEYS[2] answers, KEYS[3] pending, KEYS[4] away (see keys.go; the home shard's)
-- ARGV: 1 operation, 2 token, 3 user, 4 idempotency key, then
--   "took": 5 the shard that gave the unit, 6 the grab's record: the grab is settled as won;
--   "none": no shard had a unit: the reservation is given back;
--   "release": the unit taken away was given back on its shard: so is the user's hold here.
-- Returns 1 if this call changed something, 0 if another did first, -9 on bad arguments.

local op, token, user, key = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if token == '' or user == '' or key == nil then
  return -9
end
local answerKey = user .. '\0' .. key

local function unhold()
  if redis.call('HINCRBY', KEYS[1], user, -1) <= 0 then
    redis.call('HDEL', KEYS[1], user)
  end
end

if op == 'took' then
  local shard, record = ARGV[5], ARGV[6]
  if not shard or not record or record == '' then
    return -9
  end
  if redis.call('HDEL', KEYS[3], token) == 0 then
    return 0
  end
  redis.call('HSET', KEYS[4], token, shard .. '\n' .. record)
  if key ~= '' then
    redis.call('HSET', KEYS[2], answerKey, token .. '\n' .. record)
  end
  return 1
elseif op == 'none' then
  if redis.call('HDEL', KEYS[3], token) == 0 then
    return 0
  end
  unhold()
  if key ~= '' and redis.call('HGET', KEYS[2], answerKey) == '\n' .. token then
    redis.call('HDEL', KEYS[2], answerKey)
  end
  return 1
elseif op == 'release' then
  if redis.call('HDEL', KEYS[4], token) == 0 then
    return 0
  end
  unhold()
  return 1
end
return -9
