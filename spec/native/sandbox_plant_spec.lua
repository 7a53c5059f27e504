-- Protected names that do not exist yet (issue 18): a sandboxed command must not make a `.git`
-- anywhere in a writable root (a repository the host's git would use: its hooks and
-- configuration run at the host's next git command there), nor a file other tools load later
-- (.mcp.json, .claude/, .codex/, .vscode/, .envrc...), nor a missing protected path such as
-- the config file an MCP server was started with. Every way to make a name is tried: mkdir,
-- open(O_CREAT) (also through a dangling symlink and /proc/self/cwd), rename of a file and
-- of a directory, link (also of an O_TMPFILE), symlink, mknod, `git init`, `git clone`.
-- Each attempt runs as root and as an unprivileged user whose luxec host is unprivileged too
-- (contain_runner.lua through setpriv), under workspace-write and read-only, and is decided
-- from outside: the host's real git runs in that directory afterwards (as the same user)
-- and must not run the planted hook, or the planted file must not exist on the host. Each
-- attack also runs without a sandbox (its control: the check sees it work there). Under
-- workspace-write the refusal is recorded exactly (op and path, by the supervisor, EACCES),
-- and nothing else is; what must keep working (git status in the workspace's repository,
-- ordinary files, a bare repository by another name) gives no record at all.
local H = require("helper")
local json = require("luxec.json")
local luxec = require("luxec")
local uv = require("luv")

local RUNNER = H.root .. "/spec/native/contain_runner.lua"
local PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
local NOBODY = 65534

local function q(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
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
    luxec.run({ "chown", "-R", ("%d:%d"):format(ctx.user.uid, ctx.user.uid), path })
  end
end

local function env(ctx)
  return { PATH = PATH, HOME = ctx.home, LANG = "C.UTF-8", GIT_CONFIG_NOSYSTEM = "1",
    GIT_AUTHOR_NAME = "t", GIT_AUTHOR_EMAIL = "t@t", GIT_COMMITTER_NAME = "t",
    GIT_COMMITTER_EMAIL = "t@t" }
end

-- A command on the host as the user under test, no sandbox: output, code.
local function host(ctx, script, cwd)
  local r = assert(luxec.run(as_user(ctx, { "sh", "-c", script }), { cwd = cwd, timeout = 30,
    env = env(ctx) }))
  return r.output, r.code
end

-- The command in a sandbox of `mode` (nil: none), run by a luxec host of the user under test.
local function jail(ctx, script, mode, extra)
  local sb
  if mode then
    sb = { mode = mode, network = "deny" }
    for k, v in pairs(extra or {}) do sb[k] = v end
  end
  local req = json.encode({ argv = { "sh", "-c", script }, cwd = ctx.ws, sandbox = sb })
  local r = assert(luxec.run(as_user(ctx, { H.luxec, RUNNER, req }), { env = env(ctx),
    timeout = 60 }))
  local line = r.output:match("RESULT ([^\n]*)")
  assert(line, "the attempt's luxec host gave no result: " .. r.output)
  local res = assert(json.decode(line))
  assert(not res.error, "the command was not started: " .. tostring(res.error))
  return res
end

local function records(res)
  local out = {}
  for _, d in ipairs(res.denials or {}) do
    out[#out + 1] = require("luxec.sandbox").describe(d) .. " [" .. tostring(d.source) .. "]"
  end
  return #out > 0 and table.concat(out, "; ") or "(none)"
end

-- A git directory made by hand under another name, with a pre-commit hook that touches the
-- marker (its HEAD, made last, is refused in the sandbox: it would complete a git directory;
-- the attacks below then try to make the name that points to it).
local function gitdir_script(dir, marker)
  return ("mkdir -p %s/objects %s/refs/heads %s/hooks && echo 'ref: refs/heads/main' > %s/HEAD"
    .. " && printf '[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n' > %s/config"
    .. " && printf '#!/bin/sh\\ntouch %s\\n' > %s/hooks/pre-commit"
    .. " && chmod +x %s/hooks/pre-commit; "):format(q(dir), q(dir), q(dir), q(dir), q(dir),
      marker, q(dir), q(dir))
end

local function hook_script(dir, marker)
  return ("printf '#!/bin/sh\\ntouch %s\\n' > %s/hooks/pre-commit && "
    .. "chmod +x %s/hooks/pre-commit; "):format(marker, q(dir), q(dir))
end

-- The host's git commit in dir (as the user): did a planted hook run?
local function commit_runs_hook(ctx, dir)
  if not uv.fs_stat(dir) then return nil end
  host(ctx, "git -c safe.directory='*' commit -q --allow-empty -m host", dir)
  if uv.fs_stat(ctx.marker) then return "the host's git commit in " .. dir .. " ran the hook" end
end

local function exists(path)
  return function(ctx)
    if uv.fs_lstat(ctx.ws .. "/" .. path) then return path .. " exists on the host" end
  end
end

local BIND = "python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind("

local ATTACKS = {
  { name = "git init in a subdirectory, then a hook in sub/.git",
    script = function(ctx) return "git init -q sub; " .. hook_script("sub/.git", ctx.marker) end,
    effect = function(ctx) return commit_runs_hook(ctx, ctx.ws .. "/sub") end,
    records = { { "mkdir", "sub/.git" } } },
  { name = "git init at the top of a workspace that is no repository",
    script = function(ctx) return "git init -q .; " .. hook_script(".git", ctx.marker) end,
    effect = function(ctx) return commit_runs_hook(ctx, ctx.ws) end,
    records = { { "mkdir", ".git" } } },
  { name = "git clone into the workspace",
    script = function(ctx)
      return "git clone -q " .. q(ctx.src) .. " cl; " .. hook_script("cl/.git", ctx.marker)
    end,
    effect = function(ctx) return commit_runs_hook(ctx, ctx.ws .. "/cl") end,
    records = { { "mkdir", "cl/.git" } } },
  { name = "mkdir .git by hand, in a directory two levels down",
    script = function(ctx) return "mkdir -p a/b; " .. gitdir_script("a/b/.git", ctx.marker) end,
    effect = function(ctx) return commit_runs_hook(ctx, ctx.ws .. "/a/b") end,
    records = { { "mkdir", "a/b/.git" } } },
  { name = "a git directory made under another name, renamed onto sub/.git",
    script = function(ctx)
      return gitdir_script("gd", ctx.marker) .. "mkdir sub; mv gd sub/.git"
    end,
    effect = function(ctx) return commit_runs_hook(ctx, ctx.ws .. "/sub") end,
    records = { { "open", "gd/HEAD" }, { "rename", "gd", "sub/.git" } } },
  { name = "sub/.git as a symbolic link to a git directory made under another name",
    script = function(ctx)
      return gitdir_script("gd", ctx.marker) .. "mkdir sub; ln -s ../gd sub/.git"
    end,
    effect = function(ctx) return commit_runs_hook(ctx, ctx.ws .. "/sub") end,
    records = { { "open", "gd/HEAD" }, { "symlink", "sub/.git" } } },
  { name = "a .git file (gitdir:) written in sub",
    script = function(ctx)
      return gitdir_script("gd", ctx.marker) .. "mkdir sub; echo \"gitdir: $PWD/gd\" > sub/.git"
    end,
    effect = function(ctx) return commit_runs_hook(ctx, ctx.ws .. "/sub") end,
    records = { { "open", "gd/HEAD" }, { "open", "sub/.git" } } },
  { name = "a gitdir: file hard-linked onto sub/.git",
    script = function(ctx)
      return gitdir_script("gd", ctx.marker) .. "mkdir sub; echo \"gitdir: $PWD/gd\" > gf; "
        .. "ln gf sub/.git"
    end,
    effect = function(ctx) return commit_runs_hook(ctx, ctx.ws .. "/sub") end,
    records = { { "open", "gd/HEAD" }, { "link", "gf", "sub/.git" } } },
  { name = "a gitdir: file renamed onto sub/.git",
    script = function(ctx)
      return gitdir_script("gd", ctx.marker) .. "mkdir sub; echo \"gitdir: $PWD/gd\" > gf; "
        .. "mv gf sub/.git"
    end,
    effect = function(ctx) return commit_runs_hook(ctx, ctx.ws .. "/sub") end,
    records = { { "open", "gd/HEAD" }, { "rename", "gf", "sub/.git" } } },
  { name = "a gitdir: file written through a dangling symbolic link to .git",
    script = function(ctx)
      return gitdir_script("gd", ctx.marker) .. "mkdir sub; ln -s .git sub/lnk; "
        .. "echo \"gitdir: $PWD/gd\" > sub/lnk"
    end,
    effect = function(ctx) return commit_runs_hook(ctx, ctx.ws .. "/sub") end,
    records = { { "open", "gd/HEAD" }, { "open", "sub/.git" } } },
  { name = "a gitdir: file written through /proc/self/cwd",
    script = function(ctx)
      return gitdir_script("gd", ctx.marker) .. "mkdir sub; "
        .. "echo \"gitdir: $PWD/gd\" > /proc/self/cwd/sub/.git"
    end,
    effect = function(ctx) return commit_runs_hook(ctx, ctx.ws .. "/sub") end,
    records = { { "open", "gd/HEAD" }, { "open", "sub/.git" } } },
  { name = "an O_TMPFILE linked in as sub/.git through /proc/self/fd (linkat, follow)",
    skip = "python3",
    script = function(ctx)
      return gitdir_script("gd", ctx.marker) .. "mkdir sub; python3 -c \"import os, ctypes\n"
        .. "fd = os.open('sub', os.O_TMPFILE | os.O_WRONLY, 0o644)\n"
        .. "os.write(fd, ('gitdir: ' + os.getcwd() + '/gd').encode())\n"
        .. "libc = ctypes.CDLL(None, use_errno=True)\n"
        .. "libc.linkat(-100, b'/proc/self/fd/%d' % fd, -100, b'sub/.git', 0x400)\""
    end,
    effect = function(ctx) return commit_runs_hook(ctx, ctx.ws .. "/sub") end,
    records = { { "open", "gd/HEAD" }, { "link", nil, "sub/.git" } } },
  { name = "core.fsmonitor in a new repository's config runs at the host's git status",
    script = function(ctx)
      return "git init -q sub; printf '[core]\\n\\tfsmonitor = \"touch " .. ctx.marker
        .. "; false\"\\n' >> sub/.git/config"
    end,
    effect = function(ctx)
      if not uv.fs_stat(ctx.ws .. "/sub/.git") then return nil end
      host(ctx, "git -c safe.directory='*' status", ctx.ws .. "/sub")
      if uv.fs_stat(ctx.marker) then return "the host's git status ran core.fsmonitor" end
    end,
    records = { { "mkdir", "sub/.git" } } },
  { name = "a .GIT of another case (a case-insensitive file system would take it as .git)",
    control = "exists",
    script = function() return "mkdir -p sub/.GIT" end,
    effect = exists("sub/.GIT"),
    records = { { "mkdir", "sub/.GIT" } } },
  { name = ".mcp.json written at the top of the workspace",
    script = function() return "echo '{\"mcpServers\":{\"x\":{}}}' > .mcp.json" end,
    effect = exists(".mcp.json"),
    records = { { "open", ".mcp.json" } } },
  { name = ".claude/settings.json in a new .claude directory",
    script = function() return "mkdir .claude && echo '{\"hooks\":{}}' > .claude/settings.json" end,
    effect = exists(".claude"),
    records = { { "mkdir", ".claude" } } },
  { name = ".codex/config.toml by a directory renamed into place",
    script = function() return "mkdir c && echo 'x = 1' > c/config.toml && mv c .codex" end,
    effect = exists(".codex"),
    records = { { "rename", "c", ".codex" } } },
  { name = ".vscode as a symbolic link to a directory holding tasks.json",
    script = function() return "mkdir v && echo '{}' > v/tasks.json && ln -s v .vscode" end,
    effect = exists(".vscode"),
    records = { { "symlink", ".vscode" } } },
  { name = ".Mcp.Json of another case",
    script = function() return "echo '{}' > .Mcp.Json" end,
    effect = exists(".Mcp.Json"),
    records = { { "open", ".Mcp.Json" } } },
  { name = "a unix socket bound at sub/.git (without evidence, the network allowed)",
    policy = { evidence = false, network = "allow" },
    skip = "python3",
    script = function() return "mkdir sub && " .. BIND .. "'sub/.git')\"" end,
    effect = exists("sub/.git"),
    records = { { "bind", "sub/.git" } } },
  { name = "a unix socket bound at .mcp.json",
    skip = "python3",
    script = function() return BIND .. "'.mcp.json')\"" end,
    effect = exists(".mcp.json"),
    records = { { "bind", ".mcp.json" } } },
  { name = ".envrc as a fifo (mknod)",
    script = function() return "mkfifo .envrc" end,
    effect = exists(".envrc"),
    records = { { "mknod", ".envrc" } } },
  { name = ".mcp.json in a subdirectory (a client started there loads it)",
    script = function() return "mkdir -p pkg && echo '{}' > pkg/.mcp.json" end,
    effect = exists("pkg/.mcp.json"),
    records = { { "open", "pkg/.mcp.json" } } },
  { name = "the server's missing config file, made directly",
    protect = "conf/server.lua",
    script = function() return "mkdir conf; echo 'return {sandbox = false}' > conf/server.lua" end,
    effect = exists("conf/server.lua"),
    records = { { "open", "conf/server.lua" } } },
  { name = "the server's missing config file, by a directory renamed into place",
    protect = "conf/server.lua",
    script = function()
      return "mkdir d && echo 'return {sandbox = false}' > d/server.lua && mv d conf"
    end,
    effect = exists("conf/server.lua"),
    records = { { "rename", "d", "conf" } } },
  { name = "the server's missing config file, by a symbolic link to a directory above it",
    protect = "conf/server.lua",
    script = function()
      return "mkdir d && echo 'return {sandbox = false}' > d/server.lua && ln -s d conf"
    end,
    effect = exists("conf/server.lua"),
    records = { { "symlink", "conf" } } },
}

-- git takes a directory holding HEAD, objects/ and refs/ (or HEAD and a commondir file) for a
-- repository: its config then runs at a host git command there or below (core.pager...).
local function takes_for_repo(dir)
  return function(ctx)
    local d = ctx.ws .. "/" .. dir
    if not uv.fs_stat(d) then return nil end
    local out = host(ctx, "git -c safe.directory='*' rev-parse --absolute-git-dir 2>/dev/null",
      d)
    if out == d .. "\n" then return "the host's git takes " .. dir .. " for a repository" end
  end
end
local BARE = "mkdir -p src/objects src/refs/heads && "
for _, a in ipairs({
  { name = "HEAD made last in a directory with objects/ and refs/ (a bare repository)",
    script = BARE .. "echo 'ref: refs/heads/main' > src/HEAD",
    records = { { "open", "src/HEAD" } } },
  { name = "refs/ made last in a directory with HEAD and objects/",
    script = "mkdir -p src/objects && echo 'ref: refs/heads/main' > src/HEAD && mkdir src/refs",
    records = { { "mkdir", "src/refs" } } },
  { name = "HEAD renamed into a directory with objects/ and refs/",
    script = BARE .. "echo 'ref: refs/heads/main' > h && mv h src/HEAD",
    records = { { "rename", "h", "src/HEAD" } } },
  { name = "HEAD and a commondir naming a directory with objects/ and refs/",
    dir = "g",
    script = "mkdir -p common/objects common/refs/heads g && echo 'ref: refs/heads/main' > "
      .. "g/HEAD && echo ../common > g/commondir",
    records = { { "open", "g/commondir" } } },
}) do
  ATTACKS[#ATTACKS + 1] = { name = a.name, script = function() return a.script end,
    effect = takes_for_repo(a.dir or "src"), records = a.records }
end

-- A second thread flips the name between a harmless one and the protected one while the call
-- is made again and again (spec/fixtures/plant.c): a judge that let the kernel read the path
-- again after reading it would lose this race within a few hundred tries.
local PLANT = H.fixture("plant")
for _, call in ipairs({ "mkdir", "open", "rename", "symlink", "link", "bind" }) do
  local name = (call == "open" or call == "link") and ".mcp.json" or ".git"
  ATTACKS[#ATTACKS + 1] = {
    name = ("a race: %s of a name another thread flips to %s"):format(call, name),
    script = function(ctx) return q(ctx.plant) .. " " .. call .. " . 10000" end,
    effect = exists(name),
    records = { { call == "open" and "open" or call, (call == "rename" or call == "link")
      and "src" or name, (call == "rename" or call == "link") and name or nil } },
    race = true,
  }
end

local KEEPS = {
  -- (a plain git status also refreshes the index when it can: the read-only .git refuses
  -- that, a true record; --no-optional-locks is how git is told not to try)
  { name = "git status and log in the workspace's own repository", repo = true,
    script = "git --no-optional-locks status --short && git log --oneline | wc -l" },
  { name = "files, directories, renames, links, directories named objects and refs",
    modes = { ["workspace-write"] = true },
    script = "mkdir -p a/b && echo x > a/b/c && mv a/b/c a/b/d && ln -s d a/b/e && ln a/b/d f"
      .. " && mkdir -p a/objects a/refs && echo x > a/HEADER && mkdir -p a/b && echo ok" },
}

-- Opens with O_CREAT of what exists (the host makes those calls: each must behave as the
-- kernel's): a device, a pipe through /dev/stdout, a fifo whose reader comes later, a file.
KEEPS[#KEEPS + 1] = {
  name = "O_CREAT opens of /dev/null, /dev/stdout, a fifo and a file that exist",
  modes = { ["workspace-write"] = true },
  script = "echo gone > /dev/null && echo out > /dev/stdout && mkfifo ff && "
    .. "{ (sleep 0.2; cat ff) & echo through > ff; wait; } && echo a > f && echo b >> f && cat f",
  output = "out\nthrough\na\nb\n",
}

local function resolve_records(ctx, list)
  local out = {}
  for i, r in ipairs(list) do
    out[i] = { op = r[1], path = r[2] and ctx.ws .. "/" .. r[2],
      to = r[3] and ctx.ws .. "/" .. r[3] }
    if r[1] ~= "rename" and r[1] ~= "link" then out[i].to = nil end
  end
  return out
end

-- Every record is one the attack names (exact op and paths, the supervisor's EACCES), and
-- each it names is there.
local function assert_records(ctx, res, list)
  local want = resolve_records(ctx, list)
  for _, d in ipairs(res.denials) do
    local ok = false
    for _, w in ipairs(want) do
      local path_ok = d.path == w.path or (w.path == nil and d.op == "link")
      if d.op == w.op and path_ok and d.to == w.to then ok = true end
    end
    assert(ok, "a record the attack does not explain: " .. records(res))
    assert.equals("supervisor", d.source)
    assert.equals("EACCES", d.error)
    assert(math.type(d.pid) == "integer" and d.pid > 0 and d.comm ~= "", records(res))
  end
  for _, w in ipairs(want) do
    local seen = false
    for _, d in ipairs(res.denials) do
      seen = seen or (d.op == w.op and d.to == w.to and (w.path == nil or d.path == w.path))
    end
    assert(seen, ("no record of %s %s %s; the records: %s"):format(w.op, tostring(w.path),
      tostring(w.to), records(res)))
  end
end

local function have(tool)
  return luxec.run({ "sh", "-c", "command -v " .. tool }, { env = { PATH = PATH } }).code == 0
end

for _, user in ipairs(users()) do
  describe("protected names made from inside, as " .. user.name, function()
    local layers = require("luxec.core").sandbox_layers()
    local why = layers.landlock < 3 and "Landlock ABI " .. layers.landlock .. " (3 needed)"
      or not have("git") and "git is not installed"
      or #user.prefix > 0 and not have("setpriv") and "setpriv is not installed" or nil
    if why then
      it("runs where the sandbox can be tried", function() pending("skipped: " .. why) end)
      return
    end
    local ctx = { user = user }
    lazy_setup(function()
      ctx.out = assert(uv.fs_mkdtemp("/var/tmp/luxec-plant-XXXXXX"))
      assert(uv.fs_chmod(ctx.out, 493))
      ctx.home = ctx.out .. "/home"
      assert(uv.fs_mkdir(ctx.home, 493))
      ctx.src = ctx.out .. "/src"
      ctx.plant = ctx.out .. "/plant"
      luxec.run({ "cp", PLANT, ctx.plant })
      give(ctx, ctx.out)
      local out, code = host(ctx, "git init -q " .. q(ctx.src) .. " && git -C " .. q(ctx.src)
        .. " commit -q --allow-empty -m src", "/")
      assert(code == 0, out)
    end)
    lazy_teardown(function() luxec.run({ "rm", "-rf", ctx.out }) end)
    before_each(function()
      ctx.ws = H.tmpdir()
      ctx.marker = ctx.out .. "/ran-" .. H.rand_digits(9)
      give(ctx, ctx.ws)
    end)
    after_each(function()
      H.rmtree(ctx.ws)
      os.remove(ctx.marker)
      H.assert_clean()
    end)

    for _, mode in ipairs({ false, "workspace-write", "read-only" }) do
      local title = mode and mode .. ", network denied" or "without a sandbox (the controls)"
      describe(title, function()
        for _, a in ipairs(ATTACKS) do
          it(a.name, function()
            if a.skip and not have(a.skip) then
              pending("skipped: " .. a.skip .. " is not installed")
              return
            end
            local extra = a.protect and { protect = { ctx.ws .. "/" .. a.protect } } or {}
            for k, v in pairs(a.policy or {}) do extra[k] = v end
            local res = jail(ctx, a.script(ctx), mode or nil, extra)
            local happened = a.effect(ctx)
            if not mode then
              assert(happened, "control: the attack did not work without a sandbox; output: "
                .. tostring(res.output))
              return
            end
            assert(not happened, ("ESCAPE: %s (output: %s)"):format(tostring(happened),
              tostring(res.output):sub(1, 300)))
            if mode == "workspace-write" then assert_records(ctx, res, a.records) end
          end)
        end
        if mode then
          for _, k in ipairs(KEEPS) do
            if not k.modes or k.modes[mode] then
              it("keeps working with no record: " .. k.name, function()
                if k.repo then
                  local out, code = host(ctx,
                    "git init -q . && git commit -q --allow-empty -m a", ctx.ws)
                  assert(code == 0, out)
                end
                local res = jail(ctx, k.script, mode)
                assert.equals(0, res.code, res.output)
                if k.output then assert.equals(k.output, res.output) end
                assert(res.denials_total == 0, "false records: " .. records(res))
                if k.repo then
                  local out, code = host(ctx, "git commit -q --allow-empty -m b && git log "
                    .. "--oneline | wc -l", ctx.ws)
                  assert.equals(0, code, out)
                  assert.equals("2\n", out)
                end
              end)
            end
          end
        end
      end)
    end
  end)
end

describe("a masked path inside the workspace", function()
  local ok, why = H.sandbox_usable()
  if not ok then
    it("runs where the kernel offers every layer", function() pending("skipped: " .. why) end)
    return
  end
  local ws
  before_each(function() ws = H.tmpdir() end)
  after_each(function()
    H.rmtree(ws)
    H.assert_clean()
  end)

  it("is refused a write with a record (a read-only mount, as a repository is)", function()
    H.write_file(ws .. "/.env", "TOKEN=hostsecret\n")
    local r = assert(luxec.run({ "sh", "-c", "cat .env; echo x > .env; echo rc=$?" },
      { cwd = ws, sandbox = { mode = "workspace-write", deny_read = { ws .. "/.env" } } }))
    assert.is_nil(r.output:find("hostsecret", 1, true))
    assert.truthy(r.output:find("rc=[12]"), r.output)
    assert.equals("TOKEN=hostsecret\n", H.read_file(ws .. "/.env"))
    local recs = {}
    for _, d in ipairs(r.sandbox.denials) do recs[#recs + 1] = d.op .. " " .. tostring(d.path) end
    assert.same({ "open " .. ws .. "/.env" }, recs)
  end)
end)
