--- luxec.serve.daemon: the local daemon — a `luxec serve` on a unix socket in a directory of
--- the user's own ($XDG_RUNTIME_DIR/luxec, else /tmp/luxec-UID: mode 0700, checked to be a
--- real directory owned by the user), whose sessions outlive their clients. Clients start it
--- on demand (`M.connect`); it serves only peers of its own uid (SO_PEERCRED) and exits
--- when idle: no client and no running session for `idle` seconds.
local sched = require("luxec.sched")
local uv = require("luv")

local M = {}

M.defaults = {
  idle = 60, -- seconds without a client and without a running session before it exits
  start_timeout = 10, -- seconds a client waits for a daemon it started to answer
}

--- The daemon's directory, made (0700) when missing; nil and a message saying what is wrong
--- with it (not a directory, a symlink, someone else's, open to others and not ours to fix).
---@return string|nil dir, string|nil err
function M.dir()
  local uid = uv.getuid()
  local base = os.getenv("XDG_RUNTIME_DIR")
  local dir
  if base and base ~= "" then
    dir = base:gsub("/+$", "") .. "/luxec"
  else
    dir = ("/tmp/luxec-%d"):format(uid)
  end
  local ok, err, code = uv.fs_mkdir(dir, 448) -- 0700
  if not ok and code ~= "EEXIST" then
    return nil, ("cannot make the daemon's directory %s: %s"):format(dir, tostring(err))
  end
  local st = uv.fs_lstat(dir)
  if not st or st.type ~= "directory" then
    return nil, ("the daemon's directory %s is not a directory (%s): remove it"):format(dir,
      st and st.type or "gone")
  end
  if st.uid ~= uid then
    return nil, ("the daemon's directory %s belongs to uid %d, not to uid %d: someone else "
      .. "made it; remove it or set XDG_RUNTIME_DIR"):format(dir, st.uid, uid)
  end
  if st.mode & 63 ~= 0 then -- group or other bits: ours, so made private again
    local okc, cerr = uv.fs_chmod(dir, 448)
    if not okc then
      return nil, ("the daemon's directory %s is open to others (mode %o) and cannot be "
        .. "made 0700: %s"):format(dir, st.mode & 511, tostring(cerr))
    end
  end
  return dir
end

--- The daemon's socket path (its directory made and checked); nil and a message.
---@return string|nil path, string|nil err
function M.socket()
  local dir, err = M.dir()
  if not dir then return nil, err end
  return dir .. "/serve.sock"
end

--- Whether a connecting peer may be served: the same uid as the daemon. Returns true, or
--- false and the reason (said to the peer before it is hung up on).
---@param uid integer|nil  the peer's uid (nil: it could not be found)
---@param why string|nil  why it could not be found
function M.admit(uid, why)
  if uid == nil then return false, "cannot tell who is connecting: " .. tostring(why) end
  local own = uv.getuid()
  if uid ~= own then
    return false, ("uid %d may not use the daemon of uid %d"):format(uid, own)
  end
  return true
end

local function try_connect(path)
  local h = uv.new_pipe(false)
  local err = sched.suspend(function(wake) h:connect(path, wake) end)
  h:close()
  return err == nil, err
end

-- Start `luxec serve --daemon` detached (its own session, no stdio of ours but stderr,
-- read until its socket answers); nil and a message quoting what it said when it did not.
local function start(path, opts)
  local exe = uv.exepath()
  local stderr = uv.new_pipe(false)
  local args = { "serve", "--daemon" }
  if opts.socket then args[#args + 1] = "--listen"; args[#args + 1] = "unix:" .. path end
  if opts.idle then args[#args + 1] = "--idle"; args[#args + 1] = tostring(opts.idle) end
  local exited, said = nil, ""
  local h, err = uv.spawn(exe, { args = args, detached = true, cwd = "/",
    stdio = { nil, nil, stderr } },
    function(code, signal) exited = { code = code, signal = signal } end)
  if not h then
    stderr:close()
    return nil, ("cannot start the daemon (%s serve --daemon): %s"):format(exe, tostring(err))
  end
  stderr:read_start(function(rerr, data)
    if data then said = (said .. data):sub(-4096) end
    if rerr or not data then stderr:read_stop() end
  end)
  local deadline = uv.now() + (opts.start_timeout or M.defaults.start_timeout) * 1000
  local up = false
  while not exited and uv.now() < deadline do
    if uv.fs_lstat(path) and try_connect(path) then
      up = true
      break
    end
    sched.sleep(10)
  end
  stderr:close()
  h:unref()
  if up then return true end
  -- (another client's daemon may have won the race for the socket: that is as good)
  if try_connect(path) then return true end
  said = said:gsub("%s+$", "")
  if exited then
    return nil, ("the daemon (%s serve --daemon) exited with status %d%s"):format(exe,
      exited.code, said ~= "" and ": " .. said or "")
  end
  return nil, ("the daemon (%s serve --daemon) did not answer on %s within %g s%s"):format(
    exe, path, opts.start_timeout or M.defaults.start_timeout, said ~= "" and ": " .. said or "")
end

--- A host (luxec.remote) on the daemon, started when none answers (a stale socket left by
--- a dead daemon is replaced). Its sessions start in the caller's directory and environment
--- unless spawn's cwd and env say otherwise (the daemon itself runs in /). opts: socket (a
--- path instead of the default), idle (seconds, for a daemon started here), start_timeout,
--- name. Returns the host, or nil and a message.
---@param opts {socket: string|nil, idle: number|nil, start_timeout: number|nil}|nil
function M.connect(opts)
  opts = opts or {}
  local path = opts.socket
  if not path then
    local err
    path, err = M.socket()
    if not path then return nil, "luxec daemon: " .. err end
  end
  local remote = require("luxec.remote")
  local target = { socket = path, name = opts.name or "the luxec daemon" }
  -- A daemon that answers a status request: a socket that takes the connection but whose
  -- daemon is dying (killed, its listener not closed yet) resets it, and is replaced.
  local deadline = uv.now() + (opts.start_timeout or M.defaults.start_timeout) * 1000
  local err
  repeat
    if not try_connect(path) then
      local ok, serr = start(path, opts)
      if not ok then return nil, "luxec daemon: " .. serr end
    end
    local host
    host, err = remote.connect(target)
    if host then
      local st, serr = host:status()
      if st then
        host.local_defaults = true
        return host
      end
      host:close()
      err = serr
    end
    sched.sleep(10)
  until uv.now() >= deadline
  return nil, err
end

return M
