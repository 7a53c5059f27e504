--- luxec.mcp.http: `luxec mcp --listen http://HOST:PORT`, MCP's Streamable HTTP transport
--- (revisions 2025-03-26 … 2025-11-25) on one endpoint, /mcp, served on the shared loop.
---
--- POST carries one JSON-RPC message: a request is answered as an SSE stream (its progress
--- and log notifications, then its response) when the client accepts text/event-stream,
--- else as application/json; a notification or a response gets 202. GET opens the session's
--- own SSE stream (log messages that belong to no request go there); DELETE ends the session
--- and every process it started. `Mcp-Session-Id` (128 random bits, hex) is issued with the
--- initialize result and required afterwards (400 without it, 404 for one that is unknown or
--- ended); an `MCP-Protocol-Version` header this server does not speak is refused (400).
---
--- Each session is a server of its own (luxec.mcp) with its own engine: a client sees only
--- the processes it started, and ending its session ends them. Requests are answered as
--- they finish: a long tools/call holds only its own stream.
---
--- Streams resume (luxec.mcp.http_replay): every SSE event has an id; a POST's stream is
--- primed with one (and a retry hint) at once; when its connection drops the call goes on,
--- and a GET with Last-Event-ID replays what the stream sent after that id, then carries it
--- on to its response.
---
--- Security: a bind to an address other than loopback needs a bearer token (401 without
--- it, compared in constant time); on a loopback bind the Host header must name the bound
--- address or localhost, and an Origin header must be a localhost one (403 otherwise: DNS
--- rebinding). Limits: see luxec.mcp.http_conn.
local conn_mod = require("luxec.mcp.http_conn")
local replay_mod = require("luxec.mcp.http_replay")
local json = require("luxec.json")
local mcp = require("luxec.mcp")
local sched = require("luxec.sched")
local uv = require("luv")

local M = {}

M.ENDPOINT = "/mcp"

local VERSIONS = {}
for _, v in ipairs(mcp.LEGACY_VERSIONS) do VERSIONS[v] = true end
for _, v in ipairs(mcp.MODERN_VERSIONS) do VERSIONS[v] = true end

--- The address in `url`: {host, port, loopback, family}, or nil and why.
---@param url string
---@return table|nil, string|nil
function M.parse_listen(url)
  local host, port = url:match("^http://%[([%x:%.]+)%]:(%d+)/?$")
  local family = "inet6"
  if not host then
    host, port = url:match("^http://([%w%.%-]+):(%d+)/?$")
    family = "inet"
  end
  if not host then
    return nil, ("--listen %s: expected http://HOST:PORT (HOST an IPv4 address, [an IPv6 "
      .. "address] or localhost; PORT 0 picks a free one)"):format(url)
  end
  if host == "localhost" then host = "127.0.0.1" end
  if family == "inet" and not host:match("^%d+%.%d+%.%d+%.%d+$") then
    return nil, ("--listen %s: %s is not an IP address (use an address or localhost)")
      :format(url, host)
  end
  port = tonumber(port)
  if port > 65535 then return nil, ("--listen %s: port %d is over 65535"):format(url, port) end
  local loopback = (family == "inet" and host:match("^127%.") ~= nil)
    or host == "::1" or host == "0:0:0:0:0:0:0:1"
  return { host = host, port = port, loopback = loopback, family = family }
end

--- Whether `given` equals `expected`, taking the same time whatever the first difference.
---@param given string
---@param expected string
---@return boolean
function M.equal_secret(given, expected)
  local diff = #given ~ #expected
  for i = 1, #expected do
    diff = diff | ((given:byte(i) or 0) ~ expected:byte(i))
  end
  return diff == 0
end

local function hex(bytes)
  return (bytes:gsub(".", function(c) return ("%02x"):format(c:byte()) end))
end

local function new_session_id()
  return hex(uv.random(16))
end

---@class luxec.McpHttp
local Http = {}
Http.__index = Http

function Http:log(msg)
  if self.cfg.server.log ~= "off" then io.stderr:write("luxec mcp: ", msg, "\n") end
end

-- Sessions ------------------------------------------------------------------------------------

-- One POST's answer: an SSE stream or, for a client that accepts only JSON, one body.
local function new_reply(conn, sse, headers)
  return { conn = conn, sse = sse, headers = headers, open = true, started = false }
end

local function sse_event(line, id)
  return ("event: message\nid: %s\ndata: %s\n\n"):format(id, line)
end

local function sse_headers(r)
  r.headers["Content-Type"] = "text/event-stream"
  r.headers["Cache-Control"] = "no-cache"
  return r.headers
