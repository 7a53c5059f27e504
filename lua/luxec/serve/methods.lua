--- luxec.serve.methods: the process/* methods of the exec-server. Codex's methods keep
--- Codex's meanings; luxec's additions are fields of a `luxec` object in a request (answered
--- with a `luxec` object in the response) and methods of their own (process/attach, list,
--- status, inputState, signal, resize, closeStdin, snapshot, readRange).
local base64 = require("luxec.serve.base64")
local json = require("luxec.json")
local proto = require("luxec.serve.protocol")
local sched = require("luxec.sched")

local fail, INVALID_REQUEST, INVALID_PARAMS = proto.fail, proto.INVALID_REQUEST,
  proto.INVALID_PARAMS

local LUXEC_START = { sandbox = true, head = true, tail = true, stderr = true, rows = true,
  cols = true, log = true, grace_ms = true, meta = true }

local function null_if_nil(v)
  if v == nil then return json.null end
  return v
end

-- The spawn options of process/start's params.
local function spawn_options(server, p)
  local ext = proto.table(p, "luxec") or {}
  proto.only(ext, "luxec", LUXEC_START)
  local tty = proto.boolean(p, "tty", false)
  local opts = {
    cwd = proto.path(p, "cwd", false) or server.workspace,
    arg0 = proto.string(p, "arg0", false),
    stdin = (tty or proto.boolean(p, "pipeStdin", false)) and "pipe" or "null",
    head = ext.head,
    tail = ext.tail or server.session_tail, log = ext.log, grace_ms = ext.grace_ms,
  }
  if ext.meta ~= nil and type(ext.meta) ~= "table" then
    fail(INVALID_PARAMS, "invalid params: 'luxec.meta' must be an object (got %s)",
      type(ext.meta))
  end
  local meta = ext.meta -- (kept with the session, shown by process/list and process/attach)
  local env = proto.table(p, "env")
  if env then
    opts.env = {}
    for k, v in pairs(env) do
      if type(k) ~= "string" or type(v) ~= "string" then
        fail(INVALID_PARAMS, "invalid params: 'env' must map names to strings (%s = %s)",
          tostring(k), type(v))
      end
      opts.env[k] = v
    end
  end
  if tty then
    opts.tty = ext.rows and { rows = ext.rows, cols = ext.cols } or true
  else
    opts.stderr = ext.stderr or "pipe"
  end
  if ext.sandbox ~= nil then
    if server.sandbox then
      fail(INVALID_PARAMS, "invalid params: 'luxec.sandbox': this server confines every "
        .. "process with its own policy (--sandbox %s)", server.sandbox.mode)
    end
    opts.sandbox = ext.sandbox
  elseif server.sandbox then
    opts.sandbox = server.sandbox
  end
  return opts, tty, meta
end

local function status_result(s)
  local rows, cols = s.p:size()
  return { processId = s.id, argv = json.array(s.argv), pid = s.p.pid, tty = s.tty,
    exited = s.exited, exitCode = null_if_nil(s.exit_code), closed = s.closed,
    nextSeq = s.next_seq, streams = s.streams, rows = null_if_nil(rows),
    cols = null_if_nil(cols), ageMs = require("luv").now() - s.started_ms,
    clients = (function()
      local n = 0
      for c in pairs(s.subs) do if c.open then n = n + 1 end end
      return n
    end)(), meta = s.meta }
end

return function(server)
  local M = {}

  M["process/start"] = function(conn, p)
    local id = proto.string(p, "processId", true)
    local argv = proto.argv(p, "argv")
    if server.sessions[id] then fail(INVALID_REQUEST, "process %s already exists", id) end
    local opts, tty, meta = spawn_options(server, p)
    local ok, proc, err = pcall(require("luxec").spawn, argv, opts)
    if not ok then fail(INVALID_PARAMS, "invalid params: %s", tostring(proc)) end
    if not proc then fail(proto.INTERNAL_ERROR, "cannot start %s: %s", argv[1], err) end
    if server.sessions[id] then -- (started meanwhile by another connection)
      proc:close()
      fail(INVALID_REQUEST, "process %s already exists", id)
    end
    server:adopt(id, proc, conn, { argv = argv, tty = tty, meta = meta,
      pipe_stdin = opts.stdin == "pipe", streams = opts.stderr == "pipe" and 2 or 1 })
    local result = { processId = id }
    if p.luxec then result.luxec = { pid = proc.pid } end
    return result
  end

  M["process/read"] = function(conn, p)
    local id = proto.string(p, "processId", true)
    local after = proto.integer(p, "afterSeq", 0) or 0
    local max = proto.integer(p, "maxBytes", 1) or math.maxinteger
    local wait = proto.integer(p, "waitMs", 0, 24 * 3600 * 1000) or 0
    local s = server:session(id)
    local function ready()
      local chunks = server:chunks_after(s, after, max)
      return #chunks > 0 or s.closed or (s.exited and after < s.next_seq - 1)
    end
    server:wait_session(s, ready, wait)
    local chunks, next_seq = server:chunks_after(s, after, max, conn.extras)
    return { chunks = chunks, nextSeq = next_seq, exited = s.exited,
      exitCode = null_if_nil(s.exit_code), closed = s.closed, failure = json.null }
  end

  M["process/write"] = function(_, p)
    local id = proto.string(p, "processId", true)
    return server:write_input(id, proto.bytes(p, "chunk"))
  end

  M["process/terminate"] = function(_, p)
    local id = proto.string(p, "processId", true)
    local ext = proto.table(p, "luxec") or {}
    proto.only(ext, "luxec", { signal = true, grace_ms = true, wait = true })
    local s = server.sessions[id]
    if not s or s.exited then
      if s then server:forget(id) end
      return { running = false }
    end
    local topts = { signal = ext.signal, grace_ms = ext.grace_ms }
    if ext.wait then
      local ok, r = pcall(s.p.terminate, s.p, topts)
      if not ok then fail(INVALID_PARAMS, "invalid params: %s", tostring(r)) end
      return { running = true, luxec = r }
    end
    sched.go(function() pcall(s.p.terminate, s.p, topts) end)
    return { running = true }
  end

  -- luxec's methods ---------------------------------------------------------------------------

  M["process/attach"] = function(conn, p)
    local s = server:session(proto.string(p, "processId", true))
    s.subs[conn] = true
    return status_result(s)
  end

  M["server/status"] = function()
    local running, held, clients = 0, 0, 0
    for _, s in pairs(server.sessions) do
      held = held + 1
      if not s.exited then running = running + 1 end
    end
    for c in pairs(server.conns) do if c.open then clients = clients + 1 end end
    local uv = require("luv")
    return { pid = uv.os_getpid(), uid = uv.getuid(), sessions = held, running = running,
      clients = clients, ageMs = uv.now() - server.started_ms, host = uv.os_gethostname() }
  end

  M["process/list"] = function()
    local list = json.array()
    for _, s in pairs(server.sessions) do list[#list + 1] = status_result(s) end
    table.sort(list, function(a, b) return a.processId < b.processId end)
    return { processes = list }
  end

  local function live(p)
    local s = server:session(proto.string(p, "processId", true))
    if s.p:closed() then fail(INVALID_REQUEST, "process %s is closed", s.id) end
    return s
  end

  M["process/status"] = function(_, p)
    local s = live(p)
    local st = s.p:status()
    st.holders = st.holders and json.array(st.holders) or nil
    return st
  end

  M["process/inputState"] = function(_, p)
    local s = live(p)
    local core = s.p._core
    local unread = s.p:finished() and 0 or core:input_unread()
    local waiting, echo_off, canonical = false, nil, nil
    if (unread == nil or unread == 0) and s.p:status().running then
      waiting, echo_off, canonical = core:input_state()
    end
    return { unread = null_if_nil(unread), waiting = waiting == true,
      echoOff = null_if_nil(echo_off), canonical = null_if_nil(canonical) }
  end

  local SIGNALS = { interrupt = "INT" }
  M["process/signal"] = function(_, p)
    local s = live(p)
    local sig = p.signal
    if SIGNALS[sig] then sig = SIGNALS[sig] end
    if type(sig) ~= "string" and math.type(sig) ~= "integer" then
      fail(INVALID_PARAMS, "invalid params: 'signal' must be \"interrupt\", a signal name or "
        .. "number (got %s)", type(sig))
    end
    local target = p.target
    if target ~= nil and target ~= "group" then
      fail(INVALID_PARAMS, "invalid params: 'target' must be \"group\" or absent")
    end
    local ok, r, err = pcall(s.p.signal, s.p, sig, target)
    if not ok then fail(INVALID_PARAMS, "invalid params: %s", tostring(r)) end
    if not r then fail(INVALID_REQUEST, "signal: %s", tostring(err)) end
    return {}
  end

  M["process/resize"] = function(_, p)
    local s = live(p)
    local rows = proto.integer(p, "rows", 1, 65535)
    local cols = proto.integer(p, "cols", 1, 65535)
    if not (rows and cols) then fail(INVALID_PARAMS, "invalid params: 'rows' and 'cols' are "
      .. "required") end
    local ok, err = s.p:resize(rows, cols)
    if not ok then fail(INVALID_REQUEST, "resize: %s", tostring(err)) end
    return {}
  end

  M["process/closeStdin"] = function(_, p)
    local s = live(p)
    local ok, err = s.p:close_stdin()
    if not ok then fail(INVALID_REQUEST, "closeStdin: %s", tostring(err)) end
    return {}
  end

  M["process/snapshot"] = function(_, p)
    local s = live(p)
    local snap = s.p:snapshot(proto.integer(p, "stream", 1, 2))
    return { head = base64.encode(snap.head), tail = base64.encode(snap.tail),
      dropped = snap.dropped, total = snap.total }
  end

  M["process/readRange"] = function(_, p)
    local s = live(p)
    local offset = proto.integer(p, "offset", 0)
    local length = proto.integer(p, "length", 0)
    if not (offset and length) then
      fail(INVALID_PARAMS, "invalid params: 'offset' and 'length' are required")
    end
    local data, err = s.p:read_range(offset, length, proto.integer(p, "stream", 1, 2))
    if not data then fail(INVALID_REQUEST, "readRange: %s", tostring(err)) end
    return { chunk = base64.encode(data) }
  end

  return M
end
