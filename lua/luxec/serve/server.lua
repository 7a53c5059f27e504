--- luxec.serve.server: the exec-server — sessions owned by the server, reached by clients
--- (connections) that speak the protocol of luxec.serve.protocol. A session lives in the
--- server, not in the connection that started it: every connection subscribed to it gets its
--- notifications, and a client that comes back subscribes again (process/attach) and reads
--- what it missed by sequence number (process/read afterSeq).
---
--- Each session keeps the chunks of its output with their sequence numbers, up to `retain`
--- bytes (the oldest go first; the session's own head and tail and its log still hold them
--- for process/snapshot and process/readRange). A connection whose output queue is over
--- `max_queued` bytes gets no output notifications until it drains: the client sees the gap
--- in the sequence numbers and reads the rest, so a slow client never grows the server.
local base64 = require("luxec.serve.base64")
local json = require("luxec.json")
local proto = require("luxec.serve.protocol")
local sched = require("luxec.sched")
local uv = require("luv")
local wire = require("luxec.serve.wire")

local M = {}

M.defaults = {
  retain = 1024 * 1024, -- output bytes kept per session for process/read
  max_queued = 4 * 1024 * 1024, -- a connection's queue above which output is not pushed
  keep_finished = 64, -- finished sessions kept readable (the oldest are forgotten)
  -- A session's input not yet taken by its program above which process/write is answered
  -- only once it is below again (looked at every `input_poll_ms`): a client that waits for
  -- its answers, over a window as luxec's does, never grows the server's memory.
  max_input = 8 * 1024 * 1024,
  input_poll_ms = 2,
  -- A session's tail unless the client names one: more than the core reads in one turn of
  -- the loop (4 MiB), so that the server, which reads after each turn, drops nothing.
  tail = 5 * 1024 * 1024,
}

local Server = {}
Server.__index = Server

local Conn = {}
Conn.__index = Conn

--- A server. opts: sandbox (a luxec policy every process runs under, or nil), workspace
--- (its directory), retain, max_queued, keep_finished, on_idle (called when the last
--- session and connection are gone).
function M.new(opts)
  opts = opts or {}
  local self = setmetatable({
    sessions = {}, -- processId -> session
    finished = {}, -- processIds of finished sessions, oldest first
    conns = {},
    started_ms = uv.now(),
    sandbox = opts.sandbox,
    workspace = opts.workspace or uv.cwd(),
    retain = opts.retain or M.defaults.retain,
    max_queued = opts.max_queued or M.defaults.max_queued,
    keep_finished = opts.keep_finished or M.defaults.keep_finished,
    max_input = opts.max_input or M.defaults.max_input,
    session_tail = opts.tail or M.defaults.tail,
  }, Server)
  self.methods = require("luxec.serve.methods")(self)
  for name, fn in pairs(require("luxec.serve.fs")(self)) do
    self.methods[name] = fn
  end
  return self
end

