-- Joins a user to an activity's line, atomically: the ticket the user has waiting is given back;
-- otherwise, within the cap, a new ticket joins the early crowd (before the start, unless sealed)
-- or the tail (which seals the line first).
-- KEYS: 1 state, 2 tickets, 3 users, 4 at, 5 early, 6 drawn (all {line:ID}: see keys.go)
-- ARGV: 1 ticket id, 2 user, 3 now (ms), 4 start (ms), 5 cap, 6 tail allowed (1/0)
-- A ticket record is "user\nplace\nearly\njoined ms\noutcome\norder token\namount".
-- Returns {1, id, record, place, state...} for a new ticket, {0, id, record, place, state...} for
-- the one waiting, {-1} when the line is full, {-2} when only the tail is left and it is not
-- allowed, {-3} when the line was given a revision of the activity that ends it by now
-- (line_revise.lua). The state is the line's after the join: sealed, drawn, early, tail, head, rate.
local FIELDS = {'sealed', 'drawn', 'early', 'tail', 'head', 'rate'}
local function answer(code, id, rec, place)
  local out = {code, id, rec, place}
  local st = redis.call('HMGET', KEYS[1], unpack(FIELDS))
  for i = 1, #FIELDS do out[#out + 1] = st[i] end
  return out
end

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
    local user, place, isEarly, joined, outcome = string.match(rec, '^([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n')
    place = tonumber(place)
    if isEarly == '1' then
      place = tonumber(redis.call('HGET', KEYS[6], cur) or '-1')
    end
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
return answer(1, ARGV[1], rec, place)
