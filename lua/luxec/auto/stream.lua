--- luxec.auto.stream: sessions over a descriptor no child of ours owns (pexpect's fdspawn and
--- socket spawn): a serial device or terminal, a FIFO, a unix or TCP socket, or a descriptor
--- the host inherited. The object is a luxec.Process (expect, send, sendline, read,
--- wait_output, wait, close, log_to, record work as on a spawned session); it finishes when
--- the peer closes (EOF). There is no process behind it: pid is nil, and the calls that act on
--- one (signal, terminate, resize, wait_input) raise an error saying so.
local process = require("luxec.process")
local sched = require("luxec.sched")
local uv = require("luv")

local M = {}

M.defaults = {
  connect_timeout = 30, -- seconds a TCP connect may take
}

local Process = process.Process
---@class luxec.Stream: luxec.Process
local Stream = setmetatable({}, { __index = Process })
Stream.__index = Stream
Stream.__close = Process.close
Stream.__tostring = Process.__tostring
M.Stream = Stream

local function no_process(fname)
  return function(self)
    error(("%s: %s is a stream, not a process: there is nothing to %s")
      :format(fname, self.target, fname == "resize" and "resize" or "signal"), 2)
  end
end
Stream.signal = no_process("signal")
Stream.terminate = no_process("terminate")
Stream.kill = no_process("kill")
Stream.resize = no_process("resize")
function Stream.wait_input(self)
  error(("wait_input: %s is a stream: whether its peer waits for input cannot be seen from "
    .. "this side (expect its prompt instead)"):format(self.target), 2)
end
function Stream.screen(self)
  error(("screen: %s is a stream, not a terminal session of luxec's"):format(self.target), 2)
end
Stream.expect_screen = Stream.screen

--- The status of a stream: {kind, name, eof, finished, running, exited, tty, write_queued};
--- after close(), the status it had then (running false), as a spawned session's.
function Stream:status()
  local final = self._final
  if final and not self._core then -- (closed: the status it had then, a copy)
    local st = {}
    for k, v in pairs(final) do st[k] = v end
    return st
  end
  if not self._core then
    error(("attempt to call 'status' on a closed stream (%s)"):format(self.target), 2)
  end
  local st = self._core:status()
  st.finished = self._finished
  st.waiting_for_input = false
  return st
end

--- The status close() keeps for status() and wait() after it: a stream still open then is
--- ended by the close (killed_by "close"), as a spawned session's program.
function Stream:_final_status()
  local st = self:status()
  if st.running then st.running, st.killed_by = false, "close" end
  return st
end

--- ^C and the like are written as the control character (a stream has no process group).
function Stream:sendcontrol(key)
  local ch = require("luxec.auto.expect").control(key)
  if not ch then
    error(("bad argument #1 to 'sendcontrol' (a key such as \"c\" or \"^]\" expected, got %s)")
      :format(tostring(key)), 2)
  end
  return self:write(ch)
end

--- A terminal's echo (a serial line, a PTY's slave side); false for a socket or a FIFO.
function Stream:setecho(on)
  if type(on) ~= "boolean" then
    error(("bad argument #1 to 'setecho' (boolean expected, got %s)"):format(type(on)), 2)
  end
  local now, err, code = self._core:tty_echo(on)
  if now == nil then
    return nil, ("ENOTTY: %s is not a terminal (it has no echo to set)"):format(self.target),
      code or err
  end
  return true
end

function Stream:getecho()
  return self._core:tty_echo() == true
end

local function bad(msg, level)
  error("bad argument #1 to 'open_stream' (" .. msg .. ")", level + 1)
end

-- The target as {name, path|unix|host+port|fd}; raises an error naming what is wrong.
local function parse_target(target, level)
  local t = type(target)
  if t == "number" then
    if math.type(target) ~= "integer" or target < 0 then
      bad(("a descriptor number must be a non-negative integer, got %s"):format(target), level + 1)
    end
    return { name = ("fd %d"):format(target), fd = target }
  elseif t == "table" then
    local host, port = target.host, target.port
    if type(host) ~= "string" or host == "" then
      bad("a table target needs host = \"name or address\"", level + 1)
    end
    if host:find("\0", 1, true) then bad(("%q contains a NUL byte"):format(host), level + 1) end
    if math.type(port) ~= "integer" or port < 1 or port > 65535 then
      bad(("port must be an integer 1..65535, got %s"):format(tostring(port)), level + 1)
    end
    return { name = ("tcp:%s:%d"):format(host, port), host = host, port = port }
  elseif t == "string" and target ~= "" then
    if target:find("\0", 1, true) then bad(("%q contains a NUL byte"):format(target), level + 1) end
    local rest = target:match("^tcp:(.+)$")
    if rest then
      local host, port = rest:match("^%[(.+)%]:(%d+)$")
      if not host then host, port = rest:match("^([^:]+):(%d+)$") end
      port = tonumber(port)
      if not host or not port or port < 1 or port > 65535 then
        bad(("%q: expected \"tcp:HOST:PORT\" with a port 1..65535"):format(target), level + 1)
      end
      return { name = target, host = host, port = math.tointeger(port) }
    end
    local path = target:match("^unix:(.+)$")
    if path then return { name = target, unix = path } end
    return { name = target, path = target }
  end
  bad(("a path, \"tcp:host:port\", \"unix:/path\", {host=, port=} or a descriptor number "
    .. "expected, got %s"):format(t == "string" and "an empty string" or t), level + 1)
