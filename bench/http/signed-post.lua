-- wrk script: replays pre-signed `POST /apps/{id}/events` requests (bench/http/api-ab.ts
-- writes them, one per line: "<path>?<query>\t<body>"), in turn, over wrk's keep-alive
-- connections. Signed as the `pusher` SDK signs; valid for the server's ±600 s window.
--   wrk -t1 -c16 -d8s -s signed-post.lua http://127.0.0.1:PORT -- requests.txt
local requests = {}
local i = 0

function init(args)
  local file = assert(io.open(args[1], "r"), "usage: wrk ... -s signed-post.lua URL -- requests.txt")
  for line in file:lines() do
    local target, body = line:match("^(%S+)\t(.*)$")
    if target then
      requests[#requests + 1] = wrk.format("POST", target, { ["Content-Type"] = "application/json" }, body)
    end
  end
  file:close()
  assert(#requests > 0, "no requests in " .. args[1])
end

function request()
  i = i % #requests + 1
  return requests[i]
end
