-- risk.lua: a grab counted in the risk windows (see RiskWindows) under some of its keys, or a
-- user's challenge solve recorded there. The keys of each part carry one hash tag, and those of
-- one call one slot: on a single server a grab is one call of all its parts, on Redis Cluster a
-- call per part.
--
-- ARGV[1] the parts, a letter each, in the order of their keys (below); ARGV[2] now, the slice;
-- ARGV[3] the keys' lifetime (ms): the window and a slice; ARGV[4] the user ("": none); ARGV[5]
-- for a 'c' part this click (8 bytes: Unix ns, little endian), for an 's' part the solve (16
-- bytes: its slice and its length in ns); ARGV[6] the most bytes of clicks kept; ARGV[7] the
-- most users counted per key.
--
--   'u'  a key counting requests and users (an address, a device fingerprint), 2 keys: its
--        requests, a hash of slice -> requests, and its users, a sorted set of user -> the last
--        slice they came in, at most ARGV[7] of them (the oldest go first). Answers the requests
--        of the window before this one and its distinct users, this one's included.
--   'r'  a key counting requests (a page's exact signals), 1 key. Answers the requests of the
--        window before this one.
--   'c'  the user, 1 key: a string of the last solve (16 bytes, zeros: none) and the last
--        clicks (8 bytes each, newest first). Answers it, this click included.
--   's'  the same key, its solve replaced. Answers nothing.
--
-- A key's first request of a slice sets its lifetime and forgets the slices, and the users, the
-- window has left; the others cost a field's increment, a read of the window's other five
-- slices and, with a user, a ZADD and a ZCARD (and a PEXPIRE when the user is new).

local parts, now, ttl, user, news = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5]
local keep, cap = tonumber(ARGV[6]), tonumber(ARGV[7])
if not now or not tonumber(ttl) or not keep or not cap or cap < 1 then
  return redis.error_reply('risk.lua: bad arguments')
end

-- requests counts a request in the hash at KEYS[k], and returns those of the window before it
-- and whether it is the first of its slice.
local function requests(k)
  local key = KEYS[k]
  local n = redis.call('HINCRBY', key, ARGV[2], 1)
  local before = n - 1
  for _, c in ipairs(redis.call('HMGET', key, now - 1, now - 2, now - 3, now - 4, now - 5)) do
    before = before + (tonumber(c) or 0)
  end
  if n == 1 then -- a new slice: the lifetime, and the slices the window has left
    redis.call('PEXPIRE', key, ttl)
    redis.call('HDEL', key, now - 6, now - 7, now - 8, now - 9, now - 10, now - 11, now - 12, now - 13, now - 14)
  end
  return before, n == 1
end

local out, k = {}, 1
for p = 1, string.len(parts) do
  local part = string.sub(parts, p, p)
  if part == 'u' then
    local before, fresh = requests(k)
    out[#out + 1] = before
    local users, added = KEYS[k + 1], 0
    if fresh then
      redis.call('ZREMRANGEBYSCORE', users, '-inf', now - 6)
    end
    if user == '' then
      out[#out + 1] = 0
    else
      added = redis.call('ZADD', users, 'GT', now, user)
      local n = redis.call('ZCARD', users)
      if n > cap then
        redis.call('ZREMRANGEBYRANK', users, 0, n - cap - 1)
        n = cap
      end
      out[#out + 1] = n
    end
    if fresh or added > 0 then -- a new slice, or a new user (the set may be new)
      redis.call('PEXPIRE', users, ttl)
    end
    k = k + 2
  elseif part == 'r' then
    out[#out + 1] = (requests(k))
    k = k + 1
  elseif part == 'c' or part == 's' then
    local v = redis.call('GET', KEYS[k]) or ''
    local solve, clicks = string.sub(v, 1, 16), string.sub(v, 17)
    if string.len(solve) ~= 16 then
      solve = string.rep('\0', 16)
    end
    if part == 'c' and string.len(news) == 8 then
      v = solve .. string.sub(news .. clicks, 1, keep)
      out[#out + 1] = v
    elseif part == 's' and string.len(news) == 16 then
      v = news .. clicks
    else
      return redis.error_reply('risk.lua: a click is 8 bytes, a solve 16')
    end
    redis.call('SET', KEYS[k], v, 'PX', ttl)
    k = k + 1
  else
    return redis.error_reply('risk.lua: unknown part ' .. part)
  end
end
return out