end

-- The host name's first address (luv resolves it off the loop's thread).
local function resolve(host)
  local res, err = sched.suspend(function(wake)
    uv.getaddrinfo(host, nil, { socktype = "stream" }, function(e, r) wake(r, e) end)
  end)
  if not res or not res[1] then
    return nil, ("%s: cannot resolve %s"):format(err or "ENOENT", host)
  end
  return res[1].addr
end

local OPTS = { timeout = true, read_only = true, head = true, tail = true, log = true,
  log_max = true, log_to = true, record = true }

--- Open a session over target (see the module's description). opts: timeout (seconds for a
--- TCP connect, default 30), read_only (open a path for reading only: a FIFO's writers
--- leaving is then its EOF; the default for a FIFO), head, tail, log, log_max, log_to,
--- record. Returns the session, or nil, "ECONNREFUSED: ... (tcp:127.0.0.1:1)", "ECONNREFUSED".
---@param target string|integer|{host: string, port: integer}
---@param opts table|nil
---@return luxec.Stream|nil, string|nil, string|nil
function M.open(target, opts)
  local spec = parse_target(target, 2)
  if opts ~= nil and type(opts) ~= "table" then
    error(("bad argument #2 to 'open_stream' (options table expected, got %s)"):format(
      type(opts)), 2)
  end
  opts = opts or {}
  for k in pairs(opts) do
    if not OPTS[k] then error(("bad option '%s' to 'open_stream'"):format(tostring(k)), 2) end
  end
  local ok, ms = pcall(process.timeout_ms, "open_stream", opts.timeout,
    M.defaults.connect_timeout)
  if not ok then error(ms, 2) end
  local read_only = opts.read_only
  if read_only == nil and spec.path then
    local st = uv.fs_stat(spec.path)
    read_only = st ~= nil and st.type == "fifo"
  end
  local function fail(err, code)
    return nil, ("%s (%s)"):format(err, spec.name), code
  end
  local addr
  if spec.host then
    local err
    addr, err = resolve(spec.host)
    if not addr then return fail(err, "ENOENT") end
  end
  local self
  local h, kind, connecting = process.core.stream_open({
    name = spec.name, path = spec.path, unix = spec.unix, fd = spec.fd, tcp = addr,
    port = spec.port, read_only = read_only,
    head = opts.head or process.defaults.head, tail = opts.tail or process.defaults.tail,
    log = opts.log, log_max = opts.log_max,
    on_event = function(ev, a, b)
      if ev == "connect" then
        if self then self._connect_err = a end
        if self and self._on_connect then self._on_connect() end
      elseif self then
        self:_event(ev, a, b)
      end
    end,
  })
  if not h then
    if connecting == "EINVAL" and spec.path then
      return fail("EINVAL: a regular file or directory is not a stream (read a file with "
        .. "io.open)", "EINVAL")
    end
    if connecting == "EBADF" then
      return fail("EBADF: not an open descriptor of this host", "EBADF")
    end
    return fail(kind, connecting)
  end
  self = process._wrap(Stream, h, nil, 1, nil)
  self.target, self.kind = spec.name, kind
  if connecting then
    self:_hold(1)
    local timer = uv.new_timer()
    local _, timed_out = sched.suspend(function(wake)
      self._on_connect = wake
      if ms then timer:start(math.max(0, math.floor(ms)), 0, function() wake(nil, true) end) end
    end)
    timer:close()
    self._on_connect = nil
    self:_hold(-1)
    local err = self._connect_err
    if timed_out or err ~= 0 then
      self:close()
      if timed_out then
        return fail(("ETIMEDOUT: connect did not finish within %g s"):format(ms / 1000),
          "ETIMEDOUT")
      end
      local msg, name = uv.translate_sys_error(err)
      return fail(msg, name)
    end
  end
  if opts.record then
    local rec, rerr, rcode = require("luxec.auto.record").start(opts.record, {
      argv = { spec.name }, rows = process.defaults.rows, cols = process.defaults.cols,
      tty = kind == "tty" })
    if not rec then
      self:close()
      return nil, ("%s (record)"):format(rerr), rcode
    end
    rec:attach(self)
  end
  if opts.log_to then
    local to = opts.log_to
    self:on("output", type(to) == "function" and to
      or function(data) to:write(data) to:flush() end, { hold = false })
  end
  for _, fn in ipairs(process.on_spawn) do -- (the prompt's :ps lists it)
    fn(self, { spec.name }, opts)
  end
  return self
end

return M
