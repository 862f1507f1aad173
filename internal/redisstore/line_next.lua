-- The drainer's next batch: up to n places from the head of a drawn line, with their tickets.
-- KEYS: 1 state, 2 at, 3 tickets (all {line:ID}: see keys.go)
-- ARGV: 1 n
-- Returns {head, to, place, id, record, place, id, record, ...}: the places in [head, to) that
-- hold a ticket, each with its id and record, in place order.
local st = redis.call('HMGET', KEYS[1], 'drawn', 'early', 'tail', 'head')
local head = tonumber(st[4]) or 0
if st[1] ~= '1' then return {head, head} end
local placed = (tonumber(st[2]) or 0) + (tonumber(st[3]) or 0)
local to = math.min(head + tonumber(ARGV[1]), placed)
local out = {head, to}
for p = head, to - 1 do
  local id = redis.call('HGET', KEYS[2], p)
  if id then
    local rec = redis.call('HGET', KEYS[3], id)
    if rec then
      out[#out + 1] = p
      out[#out + 1] = id
      out[#out + 1] = rec
    end
  end
end
return out
