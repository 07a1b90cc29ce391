-- wrk script of the harness (bench/harness/wrk.ts): replays a pool of pre-signed HTTP
-- requests in turn, one per request() call, and prints the run's counts as one JSON line.
--
--   wrk -t T -c C -d D -s replay.lua http://host:port -- POOL_FILE T
--
-- POOL_FILE holds whole requests (request line, headers, body), each as
-- "<byte length>\n<bytes>". wrk's Lua has no HMAC, so Node signs the pool before the
-- run (the pusher SDK's own signer; auth_timestamp is valid for ±600 s, far longer than a
-- run). Each thread starts at its own offset in the pool (its share of it), so threads do
-- not send the same request at the same moment. No response() hook: defining one makes
-- wrk hand every response's headers and body to Lua, which costs more than the server.

-- setup() runs in wrk's main Lua state before the thread is started, so thread:set is
-- safe here (and only here: a running thread's Lua state must not be touched).
local threads = 0

function setup(thread)
  thread:set("tid", threads)
  threads = threads + 1
end

local pool = {}
local n = 0
local i = 0

function init(args)
  local file = args[1]
  if file == nil then error("replay.lua: pass the pool file after --") end
  local f = assert(io.open(file, "rb"))
  local data = f:read("*a")
  f:close()
  local pos = 1
  local size = #data
  while pos <= size do
    local nl = data:find("\n", pos, true)
    if nl == nil then error("replay.lua: truncated pool file at byte " .. pos) end
    local len = tonumber(data:sub(pos, nl - 1))
    if len == nil or nl + len > size then error("replay.lua: bad entry at byte " .. pos) end
    n = n + 1
    pool[n] = data:sub(nl + 1, nl + len)
    pos = nl + len + 1
  end
  if n == 0 then error("replay.lua: empty pool " .. file) end
  local nthreads = tonumber(args[2] or "1")
  i = math.floor((tid or 0) * n / nthreads)
end

function request()
  i = i + 1
  if i > n then i = 1 end
  return pool[i]
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK_RESULT {"duration_us":%d,"requests":%d,"bytes":%d,"connect_errors":%d,"read_errors":%d,' ..
    '"write_errors":%d,"status_errors":%d,"timeouts":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"mean_us":%.1f}\n',
    summary.duration, summary.requests, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))
end
