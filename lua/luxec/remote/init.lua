--- luxec.remote: sessions on a `luxec serve` reached over a command's stdio (ssh, kubectl
--- exec -i, docker exec -i, or the server itself) or over a unix socket (a server started
--- with --listen, whose sessions outlive their clients). `connect` returns a host whose
--- `spawn` gives the same Process as luxec.spawn, driven through the exec-server protocol.
local core_mod = require("luxec.remote.core")
local json = require("luxec.json")
local proto = require("luxec.serve.protocol")
local options = require("luxec.process.options")
local process = require("luxec.process")
local sched = require("luxec.sched")
local uv = require("luv")
local wire = require("luxec.serve.wire")
local base64 = require("luxec.serve.base64")

local M = {}

-- Remote sessions: Processes whose terminate asks the server (one grace, then a kill of
-- whatever is left of the tree there) and waits until the end has arrived here.
local RemoteProcess = setmetatable({}, { __index = process.Process })
RemoteProcess.__index = RemoteProcess
RemoteProcess.__close = process.Process.close
RemoteProcess.__tostring = process.Process.__tostring

function RemoteProcess:terminate(opts)
  if not self._core then error("attempt to call 'terminate' on a closed process", 2) end
  opts = opts or {}
  local r, err = self._core.conn:call("process/terminate", { processId = self._core.id,
    luxec = { signal = opts.signal, grace_ms = opts.grace_ms, wait = true } })
  if not r then error(err, 2) end
  self._core:unpace()
  self:_wait_until(function() return self._finished end, 5000, true)
  return r.luxec or { method = "already gone", graceful = true, killed = 0 }
end

