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
