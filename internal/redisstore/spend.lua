-- Spends a pass on its own (a line's join): only its owner, before its expiry, and only once.
-- A pass shown by someone else is left to its owner, as grab.lua leaves it.
-- KEYS: 1 the pass ({act:ID}:pass:TOKEN; its format, spent or not: see keys.go)
-- ARGV: 1 user, 2 now (ms), 3 this spend's id (made by the caller before the call)
-- Returns 1 when spent now, or by this very spend before (a client's retry after a lost reply),
-- 0 when refused.
local p = redis.call('GET', KEYS[1])
if p == '\n' .. ARGV[3] then
  return 1
end
local nl = p and string.find(p, '\n', 1, true)
if not nl or nl == 1 or string.sub(p, 1, nl - 1) ~= ARGV[1]
    or tonumber(ARGV[2]) >= (tonumber(string.sub(p, nl + 1)) or 0) then
  return 0
end
redis.call('SET', KEYS[1], '\n' .. ARGV[3], 'KEEPTTL')
return 1
