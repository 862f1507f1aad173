-- Makes ARGV[1] the holder of the lease KEYS[1] (see keys.go) for ARGV[2] ms, or extends it if
-- ARGV[1] holds it already, unless another holds it: a job's lease (Lease), a line's drainer
-- (Line.Lead).
-- Returns 1 when ARGV[1] holds the lease.
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
