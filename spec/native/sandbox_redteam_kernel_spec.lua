-- A second red-team pass (issue 18), in the classes the other escape specs leave out: every
-- other system call the filter refuses (each with its record), namespaces by every other flag,
-- sockets of the kernel's other families, the init's memory and descriptors (a fork of the
-- host) by the calls that skip /proc, descriptors a session must not hold, a lease on a file
-- outside (it makes the host's open of that file for writing wait), and the evidence of calls
-- that fail for the kernel's own reasons or succeed (no record) against ones the sandbox
-- refused (their record). Run by the red-team driver: workspace-write and read-only, as root
-- and as an unprivileged user whose luxec host is unprivileged too, decided from outside.
local H = require("helper")
local uv = require("luv")
local D = require("native.redteam_driver")
local luxec = require("luxec")

local ATTEMPTS = {}
local function attempt(class, name, a)
  a.class, a.name = class, name
  a.effect = a.effect or D.worked
  ATTEMPTS[#ATTEMPTS + 1] = a
end
local RT, SECRET, file = D.RT, D.SECRET, D.file

local function records(...)
  local want = { ... }
  return function() return want end
end

-- Every other call the filter refuses: EPERM and one record naming it (arguments zero: had
-- the filter let one through, the kernel would fail it for its arguments, never do harm).
local CALLS = {
  { "kexec_load", "kexec" }, { "kexec_file_load", "kexec" }, { "init_module", "module" },
  { "finit_module", "module" }, { "delete_module", "module" }, { "swapon", "swap" },
  { "swapoff", "swap" }, { "quotactl", "quotactl" }, { "acct", "acct" }, { "iopl", "ioperm" },
  { "ioperm", "ioperm" }, { "fsconfig", "fsconfig" }, { "fsmount", "fsmount" },
  { "fspick", "fspick" }, { "move_mount", "move_mount" },
  { "io_uring_enter", "io_uring_enter" }, { "io_uring_register", "io_uring_register" },
  { "open_by_handle_at", "open_by_handle_at" },
}
for _, c in ipairs(CALLS) do
  attempt("other refused calls", c[1], {
    argv = function() return { RT, "call", c[1] } end,
    refused = "^EPERM",
    records = records({ c[2] }),
  })
end
attempt("other refused calls", "process_vm_writev into the init (the host's memory)", {
  argv = function() return { RT, "call", "process_vm_writev", "1" } end,
  refused = "^EPERM",
  records = records({ "process_vm_writev" }),
})
attempt("other refused calls", "ptrace-attach the init", {
  argv = function() return { RT, "call", "ptrace-attach", "1" } end,
  refused = "^EPERM",
  records = records({ "ptrace" }),
})

-- Namespaces by every flag the earlier passes did not try
local FLAGS = { ipc = "0x08000000", pid = "0x20000000", uts = "0x04000000",
  cgroup = "0x02000000", net = "0x40000000" }
for _, ns in ipairs({ "ipc", "pid", "uts", "cgroup", "net" }) do
  attempt("namespaces", "unshare a new " .. ns .. " namespace", {
    argv = function() return { RT, "unshare", FLAGS[ns] } end,
    refused = "^EPERM",
    records = records({ "unshare" }),
  })
end
attempt("namespaces", "unshare a new time namespace", {
  argv = function() return { RT, "unshare", "0x80" } end,
  refused = "^EPERM",
  records = records({ "unshare" }),
})
attempt("namespaces", "unshare CLONE_SYSVSEM", {
  argv = function() return { RT, "unshare", "0x40000" } end,
  refused = "^EPERM",
  records = records({ "unshare" }),
})
for _, ns in ipairs({ "ipc", "pid", "uts", "cgroup" }) do
  attempt("namespaces", "clone into a new " .. ns .. " namespace", {
    argv = function() return { RT, "clone", FLAGS[ns] } end,
    refused = "^EPERM",
    records = records({ "clone (new namespace)" }),
  })
end

-- Sockets of the kernel's other families: none exists in the sandbox (one record each)
local SOCKETS = {
  { "AF_PACKET raw (every frame of the host's interfaces)", "17", "3" },
  { "AF_NETLINK route", "16", "3", "0" }, { "AF_NETLINK audit", "16", "3", "9" },
  { "AF_NETLINK uevent", "16", "2", "15" }, { "AF_NETLINK generic", "16", "3", "16" },
  { "AF_VSOCK (the hypervisor's host)", "40", "1" }, { "AF_ALG (kernel crypto)", "38", "5" },
  { "AF_KEY (IPsec keys)", "15", "3", "2" }, { "AF_BLUETOOTH", "31", "3" },
  { "AF_XDP", "44", "3" }, { "AF_TIPC", "30", "5" }, { "AF_CAN", "29", "3", "1" },
  { "AF_RDS", "21", "5" }, { "AF_LLC", "26", "2" },
  -- (the filter refuses 0, 3, 4-7 and 8-9 in ranges: one of each edge)
  { "AF_UNSPEC", "0", "1" }, { "AF_AX25", "3", "5" }, { "AF_IPX", "4", "2" },
  { "AF_BRIDGE", "7", "3" }, { "AF_ATMPVC", "8", "5" }, { "AF_X25", "9", "5" },
  { "AF_DECnet", "12", "5" }, { "a family past every known one", "2147483647", "1" },
}
for _, s in ipairs(SOCKETS) do
  attempt("sockets of other families", s[1], {
    argv = function() return { RT, "socket", s[2], s[3], s[4] or "0" } end,
    refused = "^EPERM",
    records = records({ "socket" }),
  })
end

-- The init (pid 1) shares the host's memory and is the host's fork: nothing of it is reachable
local function kernel_refused(name, argv, extra)
  local a = extra or {}
  a.argv = function() return argv end
  a.records = a.records or records()
  attempt("the init (the host's memory)", name, a)
end
kernel_refused("process_vm_readv of the init", { RT, "vm-read", "1" }, { refused = "^EPERM" })
kernel_refused("kcmp against the init", { RT, "kcmp", "1" }, { refused = "^EPERM" })
kernel_refused("pidfd_getfd of each of the init's descriptors", { RT, "getfd", "1" },
  { refused = "^EPERM" })
kernel_refused("read the init's environment (the host's)", { "cat", "/proc/1/environ" }, {
  effect = function(_, _, res)
    if res.output:find(SECRET, 1, true) then return "read: " .. res.output:sub(1, 120) end
  end,
})
kernel_refused("read the init's memory through /proc/1/mem", { "sh", "-c",
  "dd if=/proc/1/mem bs=1 count=1 skip=4194304 2>/dev/null && echo ok read" })
kernel_refused("list the init's root (/proc/1/root/)",
  { "sh", "-c", "ls /proc/1/root/ && echo ok" })

-- Files of the init's /proc that act on its memory map, which is the host's: the host's
-- oom_score_adj (the OOM killer's first choice) and coredump_filter, looked at on the luxec host
local function per_mm(name, value)
  local function read(pid)
    return (file(("/proc/%d/%s"):format(pid, name)) or ""):gsub("%s+$", "")
  end
  attempt("the init (the host's memory)", ("write %s of the init (the host's own)"):format(name), {
    argv = function()
      return { "sh", "-c", ("echo %s > /proc/1/%s; echo HELD; read x"):format(value, name) }
    end,
    -- the luxec host has what it inherited from this process, unless the write reached it
    hold = function(_, st, pid) st.now, st.want = read(pid), read(uv.os_getpid()) end,
    effect = function(_, st)
      if st.now ~= st.want then return ("the luxec host's %s is %s"):format(name, st.now) end
    end,
    records = function() return { { "open", "/proc/1/" .. name } } end,
  })
end
per_mm("oom_score_adj", "1000")
per_mm("coredump_filter", "0x7f")

-- Descriptors: a command holds its standard ones and what it opens, nothing of the host's
local FDS = "import os; print(' '.join(sorted(os.listdir('/proc/self/fd'), key=int)))"
local function only_std(_, _, res)
  local extra = {}
  for fd in res.output:gmatch("%d+") do
    if tonumber(fd) > 3 then extra[#extra + 1] = fd end -- (3: the listing's own)
  end
  if #extra > 0 then return "descriptors the command did not open: " .. res.output end
end
attempt("descriptors", "a pipe session holds 0, 1 and 2 only", {
  argv = function() return { "python3", "-c", FDS } end, effect = only_std, records = records(),
})
attempt("descriptors", "a terminal session holds 0, 1 and 2 only", {
  tty = true,
  argv = function() return { "python3", "-c", FDS } end, effect = only_std, records = records(),
})

-- A lease on a file outside: while the sandbox holds it, the host's open of that file for
-- writing waits (O_NONBLOCK: EAGAIN). Looked at from outside while the command waits.
attempt("host files", "a read lease on a file outside, held", {
  argv = function(ctx) return { RT, "lease", ctx.target } end,
  hold = function(ctx, st)
    local fd, err = uv.fs_open(ctx.target, 2049, 420) -- O_WRONLY | O_NONBLOCK
    if fd then uv.fs_close(fd) end
    st.blocked = not fd and tostring(err):match("EAGAIN") ~= nil
  end,
  effect = function(_, st)
    if st.blocked then return "the host's open for writing was held up by the lease" end
  end,
  refused = "^EPERM",
  records = records({ "fcntl (F_SETLEASE)" }),
})

-- Waits the host makes for the session: a fifo opened with O_CREAT is opened by the host,
-- which waits for a reader on a thread of its own. However many such waits a session starts,
-- the host's own work for them stays small (it runs outside the session's limits): measured
-- as the luxec host's CPU time over two seconds of 800 waits, against that time.
local function cpu_seconds(pid)
  local f = io.open(("/proc/%d/stat"):format(pid))
  if not f then return nil end
  local stat = f:read("a")
  f:close()
  local rest = stat:match("%) (.*)$")
  local fields = {}
  for v in rest:gmatch("%S+") do fields[#fields + 1] = v end
  -- utime and stime: fields 14 and 15 of the line, 12 and 13 after the command's ")"
  return (tonumber(fields[12]) + tonumber(fields[13])) / 100
end
attempt("host work", "800 writers waiting on a fifo keep the host busy", {
  prepare = function(ctx)
    os.remove(ctx.ws .. "/fifo")
    assert(os.execute("mkfifo " .. D.q(ctx.ws .. "/fifo")))
    D.give(ctx, ctx.ws .. "/fifo")
  end,
  argv = function(ctx) return { RT, "fifo-waits", ctx.ws .. "/fifo", "800" } end,
  hold = function(_, st, pid)
    -- (windows of time, not waits for events): the host's looks at the waiting writers
    -- back off from 10 ms to a second each, so the first two seconds are the ramp; what the
    -- host spends after it is what a session can make it spend for as long as it likes
    require("luxec").sleep(2)
    local t0, c0 = uv.hrtime(), cpu_seconds(pid)
    require("luxec").sleep(2)
    st.cpu = (cpu_seconds(pid) - c0) / ((uv.hrtime() - t0) / 1e9)
  end,
  effect = function(_, st)
    if st.cpu and st.cpu > 0.2 then
      return ("the host spent %.2f CPU seconds a second on the session's waits"):format(st.cpu)
    end
  end,
  records = function(ctx, mode)
    if mode == "read-only" then return { { "open", ctx.ws .. "/fifo" } } end
    return {}
  end,
})

-- A blocking connect to a listener inside whose backlog is full: the host makes it on a thread
-- of its own. Callers killed while they wait must not leave those threads behind (each killed
-- caller frees its pid, so the session's pids limit would not bound them).
local FILL = "import os, socket, signal, sys, time\n"
  .. "s = socket.socket(socket.AF_UNIX); s.bind('lsock'); s.listen(0)\n"
  .. "f = socket.socket(socket.AF_UNIX); f.setblocking(False)\n"
  .. "try:\n  f.connect('lsock')\nexcept OSError:\n  pass\n"
local KILLED = FILL
  .. "kids = []\n"
  .. "for i in range(150):\n"
  .. "  pid = os.fork()\n"
  .. "  if pid == 0:\n"
  .. "    try:\n      socket.socket(socket.AF_UNIX).connect('lsock')\n"
  .. "    finally:\n      os._exit(0)\n"
  .. "  kids.append(pid)\n"
  .. "time.sleep(1)\n"
  .. "for p in kids: os.kill(p, signal.SIGKILL); os.waitpid(p, 0)\n"
  .. "print('killed', len(kids)); print('HELD', flush=True); sys.stdin.readline()\n"
local function threads(pid)
  local n = 0
  local req = uv.fs_scandir(("/proc/%d/task"):format(pid))
  for _ in function() return req and uv.fs_scandir_next(req) end do n = n + 1 end
  return n
end
local function no_lsock(ctx) os.remove(ctx.ws .. "/lsock") end
attempt("host work", "150 callers killed in a blocking connect leave no host thread waiting", {
  prepare = no_lsock,
  argv = function() return { "python3", "-c", KILLED } end,
  hold = function(_, st, pid)
    -- each left thread ends within a second of its caller's end
    st.ok = pcall(H.wait_for, function() return threads(pid) < 50 end, 20000, "threads")
    st.left = threads(pid)
  end,
  effect = function(_, st, res)
    if res.output:match("^killed") and not st.ok then
      return ("the host kept %d threads for killed callers"):format(st.left)
    end
  end,
  records = function(ctx, mode)
    if mode == "read-only" then return { { "bind", ctx.ws .. "/lsock" } } end
    return {}
  end,
})
attempt("host work", "a blocking connect whose listener accepts after two seconds connects", {
  prepare = no_lsock,
  argv = function()
    return { "python3", "-c", FILL .. "import threading\nres = []\n"
      .. "def b():\n  socket.socket(socket.AF_UNIX).connect('lsock'); res.append('connected')\n"
      .. "t = threading.Thread(target=b); t.start(); time.sleep(2.5)\n"
      .. "s.accept(); s.accept(); t.join(30); print(res)\n" }
  end,
  effect = function() end,
  records = function(ctx, mode)
    if mode == "read-only" then return { { "bind", ctx.ws .. "/lsock" } } end
    return {}
  end,
  check = function(_, res)
    if not res.output:find("Read-only file system", 1, true) then -- (read-only: no listener)
      assert.matches("%['connected'%]", res.output)
    end
  end,
})

-- What other tools run from a project later (hook managers' configurations, other editors'
-- and agents' MCP servers and tasks): not made by a command, in the workspace or below it
local PLANTS = {
  { "lefthook.yml", "open" }, { ".lefthook.yml", "open" }, { "lefthook-local.yml", "open" },
  { ".lefthook-local.yml", "open" }, { ".lefthook/pre-commit/run.sh", "mkdir", ".lefthook" },
  { ".zed/tasks.json", "mkdir", ".zed" }, { ".amazonq/mcp.json", "mkdir", ".amazonq" },
  { ".roo/mcp.json", "mkdir", ".roo" }, { ".kiro/settings/mcp.json", "mkdir", ".kiro" },
  { ".continue/mcpServers/x.yaml", "mkdir", ".continue" }, { "opencode.json", "open" },
  { ".opencode/plugin/x.js", "mkdir", ".opencode" },
  { "sub/lefthook.yml", "open" }, { "sub/.zed/tasks.json", "mkdir", "sub/.zed" },
}
for _, p in ipairs(PLANTS) do
  attempt("what other tools run later", "plant " .. p[1], {
    prepare = function(ctx)
      os.execute("rm -rf " .. D.q(ctx.ws .. "/" .. (p[3] or p[1])))
      uv.fs_mkdir(ctx.ws .. "/sub", 493)
      D.give(ctx, ctx.ws .. "/sub")
    end,
    argv = function()
      return { "sh", "-c", ("mkdir -p \"$(dirname %s)\" && echo 'x: touch /tmp/pwned' > %s")
        :format(p[1], p[1]) }
    end,
    effect = function(ctx)
      local made = uv.fs_stat(ctx.ws .. "/" .. p[1])
      os.execute("rm -rf " .. D.q(ctx.ws .. "/" .. (p[3] or p[1])))
      if made then return p[1] .. " was made in the workspace" end
    end,
    records = function(ctx) return { { p[2], ctx.ws .. "/" .. (p[3] or p[1]) } } end,
  })
end

-- luxec's own daemon directory (/tmp/luxec-UID without XDG_RUNTIME_DIR): a socket of the
-- command's in place of the daemon's would answer the host's next luxec client
attempt("what other tools run later", "a socket in luxec's daemon directory, made first", {
  prepare = function(ctx)
    local dir = ("/tmp/luxec-%d"):format(ctx.user.uid)
    return { dir = dir, existed = uv.fs_stat(dir) ~= nil }
  end,
  argv = function(_, st)
    return { "sh", "-c", ("mkdir -p %s; python3 -c \"import socket; "
      .. "socket.socket(socket.AF_UNIX).bind('%s/serve.sock'); print('ok bound')\"")
      :format(st.dir, st.dir) }
  end,
  effect = function(_, st, res)
    local bound = res.output:match("ok bound")
    if bound then os.remove(st.dir .. "/serve.sock") end -- (what the command made only)
    if not st.existed then uv.fs_rmdir(st.dir) end
    if bound then return "the command bound " .. st.dir .. "/serve.sock" end
  end,
  -- (mkdir -p of a directory that exists makes no record)
  records = function(_, _, st)
    return { { "mkdir", st.dir }, { "bind", st.dir .. "/serve.sock" } }
  end,
  loose = true,
})

-- Another session of the same user and policy, alive meanwhile: its abstract and pathname
-- sockets, its SysV IPC, its /dev/shm and its processes are not this one's
local XS = H.rand_digits(8)
local XS_SOCK = "/tmp/luxec-xs-" .. XS .. ".sock"
local SERVE = "import ctypes, os, socket, sys, threading\n"
  .. "libc = ctypes.CDLL(None)\n"
  .. "def serve(addr):\n"
  .. "  s = socket.socket(socket.AF_UNIX)\n"
  .. "  try:\n    s.bind(addr); s.listen(8)\n  except OSError as e:\n    print(e); return\n"
  .. "  def loop():\n"
  .. "    while True:\n      s.accept(); print('accepted', repr(addr), flush=True)\n"
  .. "  threading.Thread(target=loop, daemon=True).start()\n"
  .. "serve('\\0luxec-xs-" .. XS .. "'); serve('" .. XS_SOCK .. "')\n"
  .. "print('shm', libc.shmget(" .. (0x4c000000 + XS % 65536) .. ", 4096, 0o1666))\n"
  .. "print('msg', libc.msgget(" .. (0x4c000000 + XS % 65536) .. ", 0o1666))\n"
  .. "try:\n  open('/dev/shm/luxec-xs-" .. XS .. "', 'w').write('other session')\n"
  .. "except OSError as e:\n  print(e)\n"
  .. "print('HELD', flush=True); sys.stdin.readline()\n"
local VISIT = "import ctypes, os, socket\n"
  .. "libc = ctypes.CDLL(None)\n"
  .. "for a in ('\\0luxec-xs-" .. XS .. "', '" .. XS_SOCK .. "'):\n"
  .. "  try:\n    socket.socket(socket.AF_UNIX).connect(a); print('ok connected', repr(a))\n"
  .. "  except OSError as e:\n    print(e)\n"
  .. "if libc.shmget(" .. (0x4c000000 + XS % 65536) .. ", 0, 0) >= 0: print('ok shm')\n"
  .. "if libc.msgget(" .. (0x4c000000 + XS % 65536) .. ", 0) >= 0: print('ok msg')\n"
  .. "if os.path.exists('/dev/shm/luxec-xs-" .. XS .. "'): print('ok /dev/shm')\n"
  .. "pids = [p for p in os.listdir('/proc') if p.isdigit()]\n"
  .. "if len(pids) > 2: print('ok processes', pids)\n"
  .. "for p in range(3, 64):\n"
  .. "  try:\n    os.kill(p, 0); print('ok signalled', p)\n  except OSError:\n    pass\n"
attempt("another session", "its sockets, SysV IPC, /dev/shm and processes", {
  prepare = function(ctx, mode)
    os.remove(XS_SOCK)
    return { other = D.start_session(ctx, { "python3", "-c", SERVE }, mode) }
  end,
  argv = function() return { "python3", "-c", VISIT } end,
  effect = function(_, st, res)
    local other = D.stop_session(st.other)
    os.remove(XS_SOCK)
    local got = other:match("accepted[^\n]*") or res.output:match("ok [^\n]*")
    if got then return "reached the other session: " .. got end
  end,
  records = function(_, mode)
    if mode == "read-only" then return {} end -- (the other session could not bind it)
    return { { "connect", XS_SOCK } }
  end,
})

-- Two sessions at once, each making one of the names that complete a git directory (HEAD is
-- there): a judge that looks for the other and then makes its own, each session on a thread
-- of its own, lets both stand, and the host's git takes the directory for a repository.
attempt("another session", "objects/ and refs/ made at once by two sessions beside a HEAD", {
  prepare = function(ctx, mode)
    os.execute("rm -rf " .. D.q(ctx.ws .. "/D") .. "; mkdir " .. D.q(ctx.ws .. "/D"))
    H.write_file(ctx.ws .. "/D/HEAD", "ref: refs/heads/main\n")
    D.give(ctx, ctx.ws .. "/D")
    return { other = D.start_session(ctx, { "sh", "-c", RT .. " gitdir-race D refs objects 3 &"
      .. " echo HELD; read x; wait" }, mode) }
  end,
  argv = function() return { RT, "gitdir-race", "D", "objects", "refs", "3" } end,
  effect = function(ctx, st, res)
    local other = D.stop_session(st.other)
    local done = uv.fs_stat(ctx.ws .. "/D/objects") and uv.fs_stat(ctx.ws .. "/D/refs")
    os.execute("rm -rf " .. D.q(ctx.ws .. "/D"))
    if other:find("ok won") or res.output:find("ok won") or done then
      return "a git directory was completed: " .. res.output .. other
    end
  end,
  loose = "pattern",
  records = function(ctx)
    local at = ctx.ws:gsub("%p", "%%%0") .. "/D/"
    return { { "mkdir", "^" .. at .. "objects$" }, { "mkdir", "^" .. at .. "refs$" } }
  end,
})

-- A descriptor swapped under the call: a pipe and a unix socket in turn at one descriptor
-- while connect or sendto aims it at a host socket outside the roots (a judge that looked at
-- the descriptor and let the kernel look again would let one through)
local SWAP_DIR = "/run/luxec-rt-" .. H.rand_digits(8)
local HOST_SERVE = "import os, socket, sys, threading\n"
  .. "d = sys.argv[1]\n"
  .. "st = socket.socket(socket.AF_UNIX); st.bind(d + '/s.sock'); st.listen(64)\n"
  .. "dg = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); dg.bind(d + '/d.sock')\n"
  .. "for f in ('s.sock', 'd.sock'): os.chmod(d + '/' + f, 0o777)\n"
  .. "def acc():\n  while True:\n    st.accept(); print('accepted', flush=True)\n"
  .. "def rcv():\n  while True:\n    dg.recv(16); print('received', flush=True)\n"
  .. "threading.Thread(target=acc, daemon=True).start()\n"
  .. "threading.Thread(target=rcv, daemon=True).start()\n"
  .. "print('listening', flush=True); sys.stdin.read()\n"
-- The host's server (prepare), and what it heard once stopped (effect).
local function host_server()
  os.execute("rm -rf " .. SWAP_DIR .. "; mkdir -m 0777 " .. SWAP_DIR)
  local srv = assert(luxec.spawn({ "python3", "-c", HOST_SERVE, SWAP_DIR }))
  assert(srv:expect("listening", { timeout = 20 }))
  return { srv = srv }
end
local function stop_host_server(st)
  st.srv:close_stdin()
  st.srv:wait({ timeout = 10 })
  local heard = st.srv:read()
  st.srv:close()
  os.execute("rm -rf " .. SWAP_DIR)
  return heard
end
for _, how in ipairs({ { "connect", "s.sock", "connect" }, { "dgram", "d.sock", "sendto" } }) do
  attempt("descriptor swaps", ("%s a host socket outside through a descriptor swapped between a "
    .. "pipe and a unix socket"):format(how[3]), {
    prepare = host_server,
    argv = function() return { RT, "fd-swap", how[1], SWAP_DIR .. "/" .. how[2], "20000" } end,
    effect = function(_, st, res)
      local heard = stop_host_server(st)
      if heard:find("accepted") or heard:find("received") or res.output:match("^ok") then
        return "the host socket was reached: " .. heard .. res.output
      end
    end,
    loose = true,
    records = function() return { { how[3], SWAP_DIR .. "/" .. how[2] } } end,
  })
end

-- The caller's terminal and a fifo outside swapped at one descriptor while /dev/tty is opened
-- with O_CREAT (`echo > /dev/tty`), an open the host makes with the caller's terminal: a host
-- that looked at a descriptor and opened it again opened the fifo for writing (no Landlock
-- rule binds the host). A reader on the host tells whether anything came through the fifo.
attempt("descriptor swaps", "/dev/tty opened with O_CREAT while a descriptor swaps between the "
  .. "terminal and a fifo outside", {
  prepare = function()
    os.execute("rm -rf " .. SWAP_DIR .. "; mkdir -m 0777 " .. SWAP_DIR)
    assert(os.execute("mkfifo -m 0666 " .. SWAP_DIR .. "/tty.fifo"))
    local O_NONBLOCK = 2048 -- (a reader that does not wait for a writer)
    return { fd = assert(uv.fs_open(SWAP_DIR .. "/tty.fifo", O_NONBLOCK, 0)) }
  end,
  argv = function() return { RT, "tty-swap", SWAP_DIR .. "/tty.fifo", "2000" } end,
  effect = function(_, st, res)
    local got = uv.fs_read(st.fd, 4096) or ""
    uv.fs_close(st.fd)
    os.execute("rm -rf " .. SWAP_DIR)
    if got ~= "" or res.output:match("^ok") then
      return "the fifo outside was written: " .. got .. res.output
    end
  end,
  records = function() return {} end,
})

-- The descriptor and the address swapped together: an inet socket with an inet address (or a
-- socket with no address) and a unix socket with a host socket's path in turn. A judge that
-- let the kernel make a call it found harmless would have the kernel find the other pair.
local SWAP_PAT = "^" .. SWAP_DIR:gsub("%p", "%%%0")
for _, how in ipairs({
  { "connect", "s.sock", "connect", "an inet socket with an inet address (the network allowed)",
    { network = "allow" } },
  { "sendmsg", "d.sock", "sendmsg", "a connected unix stream socket with no address" },
  { "sendmsg-udp", "d.sock", "sendmsg", "an inet socket with no address" },
}) do
  attempt("descriptor swaps", ("%s a host socket outside, with the descriptor and the address "
    .. "swapped together from %s to a unix socket and its path"):format(how[3], how[4]), {
    prepare = host_server,
    policy = how[5],
    argv = function() return { RT, "both-swap", how[1], SWAP_DIR .. "/" .. how[2], "20000" } end,
    effect = function(_, st, res)
      local heard = stop_host_server(st)
      if heard:find("accepted") or heard:find("received") then
        return "the host socket was reached: " .. heard .. res.output
      end
    end,
    loose = "pattern",
    records = function()
      return { { how[3], SWAP_PAT .. "/" .. how[2]:gsub("%.", "%%.") .. "$" } }
    end,
  })
end

-- A host service the policy names hands out a socket of the host's network namespace
-- (SCM_RIGHTS): an abstract name it connects to is looked up in the host's namespace, where a
-- host server listens, not in the sandbox's own.
local ABS_NAME = "luxec-rt-abs-" .. H.rand_digits(8)
local GIVE_SERVE = "import array, os, socket, sys, threading\n"
  .. "d = sys.argv[1]\n"
  .. "ab = socket.socket(socket.AF_UNIX); ab.bind('\\0" .. ABS_NAME .. "'); ab.listen(8)\n"
  .. "def acc():\n  while True:\n    ab.accept(); print('accepted', flush=True)\n"
  .. "threading.Thread(target=acc, daemon=True).start()\n"
  .. "sv = socket.socket(socket.AF_UNIX); sv.bind(d + '/give.sock')\n"
  .. "os.chmod(d + '/give.sock', 0o777); sv.listen(8)\n"
  .. "def give():\n  while True:\n    c, _ = sv.accept(); s = socket.socket(socket.AF_UNIX)\n"
  .. "    c.sendmsg([b'x'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, "
  .. "array.array('i', [s.fileno()]))]); c.close(); s.close()\n"
  .. "threading.Thread(target=give, daemon=True).start()\n"
  .. "print('listening', flush=True); sys.stdin.read()\n"
local TAKE = "import array, socket, sys\n"
  .. "c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1])\n"
  .. "m, anc, f, a = c.recvmsg(1, socket.CMSG_SPACE(4))\n"
  .. "s = socket.socket(fileno=array.array('i', anc[0][2][:4])[0])\n"
  .. "try:\n  s.connect('\\0' + sys.argv[2]); print('ok connected')\n"
  .. "except OSError as e:\n  print(e)\n"
attempt("descriptor swaps", "an abstract name from a host socket a named service hands out", {
  prepare = function()
    os.execute("rm -rf " .. SWAP_DIR .. "; mkdir -m 0777 " .. SWAP_DIR)
    local srv = assert(luxec.spawn({ "python3", "-c", GIVE_SERVE, SWAP_DIR }))
    assert(srv:expect("listening", { timeout = 20 }))
    return { srv = srv }
  end,
  policy = { unix_sockets = { SWAP_DIR .. "/give.sock" } },
  argv = function() return { "python3", "-c", TAKE, SWAP_DIR .. "/give.sock", ABS_NAME } end,
  effect = function(_, st, res)
    local heard = stop_host_server(st)
    if heard:find("accepted") or res.output:match("^ok") then
      return "the host's abstract socket was reached: " .. heard .. res.output
    end
  end,
  records = function() return { { "connect", "@" .. ABS_NAME } } end,
})

attempt("descriptor swaps", "a unix connect to a host socket after 40 refused inet connects: "
  .. "its record is kept (a flood of one kind hides none of another)", {
  prepare = host_server,
  argv = function()
    return { "python3", "-c", "import socket\nfor i in range(40):\n  s = socket.socket()\n"
      .. "  try:\n    s.connect(('10.9.9.%d' % i, 80))\n  except OSError:\n    pass\n"
      .. "u = socket.socket(socket.AF_UNIX)\ntry:\n  u.connect('" .. SWAP_DIR .. "/s.sock'); "
      .. "print('ok connected')\nexcept OSError as e:\n  print(e)" }
  end,
  effect = function(_, st, res)
    stop_host_server(st)
    return D.worked(nil, nil, res)
  end,
  loose = "present",
  records = function() return { { "connect", SWAP_DIR .. "/s.sock" } } end,
})

-- The evidence: a call the kernel fails for its own reason, or one that works, has no record;
-- one the sandbox refused has exactly its record
local function py(name, code, want, extra)
  local a = extra or {}
  a.argv = function(ctx)
    return { "python3", "-c", "import os, socket\nO = " .. ("%q"):format(ctx.out) .. "\n" .. code }
  end
  a.effect = function(ctx)
    if file(ctx.target) ~= ctx.target_text then return "the file outside was written" end
  end
  a.records = function(ctx, mode)
    local out = {}
    for _, w in ipairs(want) do
      if not w.mode or w.mode == mode then
        out[#out + 1] = { w[1], w[2] and w[2](ctx), w[3] and w[3](ctx) }
      end
    end
    return out
  end
  attempt("evidence", name, a)
end
local function try(stmt) return "try:\n  " .. stmt .. "\nexcept OSError as e:\n  print(e)" end
py("open O_CREAT of a file outside that exists, for reading: works, no record",
  "os.open(O + '/target', os.O_RDONLY | os.O_CREAT); print('opened')", {})
py("unlink, chmod, rename of missing files outside: ENOENT, no record",
  try("os.unlink(O + '/missing')") .. "\n" .. try("os.chmod(O + '/missing', 0o600)") .. "\n"
    .. try("os.rename(O + '/missing', 'x')"), {})
py("connect to a missing socket: ENOENT, no record",
  try("socket.socket(socket.AF_UNIX).connect(O + '/missing.sock')"), {})
py("mkdir of directories that exist, outside and inside: EEXIST, no record",
  try("os.mkdir('/var/tmp')") .. "\n" .. try("os.mkdir('.')") .. "\n" .. try("os.mkdir(O)"), {})
-- (the link in the workspace made by the host first: the same call in both modes)
local function link_out(ctx)
  os.remove(ctx.ws .. "/lnk")
  assert(uv.fs_symlink(ctx.target, ctx.ws .. "/lnk"))
end
py("O_NOFOLLOW | O_CREAT on a link to a file outside: ELOOP, no record",
  try("os.open('lnk', os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW)"), {}, { prepare = link_out })
py("open a directory for writing, or with O_CREAT: EISDIR, no record",
  try("os.open('.', os.O_WRONLY)") .. "\n" .. try("os.open('.', os.O_RDONLY | os.O_CREAT)"), {})
py("mkdir below a missing directory: ENOENT, no record", try("os.mkdir('no/such/dir')"), {})
py("a hard link of a file outside into the workspace: refused, its record",
  try("os.link(O + '/target', 'hl')"),
  { { "link", function(ctx) return ctx.target end, function(ctx) return ctx.ws .. "/hl" end } })
py("write a file outside through a link in the workspace: the file's record",
  try("os.open('lnk', os.O_WRONLY)"), { { "open", function(ctx) return ctx.target end } },
  { prepare = link_out })
-- (over one that is not empty: the kernel's ENOTEMPTY, no record)
py("move a directory of the workspace over an empty one outside: its record",
  try("os.mkdir('d')") .. "\n" .. try("os.rename('d', O)") .. "\n"
    .. try("os.rename('d', O + '/empty')") .. "\n" .. try("os.rmdir('d')"),
  { { "rename", function(ctx) return ctx.ws .. "/d" end,
    function(ctx) return ctx.out .. "/empty" end, mode = "workspace-write" },
    { "mkdir", function(ctx) return ctx.ws .. "/d" end, mode = "read-only" } },
  { prepare = function(ctx) uv.fs_mkdir(ctx.out .. "/empty", 493) end })
py("utime, chmod, chown, setxattr of a file outside: one record each",
  try("os.utime(O + '/target')") .. "\n" .. try("os.chmod(O + '/target', 0o666)") .. "\n"
    .. try("os.chown(O + '/target', os.getuid(), os.getgid())") .. "\n"
    .. try("os.setxattr(O + '/target', 'user.x', b'1')"),
  { { "utime", function(ctx) return ctx.target end },
    { "chmod", function(ctx) return ctx.target end },
    { "chown", function(ctx) return ctx.target end },
    { "setxattr", function(ctx) return ctx.target end } })

-- Inodes the session shares with the host on a mount it can write: a file of /proc outside
-- a process's directory is one inode for every procfs (root owns them, and owning is all
-- chmod asks), and a descriptor the host opened is on the host's own mount.
-- (read in a procfs of its own: one mounted before the change keeps the mode it read)
local FRESH_PROC = (uv.getuid() == 0 and "unshare -mpf" or "unshare -Urmpf") .. " --mount-proc "
local function proc_mode()
  local f = assert(io.popen(FRESH_PROC .. "stat -c %a /proc/buddyinfo"))
  local mode = f:read("a"):match("^(%d+)")
  f:close()
  return assert(mode, "no mode of /proc/buddyinfo")
end
for _, evidence in ipairs({ true, false }) do
  -- (without evidence nothing judges the call: the mount tree alone refuses it)
  local how = evidence and "" or ", evidence off"
  attempt("shared inodes", "chmod a file of /proc (every procfs shares its mode)" .. how, {
    argv = function() return { "chmod", "400", "/proc/buddyinfo" } end,
    prepare = function() return { mode = proc_mode() } end,
    effect = function(_, st)
      local now = proc_mode()
      if now ~= st.mode then
        os.execute(FRESH_PROC .. "chmod " .. st.mode .. " /proc/buddyinfo")
        return ("/proc/buddyinfo's mode became %s"):format(now)
      end
    end,
    policy = { evidence = evidence },
    -- (root owns them: for another user, chmod fails EPERM without any sandbox, unrecorded)
    records = function(ctx)
      return evidence and ctx.user.uid == 0 and { { "chmod", "/proc/buddyinfo" } } or {}
    end,
  })
end
local function null_times()
  local s = uv.fs_stat("/dev/null")
  return s and ("%d.%d/%d.%d"):format(s.mtime.sec, s.mtime.nsec, s.ctime.sec, s.ctime.nsec)
end
for _, evidence in ipairs({ true, false }) do
  attempt("shared inodes", "touch and chmod the /dev/null of stdin (= \"null\") by its "
    .. "descriptor" .. (evidence and "" or ", evidence off"), {
    stdin = "null",
    argv = function()
      return { "sh", "-c", "touch -d 2001-01-01 /proc/self/fd/0; chmod 666 /proc/self/fd/0" }
    end,
    prepare = function() return { t = null_times() } end,
    effect = function(_, st)
      if null_times() ~= st.t then return "the host's /dev/null changed: " .. null_times() end
    end,
    policy = { evidence = evidence },
    -- (root's /dev/null: for another user, times given and chmod fail EPERM without any
    -- sandbox, unrecorded)
    records = function(ctx)
      return evidence and ctx.user.uid == 0
        and { { "utime", "/dev/null" }, { "chmod", "/dev/null" } } or {}
    end,
  })
end
-- Memory the host cannot read (memfd_secret) would hold arguments the kernel reads and the
-- host judging the call does not: the call is not there, as on a kernel without it
attempt("shared inodes", "memfd_secret (arguments the host could not read)", {
  argv = function()
    return { "python3", "-c", "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
      .. "fd = libc.syscall(447, 0)\nprint('ok' if fd >= 0 else os.strerror(ctypes.get_errno()))" }
  end,
  refused = "^Function not implemented",
  records = records(),
})
py("reopen a memfd for writing through /proc/self/fd: works, no record",
  "fd = os.memfd_create('x')\nfor fl in (os.O_WRONLY, os.O_RDWR | os.O_CREAT, os.O_WRONLY | "
  .. "os.O_TRUNC):\n  os.close(os.open('/proc/self/fd/%d' % fd, fl))\nprint('reopened')", {},
  { refused = "reopened" })
py("chattr -v (FS_IOC_SETVERSION) of a file outside: its record; 32-bit FS_IOC32_SETFLAGS: "
  .. "ENOTTY, no record", "import fcntl, struct\nfd = os.open(O + '/target', os.O_RDONLY)\n"
  .. try("fcntl.ioctl(fd, 0x40087602, struct.pack('l', 5))") .. "\n"
  .. try("fcntl.ioctl(fd, 0x40046602, struct.pack('i', 0))"),
  { { "chattr", function(ctx) return ctx.target end } })

D.run("red team (kernel interfaces)", ATTEMPTS, { describe = describe, it = it,
  pending = pending, lazy_setup = lazy_setup, lazy_teardown = lazy_teardown, assert = assert })
