--- luxec.serve: `luxec serve` — the exec-server (luxec.serve.server) on a transport: stdio
--- (one message per line; the sessions end when stdin ends, as a remote command's should) or
--- a unix socket (`--listen unix:PATH`: many clients, and sessions that outlive them).
local server_mod = require("luxec.serve.server")
local sched = require("luxec.sched")
local daemon = require("luxec.serve.daemon")
local wire = require("luxec.serve.wire")
local uv = require("luv")

local M = {}

M.MAX_LINE = 64 * 1024 * 1024 -- the longest message (line or frame) accepted (a big fs/writeFile)

-- A writer on a luv stream that counts the bytes not yet written. write(text[, more]):
-- `more` follows `text` in the same write (the bytes after a frame's header, not copied).
local function stream_writer(h, on_broken)
  local w = { queued = 0 }
  function w.write(text, more)
    if h:is_closing() then return end
    local n = #text + (more and #more or 0)
    w.queued = w.queued + n
    local ok, err = pcall(h.write, h, more and { text, more } or text, function(werr)
      w.queued = w.queued - n
      if werr and on_broken then on_broken(werr) end
    end)
    if not ok then
      w.queued = w.queued - n
      if on_broken then on_broken(err) end
    end
  end
  function w.count() return w.queued end
  return w
end

local function stdout_handle()
  local kind = uv.guess_handle(1)
  if kind == "tty" then return uv.new_tty(1, false) end
  if kind == "pipe" then
    local h = uv.new_pipe(false)
    if h:open(1) then return h end
    h:close()
  end
  return nil
end

-- The reader of a connection's bytes (lines, then frames when the client asks for them).
local function reader_for(conn)
  local reader
  reader = wire.reader({
    max = M.MAX_LINE, max_frame = M.MAX_LINE,
    on_line = function(line) conn:line(line) end,
    on_oversize = function(size)
      conn:send(require("luxec.serve.protocol").error(nil, -32600, ("invalid request: a "
        .. "message of %d bytes is over the limit of %d bytes"):format(size, M.MAX_LINE)))
    end,
    on_frame = function(...) conn:frame(...) end,
    on_error = function(message) conn:frame_error(message) end,
  })
  conn.switch = function() reader:binary() end
  return reader
end

-- Read descriptor `fd` into `reader` (a pipe, socket or terminal through luv; a file in the
-- thread pool); `on_end()` once it ends. Returns a function that stops reading.
local function read_fd(fd, reader, on_end)
  local kind = uv.guess_handle(fd)
  local h
  if kind == "tty" then
    h = uv.new_tty(fd, true)
  elseif kind == "pipe" or kind == "tcp" then
    h = kind == "pipe" and uv.new_pipe(false) or uv.new_tcp()
    if not h:open(fd) then
      h:close()
      h = nil
    end
  end
  local stopped = false
  local function finish()
    if stopped then return end
    reader:finish()
    on_end()
  end
  if h then
    h:read_start(function(_, data)
      if data then return reader:feed(data) end
      finish()
    end)
  else
    local function next_chunk()
      uv.fs_read(fd, 65536, -1, function(err, data)
        if stopped then return end
        if err or not data or data == "" then return finish() end
        reader:feed(data)
        next_chunk()
      end)
    end
    next_chunk()
  end
  return function()
    stopped = true
    reader:close()
    if h and not h:is_closing() then
      h:read_stop()
      h:close()
    end
  end
end

local function wait_drained(w)
  local deadline = uv.now() + 2000
  while w.queued > 0 and uv.now() < deadline do sched.sleep(5) end
end

--- Serve one client on stdin/stdout until stdin ends (or SIGTERM, SIGINT, SIGHUP); then
--- every session is ended.
---@param srv table  a luxec.serve.server
function M.stdio(srv)
  local h = stdout_handle()
  local w
  if h then
    w = stream_writer(h)
  else -- a file: written in place
    w = { queued = 0, count = function() return 0 end,
      write = function(text, more) uv.fs_write(1, more and { text, more } or text, -1) end }
  end
  local stop, signals, hung_up = nil, {}, nil
  local conn = srv:connect(w.write, w.count, function() hung_up("hang-up") end)
  local why = sched.suspend(function(done)
    hung_up = done
    stop = read_fd(0, reader_for(conn), done)
    for _, name in ipairs({ "sigterm", "sigint", "sighup" }) do
      local s = uv.new_signal()
      s:start(name, function() done(name) end)
      signals[#signals + 1] = s
    end
  end)
  for _, s in ipairs(signals) do s:close() end
  if why then stop() end -- (a signal: stdin is left as it is)
  srv:shutdown()
  wait_drained(w)
  if h then h:close() end
  return 0
end

-- Whether something answers on the socket `path` (a live server), found by connecting.
local function answers(path)
  local c = uv.new_pipe(false)
  local result = sched.suspend(function(wake)
    c:connect(path, function(err) wake(err == nil) end)
  end)
  c:close()
  return result
end

-- A timer that calls done() once the server has had no client and no running session for
-- `idle` seconds.
local function idle_watch(srv, idle, done)
  local since = uv.now()
  local t = uv.new_timer()
  t:start(100, math.max(50, math.min(1000, math.floor(idle * 250))), function()
    if not srv:idle() then
      since = uv.now()
    elseif uv.now() - since >= idle * 1000 then
      t:stop()
      done("idle")
    end
  end)
  return t
end

--- Serve clients on the unix socket `path` (mode 0600) until SIGTERM or SIGINT (or, with
--- `idle` seconds, once idle that long); only peers of this uid are served (SO_PEERCRED). A
--- stale socket left by a server that died is replaced, a live one is an error.
function M.listen(srv, path, idle)
  if uv.fs_lstat(path) then
    if answers(path) then
      io.stderr:write(("luxec serve: %s: a server already listens there\n"):format(path))
      return 1
    end
    uv.fs_unlink(path)
  end
  -- Bound and listening under a name of its own, made 0600, and only then linked into
  -- place (never over another): the socket is never there with another mode, nor there and
  -- refusing. (The name is no longer than the socket's own in the same directory.)
  local l = uv.new_pipe(false)
  local tmp = ("%s/.l%d"):format(path:match("^(.*)/[^/]*$") or ".", uv.os_getpid())
  uv.fs_unlink(tmp)
  local ok, err = l:bind(tmp)
  if not ok then
    io.stderr:write(("luxec serve: cannot listen on %s: %s\n"):format(path, tostring(err)))
    l:close()
    return 1
  end
  uv.fs_chmod(tmp, 384)
  local bound = uv.fs_lstat(tmp)
  ok, err = l:listen(64, function(lerr)
    if lerr then return end
    local c = uv.new_pipe(false)
    if not pcall(l.accept, l, c) then return c:close() end
    local _, uid, why = require("luxec.core").peer_cred(c)
    local admitted, reason = daemon.admit(uid, uid == nil and why or nil)
    if not admitted then -- told why, then hung up on
      local msg = require("luxec.serve.protocol").error(nil, -32600, "refused: " .. reason)
      c:write(require("luxec.serve.protocol").encode(msg), function() c:close() end)
      return
    end
    local conn
    local w = stream_writer(c, function() if conn then conn:close() end end)
    conn = srv:connect(w.write, w.count, function()
      if not c:is_closing() then c:close() end
    end)
    local reader = reader_for(conn)
    c:read_start(function(rerr, data)
      if rerr or not data then
        reader:finish()
        return conn:close()
      end
      reader:feed(data)
    end)
  end)
  local linked
  if ok then linked, err = uv.fs_link(tmp, path) end
  uv.fs_unlink(tmp)
  if not (ok and linked) then
    io.stderr:write(("luxec serve: cannot listen on %s: %s\n"):format(path, tostring(err)))
    l:close()
    return 1
  end
  local signals, idle_timer = {}, nil
  sched.suspend(function(done)
    for _, name in ipairs({ "sigterm", "sigint", "sighup" }) do
      local s = uv.new_signal()
      s:start(name, done)
      signals[#signals + 1] = s
    end
    if idle then idle_timer = idle_watch(srv, idle, done) end
  end)
  for _, s in ipairs(signals) do s:close() end
  if idle_timer then idle_timer:close() end
  l:close()
  local now = uv.fs_lstat(path) -- (unless another server has replaced it since)
  if now and bound and now.ino == bound.ino and now.dev == bound.dev then uv.fs_unlink(path) end
  srv:shutdown()
  return 0
end

--- `luxec serve` with its parsed options: listen ("unix:PATH" or nil for stdio), daemon
--- (listen on the daemon's socket unless `listen` names one, and exit when idle), idle
--- (seconds), sandbox (a mode or nil), max_queued (bytes). Returns the exit status.
function M.main(opts)
  local policy
  if opts.sandbox and opts.sandbox ~= "full-access" then
    policy = { mode = opts.sandbox, network = "deny" }
    local ok, err = pcall(require("luxec.sandbox").resolve, policy, uv.cwd(), nil, false)
    if not ok then
      io.stderr:write("luxec serve: --sandbox: ", tostring(err), "\n")
      return 1
    end
  end
  local srv = server_mod.new({ sandbox = policy, max_queued = opts.max_queued })
  if opts.daemon then
    local path, err = opts.listen and opts.listen:match("^unix:(.+)$"), nil
    if not path and opts.listen then
      io.stderr:write(("luxec serve: --listen: unix:PATH expected, got '%s'\n")
        :format(opts.listen))
      return 2
    end
    if not path then path, err = daemon.socket() end
    if not path then
      io.stderr:write("luxec serve --daemon: ", err, "\n")
      return 1
    end
    return M.listen(srv, path, opts.idle or daemon.defaults.idle)
  end
  if opts.listen then
    local path = opts.listen:match("^unix:(.+)$")
    if not path then
      io.stderr:write(("luxec serve: --listen: unix:PATH expected, got '%s'\n")
        :format(opts.listen))
      return 2
    end
    return M.listen(srv, path)
  end
  return M.stdio(srv)
end

return M
