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
local uv = require("luv")
local D = require("native.redteam_driver")

local ATTEMPTS = {}
local function attempt(class, name, a)
  a.class, a.name = class, name
  ATTEMPTS[#ATTEMPTS + 1] = a
end
local RT, SECRET, file, worked = D.RT, D.SECRET, D.file, D.worked

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
    effect = function(ctx, _, res)
      if file(ctx.target) ~= ctx.target_text then return "the file outside was written" end
      return worked(ctx, nil, res)
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
    effect = function(ctx, _, res)
      if file("/proc/sys/kernel/domainname") ~= ctx.domainname then
        return "the host's domainname changed"
      end
      return worked(ctx, nil, res)
    end,
  })
call("write /proc/sys/kernel/domainname with O_CREAT (the host opens what exists)",
  { "proc-create", "/proc/sys/kernel/domainname", "luxec-redteam" }, nil, {
    records = function() return { { "open", "/proc/sys/kernel/domainname" } } end,
    effect = function(ctx, _, res)
      if file("/proc/sys/kernel/domainname") ~= ctx.domainname then
        return "the host's domainname changed"
      end
      return worked(ctx, nil, res)
    end,
  })
call("write a /sys file of the kernel", { "proc-write", "/sys/kernel/mm/ksm/run", "0" }, nil, {
  -- (root's file, mode 644: for another user its mode refuses the write before the sandbox
  -- could, and nothing is the sandbox's to record)
  records = function(ctx)
    if ctx.user.uid ~= 0 then return {} end
    return { { "open", "/sys/kernel/mm/ksm/run" } }
  end,
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
    effect = function(ctx, _, res)
      local now = file("/proc/sys/kernel/domainname")
      if now ~= ctx.domainname then
        H.write_file("/proc/sys/kernel/domainname", ctx.domainname)
        return "the host's domainname became " .. tostring(now)
      end
      return worked(ctx, nil, res)
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
  function(_, _, res)
    if res.output:find(SECRET, 1, true) then return "read: " .. res.output:sub(1, 120) end
  end)
creat_open("read the host's memory map: /proc/1/maps opened with O_CREAT",
  function() return { RT, "creat-open", "/proc/1/maps", "r" } end,
  function(_, _, res)
    if res.output:match("^ok") then return "read: " .. res.output:sub(1, 120) end
  end)
attempt("the init's /proc (a fork of the host)",
  "take the init's end-of-session pipe for writing through /proc/1/fd/N with O_CREAT", {
    argv = function()
      return { "sh", "-c", "for f in /proc/1/fd/*; do " .. RT .. " creat-open $f w; done" }
    end,
    effect = function(_, _, res)
      if res.output:match("ok opened") then return "opened: " .. res.output end
    end,
    -- each open the host refuses is its record; where the init's fd directory cannot be
    -- listed (it is not dumpable), there are none
    loose = "pattern",
    records = function() return { { "open", "^/proc/1/fd/%d+$" } } end,
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
  a.records = a.records or function(ctx, mode)
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
-- (an unnamed file keeps the mode it is made with until a link names it: linkat with
-- AT_SYMLINK_FOLLOW, which os.link makes when given a directory descriptor; read-only: the
-- open in a directory that is not writable is the refusal, named by the directory)
local function tmpfile_setid(p)
  local dir, name = p:match("^(.*)/(.*)$")
  return ("python3 -c \"import os; fd = os.open('%s', os.O_TMPFILE | os.O_WRONLY, 0o6755); "
    .. "os.link('/proc/self/fd/%%d' %% fd, '%s', dst_dir_fd=os.open('%s', os.O_RDONLY), "
    .. "follow_symlinks=True)\""):format(dir, name, dir)
end
setid("made with mode 06755 as an unnamed file (O_TMPFILE), then linked", tmpfile_setid, {}, {
  records = function(ctx, mode)
    return mode == "read-only" and { { "open", ctx.dir } } or {}
  end,
})
setid("an unnamed file with mode 06755, file evidence off", tmpfile_setid, {},
  { policy = { evidence = false }, records = function() return {} end })

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

D.run("red team", ATTEMPTS, { describe = describe, it = it,
  -- looked up when called: the pending() of the test running then (the one of the file's
  -- top level, called inside a test, would let it pass)
  pending = function(why) pending(why) end,
  lazy_setup = lazy_setup, lazy_teardown = lazy_teardown, assert = assert })
