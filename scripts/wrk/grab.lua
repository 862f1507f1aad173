-- wrk script: POST a grab with a different user's token on every request.
-- Set TOKENS (file of tokens, one per line) and ACTIVITY in the environment, and pass wrk's
-- thread count after "--" (each thread takes every n-th token).
local threads = {}
local counter = 0

function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
  table.insert(threads, thread)
end

function init(args)
  tokens = {}
  for line in io.lines(os.getenv("TOKENS")) do
    tokens[#tokens + 1] = "Bearer " .. line
  end
  nthreads = tonumber(args[1]) or 1
  path = "/api/activities/" .. os.getenv("ACTIVITY") .. "/grab"
  idx = id + 1
  statuses = {}
end

function request()
  local tok = tokens[(idx - 1) % #tokens + 1] -- fewer tokens than threads: they share
  idx = idx + nthreads
  if idx > #tokens then idx = id + 1 end
  return wrk.format("POST", path, { ["Authorization"] = tok }, nil)
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
  io.write(string.format("p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms\n",
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency:percentile(99.9) / 1000))
  for _, t in ipairs(threads) do
    local s = t:get("statuses")
    for code, n in pairs(s) do
      io.write(string.format("status %d: %d\n", code, n))
    end
  end
end
