--- W8: network by name. curl in a read-only sandbox fetches from a python3 http.server on the
--- host's loopback, through the session's proxy (network = {allow = {"bench.test"}}) or
--- directly (the same sandbox with network = "allow": the C column). Only curl's own transfer
--- time is counted (its %{time_total}), never the spawn.
---   luxec bench/net_proxy.lua direct|proxy|tunnel bulk|small|upload COUNT DIR
--- DIR holds the files served: `big` for bulk (one download; prints secs=), `small` for small
--- (COUNT requests, one connection each; prints secs=<median seconds per request>). upload
--- sends `big` as the body of one plain HTTP PUT (Content-Length) to a python3 server that
--- reads it whole before it answers. tunnel goes through the proxy with CONNECT (curl -p),
--- as HTTPS does.
local luxec = require("luxec")
local uv = require("luv")

local case, kind, count, dir = arg[1], arg[2], tonumber(arg[3]), arg[4]
assert((case == "direct" or case == "proxy" or case == "tunnel")
  and (kind == "bulk" or kind == "small" or kind == "upload") and count and dir,
  "usage: net_proxy.lua direct|proxy|tunnel bulk|small|upload COUNT DIR")

-- The upload's server: reads a PUT's body (Content-Length) in 1 MiB pieces, then answers.
local SINK = [[
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_PUT(self):
        n = int(self.headers['Content-Length'])
        while n > 0:
            d = self.rfile.read(min(n, 1 << 20))
            if not d: break
            n -= len(d)
        self.send_response(200)
        self.send_header('Content-Length', '0')
        self.end_headers()
    def log_message(self, *a): pass
http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()
]]

local function free_port()
  local t = uv.new_tcp()
  t:bind("127.0.0.1", 0)
  local port = t:getsockname().port
  t:close()
  return port
end

local port = free_port()
local argv = kind == "upload" and { "python3", "-c", SINK, tostring(port) }
  or { "python3", "-m", "http.server", "--bind", "127.0.0.1", "--directory", dir, tostring(port) }
local server = assert(luxec.spawn(argv, { stdin = "null" }))
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
local file = kind == "small" and "small" or "big"
local url = ("http://%s:%d/%s"):format(host, port, file)
local curl = "curl -sS -o /dev/null -w '%{time_total}\\n'" .. (case == "tunnel" and " -p" or "")
  .. (kind == "upload" and (" -H 'Expect:' -T %s/big"):format(dir) or "")
local n = kind == "small" and count or 1
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