end

-- Send `msg` on reply `r`; `final` ends it (the request's response). An SSE reply's
-- messages are kept for a resume (luxec.mcp.http_replay) and sent if a connection holds it.
local function deliver(sess, r, msg, final)
  if not r.open then return end
  local ok, line = pcall(json.encode, msg)
  if not ok then
    if not final then return end
    line = json.encode({ jsonrpc = "2.0", id = msg.id, error = { code = mcp.INTERNAL_ERROR,
      message = "Internal error: the result could not be encoded as JSON: " .. line } })
  end
  if r.sse then
    local id = sess.replay:record(r.stream, line, final)
    if r.conn and not r.started then
      r.started = true
      r.conn:stream(200, sse_headers(r))
    end
    if r.conn then r.conn:write(sse_event(line, id)) end
    if final then
      r.open = false
      if r.conn then r.conn:finish() end
    end
  elseif final then
    r.open = false
    r.headers["Content-Type"] = "application/json"
    r.conn:respond(200, r.headers, line)
  end
end

-- A message from a session's server: a response to the POST that asked, a progress
-- notification to the POST whose request has its token, anything else (log messages) to the
-- POST being handled, else the newest open SSE reply, else the GET stream, else nowhere.
local function route(sess, msg)
  if msg.method == nil then
    local key = mcp.id_key(msg.id)
    local r = key and sess.pending[key] or sess.current
    if key then sess.pending[key] = nil end
    if r and not r.key then -- an error about a POST that held no request: its answer
      r.open = false
      return r.conn:respond(400, { ["Content-Type"] = "application/json" }, json.encode(msg))
    end
    if r then
      if r.tkey and sess.tokens[r.tkey] == r then sess.tokens[r.tkey] = nil end
      if sess.initializing == r then
        sess.initializing = nil
        if msg.error then r.headers["Mcp-Session-Id"] = nil end
      end
      deliver(sess, r, msg, true)
    end
    return
  end
  local p = msg.params
  local r
  if msg.method == "notifications/progress" and type(p) == "table" then
    local key = mcp.id_key(p.progressToken)
    r = key and sess.tokens[key]
  end
  r = r or (sess.current and sess.current.key and sess.current)
  if not (r and r.open and r.sse) then
    r = nil
    for _, pr in pairs(sess.pending) do
      if pr.open and pr.sse and (not r or pr.key > r.key) then r = pr end
    end
  end
  if r then return deliver(sess, r, msg, false) end
  -- once the GET stream was opened, its messages are kept for a resume while it is away
  if sess.get_st then
    local line = json.encode(msg)
    local id = sess.replay:record(sess.get_st, line)
    local g = sess.get_stream
    if g and g.open then g.conn:write(sse_event(line, id)) end
  end
end

function Http:_new_session()
  local srv = mcp.new(self.cfg)
  local sess = { id = new_session_id(), srv = srv, pending = {}, tokens = {}, seq = 0,
    replay = replay_mod.new(self.cfg.server.http_replay_bytes) }
  srv.log_prefix = ("session %s: "):format(sess.id:sub(1, 8))
  srv.send = function(_, msg) route(sess, msg) end
  return sess
end

-- End a session: no request is taken for it any more; its streams end, its processes too.
-- `done` runs when they are gone.
function Http:_end_session(sess, why, done)
  if self.sessions[sess.id] ~= sess then return done and done() end
  self.sessions[sess.id] = nil
  self.nsessions = self.nsessions - 1
  sess.srv:log("info", "session ended: " .. why)
  if sess.get_stream and sess.get_stream.open then
    sess.get_stream.open = false
    sess.get_stream.conn:finish()
  end
  sched.go(function()
    sess.srv:end_sessions()
    for _, r in pairs(sess.pending) do
      if r.open and r.conn then
        if r.started then r.conn:finish() else r.conn:close() end
      end
      r.open = false
    end
    sess.pending = {}
    local g = sess.get_stream
    if g and not g.timer:is_closing() then g.timer:close() end
    if done then done() end
  end)
end

-- Requests ------------------------------------------------------------------------------------

local function error_body(message, code)
  return json.encode({ jsonrpc = "2.0", id = json.null,
    error = { code = code or -32000, message = message } })
end

local function refuse(conn, status, message, extra)
  local headers = { ["Content-Type"] = "application/json" }
  for k, v in pairs(extra or {}) do headers[k] = v end
  conn:respond(status, headers, error_body(message))
end

local LOCAL_NAMES = { localhost = true, ["127.0.0.1"] = true, ["[::1]"] = true }

-- DNS rebinding: on a loopback bind, Host must be this server by a local name, and a
-- browser's Origin a local one.
function Http:_host_allowed(req)
  local host = req.headers.host
  if not host or req.counts.host ~= 1 then return false, "no Host header (or more than one)" end
  if not self.addr.loopback then return true end
  local name, port = host:lower():match("^(%[[%x:%.]+%]):?(%d*)$")
  if not name then name, port = host:lower():match("^([%w%.%-]+):?(%d*)$") end
  if not name or not (LOCAL_NAMES[name] or name == self.addr.host)
    or (port ~= "" and tonumber(port) ~= self.port) then
    return false, ("Host %q is not this server (expected localhost:%d or %s:%d)")
      :format(host, self.port, self.addr.host, self.port)
  end
  local origin = req.headers.origin
  if origin then
    local oname = origin:lower():match("^https?://(%[[%x:%.]+%]):?%d*$")
      or origin:lower():match("^https?://([%w%.%-]+):?%d*$")
    if not (oname and LOCAL_NAMES[oname]) then
      return false, ("Origin %q is not a local one (a loopback server answers only pages "
        .. "of localhost)"):format(origin)
    end
  end
  return true
end

function Http:_authorized(req)
  if not self.token then return true end
  local auth = req.headers.authorization or ""
  local given = auth:match("^[Bb]earer +(.-)%s*$")
  return given ~= nil and req.counts.authorization == 1 and M.equal_secret(given, self.token)
end

local function accepts(req, mime)
  local a = (req.headers.accept or ""):lower()
  return a:find(mime, 1, true) ~= nil or a:find("*/*", 1, true) ~= nil
end

function Http:request(conn, req)
  local ok, why = self:_host_allowed(req)
  if not ok then return refuse(conn, 403, "Forbidden: " .. why) end
  if not self:_authorized(req) then
    return refuse(conn, 401, "Unauthorized: a valid bearer token is required "
      .. "(Authorization: Bearer TOKEN)", { ["WWW-Authenticate"] = 'Bearer realm="luxec"' })
  end
  local path = req.url:match("^[^?#]*")
  if path ~= M.ENDPOINT then
    return refuse(conn, 404, ("Not Found: %s (the MCP endpoint is %s)"):format(path, M.ENDPOINT))
  end
  if self.closing then return refuse(conn, 503, "Service Unavailable: the server is stopping") end
  local version = req.headers["mcp-protocol-version"]
  if version and not VERSIONS[version] then
    return refuse(conn, 400, ("Bad Request: unsupported MCP-Protocol-Version %q (supported: "
      .. "%s)"):format(version, table.concat(mcp.LEGACY_VERSIONS, ", ")))
  end
  if req.method == "POST" then return self:_post(conn, req) end
  if req.method == "GET" or req.method == "DELETE" then
    local sess, status, msg = self:_session_of(req)
    if not sess then return refuse(conn, status, msg) end
    if req.method == "DELETE" then
      return self:_end_session(sess, "deleted by the client", function()
        conn:respond(200, {}, "")
      end)
    end
    return self:_get(conn, req, sess)
  end
  refuse(conn, 405, ("Method Not Allowed: %s (use POST, GET or DELETE)"):format(req.method),
    { Allow = "GET, POST, DELETE" })
end

function Http:_session_of(req)
  local id = req.headers["mcp-session-id"]
  if not id then
    return nil, 400, "Bad Request: Mcp-Session-Id header is required (initialize first)"
  end
  local sess = self.sessions[id]
  if not sess then return nil, 404, "Session not found: " .. id end
  return sess
end

function Http:_get(conn, req, sess)
  if not accepts(req, "text/event-stream") then
    return refuse(conn, 406, "Not Acceptable: GET opens an event stream: Accept must "
      .. "include text/event-stream")
  end
  local last = req.headers["last-event-id"]
  local st, kept, gap
  if last then
    st, kept, gap = sess.replay:resume(last)
    if not st then return refuse(conn, 400, "Bad Request: " .. kept) end
    if st.owner ~= "get" then return self:_resume(conn, sess, st, kept, gap) end
  end
  if sess.get_stream and sess.get_stream.open then
    return refuse(conn, 409, "Conflict: this session already has a GET stream open")
  end
  local g = { conn = conn, open = true, timer = uv.new_timer() }
  sess.get_stream = g
  sess.get_st = sess.get_st or sess.replay:open_stream("get")
  conn:stream(200, { ["Content-Type"] = "text/event-stream", ["Cache-Control"] = "no-cache",
    ["Mcp-Session-Id"] = sess.id })
  self:_replay(conn, sess, sess.get_st, kept, gap)
  local every = self.limits.keepalive_ms
  g.timer:start(every, every, function() conn:write(": keepalive\n\n") end)
  conn:on_close(function()
    g.open = false
    if not g.timer:is_closing() then g.timer:close() end
  end)
end

-- Open SSE stream `conn`: the retry hint, a priming id (2025-11-25 on), then what a resume
-- replays: a warning when messages after the client's id were dropped, the kept ones.
function Http:_replay(conn, sess, st, kept, gap)
  if (sess.srv.protocol_version or "") >= "2025-11-25" then
    conn:write(("retry: %d\nid: %s\ndata: \n\n"):format(self.cfg.server.http_retry_ms,
      sess.replay:mark(st)))
  else
    conn:write(": stream open\n\n")
  end
  if gap then
    local line = json.encode({ jsonrpc = "2.0", method = "notifications/message",
      params = { level = "warning", logger = "luxec", data = ("messages of this stream up "
        .. "to event %s were dropped from the session's replay buffer "
        .. "(server.http_replay_bytes = %d): they are lost; what is left follows")
        :format(gap, self.cfg.server.http_replay_bytes) } })
    conn:write(sse_event(line, sess.replay:mark(st)))
  end
  for _, e in ipairs(kept or {}) do conn:write(sse_event(e.line, e.id)) end
end

-- GET with the Last-Event-ID of a POST's stream: what it kept is replayed here, and if its
-- response is still to come this connection takes the stream over (the old one, if any, is
-- dropped: a message goes on one connection only) and ends after the response.
function Http:_resume(conn, sess, st, kept, gap)
  local r = st.owner
  conn:stream(200, { ["Content-Type"] = "text/event-stream", ["Cache-Control"] = "no-cache",
    ["Mcp-Session-Id"] = sess.id })
  self:_replay(conn, sess, st, kept, gap)
  if not r.open then return conn:finish() end
  local old = r.conn
  r.conn, r.started = conn, true
  if old then old:close("a client resumed this stream on another connection") end
  conn:on_close(function()
    if r.conn == conn then r.conn = nil end
  end)
end

function Http:_post(conn, req)
  local ctype = (req.headers["content-type"] or ""):lower()
  if not ctype:match("^application/json") then
    return refuse(conn, 415, "Unsupported Media Type: the body must be application/json")
  end
  local sse = accepts(req, "text/event-stream")
  if not sse and not accepts(req, "application/json") then
    return refuse(conn, 406, "Not Acceptable: Accept must include application/json or "
      .. "text/event-stream")
  end
  local msg, err = json.decode(req.body)
  if err or type(msg) ~= "table" then
    return refuse(conn, 400, ("Parse error: the body is not one JSON-RPC message (%s)")
      :format(err or "not an object"))
  end
  if msg[1] ~= nil or next(msg) == nil and req.body:match("^%s*%[") then
    return refuse(conn, 400, "Bad Request: batches (JSON arrays) are not supported")
  end
  local is_request = type(msg.method) == "string" and msg.id ~= nil
  local sess
  if msg.method == "initialize" then
    if req.headers["mcp-session-id"] then
      return refuse(conn, 400, "Bad Request: initialize starts a session: send it without "
        .. "Mcp-Session-Id")
    end
    if self.nsessions >= self.limits.max_sessions then
      return refuse(conn, 503, ("Service Unavailable: %d sessions are open (the limit)")
        :format(self.limits.max_sessions))
    end
    sess = self:_new_session()
  else
    local status, text
    sess, status, text = self:_session_of(req)
    if not sess then return refuse(conn, status, text) end
  end
  local key = is_request and mcp.id_key(msg.id)
  if key and sess.pending[key] then
    return refuse(conn, 409, ("Conflict: request id %s is already in progress in this session")
      :format(json.encode(msg.id)))
  end
  local r = new_reply(conn, sse, {})
  if key then
    sess.seq = sess.seq + 1
    r.key = sess.seq
    sess.pending[key] = r
    local meta = type(msg.params) == "table" and msg.params._meta
    local tkey = type(meta) == "table" and mcp.id_key(meta.progressToken)
    if tkey then sess.tokens[tkey], r.tkey = r, tkey end
    if sse then r.stream = sess.replay:open_stream(r) end
    conn:on_close(function()
      if r.conn ~= conn then return end
      if r.stream and r.open then -- the call goes on; its messages wait for a resume
        r.conn = nil
        return
      end
      r.open = false
      if sess.pending[key] == r then sess.pending[key] = nil end
      if tkey and sess.tokens[tkey] == r then sess.tokens[tkey] = nil end
    end)
    if msg.method == "initialize" then
      self.sessions[sess.id] = sess
      self.nsessions = self.nsessions + 1
      sess.initializing = r
      r.headers["Mcp-Session-Id"] = sess.id
    end
  end
  if r.stream and msg.method ~= "initialize" then -- the stream starts at once, primed
    r.started = true
    conn:stream(200, sse_headers(r))
    self:_replay(conn, sess, r.stream)
  end
  sess.current = r
  sess.srv:handle_line(req.body)
  sess.current = nil
  if msg.method == "initialize" and self.sessions[sess.id] == sess and not sess.srv
    .protocol_version then
    self:_end_session(sess, "initialize failed")
  end
  if not key and r.open then -- a notification or a response: nothing to answer
    r.open = false
    conn:respond(202, {}, "")
  end
end

-- Lifetime ------------------------------------------------------------------------------------

--- Listen on `url` and serve until a signal; every session's processes are ended first.
--- opts: token (string or nil), limits (luxec.mcp.config's server.http_* values). Returns
--- the exit status.
---@param cfg table
---@param url string
---@param token string|nil
---@return integer
function M.serve(cfg, url, token)
  local addr, err = M.parse_listen(url)
  if not addr then
    io.stderr:write("luxec mcp: ", err, "\n")
    return 2
  end
  if not addr.loopback and not token then
    io.stderr:write(("luxec mcp: refusing to listen on %s: it is not a loopback address, so "
      .. "a bearer token is required (--token-file PATH or LUXEC_MCP_TOKEN)\n"):format(url))
    return 2
  end
  local s = cfg.server
  local self = setmetatable({ cfg = cfg, addr = addr, token = token, sessions = {},
    nsessions = 0, conns = {}, nconns = 0, limits = {
      header_bytes = s.http_header_bytes, body_bytes = s.max_message_bytes,
      request_timeout_ms = s.http_request_timeout_ms, max_queued_bytes = s.http_max_queued_bytes,
      max_sessions = s.http_max_sessions, keepalive_ms = s.http_keepalive_ms,
      max_connections = s.http_max_connections,
    } }, Http)
  local tcp = uv.new_tcp(addr.family == "inet6" and "inet6" or "inet")
  local ok, berr = tcp:bind(addr.host, addr.port)
  if ok then ok, berr = tcp:listen(128, function(lerr) self:_accept(lerr) end) end
  if not ok then
    tcp:close()
    io.stderr:write(("luxec mcp: cannot listen on %s: %s\n"):format(url, tostring(berr)))
    return 1
  end
  self.tcp = tcp
  self.port = tcp:getsockname().port
  local shown = addr.family == "inet6" and ("[%s]"):format(addr.host) or addr.host
  io.stderr:write(("luxec mcp: listening on http://%s:%d%s\n"):format(shown, self.port,
    M.ENDPOINT))
  sched.suspend(function(wake)
    self.signals = {}
    for _, sig in ipairs({ "sigterm", "sigint", "sighup" }) do
      local h = uv.new_signal()
      h:start(sig, function() self:shutdown(sig:upper(), wake) end)
      self.signals[#self.signals + 1] = h
    end
  end)
  return 0
end

function Http:_accept(err)
  if err then return self:log("accept: " .. tostring(err)) end
  local c = uv.new_tcp()
  if not self.tcp:accept(c) then return c:close() end
  if self.nconns >= self.limits.max_connections then
    self:log(("http: a connection refused: %d are open (server.http_max_connections)")
      :format(self.nconns))
    return c:close()
  end
  self.nconns = self.nconns + 1
  local conn
  conn = conn_mod.serve(c, self.limits, function(cn, req) self:request(cn, req) end,
    function(msg) self:log("http: " .. msg) end)
  self.conns[conn] = true
  conn.on_end = function()
    self.conns[conn] = nil
    self.nconns = self.nconns - 1
  end
end

-- Stop listening, end every session (and so every process), then close what is left.
function Http:shutdown(why, done)
  if self.closing then return end
  self.closing = true
  self:log("shutting down: " .. why)
  self.tcp:close()
  local left = 0
  local function one_done()
    left = left - 1
    if left > 0 then return end
    for conn in pairs(self.conns) do conn:close() end
    for _, h in ipairs(self.signals) do h:close() end
    done()
  end
  local all = {}
  for _, sess in pairs(self.sessions) do all[#all + 1] = sess end
  left = #all + 1
  for _, sess in ipairs(all) do self:_end_session(sess, why, one_done) end
  one_done()
end

return M
