--- W8: network by name. curl in a read-only sandbox fetches from a python3 http.server on the
--- host's loopback, through the session's proxy (network = {allow = {"bench.test"}}) or
--- directly (the same sandbox with network = "allow": the C column). Only curl's own transfer
--- time is counted (its %{time_total}), never the spawn.
---   luxec bench/net_proxy.lua direct|proxy|tunnel bulk|small COUNT DIR
--- DIR holds the files served: `big` for bulk (one download; prints secs=), `small` for small
--- (COUNT requests, one connection each; prints secs=<median seconds per request>). tunnel
--- goes through the proxy with CONNECT (curl -p), as HTTPS does.
local luxec = require("luxec")
local uv = require("luv")

local case, kind, count, dir = arg[1], arg[2], tonumber(arg[3]), arg[4]
assert((case == "direct" or case == "proxy" or case == "tunnel")
  and (kind == "bulk" or kind == "small") and count and dir,
  "usage: net_proxy.lua direct|proxy|tunnel bulk|small COUNT DIR")

local function free_port()
  local t = uv.new_tcp()
  t:bind("127.0.0.1", 0)
  local port = t:getsockname().port
  t:close()
  return port
end

local port = free_port()
local server = assert(luxec.spawn({ "python3", "-m", "http.server", "--bind", "127.0.0.1",
  "--directory", dir, tostring(port) }, { stdin = "null" }))
-- up when a connect succeeds
local up = false
for _ = 1, 200 do
  local t, done = uv.new_tcp(), nil
  t:connect("127.0.0.1", port, function(err) done = err or true end)
  while done == nil do uv.run("once") end
  t:close()
  if done == true then up = true break end
  luxec.sleep(0.02)
end
assert(up, "the http server did not start")

local host = case == "direct" and "127.0.0.1" or "bench.test"
local file = kind == "bulk" and "big" or "small"
local url = ("http://%s:%d/%s"):format(host, port, file)
local curl = "curl -sS -o /dev/null -w '%{time_total}\\n'" .. (case == "tunnel" and " -p" or "")
local n = kind == "bulk" and 1 or count
local script = ("for i in $(seq %d); do %s %s || exit 1; done"):format(n, curl, url)
local net = case == "direct" and "allow"
  or { allow = { "bench.test" }, resolve = { ["bench.test"] = "127.0.0.1" } }
local r = luxec.run({ "sh", "-c", script }, { timeout = 120, cwd = "/",
  sandbox = { mode = "read-only", network = net } })
server:terminate()
server:close()
assert(r.code == 0, "curl failed: " .. r.output)
local times = {}
for v in r.output:gmatch("[%d.]+") do times[#times + 1] = tonumber(v) end
assert(#times == n, "curl printed " .. r.output)
table.sort(times)
local median = #times % 2 == 1 and times[(#times + 1) // 2]
  or (times[#times // 2] + times[#times // 2 + 1]) / 2
print(("secs=%.9f"):format(median))
