-- Makes ARGV[1] the line's drainer for ARGV[2] ms, or keeps it so, unless another holds it.
-- KEYS: 1 lead ({line:ID})
-- Returns 1 when ARGV[1] leads.
local cur = redis.call('GET', KEYS[1])
if not cur then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
