-- The red-team pass (see sandbox_redteam_spec.lua), second part: what the host's shell, ssh,
-- git, editors and agents run from HOME when HOME is in a writable root (also by a race of
-- the working directory against a name the host makes itself), and the evidence of calls the
-- kernel fails for its own reasons, of control bytes in a path, and of floods.
local H = require("helper")
local luxec = require("luxec")
local sandbox = require("luxec.sandbox")
local uv = require("luv")
local D = require("native.redteam_driver")

local ATTEMPTS = {}
local function attempt(class, name, a)
  a.class, a.name = class, name
  ATTEMPTS[#ATTEMPTS + 1] = a
end
local RT, q, give, file, state = D.RT, D.q, D.give, D.file, D.state

-- HOME inside a writable root: what the host's shell, ssh, git, editors and agents run later
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
home_attempt("~/.bash_aliases (Debian's ~/.bashrc sources it)",
  function() return "echo 'touch /tmp/pwned' > ~/.bash_aliases" end,
  at("open", ".bash_aliases"), { watch = { ".bash_aliases" } })
home_attempt("a .pth file in Python's user site-packages (run by every python3)",
  function()
    return "mkdir -p ~/.local/lib/python3.11/site-packages && echo 'import os' "
      .. "> ~/.local/lib/python3.11/site-packages/x.pth"
  end, at("mkdir", ".local/lib"), { watch = { ".local/lib" } })
home_attempt("a vim plugin (~/.vim/plugin, loaded at vim's start)",
  function()
    return "mkdir -p ~/.vim/plugin && echo 'call system(\"touch /tmp/pwned\")' "
      .. "> ~/.vim/plugin/x.vim"
  end, at("mkdir", ".vim"), { watch = { ".vim" } })
home_attempt("a pyenv shim (~/.pyenv/shims, first on a pyenv user's PATH)",
  function()
    return "mkdir -p ~/.pyenv/shims && printf '#!/bin/sh\n' > ~/.pyenv/shims/python3"
  end, at("mkdir", ".pyenv"), { watch = { ".pyenv" } })
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

-- A mode an earlier session set: a sandboxed command may take the read or search permission
-- away from a directory it owns in a writable root. The host's searches (repositories,
-- protect, deny_read) run as the host's user; what they cannot read must not be taken for
-- empty, or the next session gives the permission back and writes what was hidden. prepare()
-- sets the mode as that earlier session would have; effect() puts it back.
local function hidden_attempt(name, a)
  local set = a.prepare
  a.prepare = function(ctx, mode)
    local st = set and set(ctx, mode) or {}
    local r = luxec.run({ "chmod", a.mode, a.dir(ctx) })
    assert(r.code == 0, "chmod: " .. r.output)
    return st
  end
  local effect = a.effect
  a.effect = function(ctx, st, res)
    luxec.run({ "chmod", "755", a.dir(ctx) })
    return effect(ctx, st, res)
  end
  a.loose = "pattern"
  -- a normal user's host may not read the directory, which its own user owns (so the
  -- session's user could give the permission back): a workspace-write spawn fails, naming it
  -- (read-only: nothing is searched, and nothing can change the mode back). Root's host reads
  -- every directory.
  local fails_in = a.fails_in or { ["workspace-write"] = true }
  a.unstarted = function(ctx, mode)
    if ctx.user.uid == 0 or not fails_in[mode] then return nil end
    return (a.failing or "the host may not read or search %s"):format(
      (a.dir(ctx):gsub("%p", "%%%0")))
  end
  attempt("a permission an earlier session took away", name, a)
end

-- An effect: the hook file at rel (below the workspace) exists, made by the session; removed.
local function planted(rel)
  return function(ctx)
    local hook = ctx.ws .. rel
    if uv.fs_stat(hook) then
      os.remove(hook)
      return "a hook was planted in " .. hook
    end
  end
end

