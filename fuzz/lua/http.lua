--- fuzz_http: the HTTP request reader of `luxec mcp --listen` — luxec.mcp.http_conn over
--- http-parser (core.http_parser, src/http_parse.c) — on any bytes, on a fake TCP handle,
--- each request answered at once (so pipelined ones follow). Checked:
--- - nothing raises; every answer written is a whole HTTP/1.1 response whose status is 200
---   (a request served) or one of the refusals (400, 408, 413, 431, 505), and after a refusal
---   the connection is closed and serves nothing more;
--- - every request delivered has an upper-case method, a URL, lower-case header names and a
---   body within the limit (and a Content-Length, when given, equal to the body's size);
--- - the same bytes give the same requests and answers whether they come in one read or in
---   reads of the sizes the input chooses.
--- Input: a read size, then the bytes the client sends.
local native = require("fuzz.native")
local Input = require("lib.input")
local uv = require("luv")

package.loaded["luxec.core"] = { http_parser = native.http_parser }
local conn_mod = require("luxec.mcp.http_conn")

local LIMITS = { header_bytes = 512, body_bytes = 1024, request_timeout_ms = 3600000,
  max_queued_bytes = 1 << 30 }
local REFUSALS = { [400] = true, [408] = true, [413] = true, [431] = true, [505] = true }

local function fail(fmt, ...)
  error(fmt:format(...), 2)
end

local function check(cond, fmt, ...)
  if not cond then fail(fmt, ...) end
end

local function fake_tcp()
  local t = { out = {}, closed = false }
  function t.read_start(self, cb) self.cb = cb end
  function t.read_stop(self) self.cb = nil end
  function t.write(self, data)
    check(not self.closed, "a write after close")
    self.out[#self.out + 1] = data
  end
  function t.get_write_queue_size() return 0 end
  function t.shutdown(self, cb)
    self.shut = true
    cb()
  end
  function t.is_closing(self) return self.closed end
  function t.close(self) self.closed = true end
  return t
end

-- Serve `data` in reads of `size` bytes (0: one read); returns the requests seen (as text)
-- and the statuses written.
local function serve(data, size)
  local tcp = fake_tcp()
  local seen = {}
  local conn = conn_mod.serve(tcp, LIMITS, function(c, req)
    check(type(req.method) == "string" and req.method:match("^[A-Z%-]+$"), "method %q",
      tostring(req.method))
    check(type(req.url) == "string", "no url")
    check(#req.body <= LIMITS.body_bytes, "a body of %d bytes passed the limit", #req.body)
    local names = {}
    for k, v in pairs(req.headers) do
      check(k == k:lower(), "header name %q is not lower-case", k)
      check(type(v) == "string", "header %s is not a string", k)
      names[#names + 1] = k .. "=" .. v
    end
    table.sort(names)
    local cl = req.headers["content-length"]
    if cl and req.counts["content-length"] == 1 and cl:match("^%d+$") then
      check(tonumber(cl) == #req.body, "Content-Length %s but a body of %d bytes", cl,
        #req.body)
    end
    seen[#seen + 1] = table.concat({ req.method, req.url, req.version, req.body,
      table.concat(names, "\n") }, "\0")
    c:respond(200, { ["Content-Type"] = "text/plain" }, "ok")
  end, function() end)
  local pos = 1
  while pos <= #data and tcp.cb and not tcp.closed do
    local n = size == 0 and #data or size
    tcp.cb(nil, data:sub(pos, pos + n - 1))
    pos = pos + n
  end
  conn:close()
  uv.run("nowait") -- the closed timer's handle is freed
  local text = table.concat(tcp.out)
  local statuses, at, refused = {}, 1, false
  while at <= #text do
    local status, head_end = text:match("^HTTP/1%.1 (%d%d%d) [^\r\n]+\r\n.-\r\n\r\n()", at)
    check(status, "not an HTTP response at byte %d: %q", at, text:sub(at, at + 80))
    status = tonumber(status)
    check(not refused, "an answer after a refusal")
    check(status == 200 or REFUSALS[status], "status %d", status)
    refused = status ~= 200
    local len = tonumber(text:sub(at, head_end):match("\r\nContent%-Length: (%d+)\r\n"))
    check(len, "a response without Content-Length")
    statuses[#statuses + 1] = status
    at = head_end + len
  end
  local served = 0
  for _, s in ipairs(statuses) do if s == 200 then served = served + 1 end end
  check(served == #seen, "%d requests served, %d answered 200", #seen, served)
  return seen, statuses
end

return function(data)
  local inp = Input.new(data)
  local size = inp:byte() % 32
  local bytes = inp:rest()
  local whole_seen, whole_status = serve(bytes, 0)
  if size == 0 then return end
  local seen, status = serve(bytes, size)
  check(#seen == #whole_seen, "%d requests read in one piece, %d in reads of %d bytes",
    #whole_seen, #seen, size)
  for i = 1, #seen do
    check(seen[i] == whole_seen[i], "request %d differs when read in pieces of %d", i, size)
  end
  -- a refusal that depends on how much came at once (431 counts bytes) may differ in kind,
  -- never in being one
  check(#status == #whole_status, "%d answers in one piece, %d in pieces of %d", #whole_status,
    #status, size)
end
