-- Joins a user to an activity's line, atomically: the ticket the join's idempotency key took is
-- given back, whatever became of it; else the ticket the user has waiting; otherwise, within the
-- cap, a new ticket joins the early crowd (before the start, unless sealed) or the tail (which
-- seals the line first), and the key, if any, is remembered as the one that took it.
-- KEYS: 1 state, 2 tickets, 3 users, 4 at, 5 early, 6 drawn, 7 keys (all {line:ID}: see keys.go)
-- ARGV: 1 ticket id, 2 user, 3 now (ms), 4 start (ms), 5 cap, 6 tail allowed (1/0), 7 idempotency
-- key ('' for none), 8 lookup (1: only the ticket the key took, nothing is taken)
-- A ticket record is "user\nplace\nearly\njoined ms\noutcome\norder token\namount".
-- Returns {1, id, record, place, state...} for a new ticket or the one the key took, {0, id,
-- record, place, state...} for the one waiting, {-1} when the line is full, {-2} when only the
-- tail is left and it is not allowed, {-3} when the line was given a revision of the activity
-- that ends it by now (line_revise.lua), {-4} for a lookup the key took no ticket in. The state
-- is the line's after the join: sealed, drawn, early, tail, head, rate.
local FIELDS = {'sealed', 'drawn', 'early', 'tail', 'head', 'rate'}
local function answer(code, id, rec, place)
  local out = {code, id, rec, place}
  local st = redis.call('HMGET', KEYS[1], unpack(FIELDS))
  for i = 1, #FIELDS do out[#out + 1] = st[i] end
  return out
end

-- placeOf is the place of ticket id of record rec: an early one's is the draw's (-1 before it).
local function placeOf(id, rec)
  local place, isEarly = string.match(rec, '^[^\n]*\n([^\n]*)\n([^\n]*)\n')
  if isEarly == '1' then return tonumber(redis.call('HGET', KEYS[6], id) or '-1') end
  return tonumber(place)
end

local keyed = ARGV[2] .. '\n' .. ARGV[7]
if ARGV[7] ~= '' then
  local id = redis.call('HGET', KEYS[7], keyed)
  local rec = id and redis.call('HGET', KEYS[2], id)
  if rec then return answer(1, id, rec, placeOf(id, rec)) end
end
if ARGV[8] == '1' then return {-4} end

local st = redis.call('HMGET', KEYS[1], 'sealed', 'early', 'tail', 'head', 'ends')
if st[5] and tonumber(ARGV[3]) >= tonumber(st[5]) then return {-3} end
local sealed = st[1] == '1'
local early = tonumber(st[2]) or 0
local tail = tonumber(st[3]) or 0
local head = tonumber(st[4]) or 0

local cur = redis.call('HGET', KEYS[3], ARGV[2])
if cur then
  local rec = redis.call('HGET', KEYS[2], cur)
  if rec then
    local outcome = string.match(rec, '^[^\n]*\n[^\n]*\n[^\n]*\n[^\n]*\n([^\n]*)\n')
    local place = placeOf(cur, rec)
    if outcome == '' and (place < 0 or place >= head) then
      -- The same join run twice (a client's retry of the script) is still the first answer.
      if cur == ARGV[1] then return answer(1, cur, rec, place) end
      return answer(0, cur, rec, place)
    end
  end
end
if early + tail - head >= tonumber(ARGV[5]) then return {-1} end

local place, isEarly = -1, '0'
if not sealed and tonumber(ARGV[3]) < tonumber(ARGV[4]) then
  isEarly = '1'
  redis.call('RPUSH', KEYS[5], ARGV[1])
  redis.call('HINCRBY', KEYS[1], 'early', 1)
else
  if ARGV[6] ~= '1' then return {-2} end
  if not sealed then
    -- Without an early crowd there is nothing to draw: the line is drawn as it is sealed.
    redis.call('HSET', KEYS[1], 'sealed', '1')
    if early == 0 then redis.call('HSET', KEYS[1], 'drawn', '1') end
  end
  place = early + tail
  redis.call('HINCRBY', KEYS[1], 'tail', 1)
  redis.call('HSET', KEYS[4], place, ARGV[1])
end
local rec = ARGV[2] .. '\n' .. place .. '\n' .. isEarly .. '\n' .. ARGV[3] .. '\n\n\n0'
redis.call('HSET', KEYS[2], ARGV[1], rec)
redis.call('HSET', KEYS[3], ARGV[2], ARGV[1])
if ARGV[7] ~= '' then redis.call('HSET', KEYS[7], keyed, ARGV[1]) end
return answer(1, ARGV[1], rec, place)
