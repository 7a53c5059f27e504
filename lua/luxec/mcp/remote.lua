--- luxec.mcp.remote: where `luxec mcp` runs its sessions besides here — on configured hosts
--- (`hosts = {build1 = {command = {"ssh", "build-1", "luxec", "serve"}}}`, exec_command's
--- `host`) and on the local daemon (`daemon = true` or `luxec mcp --daemon`), whose sessions
--- outlive this server: each carries what the engine needs to take it back (its session id,
--- command, directory), and a server started again with the same owner takes back its own.
local json = require("luxec.json")
local process = require("luxec.process")
local uv = require("luv")

local M = {}

-- Config checks ----------------------------------------------------------------------------------

local function fail(key, fmt, ...)
  error({ key = key, msg = fmt:format(...) }, 0)
end

local function argv_of(key, v)
  if type(v) ~= "table" or #v == 0 then
    fail(key, "expected a command (a non-empty list of strings), got %s", type(v))
  end
  for i, a in ipairs(v) do
    if type(a) ~= "string" or a == "" then
      fail(key, "expected a command (a non-empty list of strings): item %d is %s", i, type(a))
    end
  end
  return table.move(v, 1, #v, 1, {})
end

--- `hosts`: name -> {command = argv} (or the argv itself). Returns the checked copy.
function M.check_hosts(key, v)
  if type(v) ~= "table" then fail(key, "expected a table of hosts, got %s", type(v)) end
  local out = {}
  for name, h in pairs(v) do
    local k = key .. "." .. tostring(name)
    if type(name) ~= "string" or not name:match("^[%w_.-]+$") then
      fail(key, "a host's name must be letters, digits, '_', '.' or '-' (got %s)",
        tostring(name))
    end
    if type(h) == "table" and h.command ~= nil then
      for f in pairs(h) do
        if f ~= "command" then fail(k, "unknown key '%s' (known: command)", tostring(f)) end
      end
      out[name] = { command = argv_of(k .. ".command", h.command) }
    else
      out[name] = { command = argv_of(k, h) }
    end
  end
  return out
end

--- `daemon`: true, false, or {socket = PATH, owner = NAME, idle = SECONDS}.
function M.check_daemon(key, v)
  if type(v) == "boolean" then return v end
  if type(v) ~= "table" then
    fail(key, "expected true, false or a table {socket, owner, idle}, got %s", type(v))
  end
  local out = {}
  for k, x in pairs(v) do
    if k == "socket" or k == "owner" then
      if type(x) ~= "string" or x == "" then fail(key .. "." .. k, "expected a string") end
    elseif k == "idle" then
      if type(x) ~= "number" or x <= 0 then fail(key .. ".idle", "expected seconds > 0") end
    else
      fail(key, "unknown key '%s' (known: idle, owner, socket)", tostring(k))
    end
    out[k] = x
  end
  return out
end

-- Connections -----------------------------------------------------------------------------------

-- The connection to host `name`, made (again) when there is none or it was lost.
local function host_conn(srv, name)
  local c = srv.remote_hosts[name]
  if c and not c.conn.lost then return c end
  local h = srv.cfg.hosts and srv.cfg.hosts[name]
  if not h then
    local names = {}
    for n in pairs(srv.cfg.hosts or {}) do names[#names + 1] = n end
    table.sort(names)
    return nil, ("unknown host %q (the configured hosts: %s)"):format(name,
      #names > 0 and table.concat(names, ", ") or "none")
  end
  local err
  c, err = require("luxec.remote").connect({ command = h.command, name = name })
  if not c then return nil, ("host %s: %s"):format(name, err) end
  srv.remote_hosts[name] = c
  return c
end

local function daemon_opts(cfg)
  return type(cfg.daemon) == "table" and cfg.daemon or {}
end

-- The daemon's connection, made (again) when there is none or it was lost.
local function daemon_conn(srv)
  local d = srv.remote_daemon
  if d and not d.conn.lost then return d end
  local o = daemon_opts(srv.cfg)
  local err
  d, err = require("luxec.serve.daemon").connect({ socket = o.socket, idle = o.idle })
  if not d then return nil, err end
  srv.remote_daemon = d
  return d
end

--- Whose sessions on the daemon are this server's: daemon.owner, else the working directory.
function M.owner(cfg)
  return daemon_opts(cfg).owner or ("mcp:" .. cfg.cwd)
end

--- The engine's spawn for server `srv`: on a host when the call names one, on the daemon
--- when one is configured, else here.
function M.spawn(srv)
  srv.remote_hosts = {}
  return function(argv, opts, info)
    info = info or {}
    if info.host then
      local h, err = host_conn(srv, info.host)
      if not h then return nil, err end
      -- the host's own environment, directory (unless named) and policy (its server's)
      local wd = info.workdir
      if wd and wd:sub(1, 1) ~= "/" then
        return nil, ("host %s: workdir must be an absolute path there (got %q)"):format(
          info.host, wd)
      end
      local o = { tty = opts.tty, stdin = opts.stdin, head = opts.head, tail = opts.tail,
        grace_ms = opts.grace_ms, cwd = wd }
      return h:spawn(argv, o)
    end
    if not srv.cfg.daemon then return process.spawn(argv, opts) end
    local d, err = daemon_conn(srv)
    if not d then return nil, err end
    local meta = { owner = M.owner(srv.cfg), session_id = info.session_id, cmd = info.cmd,
      cwd = opts.cwd, tty = info.tty, stdin_pipe = info.stdin_pipe, clean = info.clean,
      sandboxed = info.sandboxed, log = opts.log }
    return d:spawn(argv, opts, { meta = meta })
  end
end

--- Take back this server's sessions on the daemon (an earlier run of it started them);
--- returns how many, or nil and a message.
function M.adopt(srv)
  if not srv.cfg.daemon then return 0 end
  local d, err = daemon_conn(srv)
  if not d then return nil, err end
  local list
  list, err = d:list()
  if not list then return nil, err end
  local adopt, owner, n = require("luxec.engine.adopt"), M.owner(srv.cfg), 0
  for _, s in ipairs(list) do
    local m = s.meta
    if type(m) == "table" and m.owner == owner and math.type(m.session_id) == "integer"
      and not srv.engine._store:get(m.session_id) then
      local p = d:attach(s.processId)
      if p then
        local log = m.log ~= json.null and m.log or nil
        if adopt(srv.engine, m.session_id, p, { cmd = m.cmd, cwd = m.cwd, tty = m.tty,
          stdin_pipe = m.stdin_pipe, clean = m.clean ~= json.null and m.clean or nil,
          sandboxed = m.sandboxed, log = log, age_ms = s.ageMs }) then
          n = n + 1
        else
          p:close()
        end
      end
    end
  end
  return n
end

--- Before the engine shuts down: the daemon's sessions are left running there (the next
--- server takes them back) and their logs kept; the hosts' connections are closed (their
--- sessions end with them).
function M.detach(srv)
  local d = srv.remote_daemon
  if d then
    local eng = srv.engine
    for _, id in ipairs(eng._store:ids()) do
      local s = eng._store:get(id)
      if s.p._core and s.p._core.conn == d.conn then s.log_referenced = true end
    end
    d:close()
  end
  for _, h in pairs(srv.remote_hosts or {}) do h:close() end
end

--- The directory for the logs of daemon sessions (they outlive this server's run).
function M.log_dir(cfg)
  if not cfg.daemon or cfg.output.log_dir then return nil end
  local dir = require("luxec.serve.daemon").dir()
  if not dir then return nil end
  uv.fs_mkdir(dir .. "/mcp-logs", 448)
  local h = 5381 -- (one directory per owner: two servers never share a log's name)
  for c in M.owner(cfg):gmatch(".") do h = (h * 33 + c:byte()) & 0xffffffff end
  dir = ("%s/mcp-logs/%08x"):format(dir, h)
  uv.fs_mkdir(dir, 448)
  return dir
end

return M
