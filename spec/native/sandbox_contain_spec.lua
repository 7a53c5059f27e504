-- Containment (issue 18): a sandboxed command reaches no host unix socket, no host SysV IPC
-- object, no other terminal and no host process, and its /dev/shm is its own. Every attempt
-- runs under workspace-write and read-only (network denied), as root and as an unprivileged
-- user whose luxec host itself runs unprivileged (contain_runner.lua, started through
-- setpriv), and is decided from outside the sandbox: a host server that reports every
-- connection, host IPC objects, a host PTY, a host process's limits, a file outside. Each
-- attack also runs without a sandbox (its control): there it works and the check sees it, so
-- a "contained" verdict is never a broken test.
local H = require("helper")
local json = require("luxec.json")
local luxec = require("luxec")
local uv = require("luv")

local USOCK, IPC, CONTAIN = H.fixture("usock"), H.fixture("ipc"), H.fixture("contain")
local RUNNER = H.root .. "/spec/native/contain_runner.lua"
local PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
local MODES = { "workspace-write", "read-only" }
local NOBODY = 65534

local read_file = H.read_file
local write_file = H.write_file
local function sh_quote(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

local rand = H.rand_digits

-- The absolute path of a tool on PATH, or nil.
local function have(tool)
  local r = luxec.run({ "sh", "-c", "command -v " .. tool }, { env = { PATH = PATH } })
  return r.output:match("^(/%S+)")
end

local function users()
  local uid = math.tointeger(uv.getuid())
  if uid == 0 then
    return {
      { name = "root", uid = 0, prefix = {} },
      { name = "an unprivileged user (uid 65534, luxec host unprivileged too)", uid = NOBODY,
        prefix = { "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups" } },
    }
  end
  return { { name = ("this unprivileged user (uid %d)"):format(uid), uid = uid, prefix = {} } }
end

local function as_user(ctx, argv)
  local out = {}
  for _, a in ipairs(ctx.user.prefix) do out[#out + 1] = a end
  for _, a in ipairs(argv) do out[#out + 1] = a end
  return out
end

local function give(ctx, path)
  if ctx.user.uid ~= math.tointeger(uv.getuid()) then
    assert(uv.fs_chown(path, ctx.user.uid, ctx.user.uid))
  end
end

--- /proc facts of a host process, read by the spec (outside every sandbox).
local function observe(pid)
  local o = { pid = pid }
  local stat = read_file(("/proc/%d/stat"):format(pid))
  if not stat then
    o.alive = false
    return o
  end
  local rest = stat:match("^%d+ %(.*%) (.*)$")
  local f = {}
  for field in rest:gmatch("%S+") do f[#f + 1] = field end
  o.stopped = f[1] == "T" or f[1] == "t" -- field 3 (running or sleeping is no effect)
  o.alive = H.alive(pid)
  o.nice = f[17] -- field 19
  o.policy = f[39] -- field 41
  local limits = read_file(("/proc/%d/limits"):format(pid)) or ""
  o.nofile = limits:match("Max open files%s+(%S+%s+%S+)")
  local status = read_file(("/proc/%d/status"):format(pid)) or ""
  o.cpus = status:match("Cpus_allowed_list:%s*(%S+)")
  o.tracer = status:match("TracerPid:%s*(%d+)")
  o.ioprio = luxec.run({ CONTAIN, "ioprio-get", ("%d"):format(pid) }).output:match("ioprio (%d+)")
  return o
end

local WATCHED = { "alive", "stopped", "nice", "policy", "nofile", "cpus", "ioprio", "tracer" }

--- Which of a host process's facts changed: nil when none did.
local function changed(before, now)
  local diff = {}
  for _, k in ipairs(WATCHED) do
    if before[k] ~= now[k] then
      diff[#diff + 1] = ("%s %s -> %s"):format(k, tostring(before[k]), tostring(now[k]))
    end
  end
  return #diff > 0 and table.concat(diff, ", ") or nil
end

--- Host pids below pid (children of every thread, recursively).
local function descendants(pid)
  local out, queue = {}, { pid }
  while #queue > 0 do
    local p = table.remove(queue, 1)
    local req = uv.fs_scandir(("/proc/%d/task"):format(p))
    if req then
      for tid in function() return uv.fs_scandir_next(req) end do
        local kids = read_file(("/proc/%d/task/%s/children"):format(p, tid)) or ""
        for kid in kids:gmatch("%d+") do
          out[#out + 1] = tonumber(kid)
          queue[#queue + 1] = tonumber(kid)
        end
      end
    end
  end
  return out
end

--- The next line of a host process's output that starts with prefix (st.p, st.buf).
local function next_line(st, prefix)
  local line
  st.buf = st.buf or ""
  H.wait_for(function()
    st.buf = st.buf .. (st.p:read() or "")
    while true do
      local l, rest = st.buf:match("^([^\n]*)\n(.*)$")
      if not l then break end
      st.buf = rest
      if l:sub(1, #prefix) == prefix then
        line = l
        return true
      end
    end
    return st.p:finished()
  end, 10000, "'" .. prefix .. "' from a host process")
  assert(line, "the host process ended before '" .. prefix .. "': " .. st.buf)
  return line
end

local function host_spawn(ctx, argv, opts, as_root)
  opts = opts or {}
  opts.env = opts.env or { PATH = PATH }
  local p = assert(luxec.spawn(as_root and argv or as_user(ctx, argv), opts))
  return { p = p, buf = "" }
end

local function host_stop(st)
  if st and st.p then
    st.p:terminate({ grace_ms = 0 })
    st.p:close()
    st.p = nil
  end
end

-- Host unix socket servers --------------------------------------------------------------------

local function start_server(ctx, name, kind, path, pass, as_root)
  local st = host_spawn(ctx, { USOCK, kind == "stream" and "serve" or "dgram", path, pass }, nil,
    as_root)
  next_line(st, "listening")
  st.path, st.kind = path, kind
  st.mark = #st.p:snapshot().head
  ctx.srv[name] = st
  ctx.keep[st.p.pid] = true
end

local sentinels = 0

--- What reached server `name` since the last call (accepted connections or datagrams), as
--- the server reported them. A sentinel from the host goes last and is waited for: the
--- server handles its queue in order, so everything before it has been reported by then.
local function reached(ctx, name)
  local s = ctx.srv[name]
  local want
  if s.kind == "stream" then
    local r = luxec.run({ USOCK, "connect", s.path }, { env = { PATH = PATH } })
    assert(r.output:match("^ok hello"), "the sentinel did not get through: " .. r.output)
    want = ("accept pid=%d\n"):format(r.pid)
  else
    sentinels = sentinels + 1
    local tag = ("sentinel-%d"):format(sentinels)
    local r = luxec.run({ USOCK, "sendto", s.path, tag }, { env = { PATH = PATH } })
    assert(r.output == "ok sent\n", "the sentinel did not get through: " .. r.output)
    want = "recv " .. tag .. "\n"
  end
  local out, at
  H.wait_for(function()
    out = s.p:snapshot().head
    at = out:find(want, s.mark + 1, true)
    return at ~= nil
  end, 5000, "the sentinel at " .. s.path)
  local before = out:sub(s.mark + 1, at - 1)
  s.mark = at + #want - 1
  return before ~= "" and before or nil
end

-- Host SysV IPC objects -----------------------------------------------------------------------

local function ipc_make(ctx)
  local st = { key = rand(9), text = "host-shm-" .. rand(6) }
  local r = luxec.run(as_user(ctx, { IPC, "make", st.key, st.text }), { env = { PATH = PATH } })
  st.shm, st.msg, st.sem = r.output:match("shm=(%d+) msg=(%d+) sem=(%d+)")
  assert(st.shm, "ipc make: " .. r.output)
  st.expect = ("shm=%s msgs=0 sem=5\n"):format(st.text)
  return st
end

local function ipc_changed(st)
  local now = luxec.run({ IPC, "show", st.shm, st.msg, st.sem }).output
  if now ~= st.expect then return ("%s became %s"):format(st.expect:gsub("\n", ""), now) end
end

local function ipc_rm(_, st)
  luxec.run({ IPC, "rm", st.shm, st.msg, st.sem })
end

-- A host PTY that nobody has as controlling terminal ----------------------------------------

local function pty_host(ctx)
  local st = host_spawn(ctx, { CONTAIN, "ptyhost" })
  st.path = next_line(st, "pts "):match("^pts (%S+)")
  return st
end

local function pty_ask(st, cmd)
  st.p:write(cmd .. "\n")
  local word = cmd:match("^%S+")
  return next_line(st, word == "type" and "typed" or word)
end

local function pty_stop(_, st)
  st.p:close_stdin()
  host_stop(st)
end

-- A host process to aim at --------------------------------------------------------------------

local function hold_process(ctx)
  local marker = "hostproc" .. rand(7) -- a comm (15 bytes at most)
  local secret = "envsecret-" .. rand(8)
  local st = host_spawn(ctx, { CONTAIN, "hold", marker, ctx.target },
    { cwd = ctx.out, env = { PATH = PATH, LUXEC_HOLD_SECRET = secret } })
  next_line(st, "ready")
  st.pid = ("%d"):format(st.p.pid)
  st.marker, st.secret = marker, secret
  st.base = observe(st.p.pid)
  st.target = read_file(ctx.target)
  return st
end

local function hold_stop(_, st)
  uv.kill(st.p.pid, "sigcont")
  st.p:close_stdin()
  host_stop(st)
end

local function file_state(path)
  local s = uv.fs_stat(path)
  return s and ("%o %s"):format(s.mode & 4095, read_file(path)) or "gone"
end

-- The attempts -------------------------------------------------------------------------------
-- Each attack: argv(ctx, st), optional prepare(ctx) -> st (host side, before), effect(ctx, st,
-- res) -> a description when the effect happened (nil when it did not), optional
-- hold(ctx, st, pid, host) while the command is held alive, after(ctx, st, host, res) while
-- the luxec host is alive, cleanup(ctx, st), evidence(ctx, st) -> ops, paths (a record must
-- name one of each), refused (a pattern the sandboxed output matches), modes, skip(ctx) -> a
-- reason when this machine cannot show the attack at all, tty, tmpdir, policy(ctx).

local ATTACKS = {}
local function attack(class, name, a)
  a.class, a.name = class, name
  ATTACKS[#ATTACKS + 1] = a
end

local ok_output = function(_, _, res)
  if res.output:match("^ok") then return "it answered: " .. res.output end
end

local function server_attack(name, server, argv, extra, class)
  local a = extra or {}
  a.argv = a.argv or function(ctx) return argv(ctx, ctx.srv[server].path) end
  a.prepare = a.prepare or function(ctx)
    reached(ctx, server) -- starts from a clean mark
    return {}
  end
  local effect = a.effect
  a.effect = function(ctx, st, res)
    local got = reached(ctx, server)
    local more = effect and effect(ctx, st, res)
    if got or more then
      return table.concat({ got and "the host server got: " .. got or nil, more }, "; ")
    end
  end
  attack(class or "host unix sockets", name, a)
end

local function connect_to(_, path) return { USOCK, "connect", path, "use" } end
local function connect_evidence(server, extra)
  return function(ctx)
    local paths = { ctx.srv[server].path }
    for _, p in ipairs(extra and extra(ctx) or {}) do paths[#paths + 1] = p end
    return { "connect" }, paths
  end
end

server_attack("connect to a host server's socket outside the roots (/var/tmp)", "var",
  connect_to, { evidence = connect_evidence("var") })
server_attack("connect to a root daemon's socket under /run (like docker.sock)", "run",
  connect_to, { evidence = connect_evidence("run"),
    skip = function(ctx)
      return not ctx.srv.run and "the spec is not root: /run is not writable"
    end })
server_attack("connect to a host server's socket in /tmp (a tmux socket in a writable root)",
  "tmp", connect_to, { evidence = connect_evidence("tmp") })
server_attack("connect to a socket in the workspace whose server is a host process", "ws",
  connect_to, { evidence = connect_evidence("ws") })
server_attack("connect through a symlink in the workspace to a host socket", "var",
  function(ctx) return connect_to(ctx, ctx.ws .. "/to-host.sock") end,
  { evidence = connect_evidence("var", function(ctx) return { ctx.ws .. "/to-host.sock" } end) })
server_attack("connect through /proc/self/root to a host socket", "var",
  function(_, path) return connect_to(nil, "/proc/self/root" .. path) end,
  { evidence = connect_evidence("var", function(ctx)
    return { "/proc/self/root" .. ctx.srv.var.path } end) })
server_attack("connect by a relative path climbing out of the workspace", "var",
  function(ctx, path) return connect_to(ctx, ("../"):rep(8) .. path:sub(2)) end,
  { evidence = connect_evidence("var") })
server_attack("hard-link a host socket into the workspace and connect to the link", "var",
  function(_, path)
    local link = "hl-" .. rand(6)
    return { "sh", "-c", ("ln %s %s; %s connect %s use; rm -f %s"):format(sh_quote(path), link,
      USOCK, link, link) }
  end)
server_attack("take a host descriptor over SCM_RIGHTS and write/fchmod the file outside", "var",
  connect_to, {
    prepare = function(ctx)
      reached(ctx, "var")
      return { before = file_state(ctx.passfile) }
    end,
    effect = function(ctx, st)
      local now = file_state(ctx.passfile)
      if now ~= st.before then return "the passed file became " .. now end
    end,
  })
server_attack("take a host descriptor over SCM_RIGHTS from a /tmp socket", "tmp", connect_to, {
  prepare = function(ctx)
    reached(ctx, "tmp")
    return { before = file_state(ctx.passfile) }
  end,
  effect = function(ctx, st)
    local now = file_state(ctx.passfile)
    if now ~= st.before then return "the passed file became " .. now end
  end,
})
server_attack("an unconnected datagram (sendto) to a host datagram socket outside", "dvar",
  function(_, path) return { USOCK, "sendto", path, "attack" } end,
  { evidence = function(ctx) return { "sendto", "connect" }, { ctx.srv.dvar.path } end })
server_attack("a connected datagram to a host datagram socket outside", "dvar",
  function(_, path) return { USOCK, "dconnect", path, "attack" } end,
  { evidence = function(ctx) return { "connect", "sendto" }, { ctx.srv.dvar.path } end })
server_attack("an unconnected datagram to a host datagram socket in /tmp", "dtmp",
  function(_, path) return { USOCK, "sendto", path, "attack" } end,
  { evidence = function(ctx) return { "sendto", "connect" }, { ctx.srv.dtmp.path } end })
server_attack("a host socket that the policy does not name stays closed when another is named",
  "tmp", connect_to, {
    policy = function(ctx) return { unix_sockets = { ctx.srv.var.path } } end,
    evidence = connect_evidence("tmp"),
  })

server_attack("a named socket's path (in /tmp) swapped for a link to a host socket not named",
  "var", function(ctx, path)
    local named = ctx.srv.tmp.path
    return { "sh", "-c", ("mv %s %s.orig && ln -s %s %s && %s connect %s use"):format(named,
      named, path, named, USOCK, named) }
  end, {
    prepare = function(ctx, mode)
      reached(ctx, "var")
      return { mode = mode }
    end,
    policy = function(ctx) return { unix_sockets = { ctx.srv.tmp.path } } end,
    cleanup = function(ctx)
      local named = ctx.srv.tmp.path
      if uv.fs_lstat(named .. ".orig") then
        os.remove(named)
        assert(uv.fs_rename(named .. ".orig", named))
      end
    end,
    -- (read-only: the rename is refused, and nothing after it runs)
    evidence = function(ctx, st)
      if st.mode == "read-only" then return { "rename" }, { ctx.srv.tmp.path } end
      return { "connect" }, { ctx.srv.var.path }
    end,
  })

-- SysV IPC
local function ipc_attack(name, argv, extra)
  local a = extra or {}
  a.argv = argv
  a.prepare = a.prepare or ipc_make
  a.effect = a.effect or function(_, st) return ipc_changed(st) end
  a.cleanup = a.cleanup or ipc_rm
  attack("SysV IPC", name, a)
end
ipc_attack("write a host shared memory segment by id",
  function(_, st) return { IPC, "shmwrite", st.shm, "written-inside" } end)
ipc_attack("write a host shared memory segment by key",
  function(_, st) return { IPC, "shmwrite-key", st.key, "written-inside" } end)
ipc_attack("read a host shared memory segment",
  function(_, st) return { IPC, "shmread", st.shm } end,
  { effect = function(_, st, res)
    if res.output:find(st.text, 1, true) then return "read: " .. res.output end
  end })
ipc_attack("remove a host shared memory segment",
  function(_, st) return { IPC, "shmrm", st.shm } end)
ipc_attack("feed a host message queue by id", function(_, st) return { IPC, "msgsnd", st.msg } end)
ipc_attack("feed a host message queue by key",
  function(_, st) return { IPC, "msgsnd-key", st.key } end)
ipc_attack("take a message from a host message queue",
  function(_, st) return { IPC, "msgrcv", st.msg } end, {
    prepare = function(ctx)
      local st = ipc_make(ctx)
      local r = luxec.run(as_user(ctx, { IPC, "msgsnd", st.msg }), { env = { PATH = PATH } })
      assert(r.output == "ok sent\n", r.output)
      st.expect = st.expect:gsub("msgs=0", "msgs=1")
      return st
    end,
  })
ipc_attack("remove a host semaphore set", function(_, st) return { IPC, "semrm", st.sem } end)
ipc_attack("raise a host semaphore by id", function(_, st) return { IPC, "semop", st.sem } end)
ipc_attack("raise a host semaphore by key",
  function(_, st) return { IPC, "semop-key", st.key } end)
ipc_attack("objects made inside outlive the session on the host",
  function(_, st) return { IPC, "create", st.key } end, {
    prepare = function() return { key = rand(9) } end,
    effect = function(_, st)
      local r = luxec.run({ IPC, "keyed", st.key }).output
      if r ~= "shm=no msg=no sem=no\n" then return "on the host: " .. r end
    end,
    cleanup = function(_, st) luxec.run({ IPC, "rmkey", st.key }) end,
  })
ipc_attack("list the host's objects in /proc/sysvipc",
  function() return { "cat", "/proc/sysvipc/shm", "/proc/sysvipc/msg", "/proc/sysvipc/sem" } end,
  { effect = function(_, st, res)
    local shown = res.output:match("[^\n]* " .. st.key .. " [^\n]*")
    if shown then return "listed: " .. shown end
  end })

-- Other terminals
local function no_legacy_tiocsti()
  if read_file("/proc/sys/dev/tty/legacy_tiocsti") == "0\n" then
    return "dev.tty.legacy_tiocsti is 0: TIOCSTI is refused on this machine without a sandbox"
  end
end

attack("other terminals", "write fake output into another session's PTY", {
  prepare = function(ctx) return pty_host(ctx) end,
  argv = function(_, st) return { CONTAIN, "ptywrite", st.path, "FAKE-OUTPUT-" .. rand(6) } end,
  effect = function(_, st, res)
    local marker = res.argv[4]
    local out = pty_ask(st, "output")
    if out:find(marker, 1, true) then return "the host session showed: " .. out end
  end,
  cleanup = pty_stop,
})
attack("other terminals", "read a password typed into another session's PTY", {
  prepare = function(ctx)
    local st = pty_host(ctx)
    st.password = "password-" .. rand(8)
    pty_ask(st, "type " .. st.password)
    return st
  end,
  argv = function(_, st) return { CONTAIN, "ptyread", st.path } end,
  effect = function(_, st, res)
    if res.output:find(st.password, 1, true) then return "read inside: " .. res.output end
    local left = pty_ask(st, "pending")
    if not left:find(st.password, 1, true) then return "taken from the host PTY: " .. left end
  end,
  cleanup = pty_stop,
})
attack("other terminals", "take an orphaned host PTY as controlling terminal and TIOCSTI into it", {
  prepare = function(ctx) return pty_host(ctx) end,
  argv = function(_, st) return { CONTAIN, "ptysteal", st.path, "echo INJECTED-" .. rand(6) } end,
  effect = function(_, st, res)
    local left = pty_ask(st, "pending")
    if left:find(res.argv[4], 1, true) then return "the host PTY's reader gets: " .. left end
  end,
  cleanup = pty_stop,
  skip = no_legacy_tiocsti,
})
attack("other terminals", "TIOCSTI into the session's own terminal", {
  tty = true,
  argv = function() return { CONTAIN, "tiocsti", "INJECTED-" .. rand(6) } end,
  effect = function(_, _, res)
    -- echo is on: injected input comes back out of the master the host reads
    if res.output:find(res.argv[3], 1, true) then return "echoed: " .. res.output end
  end,
  refused = "^EPERM",
  skip = no_legacy_tiocsti,
})
attack("other terminals", "TIOCLINUX (paste the console selection into the input)", {
  tty = true,
  control = false, -- (only a virtual console answers it: no host effect to show)
  argv = function() return { CONTAIN, "tioclinux" } end,
  effect = ok_output,
  refused = "^EPERM",
})
attack("other terminals", "chmod the session's own PTY to 0666", {
  tty = true,
  argv = function() return { CONTAIN, "ptychmod", "hold" } end,
  hold = function(_, st, _, host)
    for _, pid in ipairs(descendants(host)) do
      if (read_file(("/proc/%d/comm"):format(pid)) or "") == "contain\n" then
        -- The terminal as the command has it, and the host's file of that name: only when
        -- both are one inode is the command's terminal the host's (a private devpts is not)
        local fd = ("/proc/%d/fd/0"):format(pid)
        local mine, name = uv.fs_stat(fd), uv.fs_readlink(fd)
        local host_side = name and name:match("^/dev/pts/%d+$") and uv.fs_stat(name)
        st.found = mine ~= nil
        if mine and host_side and host_side.dev == mine.dev and host_side.ino == mine.ino then
          st.mode, st.name = host_side.mode & 4095, name
        end
      end
    end
  end,
  effect = function(_, st)
    assert(st.found, "the held command's terminal was not found from outside")
    if st.mode and st.mode & 6 ~= 0 then
      return ("%s is mode %o on the host"):format(st.name, st.mode)
    end
  end,
})

-- Host processes by pid
local function proc_attack(name, argv, extra)
  local a = extra or {}
  a.prepare = a.prepare or hold_process
  a.argv = argv
  a.cleanup = a.cleanup or hold_stop
  a.effect = a.effect or function(_, st)
    local diff = changed(st.base, observe(st.p.pid))
    if diff then return "the host process changed: " .. diff end
  end
  attack("host processes", name, a)
end

local function luxec_host_attack(name, argv, extra)
  local a = extra or {}
  a.argv = function() return argv end
  a.after = function(_, st, host) st.now = observe(host) end
  a.prepare = function(ctx, mode)
    local key = mode or "none"
    ctx.host_base = ctx.host_base or {}
    if not ctx.host_base[key] then -- the luxec host of an innocent command, seen the same way
      ctx.drive(ctx, { argv = { "true" }, cwd = ctx.ws, sandbox = mode and { mode = mode } },
        { after = function(host) ctx.host_base[key] = observe(host) end })
    end
    return { base = ctx.host_base[key] }
  end
  a.effect = a.effect or function(_, st)
    local diff = changed(st.base, st.now)
    if diff then return "the luxec host changed: " .. diff end
  end
  attack("host processes", "the luxec host: " .. name, a)
end

local function one_cpu()
  local cpus = (read_file("/proc/self/status") or ""):match("Cpus_allowed_list:%s*(%S+)")
  if cpus == "0" then return "one CPU: an affinity change cannot be seen" end
end

local function tool(name)
  return function() if not have(name) then return name .. " is not installed" end end
end

proc_attack("kill -0 a host process", function(_, st) return { CONTAIN, "signal", st.pid, "0" } end,
  { effect = ok_output })
-- A signal takes effect when its target next runs: give that a moment before deciding.
local function signalled(field, value)
  return function(_, st)
    local now
    pcall(H.wait_for, function()
      now = observe(st.p.pid)
      return now[field] == value
    end, 300)
    local diff = changed(st.base, now)
    if diff then return "the host process changed: " .. diff end
  end
end
proc_attack("SIGSTOP a host process",
  function(_, st) return { CONTAIN, "signal", st.pid, "19" } end,
  { effect = signalled("stopped", true) })
proc_attack("SIGKILL a host process",
  function(_, st) return { CONTAIN, "signal", st.pid, "9" } end,
  { effect = signalled("alive", false) })
proc_attack("prlimit64 NOFILE 7 on a host process",
  function(_, st) return { CONTAIN, "prlimit", st.pid } end)
proc_attack("prlimit(1) --nofile=7:7 on a host process",
  function(_, st) return { "prlimit", "--pid", st.pid, "--nofile=7:7" } end,
  { skip = tool("prlimit") })
proc_attack("read a host process's limits (prlimit64)",
  function(_, st) return { CONTAIN, "prlimit-read", st.pid } end, { effect = ok_output })
proc_attack("setpriority 19 on a host process",
  function(_, st) return { CONTAIN, "nice", st.pid } end)
proc_attack("renice a host process",
  function(_, st) return { "renice", "-n", "19", "-p", st.pid } end,
  { skip = tool("renice") })
proc_attack("SCHED_IDLE on a host process", function(_, st) return { CONTAIN, "sched", st.pid } end)
proc_attack("sched_setaffinity on a host process",
  function(_, st) return { CONTAIN, "affinity", st.pid } end, { skip = one_cpu })
proc_attack("taskset a host process", function(_, st) return { "taskset", "-p", "1", st.pid } end,
  { skip = function() return one_cpu() or tool("taskset")() end })
proc_attack("ioprio_set idle on a host process",
  function(_, st) return { CONTAIN, "ioprio", st.pid } end)
proc_attack("ionice -c3 a host process",
  function(_, st) return { "ionice", "-c", "3", "-p", st.pid } end,
  { skip = tool("ionice") })
local function leaks(field)
  return function(_, st, res)
    if res.output:find(st[field], 1, true) then return "read: " .. res.output:sub(1, 200) end
  end
end
proc_attack("read /proc/<pid>/environ of a host process",
  function(_, st) return { "cat", "/proc/" .. st.pid .. "/environ" } end,
  { effect = leaks("secret") })
proc_attack("read /proc/<pid>/cmdline of a host process",
  function(_, st) return { "cat", "/proc/" .. st.pid .. "/cmdline" } end,
  { effect = leaks("marker") })
proc_attack("read /proc/<pid>/status of a host process",
  function(_, st) return { "cat", "/proc/" .. st.pid .. "/status" } end,
  { effect = leaks("marker") })
proc_attack("read a host process's memory (process_vm_readv)",
  function(_, st) return { CONTAIN, "memread", st.pid } end, { effect = leaks("secret") })
proc_attack("read a host process's memory (/proc/<pid>/mem)",
  function(_, st) return { CONTAIN, "procmem", st.pid } end, { effect = leaks("secret") })
proc_attack("ptrace-attach a host process", function(_, st)
  return { CONTAIN, "ptrace", st.pid, "hold" }
end, {
  hold = function(_, st) st.during = observe(st.p.pid) end,
  effect = function(_, st)
    if st.during.tracer ~= "0" or st.during.stopped then
      return ("traced: TracerPid %s, stopped %s"):format(st.during.tracer,
        tostring(st.during.stopped))
    end
  end,
})
proc_attack("steal a host process's descriptor (pidfd_getfd) and write the file outside",
  function(_, st) return { CONTAIN, "pidfd-getfd", st.pid, "3" } end, {
    effect = function(ctx, st)
      if read_file(ctx.target) ~= st.target then return "the file outside was written" end
    end,
  })
proc_attack("write through /proc/<pid>/cwd of a host process", function(_, st)
  return { "sh", "-c", "echo escaped >> /proc/" .. st.pid .. "/cwd/target" }
end, {
  effect = function(ctx, st)
    if read_file(ctx.target) ~= st.target then return "the file outside was written" end
  end,
})
proc_attack("/proc lists only the sandbox's own processes",
  function() return { CONTAIN, "procs" } end, {
    effect = function(_, st, res)
      local n, seen = 0, {}
      for pid, comm in res.output:gmatch("proc (%d+) ([^\n]*)") do
        n = n + 1
        if comm == st.marker or pid == st.pid or pid == ("%d"):format(res.host_pid) then
          seen[#seen + 1] = pid .. " " .. comm
        end
      end
      if #seen > 0 or n > 10 then
        return ("%d processes visible, host ones among them: %s"):format(n,
          table.concat(seen, ", "))
      end
    end,
  })

luxec_host_attack("kill -0", { CONTAIN, "signal", "@HOST@", "0" }, { effect = ok_output })
luxec_host_attack("prlimit64 NOFILE 7", { CONTAIN, "prlimit", "@HOST@" })
luxec_host_attack("prlimit(1) --nofile=7:7", { "prlimit", "--pid", "@HOST@", "--nofile=7:7" },
  { skip = tool("prlimit") })
luxec_host_attack("setpriority 19", { CONTAIN, "nice", "@HOST@" })
luxec_host_attack("SCHED_IDLE", { CONTAIN, "sched", "@HOST@" })
luxec_host_attack("sched_setaffinity", { CONTAIN, "affinity", "@HOST@" }, { skip = one_cpu })
luxec_host_attack("ioprio_set idle", { CONTAIN, "ioprio", "@HOST@" })
luxec_host_attack("read its environment", { "cat", "/proc/@HOST@/environ" }, {
  effect = function(ctx, _, res)
    if res.output:find(ctx.secret, 1, true) then return "read: " .. res.output:sub(1, 200) end
  end,
})

-- /dev/shm and x32 system calls
local function no_x32()
  local r = luxec.run({ CONTAIN, "x32", "getpid" })
  if not r.output:match("^ok") then
    return "this kernel has no x32 ABI (an x32 call fails without a sandbox: "
      .. r.output:gsub("\n", "") .. ")"
  end
end

attack("/dev/shm and x32", "write a host file in /dev/shm", {
  tmpdir = true, -- (with TMPDIR set, /dev/shm becomes a writable root today)
  prepare = function(ctx)
    local st = { path = "/dev/shm/luxec-contain-" .. rand(8) }
    write_file(st.path, "host shm file\n")
    give(ctx, st.path)
    return st
  end,
  argv = function(_, st) return { "sh", "-c", "echo escaped >> " .. st.path } end,
  effect = function(_, st)
    local now = read_file(st.path)
    if now ~= "host shm file\n" then return "the host file is now " .. tostring(now) end
  end,
  cleanup = function(_, st) os.remove(st.path) end,
})
attack("/dev/shm and x32", "read a host file in /dev/shm", {
  tmpdir = true,
  prepare = function(ctx)
    local st = { path = "/dev/shm/luxec-contain-" .. rand(8), secret = "shm-secret-" .. rand(6) }
    write_file(st.path, st.secret .. "\n")
    give(ctx, st.path)
    return st
  end,
  argv = function(_, st) return { "cat", st.path } end,
  effect = function(_, st, res)
    if res.output:find(st.secret, 1, true) then return "read: " .. res.output end
  end,
  cleanup = function(_, st) os.remove(st.path) end,
})
attack("/dev/shm and x32", "a file made in /dev/shm appears in the host's /dev/shm", {
  tmpdir = true,
  prepare = function() return { path = "/dev/shm/luxec-contain-" .. rand(8) } end,
  argv = function(_, st) return { "sh", "-c", "echo made > " .. st.path } end,
  effect = function(_, st)
    if uv.fs_stat(st.path) then return "the host has " .. st.path end
  end,
  cleanup = function(_, st) os.remove(st.path) end,
})
attack("/dev/shm and x32", "an x32 getpid", {
  argv = function() return { CONTAIN, "x32", "getpid" } end,
  effect = ok_output,
  skip = no_x32,
})
attack("/dev/shm and x32", "an x32 socket(AF_INET)", {
  argv = function() return { CONTAIN, "x32", "socket" } end,
  effect = ok_output,
  skip = no_x32,
})
attack("/dev/shm and x32", "an x32 openat of a file outside, then write", {
  prepare = function(ctx) return { before = read_file(ctx.target) } end,
  argv = function(ctx) return { CONTAIN, "x32", "openat", ctx.target } end,
  effect = function(ctx, st)
    if read_file(ctx.target) ~= st.before then return "the file outside was written" end
  end,
  skip = no_x32,
})
server_attack("an x32 socket+connect to a host socket outside", "var",
  function(_, path) return { CONTAIN, "x32", "connect", path } end, { skip = no_x32 },
  "/dev/shm and x32")

-- What must keep working ---------------------------------------------------------------------
-- Each: argv(ctx), check(ctx, res) with asserts; tty, input, modes, skip, tmpdir, policy,
-- quiet (no denial record at all).
local KEEPS = {}
local function keep(name, k)
  k.name = name
  KEEPS[#KEEPS + 1] = k
end

local WS_ONLY = { ["workspace-write"] = true }

keep("a unix socket server and client both inside the workspace", {
  modes = WS_ONLY,
  quiet = true,
  argv = function(ctx)
    local sock = ctx.ws .. "/in-" .. rand(6) .. ".sock"
    return { "sh", "-c", ("%s bg %s && %s connect %s; rm -f %s"):format(USOCK, sock, USOCK, sock,
      sock) }
  end,
  check = function(_, res) assert.equals("ok pong\n", res.output) end,
})
keep("a unix socket server and client both inside, in /tmp", {
  modes = WS_ONLY,
  quiet = true,
  argv = function(ctx)
    local sock = ctx.tmpd .. "/in-" .. rand(6) .. ".sock"
    return { "sh", "-c", ("%s bg %s && %s connect %s; rm -f %s"):format(USOCK, sock, USOCK, sock,
      sock) }
  end,
  check = function(_, res) assert.equals("ok pong\n", res.output) end,
})
keep("a datagram socket bound inside the workspace", {
  modes = WS_ONLY,
  quiet = true,
  argv = function(ctx) return { USOCK, "dpair", ctx.ws .. "/dg-" .. rand(6) .. ".sock" } end,
  check = function(_, res) assert.equals("ok ping\n", res.output) end,
})
keep("sends the host makes for the caller: a 4 MiB sendmsg to a slow reader, a descriptor "
  .. "passed, sendmmsg, EPIPE and SIGPIPE, a blocking datagram to a full receiver", {
  modes = WS_ONLY,
  quiet = true,
  argv = function(ctx) return { USOCK, "sends", ctx.ws .. "/full-" .. rand(6) .. ".sock" } end,
  check = function(_, res) assert.equals("ok sends\n", res.output) end,
})
keep("a blocking TCP connect inside and a 1 MiB sendmsg on it (the network allowed)", {
  quiet = true,
  policy = function() return { network = "allow" } end,
  argv = function() return { USOCK, "tcp" } end,
  check = function(_, res) assert.equals("ok tcp\n", res.output) end,
})
keep("an x32 call where the kernel has no x32: its ENOSYS, and no record", {
  quiet = true,
  skip = function() return not no_x32() and "this kernel has the x32 ABI" or nil end,
  argv = function() return { "sh", "-c", CONTAIN .. " x32 getpid; exit 0" } end,
  check = function(_, res) assert.equals("ENOSYS: Function not implemented (x32 getpid)\n",
    res.output) end,
})
keep("a stream connect to a host datagram socket: the kernel's EPROTOTYPE, and no record", {
  quiet = true,
  argv = function(ctx)
    return { "sh", "-c", USOCK .. " connect " .. ctx.srv.dvar.path .. "; exit 0" }
  end,
  check = function(_, res) assert.matches("^EPROTOTYPE", res.output) end,
})
keep("a connect through a loop of symbolic links: the kernel's ELOOP, and no record", {
  modes = WS_ONLY,
  quiet = true,
  argv = function()
    return { "sh", "-c", "ln -s la lb && ln -s lb la && " .. USOCK .. " connect la; rm -f la lb" }
  end,
  check = function(_, res) assert.matches("^ELOOP", res.output) end,
})
keep("chmod u+s of a file that does not exist: the kernel's ENOENT, and no record", {
  quiet = true,
  argv = function()
    return { "sh", "-c", "chmod 4755 /nonexistent-luxec missing 2>&1; exit 0" }
  end,
  check = function(_, res)
    assert.equals(2, select(2, res.output:gsub("No such file or directory", "")), res.output)
  end,
})
keep("an ioctl on /dev/urandom (RNDGETENTCNT)", {
  quiet = true,
  argv = function()
    return { "python3", "-c", "import fcntl, struct\nf = open('/dev/urandom', 'rb')\n"
      .. "print(struct.unpack('i', fcntl.ioctl(f, 0x80045200, bytes(4)))[0] >= 0)" }
  end,
  check = function(_, res) assert.equals("True\n", res.output) end,
})
keep("socketpair", {
  quiet = true,
  argv = function() return { USOCK, "pair" } end,
  check = function(_, res) assert.equals("ok pair\n", res.output) end,
})
keep("a host socket the policy names (unix_sockets) is reachable", {
  policy = function(ctx) return { unix_sockets = { ctx.srv.var.path } } end,
  prepare = function(ctx) reached(ctx, "var") end,
  argv = function(ctx) return { USOCK, "connect", ctx.srv.var.path } end,
  check = function(ctx, res)
    assert.matches("^ok hello", res.output)
    local got = reached(ctx, "var")
    assert.is_string(got, "the named socket's server got no connection")
    assert.equals(1, select(2, got:gsub("accept pid=", "")), got)
  end,
})
keep("tty prints the session's terminal", {
  tty = true,
  argv = function() return { "tty" } end,
  check = function(_, res) assert.matches("^/dev/pts/%d+\r?\n$", res.output) end,
})
keep("stty works on the session's terminal", {
  tty = true,
  argv = function() return { "stty", "size" } end,
  check = function(_, res) assert.matches("^24 80\r?\n$", res.output) end,
})
keep("echo > /dev/tty (an open with O_CREAT the host makes) reaches the session's terminal", {
  tty = true,
  argv = function()
    return { "sh", "-c", "exec 0</dev/null 1>/dev/null; echo to-the-tty > /dev/tty" }
  end,
  check = function(_, res) assert.matches("^to%-the%-tty\r?\n$", res.output) end,
})
keep("a PTY opened inside, made the controlling terminal: /dev/tty with O_CREAT opens it", {
  argv = function()
    return { "python3", "-c", "import os, pty, fcntl, termios\n"
      .. "m, s = pty.openpty()\n"
      .. "if os.getsid(0) != os.getpid(): os.setsid()\n"
      .. "fcntl.ioctl(s, termios.TIOCSCTTY, 0)\n"
      .. "fd = os.open('/dev/tty', os.O_WRONLY | os.O_CREAT)\n"
      .. "os.write(fd, b'inner'); print('ok', os.read(m, 5).decode())" }
  end,
  check = function(_, res) assert.matches("^ok inner\r?\n$", res.output) end,
})
keep("an interactive read on the session's terminal", {
  tty = true,
  input = "typed-line\n",
  argv = function() return { "sh", "-c", "read x; echo \"got:$x\"" } end,
  check = function(_, res) assert.matches("got:typed%-line", res.output) end,
})
keep("script -qc true /dev/null (a PTY opened inside)", {
  skip = tool("script"),
  argv = function() return { "script", "-qc", "tty", "/dev/null" } end,
  check = function(_, res) assert.matches("/dev/pts/%d+", res.output) end,
})
keep("python3 pty.openpty()", {
  skip = tool("python3"),
  argv = function()
    return { "python3", "-c", "import os, pty; m, s = pty.openpty(); os.write(s, b'x\\n'); "
      .. "print('ok', os.ttyname(s).startswith('/dev/pts/'), os.read(m, 8))" }
  end,
  check = function(_, res) assert.equals("ok True b'x\\r\\n'\n", res.output) end,
})
keep("git status in a workspace at the top of a repository", {
  skip = tool("git"),
  cwd = function(ctx) return ctx.repo end,
  argv = function() return { "git", "status", "--short", "--branch" } end,
  check = function(_, res) assert.matches("^## ", res.output) end,
})
keep("cc builds a program in the workspace and it runs", {
  modes = WS_ONLY,
  skip = tool("cc"),
  argv = function()
    local exe = "hello-" .. rand(6)
    return { "sh", "-c", ("cc -o %s hello.c && ./%s; rm -f %s"):format(exe, exe, exe) }
  end,
  check = function(_, res) assert.equals("hello from cc\n", res.output) end,
})
keep("python3 tempfile", {
  modes = WS_ONLY,
  skip = tool("python3"),
  argv = function()
    return { "python3", "-c", "import tempfile\nwith tempfile.NamedTemporaryFile() as f:\n"
      .. " f.write(b'x'); f.flush(); print('ok', f.name.startswith(tempfile.gettempdir()))" }
  end,
  check = function(_, res) assert.equals("ok True\n", res.output) end,
})
keep("a login shell with a pyenv-like mkdir -p of existing directories gives no record", {
  quiet = true,
  skip = tool("bash"),
  argv = function() return { "bash", "-lc", "true" } end,
  check = function(_, res) assert.equals("", res.output) end,
})
keep("/dev/shm is writable with TMPDIR unset, and is not the host's", {
  modes = WS_ONLY,
  quiet = true,
  argv = function(ctx)
    ctx.shm_name = "/dev/shm/luxec-contain-" .. rand(8)
    return { "sh", "-c", ("echo inside > %s && cat %s"):format(ctx.shm_name, ctx.shm_name) }
  end,
  check = function(ctx, res)
    assert.equals("inside\n", res.output)
    local leaked = uv.fs_stat(ctx.shm_name) ~= nil
    os.remove(ctx.shm_name)
    assert.is_false(leaked, "the file was made in the host's /dev/shm")
  end,
})
keep("/dev/shm is writable with TMPDIR set, and is not the host's", {
  modes = WS_ONLY,
  quiet = true,
  tmpdir = true,
  argv = function(ctx)
    ctx.shm_name = "/dev/shm/luxec-contain-" .. rand(8)
    return { "sh", "-c", ("echo inside > %s && cat %s"):format(ctx.shm_name, ctx.shm_name) }
  end,
  check = function(ctx, res)
    assert.equals("inside\n", res.output)
    local leaked = uv.fs_stat(ctx.shm_name) ~= nil
    os.remove(ctx.shm_name)
    assert.is_false(leaked, "the file was made in the host's /dev/shm")
  end,
})

-- Driving one attempt ------------------------------------------------------------------------

local function runner_env(ctx, tmpdir)
  local env = { "PATH=" .. PATH, "HOME=" .. ctx.home, "LANG=C.UTF-8",
    "LUXEC_CONTAIN_SECRET=" .. ctx.secret }
  if tmpdir then env[#env + 1] = "TMPDIR=" .. ctx.tmpd end
  return env
end

--- Run contain_runner.lua as the user under test; hooks.hold(pid, host) while the command is
--- held, hooks.after(host, res) while the luxec host is still alive. Returns the result
--- ({code, output, denials, denials_total, error, pid}) plus host_pid.
local function drive(ctx, req, hooks, tmpdir)
  hooks = hooks or {}
  local argv = as_user(ctx, { H.luxec, RUNNER, json.encode(req) })
  local stdin, stdout, stderr = uv.new_pipe(), uv.new_pipe(), uv.new_pipe()
  local buf, err, lines, exited = "", {}, {}, false
  local proc, pid = uv.spawn(argv[1], {
    args = { table.unpack(argv, 2) },
    stdio = { stdin, stdout, stderr },
    env = runner_env(ctx, tmpdir),
  }, function() exited = true end)
  assert(proc, pid)
  pid = math.tointeger(pid)
  stdout:read_start(function(_, data)
    if data then
      buf = buf .. data
      for line in function()
        local l, rest = buf:match("^([^\n]*)\n(.*)$")
        if l then buf = rest end
        return l
      end do
        lines[#lines + 1] = line
      end
    end
  end)
  stderr:read_start(function(_, data) if data then err[#err + 1] = data end end)
  local result
  local ok, problem = pcall(function()
    while not result do
      H.wait_for(function() return #lines > 0 or exited end, 30000, "the attempt's luxec host")
      if #lines == 0 then break end
      local line = table.remove(lines, 1)
      local held = line:match("^HOLD (%d+)$")
      if held then
        if hooks.hold then hooks.hold(tonumber(held), pid) end
        stdin:write("go\n")
      elseif line:sub(1, 7) == "RESULT " then
        result = assert(json.decode(line:sub(8)))
        result.host_pid = pid
        if hooks.after then hooks.after(pid, result) end
      end
    end
  end)
  stdin:shutdown()
  if not pcall(H.wait_for, function() return exited end, 20000, "the luxec host to exit") then
    proc:kill("sigkill")
    H.wait_for(function() return exited end, 5000, "the killed luxec host")
  end
  for _, h in ipairs({ proc, stdin, stdout, stderr }) do h:close() end
  uv.run("nowait")
  if not ok then error(problem, 0) end
  assert(result, "the attempt's luxec host gave no result; stderr: " .. table.concat(err))
  result.stderr = table.concat(err)
  return result
end

local function policy_for(ctx, mode, extra)
  local p = { mode = mode, network = "deny" }
  for k, v in pairs(extra and extra(ctx) or {}) do p[k] = v end
  return p
end

local function describe_records(res)
  local out = {}
  for _, d in ipairs(res.denials or {}) do
    out[#out + 1] = require("luxec.sandbox").describe(d) .. " [" .. tostring(d.source) .. "]"
  end
  return #out > 0 and table.concat(out, "; ") or "(none)"
end

local function assert_record(res, ops, paths)
  for _, d in ipairs(res.denials) do
    for _, op in ipairs(ops) do
      for _, path in ipairs(paths) do
        if d.op == op and (d.path == path or d.addr == path) then
          assert(math.type(d.pid) == "integer" and d.pid > 0, "a record without its pid")
          assert(type(d.comm) == "string" and d.comm ~= "", "a record without its command")
          assert(d.source == "kernel" or d.source == "supervisor",
            "a record that does not say its source (kernel or supervisor): " .. tostring(d.source))
          return
        end
      end
    end
  end
  error(("no record of %s %s; the records: %s"):format(table.concat(ops, "|"),
    table.concat(paths, " or "), describe_records(res)), 2)
end

local function run_attack(ctx, a, mode)
  if a.skip then
    local why = a.skip(ctx)
    if why then
      pending("skipped: " .. why)
      return
    end
  end
  local st = a.prepare and a.prepare(ctx, mode) or {}
  local ok, err = pcall(function()
    local argv = a.argv(ctx, st)
    local res = drive(ctx, {
      argv = argv,
      cwd = ctx.ws,
      tty = a.tty,
      input = a.input,
      sandbox = mode and policy_for(ctx, mode, a.policy) or nil,
    }, {
      hold = a.hold and function(pid, host) a.hold(ctx, st, pid, host) end,
      after = a.after and function(host, res) a.after(ctx, st, host, res) end,
    }, a.tmpdir)
    res.argv = argv
    assert(not res.error, "the command was not started: " .. tostring(res.error))
    local happened = a.effect(ctx, st, res)
    if not mode then
      assert(happened, "control: the attack did not work without a sandbox (so the check "
        .. "cannot see it); output: " .. tostring(res.output))
      return
    end
    assert(not happened, ("ESCAPE: %s (exit %s; output: %s)"):format(tostring(happened),
      tostring(res.code), tostring(res.output):sub(1, 300)))
    if a.refused then
      assert(res.output:match(a.refused), ("not refused (%s expected): %s"):format(a.refused,
        res.output))
    end
    if a.evidence then assert_record(res, a.evidence(ctx, st)) end
  end)
  if a.cleanup then a.cleanup(ctx, st) end
  if not ok then error(err, 0) end
end

local function run_keep(ctx, k, mode)
  if k.skip then
    local why = k.skip(ctx)
    if why then
      pending("skipped: " .. why)
      return
    end
  end
  if k.prepare then k.prepare(ctx) end
  local res = drive(ctx, { argv = k.argv(ctx), cwd = k.cwd and k.cwd(ctx) or ctx.ws, tty = k.tty,
    input = k.input, sandbox = policy_for(ctx, mode, k.policy) }, nil, k.tmpdir)
  assert(not res.error, "the command was not started: " .. tostring(res.error))
  k.check(ctx, res)
  assert.equals(0, res.code, res.output)
  if k.quiet then
    assert(res.denials_total == 0, "false records: " .. describe_records(res))
  end
end

-- Per user: the workspace (theirs), a git repository (theirs), a directory outside every
-- root, a home with a pyenv-like profile, and the host servers.
local function set_up(ctx)
  ctx.srv, ctx.keep, ctx.drive = {}, {}, drive
  ctx.secret = "hostsecret-" .. rand(8)
  ctx.ws = H.tmpdir()
  give(ctx, ctx.ws)
  ctx.tmpd = H.tmpdir()
  give(ctx, ctx.tmpd)
  ctx.out = assert(uv.fs_mkdtemp("/var/tmp/luxec-contain-XXXXXX"))
  assert(uv.fs_chmod(ctx.out, 493))
  ctx.passfile, ctx.target = ctx.out .. "/passed", ctx.out .. "/target"
  for _, f in ipairs({ ctx.passfile, ctx.target }) do
    write_file(f, "original\n")
    assert(uv.fs_chmod(f, 420))
    give(ctx, f)
  end
  local sockdir = ctx.out .. "/sock"
  assert(uv.fs_mkdir(sockdir, 493))
  give(ctx, sockdir)
  ctx.home = ctx.out .. "/home"
  assert(uv.fs_mkdir(ctx.home, 493))
  write_file(ctx.home .. "/.bash_profile",
    'export PYENV_ROOT="$HOME/.pyenv"\nmkdir -p "$PYENV_ROOT/shims" "$PYENV_ROOT/versions"\n')
  luxec.run({ "mkdir", "-p", ctx.home .. "/.pyenv/shims", ctx.home .. "/.pyenv/versions" })
  luxec.run({ "chown", "-R", ("%d:%d"):format(ctx.user.uid, ctx.user.uid), ctx.home })
  write_file(ctx.ws .. "/hello.c",
    '#include <stdio.h>\nint main(void) { puts("hello from cc"); return 0; }\n')
  give(ctx, ctx.ws .. "/hello.c")
  ctx.repo = ctx.out .. "/repo" -- (outside /tmp: a project directory somewhere)
  assert(uv.fs_mkdir(ctx.repo, 493))
  give(ctx, ctx.repo)
  if have("git") then
    local r = luxec.run(as_user(ctx, { "git", "init", "-q", ctx.repo }),
      { env = { PATH = PATH, HOME = ctx.home } })
    assert(r.code == 0, r.output)
  end
  local tmux = ("%s/tmux-%d"):format(ctx.tmpd, ctx.user.uid)
  assert(uv.fs_mkdir(tmux, 448))
  give(ctx, tmux)
  start_server(ctx, "var", "stream", sockdir .. "/host.sock", ctx.passfile)
  start_server(ctx, "tmp", "stream", tmux .. "/default", ctx.passfile)
  start_server(ctx, "ws", "stream", ctx.ws .. "/host.sock")
  start_server(ctx, "dvar", "dgram", sockdir .. "/dgram.sock")
  start_server(ctx, "dtmp", "dgram", tmux .. "/dgram.sock")
  if math.tointeger(uv.getuid()) == 0 then
    ctx.rundir = ("/run/luxec-contain-%d"):format(uv.os_getpid())
    os.execute("rm -rf " .. ctx.rundir)
    assert(uv.fs_mkdir(ctx.rundir, 493))
    start_server(ctx, "run", "stream", ctx.rundir .. "/docker.sock", nil, true)
  end
  assert(uv.fs_symlink(ctx.srv.var.path, ctx.ws .. "/to-host.sock"))
end

local function tear_down(ctx)
  for _, s in pairs(ctx.srv or {}) do host_stop(s) end
  if ctx.ws then H.rmtree(ctx.ws) end
  if ctx.tmpd then H.rmtree(ctx.tmpd) end
  if ctx.out then os.execute("rm -rf " .. sh_quote(ctx.out)) end
  if ctx.rundir then os.execute("rm -rf " .. sh_quote(ctx.rundir)) end
end

local function assert_clean(ctx)
  local function left()
    local kids = {}
    for _, pid in ipairs(H.children()) do
      if not ctx.keep[pid] then kids[#kids + 1] = pid end
    end
    return kids
  end
  pcall(H.wait_for, function() return #left() == 0 end, 2000)
  local kids = left()
  for _, pid in ipairs(kids) do uv.kill(pid, "sigkill") end
  assert(#kids == 0, "test left child processes: " .. table.concat(kids, ", "))
end

local function usable(user)
  local layers = require("luxec.core").sandbox_layers()
  if layers.landlock < 3 then
    return "Landlock ABI " .. layers.landlock .. " (3 or later needed)"
  end
  if #user.prefix > 0 and not have("setpriv") then
    return "setpriv (util-linux) is not installed: cannot drop to the test user"
  end
end

for _, user in ipairs(users()) do
  describe("containment as " .. user.name, function()
    local why = usable(user)
    if why then
      it("runs where the sandbox can be tried", function() pending("skipped: " .. why) end)
      return
    end
    local ctx = { user = user }
    lazy_setup(function() set_up(ctx) end)
    lazy_teardown(function() tear_down(ctx) end)
    after_each(function() assert_clean(ctx) end)

    describe("without a sandbox (each attack works there, and its check sees it)", function()
      for _, a in ipairs(ATTACKS) do
        if a.control ~= false then
          it("control: " .. a.class .. ": " .. a.name, function() run_attack(ctx, a, nil) end)
        end
      end
    end)

    for _, mode in ipairs(MODES) do
      describe(mode .. ", network denied", function()
        for _, a in ipairs(ATTACKS) do
          if not a.modes or a.modes[mode] then
            it(a.class .. ": " .. a.name, function() run_attack(ctx, a, mode) end)
          end
        end
        for _, k in ipairs(KEEPS) do
          if not k.modes or k.modes[mode] then
            it("keeps working: " .. k.name, function() run_keep(ctx, k, mode) end)
          end
        end
      end)
    end
  end)
end
