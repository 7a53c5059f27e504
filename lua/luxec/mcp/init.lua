--- luxec.mcp: `luxec mcp`, an MCP server on stdio in front of the exec engine.
---
--- JSON-RPC 2.0, one message per line on stdout (logs only on stderr). Both protocol eras:
--- the `initialize` handshake (2024-11-05 … 2025-11-25: a supported requested version is
--- echoed, else the newest is offered) and the stateless 2026-07-28 revision, where each
--- request names its version and client capabilities in `_meta`, `server/discover` tells
--- what the server speaks, results carry `resultType` and tools/list `ttlMs`/`cacheScope`.
--- Every tools/call runs in its own luxec.go task, so calls on different sessions are served
--- concurrently; `notifications/cancelled` ends the waiting call (no response is sent);
--- a request with a progressToken gets `notifications/progress` while it waits. stdin EOF,
--- SIGTERM, SIGINT or SIGHUP end every session, then `serve` returns 0.
local uv = require("luv")
local core = require("luxec.core")
local sched = require("luxec.sched")
local exec = require("luxec.engine")
local remote = require("luxec.mcp.remote")
local config = require("luxec.mcp.config")
local json = require("luxec.json")
local tools = require("luxec.mcp.tools")
local stdio = require("luxec.mcp.stdio")
local sandbox = require("luxec.sandbox")

local M = {}

--- The handshake-era versions, newest first, and the stateless ones.
M.LEGACY_VERSIONS = { "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05" }
M.MODERN_VERSIONS = { "2026-07-28" }

