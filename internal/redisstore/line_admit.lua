-- Records the outcomes of a batch and moves the head from ARGV[1] to ARGV[2], only if the head is
-- still at ARGV[1]: a second drainer's copy of the batch changes nothing.
-- KEYS: 1 state, 2 tickets (all {line:ID}: see keys.go)
-- ARGV: 1 from, 2 to, 3 rate, then per ticket: id, outcome, order token, amount
-- Returns 1 when it moved the head, 0 when the head was elsewhere.
if (tonumber(redis.call('HGET', KEYS[1], 'head')) or 0) ~= tonumber(ARGV[1]) then return 0 end
for i = 4, #ARGV, 4 do
  local rec = redis.call('HGET', KEYS[2], ARGV[i])
  if rec then
    local user, place, isEarly, joined = string.match(rec, '^([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n')
    redis.call('HSET', KEYS[2], ARGV[i], user .. '\n' .. place .. '\n' .. isEarly .. '\n' .. joined .. '\n' ..
      ARGV[i + 1] .. '\n' .. ARGV[i + 2] .. '\n' .. ARGV[i + 3])
  end
end
redis.call('HSET', KEYS[1], 'head', ARGV[2], 'rate', ARGV[3])
return 1
