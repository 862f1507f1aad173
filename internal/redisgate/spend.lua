-- Spends a pass on its own (a line's join): only its owner, before its expiry, and only once.
-- A pass shown by someone else is left to its owner, as grab.lua leaves it.
-- KEYS: 1 the pass ({act:ID}:pass:TOKEN, "user NL expiry (ms)"; once spent by a grab, "NL token")
-- ARGV: 1 user, 2 now (ms)
-- Returns 1 when spent now, 0 when refused.
local p = redis.call('GET', KEYS[1])
local nl = p and string.find(p, '\n', 1, true)
if not nl or nl == 1 or string.sub(p, 1, nl - 1) ~= ARGV[1]
    or tonumber(ARGV[2]) >= (tonumber(string.sub(p, nl + 1)) or 0) then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