local LEGACY, MODERN, SUPPORTED = {}, {}, json.array()
for _, v in ipairs(M.MODERN_VERSIONS) do
  MODERN[v] = true
  SUPPORTED[#SUPPORTED + 1] = v
end
for _, v in ipairs(M.LEGACY_VERSIONS) do
  LEGACY[v] = true
  SUPPORTED[#SUPPORTED + 1] = v
end

local META_VERSION = "io.modelcontextprotocol/protocolVersion"
local META_CAPS = "io.modelcontextprotocol/clientCapabilities"
local META_CLIENT = "io.modelcontextprotocol/clientInfo"

--- JSON-RPC error codes (and the 2026-07-28 revision's unsupported-version error).
M.PARSE_ERROR, M.INVALID_REQUEST, M.METHOD_NOT_FOUND = -32700, -32600, -32601
M.INVALID_PARAMS, M.INTERNAL_ERROR, M.UNSUPPORTED_VERSION = -32602, -32603, -32022

local LEVELS = { off = 0, error = 1, warn = 2, info = 3, debug = 4 }

local function now_ms()
  return uv.hrtime() / 1e6
end

-- A protocol error raised inside a handler: {code=, message=, data=}.
local function rpc_error(code, message, data)
  error({ rpc = true, code = code, message = message, data = data }, 0)
end

---@class luxec.McpServer
local Server = {}
Server.__index = Server

-- MCP's logging levels (RFC 5424's, least severe first) and the server's own, mapped.
local MCP_LEVELS = { "debug", "info", "notice", "warning", "error", "critical", "alert",
  "emergency" }
local MCP_RANK = {}
for i, name in ipairs(MCP_LEVELS) do MCP_RANK[name] = i end
local TO_MCP = { error = "error", warn = "warning", info = "info", debug = "debug" }

--- Log `msg` on stderr when the configured level lets `level` through, and to the client as
--- notifications/message once it asked for them (logging/setLevel) at this level or below.
---@param level "error"|"warn"|"info"|"debug"
---@param msg string
function Server:log(level, msg)
  if LEVELS[level] <= self.log_level then
    io.stderr:write("luxec mcp: ", self.log_prefix or "", msg, "\n")
  end
  local mcp_level = TO_MCP[level]
  if self.client_log_rank and MCP_RANK[mcp_level] >= self.client_log_rank then
    self:notify("notifications/message", { level = mcp_level, logger = "luxec", data = msg })
  end
end

-- Output ------------------------------------------------------------------------------------

--- Write one message (a table) as a line on stdout.
---@param msg table
function Server:send(msg)
  local ok, line = pcall(json.encode, msg)
  if not ok then
    self:log("error", "cannot encode a message: " .. tostring(line))
    if msg.id == nil then return end
    line = json.encode({ jsonrpc = "2.0", id = msg.id, error = { code = M.INTERNAL_ERROR,
      message = "Internal error: the result could not be encoded as JSON: " .. tostring(line) } })
  end
  self.out:write(line .. "\n")
end

--- Send a notification to the client.
---@param method string
---@param params table|nil
function Server:notify(method, params)
  if self.closed then return end
  self:send({ jsonrpc = "2.0", method = method, params = params })
end

function Server:_respond(id, result)
  self:send({ jsonrpc = "2.0", id = id, result = result })
end

function Server:_error(id, code, message, data)
  if id == nil then id = json.null end
  self:send({ jsonrpc = "2.0", id = id, error = { code = code, message = message, data = data } })
end

-- Methods -----------------------------------------------------------------------------------

local function server_info()
  return { name = "luxec", title = "luxec", version = core.version }
end

local methods = {}

function methods.initialize(self, req)
  if req.modern then
    rpc_error(M.METHOD_NOT_FOUND, "Method not found: initialize is not part of protocol "
      .. req.protocol_version .. " (call server/discover, and name the version in _meta)")
  end
  local p = req.params
  if type(p.protocolVersion) ~= "string" then
    rpc_error(M.INVALID_PARAMS, "Invalid params: initialize needs params.protocolVersion "
      .. "(a string such as \"2025-11-25\")")
  end
  local version = LEGACY[p.protocolVersion] and p.protocolVersion or M.LEGACY_VERSIONS[1]
  self.protocol_version = version
  self.client_info = type(p.clientInfo) == "table" and p.clientInfo or {}
  self.client_capabilities = type(p.capabilities) == "table" and p.capabilities or {}
  self:log("info", ("client %s %s, protocol %s (asked %s)"):format(
    tostring(self.client_info.name or "?"), tostring(self.client_info.version or ""), version,
    p.protocolVersion))
  return {
    protocolVersion = version,
    capabilities = { tools = { listChanged = false }, logging = {} },
    serverInfo = server_info(),
    instructions = self.instructions,
  }
end

function methods.ping(_, req)
  if req.modern then
    rpc_error(M.METHOD_NOT_FOUND, "Method not found: ping (removed in protocol "
      .. req.protocol_version .. ")")
  end
  return {}
end

methods["server/discover"] = function(self)
  return {
    supportedVersions = SUPPORTED,
    capabilities = { tools = { listChanged = false }, logging = {} },
    serverInfo = server_info(),
    instructions = self.instructions,
    resultType = "complete",
    ttlMs = self.cfg.server.list_ttl_ms,
    cacheScope = self.cfg.server.list_cache_scope,
  }
end

methods["logging/setLevel"] = function(self, req)
  local level = req.params.level
  if not MCP_RANK[level] then
    rpc_error(M.INVALID_PARAMS, ("Invalid params: level must be one of %s, got %s"):format(
      table.concat(MCP_LEVELS, ", "), json.encode(level == nil and json.null or level)))
  end
  self.client_log_rank = MCP_RANK[level]
  return {}
end

methods["tools/list"] = function(self, req)
  local result = { tools = tools.list(self.cfg) }
  if req.modern then
    result.ttlMs = self.cfg.server.list_ttl_ms
    result.cacheScope = self.cfg.server.list_cache_scope
  end
  return result
end

methods["tools/call"] = function(self, req)
  local p = req.params
  if type(p.name) ~= "string" then
    rpc_error(M.INVALID_PARAMS, "Invalid params: tools/call needs the tool's name in "
      .. "params.name (a string)")
  end
  if not tools.known(p.name) then
    rpc_error(M.INVALID_PARAMS, ("Unknown tool: %s (this server has %s)"):format(p.name,
      tools.names()))
  end
  local args = p.arguments
  if args == nil or args == json.null then
    args = {}
  elseif type(args) ~= "table" or args[1] ~= nil then
    rpc_error(M.INVALID_PARAMS, ("Invalid params: arguments must be an object, got %s")
      :format(type(args) == "table" and "an array" or type(args)))
  end
  return self:_start_call(req, p.name, args)
end

-- tools/call: a task of its own; the response is sent when it ends (unless cancelled). The
-- call's context for the engine (its progress notifications; the hook's sandbox is added by
-- the tool) is an argument of the engine call, and cancelling it goes through the engine.
function Server:_start_call(req, name, args)
  local meta = req.meta or {}
  local call = {
    id = req.id, key = req.key, tool = name, started = now_ms(),
    progress_token = meta.progressToken, protocol_version = req.protocol_version,
    modern = req.modern, client_info = req.client_info,
    client_capabilities = req.client_capabilities,
    ctx = { progress_interval_ms = self.cfg.server.progress_interval_ms },
  }
  if call.progress_token ~= nil then
    call.ctx.progress = function(ms, total, what)
      if call.cancelled or call.done then return end
      self:notify("notifications/progress", {
        progressToken = call.progress_token, progress = ms, total = total,
        message = ("%s: waiting, %.1f s"):format(what, ms / 1000),
      })
    end
  end
  self.calls[req.key] = call
  self:log("debug", ("call %s: %s"):format(req.key, name))
  sched.go(function()
    local ok, res = xpcall(tools.call, debug.traceback, self, call, name, args)
    call.done = true
    if self.calls[call.key] == call then self.calls[call.key] = nil end
    if call.cancelled then
      self:log("debug", ("call %s (%s) was cancelled"):format(call.key, name))
    elseif not ok then
      self:log("error", ("%s failed: %s"):format(name, tostring(res)))
      self:_error(call.id, M.INTERNAL_ERROR, "Internal error: " .. tostring(res):match("[^\n]*"))
    elseif res then
      if call.modern then res.resultType = "complete" end
      self:_respond(call.id, res)
    end
  end)
  return nil -- answered by the task
end

local notifications = {}

notifications["notifications/initialized"] = function(self)
  self.initialized = true
end

notifications["notifications/cancelled"] = function(self, params)
  local key = M.id_key(params.requestId)
  local call = key and self.calls[key]
  if not call then return end -- finished already, or never known: nothing to do
  call.cancelled = true
  self.calls[key] = nil
  self:log("info", ("call %s (%s) cancelled%s"):format(key, call.tool,
    type(params.reason) == "string" and ": " .. params.reason or ""))
  -- "keep": the session runs on, and the next call on it need not wait out this one;
  -- "kill": what the call was waiting on ends too
  self.engine:cancel(call.ctx, self.cfg.server.cancel == "kill" and "kill" or nil)
end

-- Dispatch ------------------------------------------------------------------------------------

--- The key of a JSON-RPC id in the table of calls (1 and "1" differ); nil if not an id.
---@param id any
---@return string|nil
function M.id_key(id)
  if type(id) == "string" then return "s:" .. id end
  local n = type(id) == "number" and math.tointeger(id)
  if n then return ("n:%d"):format(n) end
  return nil
end

local JSON_TYPES = { string = "a string", number = "a number", boolean = "a boolean" }

-- The request's era from its _meta: nil (handshake era), or raises for a bad or unknown
-- version; fills req.modern, req.protocol_version, req.client_info.
local function request_era(req)
  local meta = req.params._meta
  if meta == nil or meta == json.null then return end
  if type(meta) ~= "table" then
    rpc_error(M.INVALID_PARAMS, "Invalid params: params._meta must be an object")
  end
  req.meta = meta
  local v = meta[META_VERSION]
  if v == nil then return end
  if type(v) ~= "string" then
    rpc_error(M.INVALID_PARAMS, ("Invalid params: _meta[%q] must be a string"):format(META_VERSION))
  end
  if LEGACY[v] then
    req.protocol_version = v
    return
  end
  if not MODERN[v] then
    rpc_error(M.UNSUPPORTED_VERSION, ("Unsupported protocol version %q (supported: %s)")
      :format(v, table.concat(SUPPORTED, ", ")), { supported = SUPPORTED, requested = v })
  end
  local caps = meta[META_CAPS]
  if type(caps) ~= "table" and req.method ~= "server/discover" then
    rpc_error(M.INVALID_PARAMS, ("Invalid params: protocol %s requires _meta[%q] (an object)")
      :format(v, META_CAPS))
  end
  req.modern, req.protocol_version = true, v
  req.client_info = type(meta[META_CLIENT]) == "table" and meta[META_CLIENT] or nil
  req.client_capabilities = type(caps) == "table" and caps or nil
end

function Server:_request(msg, id)
  local req = { id = id, key = M.id_key(id), method = msg.method, params = msg.params or {},
    protocol_version = self.protocol_version }
  if self.calls[req.key] then
    return self:_error(id, M.INVALID_REQUEST, ("Invalid Request: id %s is already in use by a "
      .. "request in progress"):format(json.encode(id)))
  end
  local ok, res = xpcall(function()
    if type(req.params) ~= "table" or req.params[1] ~= nil then
      rpc_error(M.INVALID_PARAMS, "Invalid params: params must be an object")
    end
    request_era(req)
    local fn = methods[msg.method]
    if not fn then
      rpc_error(M.METHOD_NOT_FOUND, ("Method not found: %s"):format(msg.method))
    end
    return fn(self, req)
  end, function(e)
    if type(e) == "table" and e.rpc then return e end
    return debug.traceback(tostring(e), 2)
  end)
  if not ok then
    if type(res) == "table" then return self:_error(id, res.code, res.message, res.data) end
    self:log("error", ("%s failed: %s"):format(msg.method, tostring(res)))
    return self:_error(id, M.INTERNAL_ERROR, "Internal error: " .. tostring(res):match("[^\n]*"))
  end
  if res ~= nil then
    if req.modern then res.resultType = "complete" end
    self:_respond(id, res)
  end
end

--- Handle one line of input (one JSON-RPC message).
---@param line string
function Server:handle_line(line)
  if line:find("^%s*$") then return end
  local first = line:match("^%s*(.)")
  local msg, err = json.decode(line)
  if err then
    return self:_error(nil, M.PARSE_ERROR, ("Parse error: %s (each line must be one JSON-RPC "
      .. "message)"):format(err))
  end
  if first == "[" then
    return self:_error(nil, M.INVALID_REQUEST, "Invalid Request: batches (JSON arrays) are not "
      .. "supported; send one JSON-RPC message per line")
  end
  if type(msg) ~= "table" then
    return self:_error(nil, M.INVALID_REQUEST, ("Invalid Request: a JSON-RPC message is an "
      .. "object, got %s"):format(msg == json.null and "null" or JSON_TYPES[type(msg)]))
  end
  local id = msg.id
  local key = M.id_key(id)
  local rid = key and id or nil
  if msg.jsonrpc ~= "2.0" then
    return self:_error(rid, M.INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"')
  end
  if msg.method == nil then
    if msg.result ~= nil or msg.error ~= nil then
      self:log("debug", "ignored a response from the client (this server sends no requests)")
      return
    end
    return self:_error(rid, M.INVALID_REQUEST, 'Invalid Request: no "method"')
  end
  if type(msg.method) ~= "string" then
    return self:_error(rid, M.INVALID_REQUEST, 'Invalid Request: "method" must be a string')
  end
  if id == nil then
    local fn = notifications[msg.method]
    if fn and type(msg.params or {}) == "table" then
      fn(self, msg.params or {})
    else
      self:log("debug", "ignored notification " .. msg.method)
    end
    return
  end
  if not key then
    return self:_error(nil, M.INVALID_REQUEST, "Invalid Request: \"id\" must be a string or "
      .. "an integer")
  end
  if self.closing then return end
  return self:_request(msg, id)
end

-- Input ---------------------------------------------------------------------------------------

function Server:_open_input(fd)
  local max = self.cfg.server.max_message_bytes
  self.input = stdio.reader(fd, {
    max = max,
    on_line = function(line) self:handle_line(line) end,
    on_oversize = function(size)
      self:log("warn", ("skipped a message of %d bytes"):format(size))
      self:_error(nil, M.INVALID_REQUEST, ("Invalid Request: a message of %d bytes is over the "
        .. "limit of %d bytes (server.max_message_bytes)"):format(size, max))
    end,
    on_eof = function() self:shutdown("stdin closed") end,
    on_error = function(err) self:log("warn", "stdin: " .. err) end,
  })
end

-- Lifetime ------------------------------------------------------------------------------------

--- End every session and wait (boundedly) for the calls still running; no request is taken
--- after it. Yields (call it from a task).
function Server:end_sessions()
  self.closing = true
  remote.detach(self)
  self.engine:shutdown()
  local deadline = now_ms() + 5000
  while next(self.calls) and now_ms() < deadline do sched.sleep(5) end
end

--- Stop serving: end every session, wait (boundedly) for the calls still running, flush
--- stdout; `serve` then returns. Idempotent.
---@param reason string
function Server:shutdown(reason)
  if self.closing then return end
  self.closing = true
  self:log("info", "shutting down: " .. reason)
  if self.input then self.input:close() end
  sched.go(function()
    self:end_sessions()
    local deadline = now_ms() + 2000
    while not self.out:drained() and now_ms() < deadline do sched.sleep(5) end
    self.closed = true
    self.out:close()
    for _, s in ipairs(self.signals) do
      if not s:is_closing() then s:close() end
    end
    if self.on_done then self.on_done() end
  end)
end

--- A server for an effective configuration (see luxec.mcp.config); `start` opens stdio.
--- `seams` (for tests and embedders): the engine's `spawn` and `clock` (luxec.engine.new).
---@param cfg table
---@param seams {spawn: function|nil, clock: (fun(): number)|nil}|nil
---@return luxec.McpServer
function M.new(cfg, seams)
  local self = setmetatable({
    cfg = cfg, calls = {}, signals = {}, client_info = {}, client_capabilities = {},
    log_level = LEVELS[cfg.server.log] or LEVELS.info,
  }, Server)
  -- the engine spawns through luxec.spawn and owns every session; the server asks it
  local ecfg = config.engine_config(cfg)
  if seams then ecfg.spawn, ecfg.clock = seams.spawn, seams.clock end
  if not ecfg.spawn and (cfg.hosts or cfg.daemon) then -- (luxec.mcp.remote)
    ecfg.spawn, ecfg.log_dir = remote.spawn(self), ecfg.log_dir or remote.log_dir(cfg)
  end
  self.engine = exec.new(ecfg)
  self.instructions = config.instructions(cfg)
  return self
end

--- Serve on stdin/stdout until EOF or a signal. Opens the streams, installs the handlers.
function Server:start()
  self.out = stdio.writer(1, function(err)
    self:log("warn", "stdout: " .. err)
    self:shutdown("stdout closed")
  end)
  for _, sig in ipairs({ "sigterm", "sigint", "sighup" }) do
    local s = uv.new_signal()
    s:start(sig, function() self:shutdown(sig:upper()) end)
    s:unref()
    self.signals[#self.signals + 1] = s
  end
  self:_open_input(0)
  local sb = self.cfg.sandbox
  self:log("info", ("serving on stdio (protocols %s..%s), cwd %s, sandbox %s%s%s"):format(
    M.LEGACY_VERSIONS[#M.LEGACY_VERSIONS], M.MODERN_VERSIONS[#M.MODERN_VERSIONS], self.cfg.cwd,
    sb.mode, sb.mode ~= "full-access" and (", network " .. sandbox.network_text(sb.network)) or "",
    self.cfg.source and ", config " .. self.cfg.source or ""))
end

--- Serve MCP on stdio with `cfg` until stdin closes or a signal arrives; every session is
--- ended before it returns. Returns the exit status (0).
---@param cfg table  an effective configuration (luxec.mcp.config.check or load)
---@return integer
function M.serve(cfg)
  local srv = M.new(cfg)
  if cfg.daemon then -- the sessions an earlier run left on the daemon, before any call
    local n, err = remote.adopt(srv)
    if not n then srv:log("warn", err) elseif n > 0 then
      srv:log("info", ("took back %d session(s) from the daemon"):format(n))
    end
  end
  sched.suspend(function(wake)
    srv.on_done = wake
    srv:start()
  end)
  return 0
end

return M
