-- A red-team pass over the sandbox (issue 18), in the classes the other escape specs do not
-- try: the system calls that reach around every layer (io_uring, userfaultfd, file handles,
-- the mount API, namespaces, keyrings, bpf, perf), the kernel's own files (/proc/sys, /sys),
-- terminals by other request numbers, what the host's shell, ssh, git, editors and agents run
-- from HOME when HOME is in a writable root, a race of the working directory against a name
-- the host makes itself, the init's /proc (a fork of the host), set-user-ID programs left in
-- a writable root, and the evidence of calls the kernel fails for its own reasons.
-- Every attempt runs under workspace-write and read-only, as root and as an unprivileged user
-- whose luxec host is itself unprivileged (contain_runner.lua through setpriv), and is decided
-- from outside: a file on the host, the host's HOME, a host-side check. The evidence must be
-- exact: the records named, no other one, or none at all.
local H = require("helper")
local json = require("luxec.json")
local luxec = require("luxec")
local sandbox = require("luxec.sandbox")
local uv = require("luv")

local RT = H.fixture("redteam")
local RUNNER = H.root .. "/spec/native/contain_runner.lua"
local PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
local MODES = { "workspace-write", "read-only" }
local NOBODY = 65534

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

local function q(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

-- One attempt in a sandbox of `mode`, run by a luxec host of the user under test; HOME is
-- ctx.home unless `home` is given. Returns the runner's result (output, code, denials).
local SECRET = "luxec-host-secret-" .. math.random(10 ^ 8)
local function jail(ctx, argv, mode, home, tty, extra)
  local policy = { mode = mode, network = "deny" }
  for k, v in pairs(extra or {}) do policy[k] = v end
  -- the luxec host has a secret in its environment that the session is not given
  local req = json.encode({ argv = argv, cwd = ctx.ws, tty = tty == true,
    env = { PATH = PATH, HOME = home or ctx.home, LANG = "C.UTF-8" },
    sandbox = policy })
  local cmd = {}
  for _, a in ipairs(ctx.user.prefix) do cmd[#cmd + 1] = a end
  for _, a in ipairs({ H.luxec, RUNNER, req }) do cmd[#cmd + 1] = a end
  local r = assert(luxec.run(cmd, { timeout = 120,
    env = { PATH = PATH, HOME = home or ctx.home, LANG = "C.UTF-8",
      LUXEC_HOST_SECRET = SECRET } }))
  local line = r.output:match("RESULT ([^\n]*)")
  assert(line, "the attempt's luxec host gave no result: " .. r.output)
  local res = assert(json.decode(line))
  assert(not res.error, "the command was not started: " .. tostring(res.error))
  return res
end

local function records(res)
  local out = {}
  for _, d in ipairs(res.denials or {}) do
    out[#out + 1] = sandbox.describe(d) .. " [" .. tostring(d.source) .. "]"
  end
  return #out > 0 and table.concat(out, "; ") or "(none)"
end

-- The records must be exactly `want` ({op, path} pairs; path nil: any), each at least once,
-- and nothing else.
local function assert_records(res, want)
  local seen = {}
  for _, d in ipairs(res.denials or {}) do
    local ok = false
    for i, w in ipairs(want) do
      if d.op == w[1] and (w[2] == nil or d.path == w[2]) and (w[3] == nil or d.to == w[3]) then
        ok, seen[i] = true, true
      end
    end
    assert(ok, "a record of a call that was not refused (or not this one): "
      .. sandbox.describe(d) .. "; all: " .. records(res))
    assert.equals("supervisor", d.source)
  end
  for i, w in ipairs(want) do
    assert(seen[i], ("no record of %s %s; records: %s"):format(w[1], tostring(w[2]),
      records(res)))
  end
end

local function file(path)
  return H.read_file(path)
end

-- The attempts ------------------------------------------------------------------------------
-- Each: argv(ctx) -> argv; effect(ctx, res) -> a description when it happened on the host
-- (nil when not); records(ctx, mode) -> the exact records ({} for none); prepare(ctx);
-- home(ctx) -> the HOME of the session; tty.

local ATTEMPTS = {}
local function attempt(class, name, a)
  a.class, a.name = class, name
  ATTEMPTS[#ATTEMPTS + 1] = a
end

local function worked(_, res)
  if res.output:match("^ok") then return "the call worked: " .. res.output end
end

-- System calls that reach around the layers: refused (EPERM) by the filter, with a record.
local function call(name, args, op, extra)
  local a = extra or {}
  a.argv = a.argv or function(ctx)
    local argv = { RT, args[1] }
    for i = 2, #args do
      argv[#argv + 1] = type(args[i]) == "function" and args[i](ctx) or args[i]
    end
    return argv
  end
  a.effect = a.effect or worked
  a.records = a.records or function() return op and { { op } } or {} end
  attempt("system calls around the layers", name, a)
end

local function outside(ctx) return ctx.target end
local function ws_git(ctx) return ctx.ws .. "/.git" end

call("io_uring_setup (its opens and connects never meet the filter)", { "iouring" },
  "io_uring_setup")
call("userfaultfd (stalls the kernel mid-copy: a race amplifier)", { "userfaultfd" },
  "userfaultfd")
call("open_by_handle_at a file outside for writing (skips the path walk)",
  { "handle", outside }, "name_to_handle_at", {
    effect = function(ctx, res)
      if file(ctx.target) ~= ctx.target_text then return "the file outside was written" end
      return worked(ctx, res)
    end,
  })
call("fsopen a new file system", { "fsopen" }, "fsopen")
call("open_tree a detached copy of /", { "open_tree", "/" }, "open_tree")
call("remount the workspace's read-only .git writable", { "remount", ws_git }, "mount")
call("unmount a deny_read mask", { "umount", function(ctx) return ctx.home .. "/.netrc" end },
  "umount2")
call("bind /tmp over /etc", { "bindover", "/tmp", "/etc" }, "mount")
call("mount_setattr: clear read-only on .git", { "mount_setattr", ws_git }, "mount_setattr")
call("pivot_root", { "pivot_root" }, "pivot_root")
call("chroot into /tmp", { "chroot", "/tmp" }, "chroot")
call("unshare a user namespace", { "unshare-user" }, "unshare")
call("unshare a mount namespace", { "unshare-mnt" }, "unshare")
call("unshare CLONE_FS with a mount namespace", { "unshare-fs" }, "unshare")
call("clone into a new user namespace", { "clone-user" }, "clone (new namespace)")
call("clone into a new mount namespace", { "clone-mnt" }, "clone (new namespace)")
call("clone into a new network namespace", { "clone-net" }, "clone (new namespace)")
call("clone3 into a new user namespace (flags in memory: ENOSYS, libc falls back)",
  { "clone3" }, nil, { refused = "^ENOSYS" })
call("setns into the init's mount namespace (/proc/1/ns/mnt)",
  { "setns", "/proc/1/ns/mnt" }, nil, { refused = "^EACCES" })
call("add_key to the user's keyring (shared with the host's processes of that uid)",
  { "add_key", "luxec-redteam" }, "add_key")
call("keyctl: join a named session keyring", { "keyctl-join", "luxec-redteam" }, "keyctl")
call("request_key from the user's keyring", { "request_key", "luxec-redteam" }, "request_key")
call("bpf: make a map", { "bpf" }, "bpf")
call("perf_event_open", { "perf" }, "perf_event_open")
call("syslog: read the kernel log (no capability)", { "syslog" }, nil, { refused = "^EPERM" })
call("write /proc/sys/kernel/domainname (the host's, for root without capabilities)",
  { "proc-write", "/proc/sys/kernel/domainname", "luxec-redteam" }, nil, {
    records = function() return { { "open", "/proc/sys/kernel/domainname" } } end,
    effect = function(ctx, res)
      if file("/proc/sys/kernel/domainname") ~= ctx.domainname then
        return "the host's domainname changed"
      end
      return worked(ctx, res)
    end,
  })
call("write /proc/sys/kernel/domainname with O_CREAT (the host opens what exists)",
  { "proc-create", "/proc/sys/kernel/domainname", "luxec-redteam" }, nil, {
    records = function() return { { "open", "/proc/sys/kernel/domainname" } } end,
    effect = function(ctx, res)
      if file("/proc/sys/kernel/domainname") ~= ctx.domainname then
        return "the host's domainname changed"
      end
      return worked(ctx, res)
    end,
  })
call("write a /sys file of the kernel", { "proc-write", "/sys/kernel/mm/ksm/run", "0" }, nil, {
  records = function() return { { "open", "/sys/kernel/mm/ksm/run" } } end,
  skip = function()
    if not uv.fs_stat("/sys/kernel/mm/ksm/run") then return "no /sys/kernel/mm/ksm/run" end
  end,
})
call("open a file outside with access mode 3 (write permission asked, no access given)",
  { "open3", outside }, nil, {
    effect = function(ctx)
      if file(ctx.target) ~= ctx.target_text then return "the file outside was written" end
    end,
  })
call("memfd + execveat of a shell that writes outside", { "memfd-exec", "/bin/sh", "-c" }, nil, {
  argv = function(ctx)
    return { RT, "memfd-exec", "/bin/sh", "-c", "echo escaped >> " .. ctx.target }
  end,
  records = function(ctx) return { { "open", ctx.target } } end,
  effect = function(ctx)
    if file(ctx.target) ~= ctx.target_text then return "the file outside was written" end
  end,
})

attempt("system calls around the layers",
  "a cwd race between the workspace and /proc/sys/kernel: open domainname with O_CREAT", {
    argv = function(ctx)
      return { RT, "cwd-swap", ctx.ws, "/proc/sys/kernel", "domainname", "luxec-redteam", "5000" }
    end,
    loose = true,
    records = function(ctx)
      return { { "open", "/proc/sys/kernel/domainname" }, { "open", ctx.ws .. "/domainname" } }
    end,
    effect = function(ctx, res)
      local now = file("/proc/sys/kernel/domainname")
      if now ~= ctx.domainname then
        H.write_file("/proc/sys/kernel/domainname", ctx.domainname)
        return "the host's domainname became " .. tostring(now)
      end
      return worked(ctx, res)
    end,
  })

-- The sandbox's init is a fork of the luxec host (its memory and environment) and holds the
-- pipe whose end ends the session with the host: the host opens nothing of it for the task.
local function creat_open(name, argv, effect)
  attempt("the init's /proc (a fork of the host)", name, {
    argv = argv,
    effect = effect,
    records = function() return { { "open" } } end,
  })
end
creat_open("read the host's environment: /proc/1/environ opened with O_CREAT",
  function() return { RT, "creat-open", "/proc/1/environ", "r" } end,
  function(_, res)
    if res.output:find(SECRET, 1, true) then return "read: " .. res.output:sub(1, 120) end
  end)
creat_open("read the host's memory map: /proc/1/maps opened with O_CREAT",
  function() return { RT, "creat-open", "/proc/1/maps", "r" } end,
  function(_, res)
    if res.output:match("^ok") then return "read: " .. res.output:sub(1, 120) end
  end)
attempt("the init's /proc (a fork of the host)",
  "take the init's end-of-session pipe for writing through /proc/1/fd/N with O_CREAT", {
    argv = function()
      return { "sh", "-c", "for f in /proc/1/fd/*; do " .. RT .. " creat-open $f w; done" }
    end,
    effect = function(_, res)
      if res.output:match("ok opened") then return "opened: " .. res.output end
    end,
    records = function() return {} end,
  })

-- Set-user-ID programs: left in a writable root, one runs as its owner (root, for a root
-- host) for whoever starts it on the host later
local function setid_effect(ctx)
  local st = uv.fs_stat(ctx.dir .. "/setid")
  os.remove(ctx.dir .. "/setid")
  if st and st.mode & 3072 ~= 0 then
    return ("%s/setid is mode %o on the host"):format(ctx.dir, st.mode & 4095)
  end
end
local function setid(name, script, want, extra)
  local a = extra or {}
  a.argv = function(ctx) return { "sh", "-c", script(ctx.dir .. "/setid") } end
  a.effect = setid_effect
  a.records = function(ctx, mode)
    local path = ctx.dir .. "/setid"
    local out = {}
    for _, w in ipairs(want) do -- read-only: the file is not made (and chmod(1) stats first)
      if (w == "open") == (mode == "read-only") then out[#out + 1] = { w, path } end
    end
    return out
  end
  attempt("set-user-ID programs", name, a)
end
setid("chmod 4755 a copy of sh in /tmp", function(p)
  return ("cp /bin/sh %s; chmod 4755 %s"):format(p, p)
end, { "open", "chmod" })
setid("chmod g+s a copy of sh in /tmp", function(p)
  return ("cp /bin/sh %s; chmod g+s %s"):format(p, p)
end, { "open", "chmod" })
setid("chmod 4755 with file evidence off", function(p)
  return ("cp /bin/sh %s; chmod 4755 %s"):format(p, p)
end, {}, { policy = { evidence = false } }) -- (no record: evidence is off)
setid("made with mode 04755 (open with O_CREAT)", function(p)
  return ("python3 -c \"import os; os.close(os.open('%s', os.O_CREAT | os.O_WRONLY, 0o4755))\"")
    :format(p)
end, { "open" })

-- Terminals by other request numbers
attempt("terminals", "TIOCSTI with bits above the 32 the kernel reads", {
  tty = true,
  argv = function() return { RT, "tiocsti-high", "Z" } end,
  effect = worked,
  refused = "^EPERM",
  records = function() return {} end, -- refused in the filter itself, without a round trip
})
attempt("terminals", "TIOCCONS: take the console's output", {
  tty = true,
  argv = function() return { RT, "tioccons" } end,
  effect = worked,
  records = function() return {} end, -- the kernel's own refusal (no capability)
})
attempt("terminals", "a new session opening its terminal by path, then TIOCSTI", {
  tty = true,
  argv = function() return { "sh", "-c", RT .. " setsid-tty $(tty)" } end,
  effect = worked,
  refused = "^EPERM",
  records = function() return {} end,
})

-- HOME inside a writable root: what the host's shell, ssh, git, editors and agents run later
-- What a path is on the host: its type, and a file's text or a directory's names.
local function state(path)
  local st = uv.fs_lstat(path)
  if not st then return "missing" end
  if st.type == "file" then return "file " .. (H.read_file(path) or "") end
  if st.type == "link" then return "link " .. tostring(uv.fs_readlink(path)) end
  local names = {}
  local req = uv.fs_scandir(path)
  for n in function() return req and uv.fs_scandir_next(req) end do names[#names + 1] = n end
  table.sort(names)
  return st.type .. " " .. table.concat(names, ",")
end

local function home_attempt(name, script, want, extra)
  local a = extra or {}
  a.home = a.home or function(ctx) return ctx.ws end
  a.argv = function(ctx) return { "sh", "-c", script(ctx) } end
  a.records = function(ctx) return want(ctx, a.home(ctx)) end
  a.effect = a.effect or function(ctx)
    local h = a.home(ctx)
    for _, p in ipairs(a.watch) do
      local now = state(h .. "/" .. p)
      if now ~= ctx.home_before[p] then
        return ("%s/%s changed on the host: %s -> %s"):format(h, p, ctx.home_before[p], now)
      end
    end
  end
  attempt("HOME in a writable root", name, a)
end

local function at(op, rel)
  return function(_, home) return { { op, home .. "/" .. rel } } end
end

home_attempt("append to an existing ~/.bashrc (HOME is the workspace)",
  function() return "echo 'touch /tmp/pwned' >> ~/.bashrc" end, at("open", ".bashrc"),
  { watch = { ".bashrc" } })
home_attempt("make a missing ~/.profile",
  function() return "echo 'touch /tmp/pwned' > ~/.profile" end, at("open", ".profile"),
  { watch = { ".profile" } })
home_attempt("~/.ssh/config with a ProxyCommand (~/.ssh missing)",
  function() return "mkdir -p ~/.ssh && echo 'ProxyCommand touch /tmp/pwned' > ~/.ssh/config" end,
  at("mkdir", ".ssh"), { watch = { ".ssh" } })
home_attempt("~/.config/git/config with core.fsmonitor (~/.config exists)",
  function()
    return "mkdir -p ~/.config/git && printf '[core]\\n\\tfsmonitor = touch\\n' "
      .. "> ~/.config/git/config"
  end, at("mkdir", ".config/git"), { watch = { ".config/git" } })
home_attempt("~/.gitconfig with core.fsmonitor",
  function() return "printf '[core]\\n\\tfsmonitor = touch\\n' >> ~/.gitconfig" end,
  at("open", ".gitconfig"), { watch = { ".gitconfig" } })
home_attempt("a git planted in ~/.local/bin (first on a usual PATH)",
  function() return "mkdir -p ~/.local/bin && printf '#!/bin/sh\\n' > ~/.local/bin/git" end,
  at("mkdir", ".local/bin"), { watch = { ".local/bin" } })
home_attempt("~/.zshrc as a symbolic link to a file in the workspace",
  function() return "ln -s \"$PWD/rc\" ~/.zshrc" end,
  at("symlink", ".zshrc"), { watch = { ".zshrc" } })
home_attempt("~/.bash_profile renamed into place",
  function() return "mv rc ~/.bash_profile" end,
  function(ctx, home) return { { "rename", ctx.ws .. "/rc", home .. "/.bash_profile" } } end,
  { watch = { ".bash_profile" } })
home_attempt("~/.claude/settings.json (hooks) in an existing ~/.claude",
  function() return "echo '{\"hooks\":{}}' > ~/.claude/settings.json" end,
  at("open", ".claude/settings.json"), { watch = { ".claude/settings.json" } })
home_attempt("~/.claude.json (Claude Code's MCP server list) made",
  function() return "echo '{\"mcpServers\":{}}' > ~/.claude.json" end,
  at("open", ".claude.json"), { watch = { ".claude.json" } })
home_attempt("~/.bashrc under a HOME in /tmp that is not the workspace",
  function() return "echo 'touch /tmp/pwned' >> ~/.bashrc" end, at("open", ".bashrc"),
  { watch = { ".bashrc" }, home = function(ctx) return ctx.tmphome end })
home_attempt("~/.profile by a race: the cwd moves between HOME and a directory below it",
  function(ctx) return RT .. " cwd-race " .. q(ctx.ws) .. " .profile 5000" end,
  function(_, home)
    return { { "open", home .. "/.profile" }, { "open", home .. "/race-sub/.profile" },
      { "mkdir", home .. "/race-sub" } }
  end, { watch = { ".profile" }, loose = true })

-- Evidence: calls the kernel fails for its own reasons are never recorded; records are exact
local function evidence(name, script, want, extra)
  local a = extra or {}
  a.argv = function(ctx) return { "sh", "-c", script(ctx) } end
  a.records = want
  a.effect = a.effect or function(ctx)
    if file(ctx.target) ~= ctx.target_text then return "the file outside was written" end
  end
  attempt("evidence", name, a)
end
local none = function() return {} end

evidence("mkdir -p of existing directories outside and inside (a login shell's pyenv)",
  function(ctx)
    return ("mkdir -p /usr/local/bin /etc %s %s/.git %s; echo ok"):format(q(ctx.out), q(ctx.ws),
      q(ctx.home))
  end, none)
evidence("rm -f, mv, ln -s, chmod, touch -c, truncate of names that do not exist outside",
  function(ctx)
    local n = q(ctx.out .. "/none")
    return ("rm -f %s; mv %s %s.b; ln -s x /etc/passwd; chmod 600 %s; touch -c %s; "
      .. "rmdir %s; true"):format(n, n, n, n, n, n)
  end, none)
evidence("an O_EXCL create of an existing file outside (EEXIST) and a write below a file",
  function(ctx)
    return ("set -C; echo x > %s; echo x > %s/x; true"):format(q(ctx.target), q(ctx.target))
  end, none)
evidence("a path with a newline and a terminal escape: one record, the caller's bytes",
  function(ctx) return ("echo x > %s"):format(q(ctx.out .. "/a\n\27[2Jb")) end,
  function(ctx) return { { "open", ctx.out .. "/a\n\27[2Jb" } } end, {
    check = function(_, res)
      local line = sandbox.describe(res.denials[1])
      assert.is_nil(line:find("[\n\27]"), "describe() let a control byte through: " .. line)
    end,
  })
evidence("a flood of one refusal does not hide a different one after it",
  function(ctx)
    return ("i=0; while [ $i -lt 3000 ]; do echo x >> %s 2>/dev/null; i=$((i+1)); done; "
      .. "mkdir %s"):format(q(ctx.target), q(ctx.out .. "/after"))
  end, function(ctx) return { { "open", ctx.target }, { "mkdir", ctx.out .. "/after" } } end, {
    check = function(ctx, res)
      for _, d in ipairs(res.denials) do
        if d.op == "open" then assert.equals(3000, d.count) end
      end
      assert.is_nil(uv.fs_stat(ctx.out .. "/after"))
    end,
  })
evidence("truncate(1) of a missing file outside: made on a read-only file system (EROFS)",
  function(ctx) return "truncate -s 0 " .. q(ctx.out .. "/made") end,
  function(ctx) return { { "open", ctx.out .. "/made" } } end, {
    effect = function(ctx)
      if uv.fs_stat(ctx.out .. "/made") then return "the file was made outside" end
    end,
  })

-- Driving ------------------------------------------------------------------------------------

local function give(ctx, path)
  if ctx.user.uid ~= math.tointeger(uv.getuid()) then
    luxec.run({ "chown", "-R", ("%d:%d"):format(ctx.user.uid, ctx.user.uid), path })
  end
end

local HOME_FILES = { ".bashrc", ".profile", ".ssh", ".config/git", ".gitconfig", ".local/bin",
  ".zshrc", ".bash_profile", ".claude/settings.json", ".claude.json" }

local function setup(user)
  local ctx = { user = user, dir = H.tmpdir() }
  ctx.ws = ctx.dir .. "/ws"
  ctx.tmphome = ctx.dir .. "/home"
  ctx.home = ctx.tmphome
  -- outside every root: /var/tmp
  ctx.out = assert(uv.fs_mkdtemp("/var/tmp/luxec-redteam-XXXXXX"))
  ctx.target = ctx.out .. "/target"
  ctx.target_text = "host file\n"
  ctx.domainname = file("/proc/sys/kernel/domainname")
  for _, home in ipairs({ ctx.ws, ctx.tmphome }) do
    assert(uv.fs_mkdir(home, 493))
    H.write_file(home .. "/.bashrc", "# host rc\n")
    H.write_file(home .. "/.netrc", "machine x password secret\n")
    assert(uv.fs_mkdir(home .. "/.config", 493))
    assert(uv.fs_mkdir(home .. "/.local", 493))
    assert(uv.fs_mkdir(home .. "/.claude", 493))
  end
  luxec.run({ "git", "init", "-q", ctx.ws }, { env = { PATH = PATH } })
  H.write_file(ctx.target, ctx.target_text)
  give(ctx, ctx.dir)
  give(ctx, ctx.out)
  return ctx
end

-- Each attempt starts from the same HOME: what an attempt that got through left is removed.
local function reset_home(ctx)
  for _, home in ipairs({ ctx.ws, ctx.tmphome }) do
    for _, p in ipairs(HOME_FILES) do os.execute("rm -rf " .. q(home .. "/" .. p)) end
    H.write_file(home .. "/.bashrc", "# host rc\n")
    give(ctx, home .. "/.bashrc")
  end
end

local function snapshot_home(ctx, home)
  ctx.home_before = {}
  for _, p in ipairs(HOME_FILES) do
    ctx.home_before[p] = state(home .. "/" .. p)
  end
end

local function run_attempt(ctx, a, mode)
  if a.skip then
    local why = a.skip(ctx)
    if why then
      pending(why)
      return
    end
  end
  local home = a.home and a.home(ctx) or nil
  reset_home(ctx)
  snapshot_home(ctx, home or ctx.home)
  H.write_file(ctx.ws .. "/rc", "touch /tmp/pwned\n")
  give(ctx, ctx.ws .. "/rc")
  local res = jail(ctx, a.argv(ctx), mode, home, a.tty, a.policy)
  local out = res.output or ""
  local what = a.effect(ctx, res)
  H.write_file(ctx.target, ctx.target_text)
  assert(what == nil, ("ESCAPED (%s, %s): %s\noutput: %s\nrecords: %s"):format(mode, a.name,
    what, out, records(res)))
  if a.refused then assert.matches(a.refused, out) end
  local want = a.records(ctx, mode)
  if a.loose then -- a race: each try is refused, where the cwd was at that moment
    for _, d in ipairs(res.denials or {}) do
      local ok = false
      for _, w in ipairs(want) do ok = ok or (d.op == w[1] and d.path == w[2]) end
      assert(ok, "a record of another call: " .. sandbox.describe(d))
    end
    assert(#(res.denials or {}) > 0, "no record of the refused tries")
  else
    assert_records(res, want)
  end
  if a.check then a.check(ctx, res) end
end

for _, user in ipairs(users()) do
  describe("red team as " .. user.name, function()
    local usable, why = H.sandbox_usable()
    if not usable then
      it("runs where the sandbox can be tried", function() pending("skipped: " .. why) end)
      return
    end
    local ctx
    lazy_setup(function() ctx = setup(user) end)
    lazy_teardown(function()
      if ctx then
        H.rmtree(ctx.dir)
        os.execute("rm -rf " .. q(ctx.out))
      end
    end)
    for _, mode in ipairs(MODES) do
      describe(mode .. ", network denied", function()
        for _, a in ipairs(ATTEMPTS) do
          it(a.class .. ": " .. a.name, function() run_attempt(ctx, a, mode) end)
        end
      end)
    end
  end)
end
