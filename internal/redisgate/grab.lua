-- grab.lua: the whole grab of one unit, atomically, on one hash slot (every key carries the
-- activity's {act:ID} hash tag). It is idempotent per request: the caller makes the grab's token
-- before calling, so a retry of the same call (by go-redis after a lost reply, or by the client)
-- finds its first answer and takes nothing.
--
-- KEYS[1] stock    string: units left (for a red packet, shares left)
-- KEYS[2] shares   list of "index:amount", red packets only
-- KEYS[3] held     hash: user -> units held
-- KEYS[4] answers  hash: user NUL idempotency key -> token NL record
-- KEYS[5] grabs    hash: token -> record, every unit held now (a release deletes it)
-- KEYS[6] stream   the activity's stream of grabs for the workers
-- KEYS[7] pass     string: the path token's "user NL expiry (ms)"; once spent, "NL grab token"
-- ARGV: 1 token, 2 user, 3 idempotency key ("" for none), 4 now (Unix ms), 5 start (ms),
--       6 end (ms), 7 per-user limit, 8 kind ("item" or "redpacket"), 9 price (cents),
--       10 activity id, 11 "1" if the activity requires a pass, 12 the pass ("" for none)
-- A record is "user NL key NL share NL amount NL at". Returns {code, token, record}:
--   0 granted, 1 the first answer again, -1 activity not loaded, -2 not started, -3 ended,
--   -4 per-user limit reached, -5 sold out, -6 no valid pass, -9 bad arguments.

local token, user, key = ARGV[1], ARGV[2], ARGV[3]
local now, startAt, endAt = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local limit, kind, price, activity = tonumber(ARGV[7]), ARGV[8], tonumber(ARGV[9]), ARGV[10]
local requirePass, pass = ARGV[11], ARGV[12]

-- Validate everything before the first write.
if token == '' or user == '' or activity == '' or not now or not startAt or not endAt
    or not limit or limit < 1 or not price or price < 0
    or (kind ~= 'item' and kind ~= 'redpacket') or (requirePass ~= '0' and requirePass ~= '1')
    or pass == nil then
  return {-9}
end

local seen = redis.call('HGET', KEYS[5], token)
if seen then
  return {1, token, seen}
end
local answerKey = user .. '\0' .. key
if key ~= '' then
  local first = redis.call('HGET', KEYS[4], answerKey)
  if first then
    local nl = string.find(first, '\n', 1, true)
    return {1, string.sub(first, 1, nl - 1), string.sub(first, nl + 1)}
  end
end

local left = redis.call('GET', KEYS[1])
if not left then
  return {-1}
end
if now < startAt then
  return {-2}
end
if now >= endAt then
  return {-3}
end
-- The pass is spent whatever comes next, but a retry of this very call (same grab token) may
-- pass again, so that the retry gets the same answer as the first run.
if pass ~= '' then
  local p = redis.call('GET', KEYS[7])
  if p ~= '\n' .. token then
    local nl = p and string.find(p, '\n', 1, true)
    if not nl or nl == 1 or string.sub(p, 1, nl - 1) ~= user
        or now >= (tonumber(string.sub(p, nl + 1)) or 0) then
      return {-6}
    end
    redis.call('SET', KEYS[7], '\n' .. token, 'KEEPTTL')
  end
elseif requirePass == '1' then
  return {-6}
end
if tonumber(redis.call('HGET', KEYS[3], user) or '0') >= limit then
  return {-4}
end
if tonumber(left) <= 0 then
  return {-5}
end

local share, amount = 0, price
if kind == 'redpacket' then
  local s = redis.call('RPOP', KEYS[2])
  if not s then
    return {-5}
  end
  local colon = string.find(s, ':', 1, true)
  share, amount = tonumber(string.sub(s, 1, colon - 1)), tonumber(string.sub(s, colon + 1))
end

redis.call('DECR', KEYS[1])
redis.call('HINCRBY', KEYS[3], user, 1)
local record = user .. '\n' .. key .. '\n' .. share .. '\n' .. amount .. '\n' .. now
redis.call('HSET', KEYS[5], token, record)
if key ~= '' then
  redis.call('HSET', KEYS[4], answerKey, token .. '\n' .. record)
end
redis.call('XADD', KEYS[6], '*', 'token', token, 'activity', activity, 'user', user, 'key', key,
  'share', share, 'amount', amount, 'at', now)
return {0, token, record}