--- A new connection: `write(text[, more])` sends bytes to the client (`more`: bytes that
--- follow `text` in the same write); `queued()` says how many bytes are waiting to go out;
--- `hang_up()` (optional) closes the transport when the server ends the connection. The
--- transport sets `conn.switch` to a function that makes its reader read frames from then on
--- (luxec's binary framing, asked for at initialize).
---@param write fun(text: string, more: string|nil)
---@param queued fun(): integer
---@param hang_up fun()|nil
function Server:connect(write, queued, hang_up)
  local c = setmetatable({ server = self, _write = write, queued = queued, subs = {},
    state = "new", open = true, hang_up = hang_up }, Conn)
  self.conns[c] = true
  return c
end

function Conn:send(msg)
  if self.open then self._write(wire.encode(msg, self.binary)) end
end

--- The client went away: its subscriptions end; its sessions live on in the server.
function Conn:close()
  if not self.open then return end
  self.open = false
  self.server.conns[self] = nil
  if self.hang_up then self.hang_up() end
  for _, s in pairs(self.server.sessions) do
    s.subs[self] = nil
  end
end

--- Handle one line from the client.
function Conn:line(text)
  if text:match("^%s*$") then return end
  self:message(text)
end

--- Handle one frame from the client (luxec's binary framing): a JSON message, or the bytes of
--- a process/write request.
function Conn:frame(kind, a, b, c)
  if kind == "json" then return self:message(a) end
  if kind == "write" then
    return self:run(a, "process/write", function() return self.server:write_input(b, c) end)
  end
  self:send(proto.error(nil, proto.INVALID_REQUEST,
    ("invalid request: a client sends no %s frame"):format(kind)))
end

--- The frames cannot be read on: told, then hung up on.
function Conn:frame_error(message)
  self:send(proto.error(nil, proto.INVALID_REQUEST, "invalid request: " .. message))
  self:close()
end

function Conn:message(text)
  local msg, err = proto.decode(text)
  if msg == nil then
    return self:send(proto.error(nil, proto.PARSE_ERROR, "parse error: " .. tostring(err)))
  end
  if type(msg) ~= "table" or (msg.method ~= nil and type(msg.method) ~= "string") then
    return self:send(proto.error(nil, proto.INVALID_REQUEST,
      "invalid request: a message must be an object with a string 'method'"))
  end
  local id = msg.id
  if id == json.null then id = nil end
  if msg.method == nil then
    if msg.result ~= nil or msg.error ~= nil then return end -- a response: the server asks nothing
    return self:send(proto.error(id, proto.INVALID_REQUEST, "invalid request: a message must "
      .. "be an object with a string 'method' (a batch is not supported)"))
  end
  if id == nil then return self:notification(msg) end
  if type(id) ~= "string" and math.type(id) ~= "integer" then
    return self:send(proto.error(nil, proto.INVALID_REQUEST,
      "invalid request: 'id' must be a string or an integer"))
  end
  self:request(msg, id)
end

-- The only notification a client sends is `initialized`; any other is answered with an
-- error under id -1 (as Codex's server does).
function Conn:notification(msg)
  if msg.method == "initialized" then
    if self.state == "new" then
      return self:send(proto.error(-1, proto.INVALID_REQUEST,
        "invalid request: 'initialized' before 'initialize'"))
    end
    self.state = "ready"
    return
  end
  self:send(proto.error(-1, proto.INVALID_REQUEST,
    ("invalid request: unexpected notification '%s' (only 'initialized' is one)")
      :format(msg.method)))
end

function Conn:request(msg, id)
  local method = msg.method
  if method == "initialize" then
    if self.state ~= "new" then
      return self:send(proto.error(id, proto.INVALID_REQUEST,
        "invalid request: 'initialize' was already received"))
    end
    local framing
    local ok, err = pcall(function()
      local p = proto.params(msg)
      proto.string(p, "clientName", true)
      local ext = proto.table(p, "luxec")
      self.extras = ext ~= nil
      framing = ext and proto.string(ext, "framing", false)
      if framing and framing ~= wire.FRAMING then
        proto.fail(proto.INVALID_PARAMS, "invalid params: 'luxec.framing' must be \"%s\" "
          .. "(got \"%s\")", wire.FRAMING, framing)
      end
    end)
    if not ok then return self:answer_error(id, err) end
    self.state = "initializing"
    if framing and self.switch then -- (the answer is the last line; frames from then on)
      self:send(proto.response(id, { luxec = { framing = framing } }))
      self.binary = true
      return self.switch()
    end
    return self:send(proto.response(id, {}))
  end
  local fn = self.server.methods[method]
  if not fn then
    return self:send(proto.error(id, proto.METHOD_NOT_FOUND,
      ("method not found: '%s'"):format(method)))
  end
  self:run(id, method, fn, proto.params(msg))
end

-- Run a request's method as a task (one that waits, as process/read with waitMs does, holds
-- no other) and answer it.
function Conn:run(id, method, fn, params)
  if self.state ~= "ready" then
    return self:send(proto.error(id, proto.INVALID_REQUEST, ("invalid request: '%s' before "
      .. "the handshake ended (send 'initialize', then 'initialized')"):format(method)))
  end
  sched.go(function()
    local ok, result = xpcall(fn, function(e)
      if type(e) == "table" and e.rpc_error then return e end
      return debug.traceback(tostring(e), 2)
    end, self, params)
    if ok then
      self:send(proto.response(id, result))
    else
      self:answer_error(id, result)
    end
  end)
end

function Conn:answer_error(id, err)
  if type(err) == "table" and err.rpc_error then
    self:send(proto.error(id, err.code, err.message))
  else
    io.stderr:write("luxec serve: internal error: ", tostring(err), "\n")
    self:send(proto.error(id, proto.INTERNAL_ERROR, "internal error: "
      .. tostring(err):match("^[^\n]*")))
  end
end

-- Sessions ------------------------------------------------------------------------------------

--- The session `id`, or an invalid-request error naming it.
function Server:session(id)
  local s = self.sessions[id]
  if not s then proto.fail(proto.INVALID_REQUEST, "unknown process id %s", id) end
  return s
end

--- process/write: `data` to the input of session `id` (from a request's base64 chunk, or a
--- write frame's bytes).
function Server:write_input(id, data)
  local s = self:session(id)
  if not s.pipe_stdin then
    proto.fail(proto.INVALID_REQUEST, "process %s takes no input: it has no terminal and was "
      .. "started without pipeStdin", s.id)
  end
  if s.p:closed() then return { status = "stdinClosed" } end
  local n, err = s.p:write(data)
  if not n then return { status = "stdinClosed", luxec = { error = err } } end
  local core = s.p._core
  while self.sessions[id] == s and not s.p:closed() and core:input_queued() > self.max_input do
    sched.sleep(M.defaults.input_poll_ms)
  end
  return { status = "accepted" }
end

local function wake(s)
  local list = s.waiters
  s.waiters = {}
  for _, fn in ipairs(list) do fn() end
end

-- Push a notification to every subscriber; output only to those keeping up.
-- (`extra`: luxec's fields, for the connections that asked for them at initialize)
local function push(self, s, method, params, droppable, extra)
  for c in pairs(s.subs) do
    if not (droppable and c.queued() > self.max_queued) then
      params.luxec = c.extras and extra or nil
      c:send(proto.notification(method, params))
    end
  end
end

-- Push a chunk of output: to a connection with binary framing, a frame with the bytes as
-- they are; to one with lines, params.chunk in base64 (encoded once for all of them).
local function push_output(self, s, chunk, stream)
  local b64
  for c in pairs(s.subs) do
    if c.open and c.queued() <= self.max_queued then
      if c.binary then
        c._write(wire.frame_output(s.id, chunk.seq, stream, chunk.offset, #chunk.data),
          chunk.data)
      else
        b64 = b64 or base64.encode(chunk.data)
        local params = { processId = s.id, seq = chunk.seq, stream = chunk.stream, chunk = "",
          luxec = c.extras and { offset = chunk.offset } or nil }
        c._write(proto.encode_chunked(proto.notification("process/output", params), b64))
      end
    end
  end
end

--- Take a started process into the server as session `id`, subscribed by `conn`.
function Server:adopt(id, p, conn, info)
  local s = {
    id = id, p = p, argv = info.argv, tty = info.tty, pipe_stdin = info.pipe_stdin,
    streams = info.streams or 1,
    subs = {}, chunks = {}, first = 1, held = 0, next_seq = 1, waiters = {}, totals = { 0, 0 },
    exited = false, closed = false, started_ms = uv.now(), meta = info.meta,
  }
  s.subs[conn] = true
  self.sessions[id] = s
  local names = info.tty and { "pty", "pty" } or { "stdout", "stderr" }
  -- The bytes are read with readers of the server's own, which say what the session's head
  -- and tail buffer dropped between two reads (output faster than one turn of the loop):
  -- the chunks on either side of a gap carry their true offsets, and a client reads the
  -- bytes between from the session's log (process/readRange) when it has one.
  -- (stream 2 exists only where stderr is a stream of its own)
  local readers = { p:reader(1), (p._streams or 1) == 2 and p:reader(2) or nil }
  local function add(stream, data, offset)
    local seq = s.next_seq
    s.next_seq = seq + 1
    local chunk = { seq = seq, stream = names[stream], data = data, offset = offset }
    s.chunks[#s.chunks + 1] = chunk
    s.held = s.held + #data
    while s.held > self.retain and s.first < #s.chunks do -- keep the newest chunk always
      s.held = s.held - #s.chunks[s.first].data
      s.chunks[s.first] = false
      s.first = s.first + 1
    end
    if s.first > 64 and s.first > #s.chunks / 2 then -- compact
      table.move(s.chunks, s.first, #s.chunks, 1)
      for i = #s.chunks - s.first + 2, #s.chunks do s.chunks[i] = nil end
      s.first = 1
    end
    push_output(self, s, chunk, stream)
  end
  p:on("output", function(_, stream)
    local data, dropped, gap_at = readers[stream].read()
    local at = s.totals[stream]
    if dropped > 0 then
      if gap_at > 0 then add(stream, data:sub(1, gap_at), at) end
      data, at = data:sub(gap_at + 1), at + gap_at + dropped
    end
    if #data > 0 then add(stream, data, at) end
    s.totals[stream] = at + #data
    wake(s)
  end)
  p:on("exit", function(st)
    s.exited, s.closed = true, true
    s.status = st
    s.exit_code = st.code or (st.signal and 128 + st.signal) or -1
    local seq = s.next_seq
    s.next_seq = seq + 1
    s.exit_seq = seq
    push(self, s, "process/exited", { processId = id, seq = seq, exitCode = s.exit_code },
      false, { code = st.code, signal = st.signal_name, killedBy = st.killed_by,
        holders = st.holders and json.array(st.holders) })
    push(self, s, "process/closed", { processId = id })
    self.finished[#self.finished + 1] = id
    while #self.finished > self.keep_finished do
      self:forget(table.remove(self.finished, 1))
    end
    wake(s)
  end)
  return s
end

--- Whether the server is idle: no client connected and no session running.
function Server:idle()
  if next(self.conns) then return false end
  for _, s in pairs(self.sessions) do
    if not s.exited then return false end
  end
  return true
end

--- Drop a session (its process is ended first if it still runs).
function Server:forget(id)
  local s = self.sessions[id]
  if not s then return end
  self.sessions[id] = nil
  for i, fid in ipairs(self.finished) do
    if fid == id then
      table.remove(self.finished, i)
      break
    end
  end
  s.p:close()
  wake(s)
end

--- Wait until session `s` has something past `after` (or ended), up to `ms` milliseconds.
function Server:wait_session(s, pred, ms)
  if pred() or ms <= 0 then return end
  local deadline = uv.now() + ms
  local timer = uv.new_timer()
  while not pred() and uv.now() < deadline and self.sessions[s.id] == s do
    sched.suspend(function(w)
      s.waiters[#s.waiters + 1] = w
      timer:start(math.max(1, deadline - uv.now()), 0, w)
    end)
    timer:stop()
  end
  timer:close()
end

--- The chunks of `s` after sequence number `after`, within `max_bytes` (at least one);
--- `offsets`: each with luxec's field offset (where in its stream it starts).
function Server.chunks_after(_, s, after, max_bytes, offsets)
  local out, bytes, next_seq = json.array(), 0, s.next_seq
  for i = s.first, #s.chunks do
    local c = s.chunks[i]
    if c and c.seq > after then
      if #out > 0 and bytes + #c.data > max_bytes then
        next_seq = c.seq
        break
      end
      bytes = bytes + #c.data
      out[#out + 1] = { seq = c.seq, stream = c.stream, chunk = base64.encode(c.data),
        offset = offsets and c.offset or nil }
      next_seq = c.seq + 1
      if bytes >= max_bytes then break end
    end
  end
  return out, next_seq
end

--- End every session (the server is going away): one grace for all, then a kill.
function Server:shutdown()
  local procs = {}
  for _, s in pairs(self.sessions) do
    if not s.p:closed() then procs[#procs + 1] = s.p end
  end
  if #procs > 0 then pcall(require("luxec").terminate_all, procs, { grace_ms = 1000 }) end
  for id in pairs(self.sessions) do self:forget(id) end
  for c in pairs(self.conns) do c:close() end
end

return M