local HOOK = "printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > %s/.git/hooks/pre-commit"
hidden_attempt("a nested repository in a directory made unreadable (chmod 300)", {
  mode = "300",
  dir = function(ctx) return ctx.ws .. "/deep" end,
  prepare = function(ctx)
    if not uv.fs_stat(ctx.ws .. "/deep/nested/.git") then
      luxec.run({ "git", "init", "-q", ctx.ws .. "/deep/nested" }, { env = { PATH = D.PATH } })
      give(ctx, ctx.ws .. "/deep")
    end
  end,
  argv = function() return { "sh", "-c", "chmod 755 deep; " .. HOOK:format("deep/nested") } end,
  effect = planted("/deep/nested/.git/hooks/pre-commit"),
  records = function()
    return { { "chmod", "/deep$" }, { "open", "/deep/nested/%.git/hooks/pre%-commit$" } }
  end,
})
hidden_attempt("the workspace itself made unreadable (chmod 300; under /tmp)", {
  mode = "300",
  dir = function(ctx) return ctx.ws end,
  argv = function() return { "sh", "-c", "chmod 755 \"$PWD\"; " .. HOOK:format(".") } end,
  effect = planted("/.git/hooks/pre-commit"),
  records = function()
    return { { "chmod", "/ws$" }, { "open", "/ws/%.git/hooks/pre%-commit$" } }
  end,
})
hidden_attempt("a repository whose core.hooksPath (../hooks) lies outside a directory made "
  .. "unsearchable (chmod 400)", {
  mode = "400",
  dir = function(ctx) return ctx.ws .. "/inner" end,
  prepare = function(ctx)
    if not uv.fs_stat(ctx.ws .. "/inner/.git") then
      luxec.run({ "git", "init", "-q", ctx.ws .. "/inner" }, { env = { PATH = D.PATH } })
      luxec.run({ "git", "-C", ctx.ws .. "/inner", "config", "core.hooksPath", "../hooks" },
        { env = { PATH = D.PATH } })
      uv.fs_mkdir(ctx.ws .. "/hooks", 493)
      give(ctx, ctx.ws .. "/inner", ctx.ws .. "/hooks")
    end
  end,
  argv = function()
    return { "sh", "-c", "chmod 755 inner; printf '#!/bin/sh\\n' > hooks/pre-commit" }
  end,
  effect = planted("/hooks/pre-commit"),
  records = function() return { { "chmod", "/inner$" }, { "open", "/hooks/pre%-commit$" } } end,
  failing = "%s[/ ]", -- (its config, which the host may not read either, is named first)
})
hidden_attempt("HOME made unsearchable (chmod 600): the masked ~/.netrc, the protected ~/.bashrc", {
  mode = "600",
  home = function(ctx) return ctx.tmphome end,
  dir = function(ctx) return ctx.tmphome end,
  argv = function() return { "sh", "-c", "chmod 700 ~; cat ~/.netrc; echo x >> ~/.bashrc" } end,
  effect = function(ctx, _, res)
    if res.output:find("password secret", 1, true) then return "~/.netrc was read" end
    if file(ctx.tmphome .. "/.bashrc") ~= "# host rc\n" then return "~/.bashrc was written" end
  end,
  records = function() return { { "chmod", "/home$" }, { "open", "/home/%.bashrc$" } } end,
})
hidden_attempt("HOME made unlistable (chmod 300): the masked ~/.*_history", {
  mode = "300",
  fails_in = { ["workspace-write"] = true, ["read-only"] = true }, -- (deny_read, in both)
  home = function(ctx) return ctx.tmphome end,
  dir = function(ctx) return ctx.tmphome end,
  prepare = function(ctx)
    H.write_file(ctx.tmphome .. "/.bash_history", "ssh root@db -p hunter2\n")
    give(ctx, ctx.tmphome .. "/.bash_history")
  end,
  argv = function() return { "sh", "-c", "chmod 700 ~; cat ~/.bash_history" } end,
  effect = function(ctx, _, res)
    os.remove(ctx.tmphome .. "/.bash_history")
    if res.output:find("hunter2", 1, true) then return "~/.bash_history was read" end
  end,
  records = function() return { { "chmod", "/home$" } } end,
})
attempt("a permission an earlier session took away",
  "a directory of another user the host may not read: kept read-only, the session runs", {
    prepare = function(ctx)
      uv.fs_mkdir(ctx.ws .. "/theirs", 448) -- (root's, 0700)
      return {}
    end,
    argv = function() return { "sh", "-c", "ls theirs; touch theirs/x; echo made" } end,
    effect = function(ctx) -- (root's host and session may write root's directory)
      local made = os.remove(ctx.ws .. "/theirs/x")
      if made and ctx.user.uid ~= 0 then return "theirs/x was made" end
    end,
    records = function() return { { "open", "/theirs/x$" } } end,
    loose = "pattern",
    check = function(ctx, res)
      assert.matches("made", res.output)
      if ctx.user.uid ~= 0 then
        assert.matches("cannot open directory 'theirs': Permission denied", res.output)
      end
    end,
  })

-- A secret the policy masks that does not exist yet: made in a session and linked elsewhere,
-- the host's later writes into it (bash's history, `echo ... >> ~/.pgpass`) would be read
-- through the link past the next session's mask. Every deny_read name in a writable root is
-- reserved: none can be made, by any call.
local SECRETS = { ".pgpass", ".aws", ".bash_history", ".zsh_history", ".python_history" }
for _, where in ipairs({ "the workspace", "a HOME in /tmp" }) do
  attempt("a secret made before the host writes it", "~/.pgpass, ~/.aws, ~/.*_history made "
    .. "by open, mkdir, link, rename and symlink (HOME is " .. where .. ")", {
      home = function(ctx) return where == "the workspace" and ctx.ws or ctx.tmphome end,
      argv = function(ctx)
        return { "sh", "-c", ("cd ~; touch .pgpass; ln .pgpass %s/leak; mkdir .aws; "
          .. "touch .bash_history; touch %s/x; ln %s/x .zsh_history; mv %s/x .python_history; "
          .. "ln -s x .zsh_history; true"):format(q(ctx.ws), q(ctx.ws), q(ctx.ws), q(ctx.ws)) }
      end,
      effect = function(ctx)
        local home = where == "the workspace" and ctx.ws or ctx.tmphome
        local made = {}
        for _, name in ipairs(SECRETS) do
          if uv.fs_lstat(home .. "/" .. name) then made[#made + 1] = name end
        end
        os.execute(("rm -rf %s/x %s/leak"):format(q(ctx.ws), q(ctx.ws)))
        for _, name in ipairs(made) do os.execute("rm -rf " .. q(home .. "/" .. name)) end
        if #made > 0 then return "made " .. table.concat(made, ", ") end
      end,
      records = function()
        return { { "open", "/%.pgpass$" }, { "mkdir", "/%.aws$" }, { "open", "/%.bash_history$" },
          { "open", "/x$" },
          { "link", "/x$" }, { "rename", "/x$" }, { "symlink", "/%.zsh_history$" } }
      end,
      loose = "pattern",
    })
end

-- A device node root made in a writable root (before the session) is no way to a device: the
-- mounts outside the sandbox's own /dev are nodev.
attempt("a device node in a writable root", "write the kernel log through a node made by root", {
  skip = function() return uv.getuid() ~= 0 and "mknod needs root: skipped" or nil end,
  prepare = function(ctx)
    local node = ctx.ws .. "/kmsgnode"
    if not uv.fs_stat(node) then
      local r = luxec.run({ "mknod", "-m", "666", node, "c", "1", "11" })
      assert(r.code == 0, "mknod: " .. r.output)
    end
    return { marker = "luxec-redteam-kmsg-" .. H.rand_digits(8) }
  end,
  argv = function(_, st) return { "sh", "-c", "echo '<3>" .. st.marker .. "' > kmsgnode" } end,
  effect = function(_, st)
    local r = luxec.run({ "dmesg" })
    if r.output:find(st.marker, 1, true) then return "the line reached the kernel log" end
  end,
  records = function() return { { "open", "/kmsgnode$" } } end,
  loose = "pattern",
})

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
-- 14 kinds of file refusal, 32 distinct paths each, 17 refused calls by name and 80 i386
-- calls: then one connect to a host socket outside must still have its record
local FLOOD = [[
import os, socket, subprocess, sys
out, rt, sock = sys.argv[1], sys.argv[2], sys.argv[3]
def t(f, *a):
    try: f(*a)
    except OSError: pass
for i in range(32):
    f, d = "%s/f%d" % (out, i), "%s/d%d" % (out, i)
    t(lambda: os.close(os.open("%s/o%d" % (out, i), os.O_WRONLY | os.O_CREAT)))
    t(os.mkdir, "%s/m%d" % (out, i)); t(os.symlink, "x", "%s/s%d" % (out, i))
    t(os.unlink, f); t(os.rename, f, f + ".b"); t(os.link, f, "%s/l%d" % (out, i))
    t(os.chmod, f, 0o600); t(os.chown, f, os.getuid(), -1); t(os.utime, f)
    t(os.setxattr, f, "user.x", b"1"); t(os.removexattr, f, "user.y")
    t(os.mkfifo, "%s/p%d" % (out, i)); t(os.rmdir, d); t(os.truncate, f, 0)
for c in ["iouring", "userfaultfd", "fsopen", "open_tree /", "remount /etc", "umount /etc",
          "pivot_root", "chroot /", "unshare-user", "clone-user", "add_key x", "keyctl-join x",
          "request_key x", "bpf", "perf", "mount_setattr /etc", "handle /etc/hostname",
          "int80-range 1000 1079"]:
    subprocess.run([rt] + c.split(), stdout=subprocess.DEVNULL)
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sock); print("ok connected")
except OSError as e: print("connect:", e)
]]
attempt("evidence", "a flood of 14 kinds of file refusal, 97 refused calls, then a connect", {
  prepare = function(ctx)
    for i = 0, 31 do
      H.write_file(("%s/f%d"):format(ctx.out, i), "x")
      uv.fs_mkdir(("%s/d%d"):format(ctx.out, i), 493)
    end
    give(ctx, ctx.out)
    local sock = ctx.out .. "/host.sock"
    local p = assert(luxec.spawn({ H.fixture("usock"), "serve", sock, ctx.target }))
    H.wait_output(p, "listening", 10000)
    return { p = p, sock = sock }
  end,
  argv = function(ctx, st) return { "python3", "-c", FLOOD, ctx.out, RT, st.sock } end,
  effect = function(_, st, res)
    local got = st.p:snapshot().head:match("accept[^\n]*")
    st.p:terminate({ grace_ms = 0 })
    st.p:close()
    if got or res.output:match("ok connected") then
      return "the host server got: " .. tostring(got)
    end
  end,
  records = function(_, _, st) return { { "connect", st.sock } } end,
  loose = "present",
})

evidence("truncate(1) of a missing file outside: made on a read-only file system (EROFS)",
  function(ctx) return "truncate -s 0 " .. q(ctx.out .. "/made") end,
  function(ctx) return { { "open", ctx.out .. "/made" } } end, {
    effect = function(ctx)
      if uv.fs_stat(ctx.out .. "/made") then return "the file was made outside" end
    end,
  })

D.run("red team (HOME, evidence)", ATTEMPTS, { describe = describe, it = it,
  -- looked up when called: the pending() of the test running then (the one of the file's
  -- top level, called inside a test, would let it pass)
  pending = function(why) pending(why) end,
  lazy_setup = lazy_setup, lazy_teardown = lazy_teardown, assert = assert })
