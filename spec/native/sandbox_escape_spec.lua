-- Escape attempts under workspace-write with the network denied. Each attempt must fail AND
-- be reported: as a recorded denial (what, where, which process), or, where the kernel
-- refuses without asking the host, by the layer that blocked it.
local H = require("helper")
local uv = require("luv")
local luxec = require("luxec")

local ESCAPE = H.fixture("escape")

local usable = H.sandbox_usable

local write_file = H.write_file
local read_file = H.read_file
describe("sandbox escapes (workspace-write, network denied)", function()
  local ok, why = usable()
  if not ok then
    it("runs where the kernel offers every layer", function()
      pending("skipped: " .. why)
    end)
    return
  end

  local root, outside, listener
  before_each(function()
    root = H.tmpdir()
    outside = assert(uv.fs_mkdtemp("/var/tmp/luxec-outside-XXXXXX"))
    write_file(outside .. "/existing", "original\n")
    write_file(root .. "/inside", "inside\n")
    assert(uv.fs_mkdir(root .. "/.git", 493))
    write_file(root .. "/.git/config", "[core]\n")
  end)
  after_each(function()
    H.rmtree(root)
    os.execute("rm -rf '" .. outside .. "'")
    if listener then
      listener:close()
      listener = nil
    end
    H.assert_clean()
  end)

  -- Run argv in the sandbox (cwd = root); returns output, code, sandbox report.
  local function jail(argv, extra)
    local opts = { cwd = root, sandbox = { mode = "workspace-write", network = "deny" } }
    for k, v in pairs(extra or {}) do opts[k] = v end
    local p = assert(luxec.spawn(argv, opts))
    local st = assert(p:wait({ timeout = 10 }))
    local out = p:read()
    p:close()
    return out, st.code, st.sandbox
  end

  local function sh(script)
    return jail({ "sh", "-c", script })
  end

  local function has_denial(report, want)
    for _, d in ipairs(report.denials) do
      local match = true
      for k, v in pairs(want) do
        if d[k] ~= v then match = false end
      end
      if match then return d end
    end
    local got = {}
    for _, d in ipairs(report.denials) do
      got[#got + 1] = require("luxec.sandbox").describe(d)
    end
    local parts = {}
    for k, v in pairs(want) do parts[#parts + 1] = k .. "=" .. tostring(v) end
    error("no denial like {" .. table.concat(parts, ", ") .. "} among: "
      .. table.concat(got, "; "), 2)
  end

  local function file_attempt(name, script, op, path_of)
    it(name, function()
      local out, code, report = sh(script)
      assert.is_not.equals(0, code, out)
      local d = has_denial(report, { op = op, path = path_of() })
      assert.is_true(d.pid > 0)
      assert.is_string(d.comm)
      assert.equals("original\n", read_file(outside .. "/existing"))
    end)
  end

  file_attempt("write a new file outside a root", "echo x > $OUT/new",
    "open", function() return outside .. "/new" end)
  file_attempt("append to a file outside", "echo x >> $OUT/existing",
    "open", function() return outside .. "/existing" end)
  file_attempt("rm a file outside", "rm -f $OUT/existing",
    "unlink", function() return outside .. "/existing" end)
  file_attempt("mkdir outside", "mkdir $OUT/dir",
    "mkdir", function() return outside .. "/dir" end)
  file_attempt("symlink outside", "ln -s /etc/passwd $OUT/link",
    "symlink", function() return outside .. "/link" end)
  it("hard link from a root to outside", function()
    local out, code, report = sh("ln inside $OUT/hard")
    assert.is_not.equals(0, code, out)
    -- a link names both ends: the file it was asked for, and the new name
    has_denial(report, { op = "link", path = root .. "/inside", to = outside .. "/hard" })
    assert.is_nil(read_file(outside .. "/hard"))
  end)
  file_attempt("chmod a file outside", "chmod 777 $OUT/existing",
    "chmod", function() return outside .. "/existing" end)
  -- (to its own user and group, which no capability is needed for: to another user, the
  -- kernel refuses it without any sandbox, unrecorded: sandbox_evidence_dac_spec.lua)
  file_attempt("chown a file outside", "chown $(id -u):$(id -g) $OUT/existing",
    "chown", function() return outside .. "/existing" end)
  file_attempt("touch (utime) a file outside", "touch -c -d @0 $OUT/existing",
    "utime", function() return outside .. "/existing" end)
  file_attempt("write .git/config inside a root", "echo evil >> .git/config",
    "open", function() return root .. "/.git/config" end)
  file_attempt("write through a symlink in a root that points outside",
    "ln -s $OUT/existing link && echo x > link",
    "open", function() return outside .. "/existing" end)

  -- $OUT reaches the scripts through the environment
  setup(function() end)
  local real_sh = sh
  sh = function(script)
    return jail({ "sh", "-c", script }, { env = { OUT = outside, PATH = os.getenv("PATH") } })
  end
  local _ = real_sh

  it("move a file out of a root", function()
    local out, code, report = sh("mv inside $OUT/moved")
    assert.is_not.equals(0, code, out)
    -- (the rename is refused across the mounts; mv's copy then stops at the read-only
    -- target, as on any read-only mount: its unlink of the missing name is EROFS)
    has_denial(report, { op = "rename", path = root .. "/inside", to = outside .. "/moved" })
    assert.is_nil(read_file(outside .. "/moved"))
    assert.equals("inside\n", read_file(root .. "/inside"))
  end)

  it("truncate(2) a file outside", function()
    local out, code, report = jail({ ESCAPE, "truncate", outside .. "/existing" })
    assert.equals(1, code, out)
    has_denial(report, { op = "truncate", path = outside .. "/existing" })
    assert.equals("original\n", read_file(outside .. "/existing"))
  end)

  it("mknod a device inside a root", function()
    local out, code, report = jail({ ESCAPE, "mknod", root .. "/null" })
    assert.equals(1, code, out)
    has_denial(report, { op = "mknod", path = root .. "/null" })
  end)

  for _, attempt in ipairs({
    { "mount a file system", { "mount", "/tmp" }, "mount" },
    { "unshare a user namespace", { "unshare" }, "unshare" },
    { "setns into the host's network", { "setns" }, "setns" },
    { "io_uring (a socket+connect bypass of naive filters)", { "iouring" }, "io_uring_setup" },
  }) do
    it(attempt[1], function()
      local argv = { ESCAPE }
      for _, a in ipairs(attempt[2]) do argv[#argv + 1] = a end
      local out, code, report = jail(argv)
      assert.equals(1, code, out)
      assert.matches("^EPERM", out)
      has_denial(report, { op = attempt[3] })
    end)
  end

  it("ptrace a process outside", function()
    local out, code, report = jail({ ESCAPE, "ptrace", ("%d"):format(uv.os_getpid()) })
    assert.equals(1, code, out)
    has_denial(report, { op = "ptrace" })
  end)

  it("an i386 int 0x80 socket call", function()
    local bare = luxec.run({ ESCAPE, "int80" })
    if bare.code == nil then -- (a kernel without ia32 emulation, or one that turned it off)
      pending(("skipped: this kernel runs no i386 system calls (int 0x80 without a sandbox: " ..
        "killed by %s)"):format(tostring(bare.signal_name)))
      return
    end
    local out, code, report = jail({ ESCAPE, "int80" })
    assert.equals(1, code, out)
    local d = has_denial(report, { comm = "escape" })
    assert.matches("^syscall 359 of arch 0x40000003", d.op)
  end)

  for _, attempt in ipairs({
    { "TCP connect over IPv4", { "tcp4", "93.184.216.34", "443" }, "connect", "93.184.216.34",
      443 },
    { "TCP connect over IPv6", { "tcp6", "2606:2800:220:1::1", "443" }, "connect",
      "2606:2800:220:1::1", 443 },
    { "TCP connect to the loopback", { "tcp4", "127.0.0.1", "9" }, "connect", "127.0.0.1", 9 },
    { "TCP bind over IPv4", { "bind4", "", "8080" }, "bind", "0.0.0.0", 8080 },
    { "TCP bind over IPv6", { "bind6", "", "8080" }, "bind", "::", 8080 },
    { "UDP sendto", { "udp4", "8.8.8.8", "53" }, "sendto", "8.8.8.8", 53 },
    { "MPTCP connect", { "mptcp", "93.184.216.34", "443" }, "connect", "93.184.216.34", 443 },
    { "TCP Fast Open sendto", { "tfo", "93.184.216.34", "443" }, "sendto", "93.184.216.34", 443 },
  }) do
    it(attempt[1], function()
      local argv = { ESCAPE }
      for _, a in ipairs(attempt[2]) do argv[#argv + 1] = a end
      local out, code, report = jail(argv)
      assert.equals(1, code, out)
      has_denial(report, { op = attempt[3], addr = attempt[4], port = attempt[5] })
      assert.is_true(report.layers.netns)
    end)
  end

  it("an ICMP ping socket (refused in the empty network namespace)", function()
    local out, code, report = jail({ ESCAPE, "icmp4", "8.8.8.8" })
    assert.equals(1, code, out)
    if out:match("^EACCES") then -- ping sockets are off in a new namespace: socket() fails
      assert.is_true(report.layers.netns)
    else
      has_denial(report, { op = "sendto", addr = "8.8.8.8" })
    end
  end)

  it("a netlink socket (to change the host's interfaces)", function()
    local out, code, report = jail({ ESCAPE, "netlink" })
    assert.equals(1, code, out)
    has_denial(report, { op = "socket", family = "AF_NETLINK" })
  end)

  it("reading /proc/<host pid>/environ (no host pid exists in the sandbox's pid namespace)",
    function()
      local out, code, report = jail({ ESCAPE, "environ", ("%d"):format(uv.os_getpid()) })
      assert.equals(1, code, out)
      assert.matches("^ENOENT", out)
      assert.is_true(report.layers.pidns and report.layers.caps_dropped)
    end)

  it("reading the host's disk or other devices (the sandbox has a /dev of its own)", function()
    -- root could read a disk past every deny_read mask: no host device but the harmless ones
    -- exists inside
    local disk
    local req = uv.fs_scandir("/sys/block")
    for name in function() return req and uv.fs_scandir_next(req) end do
      if not disk and not name:match("^loop") and not name:match("^ram")
        and uv.fs_stat("/dev/" .. name) then
        disk = "/dev/" .. name
      end
    end
    local out, code = sh("ls /dev; for d in " .. (disk or "/dev/sda") .. " /dev/mem /dev/kmsg "
      .. "/dev/input /dev/console; do test -e $d && echo FOUND $d; done; exit 0")
    assert.equals(0, code, out)
    assert.is_nil(out:find("FOUND", 1, true), out)
    local names = {}
    for n in out:gmatch("%S+") do names[#names + 1] = n end
    table.sort(names)
    assert.same({ "fd", "full", "null", "ptmx", "pts", "random", "shm", "stderr", "stdin",
      "stdout", "tty", "urandom", "zero" }, names)
  end)

  it("signalling the host (no host pid exists in the sandbox's pid namespace)", function()
    local out, code, report = jail({ ESCAPE, "kill", ("%d"):format(uv.os_getpid()) })
    assert.equals(1, code, out)
    assert.matches("^ESRCH", out)
    assert.is_true(report.layers.pidns)
  end)

  it("connecting to an abstract socket outside", function()
    local name = ("luxec-spec-%d"):format(uv.os_getpid())
    local server = assert(luxec.spawn({ ESCAPE, "listen", name }))
    listener = server
    assert(server:_wait_until(function() return server:snapshot().head == "listening\n" end,
      5000))
    assert.equals("ok\n", luxec.run({ ESCAPE, "abstract", name }).output) -- it is reachable
    -- network denied: abstract sockets belong to a network namespace, the outside one is
    -- not even visible
    local out, code, report = jail({ ESCAPE, "abstract", name })
    assert.equals(1, code, out)
    assert.matches("^ECONNREFUSED", out)
    assert.is_true(report.layers.netns)
    -- network allowed: the host judges the connect (the listener is not the sandbox's)
    local p = assert(luxec.spawn({ ESCAPE, "abstract", name }, { cwd = root,
      sandbox = { mode = "workspace-write", network = "allow" } }))
    local st = p:wait({ timeout = 5 })
    out = p:read()
    p:close()
    assert.equals(1, st.code, out)
    assert.matches("^EACCES", out)
    has_denial(st.sandbox, { op = "connect", family = "AF_UNIX", path = "@" .. name,
      source = "supervisor" })
  end)

  it("writing to /dev/stdout reaches the session's own pipe, never a file", function()
    local out, code = sh("echo through > /dev/stdout; echo also > /proc/self/fd/1")
    assert.equals(0, code)
    assert.equals("through\nalso\n", out)
  end)

  describe("what keeps working", function()
    it("writes inside roots and to /dev/null, and /tmp", function()
      local out, code, report = sh("echo hi > made && cat made && echo x > /dev/null && " ..
        "mkdir d && mv made d/ && rm -r d && t=$(mktemp) && echo ok > $t && cat $t && rm $t")
      assert.equals(0, code, out)
      assert.equals("hi\nok\n", out)
      assert.equals(0, report.denials_total)
    end)

    it("a PTY inside the sandbox (openpty through script)", function()
      local out, code = jail({ "script", "-qec", "tty", "/dev/null" })
      assert.equals(0, code, out)
      assert.matches("/dev/pts/%d+", out)
    end)

    it("AF_UNIX sockets", function()
      local out, code = jail({ ESCAPE, "unix", root .. "/sock" })
      assert.equals(0, code, out)
      assert.equals("ok\n", out)
    end)

    it("git status in a repository", function()
      local r = luxec.run({ "git", "init", "-q", root .. "/repo" })
      assert.equals(0, r.code)
      local out, code = jail({ "git", "-C", root .. "/repo", "status", "--short" })
      assert.equals(0, code, out)
    end)

    it("a session on a terminal", function()
      local out, code = jail({ "sh", "-c", "tty" }, { tty = true })
      assert.equals(0, code, out)
      assert.matches("^/dev/pts/%d+", out)
    end)
  end)
end)

describe("sandbox policy", function()
  after_each(H.assert_clean)

  it("rejects a bad policy with an error naming the key, and spawns nothing", function()
    local cases = {
      { { mode = "bogus" }, "unknown mode \"bogus\"" },
      { { }, "'mode' is required" },
      { { mode = "workspace-write", netwrk = "deny" }, "unknown key 'netwrk'" },
      { { mode = "workspace-write", network = "maybe" },
        "'network' must be \"deny\", \"allow\" or {allow = {host names}}" },
      { { mode = "workspace-write", roots = { "relative/dir" } }, "roots%[1%] is relative" },
      { { mode = "workspace-write", roots = { "/nonexistent/dir" } }, "roots%[1%] does not exist" },
      { { mode = "workspace-write", roots = "/tmp" }, "'roots' must be a list" },
      { { mode = "workspace-write", best_effort = "yes" }, "'best_effort' must be a boolean" },
      { { mode = "read-only", roots = { "/tmp" } }, "'roots' makes no sense in read%-only" },
      { { mode = "workspace-write", evidence = { net = true } }, "unknown key 'evidence.net'" },
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(luxec.spawn, { "true" }, { sandbox = c[1] })
      assert.is_false(ok)
      assert.matches("bad sandbox policy: " .. c[2], err)
    end
    assert.same({}, H.children())
  end)

  it("read-only: nothing is writable but /dev/null and the terminal", function()
    local ok, why = usable()
    if not ok then
      pending("skipped: " .. why)
      return
    end
    local r = luxec.run({ "sh", "-c", "echo x > /dev/null && echo x > /tmp/luxec-ro-$$" },
      { sandbox = { mode = "read-only" } })
    assert.is_not.equals(0, r.code)
    local p = assert(luxec.spawn({ "sh", "-c", "echo x > /tmp/luxec-ro-test" },
      { sandbox = { mode = "read-only" } }))
    local st = p:wait({ timeout = 5 })
    p:close()
    assert.equals("read-only", st.sandbox.mode)
    assert.equals("deny", st.sandbox.network)
    assert.equals("open", st.sandbox.denials[1].op)
    assert.equals("/tmp/luxec-ro-test", st.sandbox.denials[1].path)
  end)

  it("with a workspace, a session's cwd elsewhere stays read-only", function()
    local ok, why = usable()
    if not ok then
      pending("skipped: " .. why)
      return
    end
    local ws, other = H.tmpdir(), assert(uv.fs_mkdtemp("/var/tmp/luxec-cwd-XXXXXX"))
    local r = luxec.run({ "sh", "-c", "touch here; touch " .. ws .. "/there" },
      { cwd = other, sandbox = { mode = "workspace-write", workspace = ws } })
    assert.equals(0, r.code, r.output) -- the last command, inside the workspace
    assert.matches("touch: cannot touch 'here'", r.output)
    assert.is_nil(uv.fs_stat(other .. "/here"))
    assert.truthy(uv.fs_stat(ws .. "/there"))
    local bad = pcall(luxec.spawn, { "true" },
      { sandbox = { mode = "workspace-write", workspace = "relative" } })
    assert.is_false(bad)
    H.rmtree(ws)
    os.execute("rm -rf '" .. other .. "'")
  end)

  it("full-access changes nothing and allows the network", function()
    local p = assert(luxec.spawn({ "true" }, { sandbox = { mode = "full-access" } }))
    local st = p:wait({ timeout = 5 })
    p:close()
    assert.equals("allow", st.sandbox.network)
    assert.same({}, st.sandbox.denials)
  end)

  it("keeps distinct refusals with counts, a bounded number of one op, and counts all",
    function()
    local ok, why = usable()
    if not ok then
      pending("skipped: " .. why)
      return
    end
    local p = assert(luxec.spawn({ "sh", "-c",
      "i=0; while [ $i -lt 150 ]; do true > /etc/luxec-$i 2>/dev/null; " ..
      "true > /etc/luxec-same 2>/dev/null; i=$((i+1)); done" },
      { sandbox = { mode = "workspace-write" } }))
    local st = p:wait({ timeout = 20 })
    p:close()
    -- the same path 150 times is one record; 31 more distinct paths fill the op's share; the
    -- latest of the ones only counted comes last
    assert.equals(33, #st.sandbox.denials)
    assert.equals(300, st.sandbox.denials_total)
    assert.same({ open = 119 }, st.sandbox.denials_overflow)
    local same
    for _, d in ipairs(st.sandbox.denials) do
      if d.path == "/etc/luxec-same" then same = d end
    end
    assert.equals(150, same.count)
    local last = st.sandbox.denials[33]
    assert.same({ "open", "/etc/luxec-149", true, 1 },
      { last.op, last.path, last.latest, last.count })
    for i = 1, 32 do assert.is_nil(st.sandbox.denials[i].latest) end
  end)

  it("without evidence still enforces and records no file call (the listener stays, for the "
    .. "AF_UNIX calls the host judges)", function()
    local ok, why = usable()
    if not ok then
      pending("skipped: " .. why)
      return
    end
    local p = assert(luxec.spawn({ "sh", "-c", "echo x > /etc/luxec-noev" },
      { sandbox = { mode = "workspace-write", evidence = false } }))
    local st = p:wait({ timeout = 5 })
    p:close()
    assert.is_not.equals(0, st.code)
    assert.is_true(st.sandbox.layers.notify)
    assert.equals(0, st.sandbox.denials_total)
  end)
end)

describe("sandbox layers that are missing", function()
  after_each(H.assert_clean)

  it("fail closed when the seccomp listener is refused (nested), unless best_effort", function()
    local ok, why = usable()
    if not ok then
      pending("skipped: " .. why)
      return
    end
    -- an inner luxec, itself sandboxed, asks for a sandbox with evidence (in its own empty
    -- directory and without deny_read: nothing for a mount namespace to do, which the inner
    -- one cannot make, so the listener is the first layer refused)
    local dir = H.tmpdir()
    local script = [[
      local luxec = require("luxec")
      local p, err, code = luxec.spawn({"true"}, {
        sandbox = {mode = "workspace-write", tmp = false, deny_read = false}})
      print("strict", p and "spawned" or err, code)
      local q = assert(luxec.spawn({"true"}, {
        sandbox = {mode = "workspace-write", tmp = false, best_effort = true}}))
      local st = q:wait()
      print("best_effort", st.code, st.sandbox.layers.notify, st.sandbox.degraded[1])
    ]]
    -- (a sanitizer build's leak check needs ptrace at exit, which the sandbox refuses)
    local r = luxec.run({ H.luxec, "-e", script }, { cwd = dir,
      sandbox = { mode = "workspace-write" },
      inherit_env = true, env = { ASAN_OPTIONS = "detect_leaks=0" } })
    H.rmtree(dir)
    assert.equals(0, r.code, r.output)
    -- inside a sandbox no namespace can be made (unshare is refused), so a strict sandbox
    -- fails closed naming that; best effort runs with Landlock and seccomp only
    assert.matches("strict\tsandbox: userns: sandbox user namespace failed: Operation not "
      .. "permitted", r.output, 1, true)
    assert.matches("best_effort\t0\tfalse\tnotify: the seccomp listener was refused", r.output)
  end)

  it("python's tempfile works inside the sandbox", function()
    local ok, why = usable()
    if not ok then
      pending("skipped: " .. why)
      return
    end
    local python = luxec.run({ "sh", "-c", "command -v python3" }).output:match("%S+")
    if not python then
      pending("python3 is not installed here")
      return
    end
    local r = luxec.run({ python, "-c",
      "import tempfile; f = tempfile.NamedTemporaryFile(); f.write(b'x'); f.flush(); print('ok')" },
      { sandbox = { mode = "workspace-write" } })
    assert.equals("ok\n", r.output)
  end)
end)
