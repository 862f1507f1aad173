-- grab.lua: whole grabs of one unit each, atomically, on one hash slot (every key carries the
-- activity's {act:ID} hash tag; key layout: see keys.go). One call takes a batch of grabs of the
-- same activity (a node coalesces the grabs that arrive together) and answers each as if it had
-- run alone, in order: a later grab of the batch sees what the earlier ones took. It is
-- idempotent per grab: the caller makes each grab's token before calling, so a retry of the same
-- call (by go-redis after a lost reply, or by the client) finds each grab's first answer and
-- takes nothing.
--
-- KEYS[1] stock    string: units left (for a red packet, shares left)
-- KEYS[2] shares   list of "index:amount", red packets only
-- KEYS[3] held     hash: user -> units held
-- KEYS[4] answers  hash: user NUL idempotency key -> token NL record
-- KEYS[5] grabs    hash: token -> record, every unit held now (a release deletes it)
-- KEYS[6] stream   the activity's stream of grabs for the workers
-- KEYS[7] pending  hash: token -> "user NL key NL now", a grab reserved here (a stock shard)
--                  while it looks for a unit on the activity's other shards (take.lua)
-- KEYS[8] away     hash: token -> "shard NL record", a grab of a user of this shard that took
--                  its unit on another shard
-- KEYS[9] revision string: the revision of the activity this shard holds (absent: 1)
-- KEYS[10] reserved hash: user -> wave, a reservation sale's reservers whose home this shard is,
--                  and NL -> how many reserved in all, once the set is whole (sealed)
-- KEYS[11...] pass string: a path token's pass (its format: see keys.go), and rate string: a
--                  user's request bucket on this activity, the time (Unix µs) its next request
--                  would find it empty (GCRA's theoretical arrival time); it expires by itself
-- ARGV, the activity: 1 start (Unix ms), 2 end (ms), 3 per-user limit, 4 kind ("item" or
--   "redpacket"), 5 price (cents), 6 activity id, 7 "1" if each grab must spend a pass
--   (sale.Activity.PassAtTheGate),
--   8 "0" if the stock is not sharded; "1" if it is (these keys are one shard's, the home of these
--   users); 2 + k if it is and the caller knows the other shards to hold k units between them
--   (what it last found there): at most k grabs out of units here reserve and fall through, the
--   rest are told sold out at once, with nothing reserved, as the fall-through would tell them
--   ("2": every other shard known empty),
--   9 the revision of the activity these arguments are of (the caller's copy), 10 "1" if the
--   activity admits reservers only (reservation admission), 11 the interval between its waves (ms);
-- then 10 per grab: token, user, idempotency key ("" for none), now (Unix ms), the index in KEYS
--   of its pass key (0 for none), the pass ("" for none), the W3C traceparent of the grab's
--   publishing span ("" for none, at most 128 bytes), the index in KEYS of the user's rate key
--   (0: no rate to check), its requests a second and its burst.
-- Record and stream entry format: see keys.go. Returns, per grab in order, code, token,
-- record: code 0 granted, 1 the first answer again, -1 activity not loaded, -2 not started,
-- -3 ended, -4 per-user limit reached, -5 sold out, -6 no valid pass, -7 over the user's rate
-- (the token is then the wait in ms until a request would pass), -10 the shard holds another
-- revision than the caller's copy (nothing taken: read the activity again), -11 not reserved,
-- -12 the buyer's wave has not opened (the token is then when it opens, Unix ms, and the record
-- the wave; both "0" while the set is not whole), -9 bad arguments (the token
-- and the record are then ""); on a sharded stock also 2 reserved (this shard is out of units:
-- the user's unit is held for the grab while it looks on the others) and 3 in progress (the
-- idempotency key's first grab is still looking).

local startAt, endAt = tonumber(ARGV[1]), tonumber(ARGV[2])
local limit, kind, price, activity = tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5]), ARGV[6]
local requirePass, sharded, revision = ARGV[7], ARGV[8], ARGV[9]
local reservation, waveInterval = ARGV[10], tonumber(ARGV[11])
-- reservable: how many grabs of this call may still reserve (sharded only; -1 for no bound)
local reservable = tonumber(sharded)
if reservable then
  reservable = reservable - 2
end
local PER = 10
local FIRST = 11 -- the per-grab arguments start after this one
local PASSKEYS = 11 -- the first pass key

-- Validate what the batch shares before anything; a grab's own arguments before its first write.
local n = (#ARGV - FIRST) / PER
if not startAt or not endAt or not limit or limit < 1 or not price or price < 0 or activity == ''
    or (kind ~= 'item' and kind ~= 'redpacket') or (requirePass ~= '0' and requirePass ~= '1')
    or not reservable or reservable ~= math.floor(reservable) or reservable < -2 or not tonumber(revision) or n < 1 or n ~= math.floor(n)
    or (reservation ~= '0' and reservation ~= '1') or not waveInterval or waveInterval < 0 then
  return {-9, '', ''}
end

-- Read what every grab of the batch needs in one call per key: the grabs already answered (a
-- retried call), the buyers' holdings, the keyed first answers, the stock. From here on the
-- batch works on these copies, and writes them back once at the end.
local grabs, tokens, users, answerKeys = {}, {}, {}, {}
for i = 0, n - 1 do
  local b = FIRST + i * PER
  local g = {token = ARGV[b + 1], user = ARGV[b + 2], key = ARGV[b + 3], now = tonumber(ARGV[b + 4]),
             passIndex = tonumber(ARGV[b + 5]), pass = ARGV[b + 6], tp = ARGV[b + 7],
             rateIndex = tonumber(ARGV[b + 8]), rate = tonumber(ARGV[b + 9]), burst = tonumber(ARGV[b + 10])}
  g.bad = g.token == '' or g.user == '' or not g.now or not g.passIndex or g.passIndex < 0 or #g.tp > 128
      or g.passIndex > #KEYS or (g.pass ~= '' and g.passIndex < PASSKEYS)
      or not g.rateIndex or g.rateIndex > #KEYS or (g.rateIndex > 0 and (g.rateIndex < PASSKEYS
      or not g.rate or g.rate < 1 or not g.burst or g.burst < 1))
  if not g.bad then
    g.answerKey = g.user .. '\0' .. g.key
    tokens[#tokens + 1] = g.token
    users[#users + 1] = g.user
    if g.key ~= '' then
      answerKeys[#answerKeys + 1] = g.answerKey
    end
  end
  grabs[#grabs + 1] = g
end
local function lookup(key, fields)
  local m = {}
  if #fields > 0 then
    local vals = redis.call('HMGET', key, unpack(fields))
    for i, f in ipairs(fields) do
      if vals[i] then
        m[f] = vals[i]
      end
    end
  end
  return m
end
local seen, held, firsts = lookup(KEYS[5], tokens), lookup(KEYS[3], users), lookup(KEYS[4], answerKeys)
local waves = {}
if reservation == '1' then
  local fields = {'\n'}
  for _, u in ipairs(users) do
    fields[#fields + 1] = u
  end
  waves = lookup(KEYS[10], fields)
end
local away, reserved = {}, {}
if sharded ~= '0' then
  for token, v in pairs(lookup(KEYS[8], tokens)) do
    away[token] = string.sub(v, string.find(v, '\n', 1, true) + 1)
  end
  reserved = lookup(KEYS[7], tokens)
end
local left = redis.call('GET', KEYS[1])
if left then
  left = tonumber(left)
end
local current = redis.call('GET', KEYS[9]) or '1'

-- The users' request buckets (GCRA, in µs on Redis's clock), read once each and written back
-- at the end: a later grab of the batch by the same user sees what the earlier ones spent.
-- The same algorithm as the edge's buckets (ratelimit.RedisBuckets, go-redis/redis_rate), on
-- purpose not shared with them: this is another bucket, of the grabs of one activity admitted
-- directly, on the activity's slot ({act:ID}:rate:USER), so that the grab's one call checks it;
-- redis_rate's keys (rate:user:...) have no hash tag and keep the requests the gate does not see
-- (challenges, lines, every activity's node-wide budget). A request is checked in one or the
-- other, never both: httpapi's edge chooses (Limits.UserAtGate).
local clock
local tats, spent = {}, {}
local function overRate(g)
  if g.rateIndex == 0 then
    return nil
  end
  if not clock then
    local t = redis.call('TIME')
    clock = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  local key = KEYS[g.rateIndex]
  if not tats[key] then
    tats[key] = tonumber(redis.call('GET', key) or '0') or 0
  end
  local interval = math.floor(1000000 / g.rate)
  local tat = math.max(tats[key], clock)
  local passAt = tat + interval - g.burst * interval
  if passAt > clock then
    return math.ceil((passAt - clock) / 1000)
  end
  tats[key] = tat + interval
  spent[key] = true
  return nil
end

local out = {}
local granted, newHeld, newGrabs, newAnswers, newPending = 0, {}, {}, {}, {}
local function answer(code, token, record)
  out[#out + 1] = code
  out[#out + 1] = token or ''
  out[#out + 1] = record or ''
end

local function grab(g)
  if g.bad then
    return answer(-9)
  end
  if seen[g.token] then
    return answer(1, g.token, seen[g.token])
  end
  if away[g.token] then
    return answer(1, g.token, away[g.token])
  end
  if reserved[g.token] then
    return answer(2, g.token) -- a retried call: the grab is reserved already
  end
  if g.key ~= '' and firsts[g.answerKey] then
    local first = firsts[g.answerKey]
    if string.sub(first, 1, 1) == '\n' then
      return answer(3) -- reserved, still looking on the other shards
    end
    local nl = string.find(first, '\n', 1, true)
    return answer(1, string.sub(first, 1, nl - 1), string.sub(first, nl + 1))
  end
  if not left then
    return answer(-1)
  end
  if current ~= revision then
    return answer(-10)
  end
  local wait = overRate(g)
  if wait then
    return answer(-7, tostring(wait))
  end
  if g.now < startAt then
    return answer(-2)
  end
  if g.now >= endAt then
    return answer(-3)
  end
  -- A reservation sale admits its reservers, each from their wave's opening (as
  -- sale.Activity.Admit says): nothing is spent or taken for a grab it refuses.
  if reservation == '1' then
    if not waves['\n'] then
      return answer(-12, '0', '0')
    end
    local wave = tonumber(waves[g.user] or '0') or 0
    if wave < 1 then
      return answer(-11)
    end
    local opens = startAt + (wave - 1) * waveInterval
    if g.now < opens then
      return answer(-12, string.format('%.0f', opens), tostring(wave))
    end
  end
  -- The pass is spent whatever comes next, but a retry of this very grab (same token) may pass
  -- again, so that the retry gets the same answer as the first run.
  if g.pass ~= '' then
    local p = redis.call('GET', KEYS[g.passIndex])
    if p ~= '\n' .. g.token then
      local nl = p and string.find(p, '\n', 1, true)
      if not nl or nl == 1 or string.sub(p, 1, nl - 1) ~= g.user
          or g.now >= (tonumber(string.sub(p, nl + 1)) or 0) then
        return answer(-6)
      end
      redis.call('SET', KEYS[g.passIndex], '\n' .. g.token, 'KEEPTTL')
    end
  elseif requirePass == '1' then
    return answer(-6)
  end
  local has = tonumber(held[g.user] or '0')
  if has >= limit then
    return answer(-4)
  end
  if left <= 0 then
    if sharded == '0' or reservable == 0 or kind ~= 'item' then
      return answer(-5) -- not sharded, or the other shards' known units reserved by grabs before
    end
    -- Out of units here: hold the user's unit for this grab while it looks on the other shards.
    if reservable > 0 then
      reservable = reservable - 1
    end
    held[g.user] = has + 1
    newHeld[g.user] = true
    newPending[#newPending + 1] = g.token
    newPending[#newPending + 1] = g.user .. '\n' .. g.key .. '\n' .. g.now
    if g.key ~= '' then
      firsts[g.answerKey] = '\n' .. g.token
      newAnswers[#newAnswers + 1] = g.answerKey
      newAnswers[#newAnswers + 1] = firsts[g.answerKey]
    end
    return answer(2, g.token)
  end

  local share, amount = 0, price
  if kind == 'redpacket' then
    local s = redis.call('RPOP', KEYS[2])
    if not s then
      return answer(-5)
    end
    local colon = string.find(s, ':', 1, true)
    share, amount = tonumber(string.sub(s, 1, colon - 1)), tonumber(string.sub(s, colon + 1))
  end

  left, granted = left - 1, granted + 1
  held[g.user] = has + 1
  newHeld[g.user] = true
  local record = g.user .. '\n' .. g.key .. '\n' .. share .. '\n' .. amount .. '\n' .. g.now
  seen[g.token] = record
  newGrabs[#newGrabs + 1] = g.token
  newGrabs[#newGrabs + 1] = record
  if g.key ~= '' then
    firsts[g.answerKey] = g.token .. '\n' .. record
    newAnswers[#newAnswers + 1] = g.answerKey
    newAnswers[#newAnswers + 1] = firsts[g.answerKey]
  end
  if g.tp == '' then
    redis.call('XADD', KEYS[6], '*', 'token', g.token, 'activity', activity, 'user', g.user, 'key', g.key,
      'share', share, 'amount', amount, 'at', g.now)
  else
    redis.call('XADD', KEYS[6], '*', 'token', g.token, 'activity', activity, 'user', g.user, 'key', g.key,
      'share', share, 'amount', amount, 'at', g.now, 'tp', g.tp)
  end
  return answer(0, g.token, record)
end

for _, g in ipairs(grabs) do
  grab(g)
end
for key in pairs(spent) do
  redis.call('SET', key, string.format('%.0f', tats[key]), 'PX', math.max(1, math.ceil((tats[key] - clock) / 1000)))
end
if granted > 0 then
  redis.call('DECRBY', KEYS[1], granted)
end
if granted > 0 or #newPending > 0 then
  local h = {}
  for user in pairs(newHeld) do
    h[#h + 1] = user
    h[#h + 1] = held[user]
  end
  redis.call('HSET', KEYS[3], unpack(h))
  if #newGrabs > 0 then
    redis.call('HSET', KEYS[5], unpack(newGrabs))
  end
  if #newPending > 0 then
    redis.call('HSET', KEYS[7], unpack(newPending))
  end
  if #newAnswers > 0 then
    redis.call('HSET', KEYS[4], unpack(newAnswers))
  end
end
return out