--- Wait until finished: what the server holds of the output comes without waiting for
--- readers to take it (the newest `keep` bytes stay here, as a local session's tail).
function RemoteProcess:wait(opts)
  if self._core then self._core:unpace() end
  return process.Process.wait(self, opts)
end

local Conn = {}
Conn.__index = Conn

function Conn:hold(delta)
  self.holds = self.holds + delta
  self.transport.ref(self.holds > 0)
end

-- A notification about session `id`, which has no session here: kept while an attach to it
-- waits for its answer (the server subscribes this connection before it answers, so what the
-- session does meanwhile can come in the same read as the answer, before the attach has made
-- the session here), and given to it then (see Host:attach); dropped otherwise.
function Conn:_early(id, handler, ...)
  local kept = id ~= nil and self.early[id]
  if kept then kept[#kept + 1] = table.pack(handler, ...) end
end

function Conn:_line(line)
  local msg = proto.decode(line)
  if type(msg) ~= "table" then return end
  local p = msg.params
  if msg.method == "process/output" and type(p) == "table" and type(p.chunk) == "string" then
    local c = self.cores[p.processId]
    if c then
      c:_chunk(p.seq, p.stream, base64.decode(p.chunk) or "", p.luxec and p.luxec.offset)
    else
      self:_early(p.processId, "_line", line)
    end
    return
  end
  self:_message(msg)
end

-- A frame (luxec's binary framing): a JSON message, or output bytes as they are.
function Conn:_frame(kind, a, b, c, d, e)
  if kind == "json" then
    local msg = proto.decode(a)
    if type(msg) == "table" then self:_message(msg) end
  elseif kind == "output" then
    local core = self.cores[a]
    if core then
      core:_chunk(b, c, e, d)
    else
      self:_early(a, "_frame", kind, a, b, c, d, e)
    end
  end
end

function Conn:_message(msg)
  if msg.method == nil and (msg.id == nil or msg.id == json.null) and type(msg.error) == "table"
  then -- an error about no request: the server refuses this client (and hangs up)
    return self:_lost(("%s: %s"):format(self.name, tostring(msg.error.message)))
  end
  if msg.id ~= nil and msg.method == nil then
    local cb = self.pending[msg.id]
    self.pending[msg.id] = nil
    if cb then
      self:hold(-1)
      if msg.error then
        cb(nil, ("%s: %s"):format(self.name, tostring(msg.error.message)), msg.error.code)
      else
        cb(msg.result)
      end
    end
    return
  end
  local p = msg.params
  local c = type(p) == "table" and self.cores[p.processId]
  if not c then
    if type(p) == "table" then self:_early(p.processId, "_message", msg) end
    return
  end
  if msg.method == "process/exited" then
    c:_exited(p)
  elseif msg.method == "process/closed" then
    c:_closed()
  end
end

function Conn:_lost(why)
  if self.lost then return end
  self.lost = why
  local pending = self.pending
  self.pending = {}
  for _, cb in pairs(pending) do
    self:hold(-1)
    cb(nil, why)
  end
  for _, c in pairs(self.cores) do c:_lost(why) end
end

--- Send a request; `cb(result)` or `cb(nil, message, code)` later. `chunk`: base64 bytes
--- sent as params.chunk (spliced in, not escaped).
function Conn:send_call(method, params, cb, chunk)
  if self.lost then return cb(nil, self.lost) end
  self.next_id = self.next_id + 1
  self.pending[self.next_id] = cb
  self:hold(1)
  local msg = { id = self.next_id, method = method, params = params }
  if chunk then
    params.chunk = ""
    self.transport.write(proto.encode_chunked(msg, chunk))
  else
    self.transport.write(wire.encode(msg, self.binary))
  end
end

--- process/write of `data` to session `id`: with binary framing a frame carrying the bytes as
--- they are, else a request with them in base64. `cb` as for send_call.
function Conn:send_write(id, data, cb)
  if not self.binary then
    return self:send_call("process/write", { processId = id }, cb, base64.encode(data))
  end
  if self.lost then return cb(nil, self.lost) end
  self.next_id = self.next_id + 1
  self.pending[self.next_id] = cb
  self:hold(1)
  self.transport.write(wire.frame_write(self.next_id, id, #data), data)
end

--- A request, waited for: the result, or nil and a message naming the host.
function Conn:call(method, params)
  return sched.suspend(function(wake) self:send_call(method, params, wake) end)
end

-- Transports ----------------------------------------------------------------------------------

-- The reader of what the server sends: lines, then frames once binary framing is agreed.
function Conn:_reader()
  self.reader = wire.reader({ max = 1 << 30, on_line = function(l) self:_line(l) end,
    on_oversize = function() end, on_frame = function(...) self:_frame(...) end,
    on_error = function(message)
      self:_lost(("connection to %s lost: %s"):format(self.name, message))
    end })
  return self.reader
end

-- The command's stdio through luv pipes, read as it comes (never through a bounded buffer:
-- the protocol's lines must arrive whole); its stderr is kept (the last 64 KiB) to quote.
local function command_transport(conn, argv)
  local stdin, stdout, stderr = uv.new_pipe(false), uv.new_pipe(false), uv.new_pipe(false)
  local args = table.move(argv, 2, #argv, 1, {})
  local exited, errtext, open = false, "", 2
  local function lost()
    if not exited or open > 0 then return end
    local e = errtext:gsub("%s+$", "")
    conn:_lost(("connection to %s lost%s"):format(conn.name, e ~= "" and ": " .. e or ""))
  end
  local h, perr = uv.spawn(argv[1], { args = args, stdio = { stdin, stdout, stderr } },
    function()
      exited = true
      lost()
    end)
  if not h then
    for _, pipe in ipairs({ stdin, stdout, stderr }) do pipe:close() end
    return nil, ("cannot start %s: %s"):format(argv[1], tostring(perr))
  end
  local lines = conn:_reader()
  local function ended(pipe)
    pipe:close()
    open = open - 1
    lost()
  end
  stdout:read_start(function(err, data)
    if err or not data then return ended(stdout) end
    lines:feed(data)
  end)
  stderr:read_start(function(err, data)
    if err or not data then return ended(stderr) end
    errtext = (errtext .. data):sub(-65536)
  end)
  local handles = { h, stdin, stdout, stderr }
  local function ref(on)
    for _, x in ipairs(handles) do
      if not x:is_closing() then
        if on then x:ref() else x:unref() end
      end
    end
  end
  ref(false)
  return {
    pid = h:get_pid(),
    write = function(text, more)
      if not stdin:is_closing() then stdin:write(more and { text, more } or text) end
    end,
    ref = ref,
    close = function()
      if not stdin:is_closing() then stdin:close() end
      ref(true)
      local deadline = uv.now() + 5000
      while not exited and uv.now() < deadline do sched.sleep(5) end
      if not exited then h:kill("sigkill") end
      while not exited do sched.sleep(5) end
      if not h:is_closing() then h:close() end
      for _, x in ipairs({ stdout, stderr }) do
        if not x:is_closing() then x:close() end
      end
    end,
  }
end

local function socket_transport(conn, path)
  local h = uv.new_pipe(false)
  local err = sched.suspend(function(wake) h:connect(path, wake) end)
  if err then
    h:close()
    return nil, ("cannot connect to %s: %s"):format(path, tostring(err))
  end
  local lines = conn:_reader()
  h:read_start(function(rerr, data)
    if rerr or not data then
      conn:_lost(("connection to %s lost%s"):format(conn.name, rerr and ": " .. rerr or ""))
      if not h:is_closing() then h:close() end
      return
    end
    lines:feed(data)
  end)
  h:unref()
  return {
    write = function(text, more)
      if not h:is_closing() then h:write(more and { text, more } or text) end
    end,
    ref = function(on)
      if h:is_closing() then return end
      if on then h:ref() else h:unref() end
    end,
    close = function() if not h:is_closing() then h:close() end end,
  }
end

-- Hosts ----------------------------------------------------------------------------------------

local Host = {}
Host.__index = Host

local serial = 0 -- (process ids: this process's pid and a serial, unique on a shared server)

--- Connect to a server: target.command (an argv that runs `luxec serve`, e.g. over ssh) or
--- target.socket (the path of a `luxec serve --listen unix:PATH`); target.name names it in
--- errors; target.framing "lines" keeps Codex's framing (by default luxec's binary framing is
--- asked for, and used when the server agrees). Returns the host, or nil and a message naming
--- it (quoting the transport's stderr).
---@param target {command: string[]|nil, socket: string|nil, name: string|nil, framing: string|nil}
function M.connect(target)
  if type(target) ~= "table" or (target.command == nil) == (target.socket == nil) then
    error("bad argument #1 to 'connect' (a table with 'command' or 'socket' expected)", 2)
  end
  local conn = setmetatable({ pending = {}, cores = {}, early = {}, next_id = 0, holds = 0,
    fills = 0,
    writing = 0, write_waiters = {}, window = core_mod.WINDOW }, Conn)
  conn.name = target.name or target.socket
    or table.concat(target.command, " ")
  local t, err
  if target.command then
    t, err = command_transport(conn, target.command)
  else
    t, err = socket_transport(conn, target.socket)
  end
  if not t then return nil, ("%s: %s"):format(conn.name, err) end
  conn.transport = t
  if target.framing ~= nil and target.framing ~= "lines" and target.framing ~= wire.FRAMING then
    error(("bad argument #1 to 'connect' (framing must be \"lines\" or \"%s\", got %s)")
      :format(wire.FRAMING, tostring(target.framing)), 2)
  end
  local framing = target.framing ~= "lines" and wire.FRAMING or nil
  local r = sched.suspend(function(wake)
    conn:send_call("initialize", { clientName = "luxec", luxec = { version = 1,
      framing = framing } }, function(res, e)
      -- (switched here, before any byte after the answer is read)
      if res and type(res.luxec) == "table" and res.luxec.framing == wire.FRAMING then
        conn.binary = true
        conn.reader:binary()
      end
      err = e
      wake(res)
    end)
  end)
  if not r then
    t.close()
    return nil, err
  end
  t.write(wire.encode({ method = "initialized" }, conn.binary))
  return setmetatable({ conn = conn, name = conn.name }, Host)
end

local function adopt(host, id, info)
  local c = core_mod.new(host.conn, id, info)
  host.conn.cores[id] = c
  local size = info.tty and { info.rows or process.defaults.rows,
    info.cols or process.defaults.cols } or nil
  local p = process._wrap(RemoteProcess, c, info.pid, c.streams, size)
  c.proc = p
  return p, c
end

--- Start argv on the host: the same options as luxec.spawn where the protocol carries them
--- (env as the exact environment, cwd, arg0, tty, stdin, stderr, head, tail, log, sandbox,
--- grace_ms). `extra.meta`: a table kept with the session by the server (process/list and
--- attach show it). Returns the Process, or nil and a message.
function Host:spawn(argv, opts, extra)
  local ok, err = pcall(options.check, "spawn", argv, opts)
  if not ok then error(err, 2) end
  opts = opts or {}
  if opts.inherit_env and opts.env then
    error("bad option 'inherit_env' to 'spawn' (a remote session gets either the server's "
      .. "environment or exactly 'env')", 2)
  end
  if opts.record or opts.cgroup == false then
    error("bad option to 'spawn' (record and cgroup are not carried to a remote host)", 2)
  end
  serial = serial + 1
  local id = ("%d.%d"):format(uv.os_getpid(), serial)
  local tty = opts.tty
  -- (the local daemon: the caller's directory and environment unless given, as luxec.spawn)
  local cwd, env = opts.cwd, opts.env
  if self.local_defaults then
    cwd = cwd or uv.cwd()
    env = env or uv.os_environ()
  end
  local params = { processId = id, argv = json.array(argv), cwd = cwd, arg0 = opts.arg0,
    tty = tty and true or false, pipeStdin = opts.stdin ~= "null",
    luxec = { sandbox = opts.sandbox, head = opts.head, tail = opts.tail, log = opts.log,
      grace_ms = opts.grace_ms, stderr = not tty and (opts.stderr or "merge") or nil,
      rows = type(tty) == "table" and tty.rows or nil,
      cols = type(tty) == "table" and tty.cols or nil, meta = extra and extra.meta } }
  if env then
    params.env = {}
    for k, v in pairs(env) do
      if v then params.env[k] = v end
    end
  end
  local p, c = adopt(self, id, { tty = tty and true or false,
    streams = (not tty and opts.stderr == "pipe") and 2 or 1,
    rows = params.luxec.rows, cols = params.luxec.cols })
  local r, code
  r, err, code = self.conn:call("process/start", params)
  while not r and code == -32600 and err:find("already exists", 1, true) do
    -- (a session left on a daemon by an earlier process with this pid)
    self.conn.cores[id] = nil
    serial = serial + 1
    id = ("%d.%d"):format(uv.os_getpid(), serial)
    params.processId = id
    self.conn.cores[id] = c
    c.id = id
    r, err, code = self.conn:call("process/start", params)
  end
  if not r then
    self.conn.cores[id] = nil
    return nil, err
  end
  p.pid, c.pid = r.luxec.pid, r.luxec.pid
  p.id = id
  return p
end

--- Run a command to completion on the host, as luxec.run does locally: {code, signal_name,
--- output, dropped, stderr (with stderr = "pipe"), timed_out, pid}, or nil and a message.
--- opts: the spawn options, plus timeout (seconds) and input (written, then EOF).
function Host:run(argv, opts)
  if opts ~= nil and type(opts) ~= "table" then
    error("bad argument #2 to 'run' (options must be a table, got " .. type(opts) .. ")", 2)
  end
  local sopts, timeout, input = {}, nil, nil
  for k, v in pairs(opts or {}) do
    if k == "timeout" then
      local ok, ms = pcall(process.timeout_ms, "run", v)
      if not ok then error(ms, 2) end
      timeout = v
    elseif k == "input" then
      if type(v) ~= "string" then
        error(("bad option 'input' to 'run' (string expected, got %s)"):format(type(v)), 2)
      end
      input = v
    else
      sopts[k] = v
    end
  end
  if sopts.stdin == nil and not sopts.tty then sopts.stdin = input and "pipe" or "null" end
  local ok, p, err = pcall(self.spawn, self, argv, sopts)
  if not ok then error(p, 2) end
  if not p then return nil, err end
  if input then
    p:write(input)
    p:close_stdin()
  end
  local timed_out = false
  if not p:wait({ timeout = timeout }) then
    timed_out = true
    p:terminate({ grace_ms = 0 })
  end
  local st = p:status()
  local out, dropped = p:read(1)
  local res = { code = st.code, signal_name = st.signal_name, output = out, dropped = dropped,
    timed_out = timed_out, pid = st.pid, connection_lost = st.connection_lost }
  if not st.tty and sopts.stderr == "pipe" then res.stderr = p:read(2) end
  p:close()
  return res
end

--- Where this client is in a session's output: what it has received, as a plain table to keep
--- (JSON as it is) and give to host:attach(id, cursor) later, from another process as well.
---@return {seq: integer, offsets: integer[]}
function RemoteProcess:cursor()
  if not self._core then error("attempt to call 'cursor' on a closed process", 2) end
  local c = self._core
  return { seq = c.seen, offsets = { c.bufs[1].total, c.bufs[2].total } }
end

local function check_cursor(cursor)
  local function bad(what)
    error(("bad argument #2 to 'attach' (a cursor {seq = N, offsets = {O1, O2}} from "
      .. "p:cursor() expected: %s)"):format(what), 3)
  end
  -- (a number read back from JSON may be a float: an integral one is taken)
  local function count(v) return type(v) == "number" and math.tointeger(v) or nil end
  if type(cursor) ~= "table" then bad("got " .. type(cursor)) end
  local seq = count(cursor.seq)
  if not seq or seq < 0 then bad("'seq' is not an integer >= 0") end
  local o = cursor.offsets
  if type(o) ~= "table" then bad("no 'offsets'") end
  local offsets = {}
  for i = 1, 2 do
    offsets[i] = count(o[i])
    if not offsets[i] or offsets[i] < 0 then
      bad(("'offsets[%d]' is not an integer >= 0"):format(i))
    end
  end
  return { seq = seq, offsets = offsets }
end

--- Attach to a session the server holds (started by an earlier client): its output from the
--- start (as far as the server holds it; here when attach returns), then live. With `cursor`
--- (p:cursor() of an earlier client): from there on — p:read() gives the bytes after it, and
--- says how many of them the server no longer holds (its chunks, the session's head and
--- tail, its log) as dropped. Returns the Process, or nil, message.
---@param id string
---@param cursor {seq: integer, offsets: integer[]}|nil
function Host:attach(id, cursor)
  if cursor ~= nil then cursor = check_cursor(cursor) end
  local conn = self.conn
  local early = conn.cores[id] == nil and {} or nil -- (see Conn:_early)
  conn.early[id] = early
  local r, err = conn:call("process/attach", { processId = id })
  if conn.early[id] == early then conn.early[id] = nil end
  if not r then return nil, err end
  if cursor and cursor.seq > r.nextSeq - 1 then
    return nil, ("%s: the cursor (seq %d) is past the output of process %s (its last seq is "
      .. "%d)"):format(self.name, cursor.seq, id, r.nextSeq - 1)
  end
  local p, c = adopt(self, id, { tty = r.tty, pid = r.pid, streams = r.streams,
    rows = r.rows ~= json.null and r.rows or nil, cols = r.cols ~= json.null and r.cols or nil })
  p.id = id
  if cursor then
    c:_start_at(cursor.seq, cursor.offsets)
    p._start = cursor.offsets
    local offsets = cursor.offsets
    p._cursor, p._evcursor = { offsets[1], offsets[2] }, { offsets[1], offsets[2] }
  end
  -- (what the server holds is here before attach returns)
  sched.suspend(function(wake) c:_fill(wake) end)
  if r.exited then c:_exited({ seq = r.nextSeq - 1, exitCode = r.exitCode }) end
  if r.closed then c:_closed() end
  -- what the session did after the answer, and came before the session was here (the exit,
  -- the close: no read brings them again)
  for _, m in ipairs(early or {}) do
    conn[m[1]](conn, table.unpack(m, 2, m.n))
  end
  return p
end

--- The sessions the server holds: {processId, argv, pid, tty, exited, exitCode, closed}.
function Host:list()
  local r, err = self.conn:call("process/list", {})
  if not r then return nil, err end
  return r.processes
end

--- The server's own state: {pid, uid, sessions, running, clients, ageMs, host}.
function Host:status()
  return self.conn:call("server/status", {})
end

--- A host on the local daemon (luxec.serve.daemon), started when none answers: opts
--- socket, idle (seconds), start_timeout. Returns the host, or nil and a message.
function M.daemon(opts)
  return require("luxec.serve.daemon").connect(opts)
end

--- Close the connection. Over a command (ssh ... luxec serve) the server then ends every
--- session it holds; a server on a socket keeps them for the next client.
function Host:close()
  self.conn.transport.close() -- (what the server says while it goes is still taken in)
  self.conn:_lost(("connection to %s closed"):format(self.name))
  for _, c in pairs(self.conn.cores) do c:ref(false) end
  self.conn.cores = {}
end

return M
