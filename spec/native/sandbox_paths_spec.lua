-- What a workspace-write sandbox keeps read-only inside its writable roots (every git
-- repository with its hooks and configuration, the protect list, the MCP server's config
-- file) and what it masks (deny_read). Every verdict is taken from outside the sandbox: the
-- host's real git runs afterwards and must not run a planted hook; files are read on the
-- host; a secret must not appear in what the sandboxed command printed.
local H = require("helper")
local uv = require("luv")
local luxec = require("luxec")
local sandbox = require("luxec.sandbox")
local config = require("luxec.mcp.config")

local usable = H.sandbox_usable

local write_file = H.write_file
local read_file = H.read_file
local function q(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

-- A command on the host (no sandbox); returns its output and exit code.
local function host(script, cwd)
  local r = assert(luxec.run({ "sh", "-c", script }, { cwd = cwd, timeout = 30,
    env = { PATH = os.getenv("PATH"), HOME = os.getenv("HOME"), GIT_CONFIG_NOSYSTEM = "1",
      GIT_AUTHOR_NAME = "t", GIT_AUTHOR_EMAIL = "t@t", GIT_COMMITTER_NAME = "t",
      GIT_COMMITTER_EMAIL = "t@t" } }))
  return r.output, r.code
end

local function git_init(dir, extra)
  local out, code = host("git init -q " .. (extra or "") .. " " .. q(dir) .. " && cd " .. q(dir)
    .. " && git commit -q --allow-empty -m init", "/")
  assert(code == 0, out)
end

describe("sandbox paths (workspace-write)", function()
  local ok, why = usable()
  if not ok then
    it("runs where the kernel offers every layer", function()
      pending("skipped: " .. why)
    end)
    return
  end

  local ws, marker
  before_each(function()
    ws = H.tmpdir()
    marker = ws .. ".hook-ran"
    git_init(ws)
  end)
  after_each(function()
    H.rmtree(ws)
    os.remove(marker)
    H.assert_clean()
  end)

  -- argv in the sandbox (cwd = the workspace); returns output, code, report.
  local function jail(script, policy, opts)
    local sb = { mode = "workspace-write" }
    for k, v in pairs(policy or {}) do sb[k] = v end
    local o = { cwd = ws, sandbox = sb, timeout = 20 }
    for k, v in pairs(opts or {}) do o[k] = v end
    local r = assert(luxec.run({ "sh", "-c", script }, o))
    return r.output, r.code, r.sandbox
  end

  -- Plant `hook` (a pre-commit hook that leaves the marker) from inside, then commit on the
  -- host in `repo`: the hook must not have run.
  local function plant_then_commit(hookdir, repo)
    local script = ("mkdir -p %s; printf '#!/bin/sh\\ntouch %s\\n' > %s/pre-commit; "
      .. "chmod +x %s/pre-commit; echo planted=$?"):format(q(hookdir), q(marker), q(hookdir),
      q(hookdir))
    local out, code, report = jail(script)
    assert.equal(0, code)
    assert.truthy(out:find("planted=1", 1, true) or out:find("planted=2", 1, true), out)
    local hout, hcode = host("git commit -q --allow-empty -m host", repo)
    assert.equal(0, hcode, hout)
    assert.is_nil(uv.fs_stat(marker))
    return report
  end

  local function contains(list, want)
    for _, v in ipairs(list) do
      if v == want then return true end
    end
    return false
  end

  it("resolving a policy again and again leaves the Lua heap where it was", function()
    -- (luv's fs_scandir kept each directory listing referenced: every spawn leaked)
    for i = 1, 5 do assert(uv.fs_mkdir(ws .. "/d" .. i, 493)) end
    local function heap_after(n)
      for _ = 1, n do sandbox.resolve({ mode = "workspace-write", tmp = false }, ws) end
      collectgarbage("collect")
      collectgarbage("collect")
      return collectgarbage("count")
    end
    local before = heap_after(20)
    local after = heap_after(200)
    assert.is_true(after - before < 64, ("the heap grew %.1f KiB"):format(after - before))
  end)

  it("keeps the workspace's own hooks from running at the host's next commit", function()
    local report = plant_then_commit(ws .. "/.git/hooks", ws)
    assert.is_true(contains(report.protected, ws .. "/.git"))
  end)

  it("keeps a nested repository's hooks from running (sub/.git)", function()
    git_init(ws .. "/sub/deeper")
    local report = plant_then_commit(ws .. "/sub/deeper/.git/hooks", ws .. "/sub/deeper")
    assert.is_true(contains(report.protected, ws .. "/sub/deeper/.git"))
  end)

  it("keeps a repository eight levels down read-only (deeper than the old bound of six)",
    function()
      local deep = ws .. "/a/b/c/d/e/f/g/r8"
      git_init(deep)
      local report = plant_then_commit(deep .. "/.git/hooks", deep)
      assert.is_true(contains(report.protected, deep .. "/.git"))
    end)

  it("keeps a directory at git_scan.depth that holds directories read-only whole", function()
    -- (unsearched: a repository below it would go unprotected; a spawn that failed instead
    -- let one `mkdir -p` of 65 levels in /tmp stop every later sandboxed spawn)
    git_init(ws .. "/a/b/c/r")
    local policy = { mode = "workspace-write", tmp = false, git_scan = { depth = 2 } }
    local spec = sandbox.resolve(policy, ws)
    assert.is_true(contains(spec.ro_paths, ws .. "/a/b"))
    local r = assert(luxec.run({ "sh", "-c", "touch a/x && echo A-RW; touch a/b/y || echo B-RO; "
      .. "touch a/b/c/r/.git/hooks/z || echo HOOK-RO" }, { cwd = ws, sandbox = policy }))
    assert.matches("A%-RW\n", r.output)
    assert.matches("B%-RO\n", r.output)
    assert.matches("HOOK%-RO\n", r.output)
    assert.is_nil(uv.fs_stat(ws .. "/a/b/y"))
    assert.is_true(contains(r.sandbox.protected, ws .. "/a/b"))
    -- the root itself at the bound (depth 0) with directories in it: nothing can be written
    local okr, err = pcall(sandbox.resolve, { mode = "workspace-write", tmp = false,
      git_scan = { depth = 0 } }, ws)
    assert.is_false(okr)
    assert.truthy(tostring(err):find("found directories deeper than 0 levels (in " .. ws .. ")",
      1, true), err)
    assert.truthy(tostring(err):find("Raise git_scan.depth", 1, true), err)
  end)

  it("keeps a directory whose entry the search cannot look at (past PATH_MAX) read-only",
    function()
      -- 25 names of 200 bytes: a bare repository below them is reached by relative names only
      -- (an existing hook opened for writing: without evidence, the kernel's own open)
      local walk = [[
import os, sys
os.chdir(sys.argv[1])
for i in range(25):
    n = ("d%02d" % i) + "x" * 197
    if sys.argv[2] == "make": os.mkdir(n)
    os.chdir(n)
if sys.argv[2] == "make":
    os.system("git init -q --bare repo")
    os.makedirs("repo/hooks", exist_ok=True)
    open("repo/hooks/pre-receive", "w").write("#!/bin/sh\n")
else:
    try:
        os.close(os.open("repo/hooks/pre-receive", os.O_WRONLY))
        print("PLANTED")
    except OSError as e:
        print("refused", e.errno)
]]
      assert.equals(0, luxec.run({ "python3", "-c", walk, ws, "make" }).code)
      local r = assert(luxec.run({ "python3", "-c", walk, ws, "plant" }, { cwd = ws,
        sandbox = { mode = "workspace-write", tmp = false, evidence = false } }))
      os.execute("rm -rf '" .. ws .. "/d00" .. ("x"):rep(197) .. "'")
      assert.matches("^refused 30\n", r.output) -- EROFS
      local kept
      for _, p in ipairs(r.sandbox.protected) do
        if #p > 3900 and p:sub(1, #ws + 5) == ws .. "/d00x" then kept = p end
      end
      assert.truthy(kept, "no directory near PATH_MAX kept read-only")
    end)

  it("finds a repository the host made since the last search (the search keeps what it read)",
    function()
      local paths = require("luxec.sandbox.paths")
      local racy = paths.SCAN_RACY_SECS
      paths.SCAN_RACY_SECS = 0 -- (every directory read is kept: a fresh one too)
      local fine, err = pcall(function()
        assert(uv.fs_mkdir(ws .. "/a", 493))
        jail("true") -- the search reads ws and ws/a
        local st = assert(uv.fs_stat(ws .. "/a"))
        git_init(ws .. "/a/late")
        -- the directory's modification time set back: its change time still moves
        assert(uv.fs_utime(ws .. "/a", st.atime.sec, st.mtime.sec + st.mtime.nsec / 1e9))
        local report = plant_then_commit(ws .. "/a/late/.git/hooks", ws .. "/a/late")
        assert.is_true(contains(report.protected, ws .. "/a/late/.git"))
        git_init(ws .. "/b")
        report = plant_then_commit(ws .. "/b/.git/hooks", ws .. "/b")
        assert.is_true(contains(report.protected, ws .. "/b/.git"))
      end)
      paths.SCAN_RACY_SECS = racy
      assert(fine, err)
    end)

  it("finds a repository in a tree moved over directories the last search read", function()
    assert(uv.fs_mkdir(ws .. "/a", 493))
    assert(uv.fs_mkdir(ws .. "/a/b", 493))
    assert(uv.fs_mkdir(ws .. "/a/b/c", 493))
    jail("true") -- the search reads a, a/b and a/b/c
    -- the same names, other directories: a moved away, a new a/b/c with a repository
    -- below it moved in whole; then one deeper down made in place
    local staged = ws .. ".staged"
    host("mkdir -p " .. q(staged .. "/b/c/repo"), "/")
    git_init(staged .. "/b/c/repo")
    assert(uv.fs_rename(ws .. "/a", ws .. "/old"))
    assert(uv.fs_mkdir(ws .. "/a", 493))
    assert(uv.fs_rename(staged .. "/b", ws .. "/a/b"))
    H.rmtree(staged)
    local report = plant_then_commit(ws .. "/a/b/c/repo/.git/hooks", ws .. "/a/b/c/repo")
    assert.is_true(contains(report.protected, ws .. "/a/b/c/repo/.git"))
    git_init(ws .. "/old/b/c/late")
    report = plant_then_commit(ws .. "/old/b/c/late/.git/hooks", ws .. "/old/b/c/late")
    assert.is_true(contains(report.protected, ws .. "/old/b/c/late/.git"))
  end)

  it("finds a repository in a root put in place of the last one (its parent moved)", function()
    local root = ws .. "/p/w"
    assert(uv.fs_mkdir(ws .. "/p", 493))
    assert(uv.fs_mkdir(root, 493))
    local policy = { tmp = false, workspace = root }
    local _, code = jail("true", policy) -- the search of the root is kept
    assert.equal(0, code)
    assert(uv.fs_rename(ws .. "/p", ws .. "/old"))
    assert(uv.fs_mkdir(ws .. "/p", 493))
    assert(uv.fs_mkdir(root, 493))
    git_init(root .. "/r")
    local out, _, report = jail("mkdir -p p/w/r/.git/hooks/x; echo made=$?", policy)
    assert.truthy(out:find("made=1", 1, true), out)
    assert.is_true(contains(report.protected, root .. "/r/.git"))
  end)

  it("keeps a repository under /tmp read-only when the workspace is elsewhere", function()
    local elsewhere = assert(uv.fs_mkdtemp("/var/tmp/luxec-ws-XXXXXX"))
    local tmprepo = H.tmpdir() -- (in /tmp: a writable root of workspace-write)
    git_init(tmprepo)
    local saved = ws
    ws = elsewhere
    local okc, err = pcall(plant_then_commit, tmprepo .. "/.git/hooks", tmprepo)
    ws = saved
    H.rmtree(tmprepo)
    os.execute("rm -rf " .. q(elsewhere))
    assert(okc, err)
  end)

  it("keeps a separate git dir (a .git file) and the file itself read-only", function()
    local gitdir = ws .. "/store.git"
    local wt = ws .. "/wt"
    local out, code = host("git init -q --separate-git-dir " .. q(gitdir) .. " " .. q(wt)
      .. " && cd " .. q(wt) .. " && git commit -q --allow-empty -m init", "/")
    assert(code == 0, out)
    local before = read_file(wt .. "/.git")
    local report = plant_then_commit(gitdir .. "/hooks", wt)
    assert.is_true(contains(report.protected, gitdir))
    assert.is_true(contains(report.protected, wt .. "/.git"))
    -- the file cannot be pointed at a git directory the command made either
    jail("mkdir -p evil; printf 'gitdir: ../evil\\n' > wt/.git; mv -f wt/.git wt/x; true")
    assert.equal(before, read_file(wt .. "/.git"))
  end)

  it("keeps a linked worktree's git dir and its common dir read-only", function()
    local wt = ws .. "/linked"
    local out, code = host("git worktree add -q " .. q(wt), ws)
    assert(code == 0, out)
    local report = plant_then_commit(ws .. "/.git/hooks", wt)
    assert.is_true(contains(report.protected, wt .. "/.git"))
  end)

  it("keeps the core.hooksPath directory read-only (relative to the worktree)", function()
    assert(uv.fs_mkdir(ws .. "/githooks", 493))
    local out, code = host("git config core.hooksPath githooks", ws)
    assert(code == 0, out)
    local report = plant_then_commit(ws .. "/githooks", ws)
    assert.is_true(contains(report.protected, ws .. "/githooks"))
  end)

  it("keeps the files the repository's configured commands run read-only (fsmonitor, a "
    .. "filter's script, an alias's script): the host's git runs nothing the command wrote",
    function()
      assert(uv.fs_mkdir(ws .. "/tools", 493))
      write_file(ws .. "/tools/clean.py", "import sys\nsys.stdout.write(sys.stdin.read())\n")
      local out, code = host("git config core.fsmonitor ./tools/fsmon.sh"
        .. " && git config filter.strip.clean 'python3 tools/clean.py'"
        .. " && git config alias.go '!sh scripts/go.sh'", ws)
      assert(code == 0, out)
      local touch = "#!/bin/sh\ntouch " .. marker .. "\n"
      local _, _, report = jail(("mkdir -p scripts; for f in tools/fsmon.sh scripts/go.sh; do "
        .. "printf %s > $f; chmod +x $f; done; printf 'open(%s, \"w\")\\n' > tools/clean.py; "
        .. "true"):format(q(touch), q(q(marker))))
      assert.is_nil(uv.fs_stat(ws .. "/tools/fsmon.sh"))
      assert.is_nil(uv.fs_stat(ws .. "/scripts/go.sh"))
      assert.equal("import sys\nsys.stdout.write(sys.stdin.read())\n",
        read_file(ws .. "/tools/clean.py"))
      assert.is_true(contains(report.protected, ws .. "/tools"))
      -- what the host's git then runs: the fsmonitor (status), the filter (add), the alias
      write_file(ws .. "/f.txt", "x\n")
      write_file(ws .. "/.gitattributes", "f.txt filter=strip\n")
      host("git status --short; git add f.txt; git go", ws)
      assert.is_nil(uv.fs_stat(marker))
    end)

  it("refuses to move a directory above a protected path or a secret, and openat2 is not "
    .. "there (its flags are in memory another thread can change)", function()
      assert(uv.fs_mkdir(ws .. "/tools", 493))
      write_file(ws .. "/tools/fsmon.sh", "#!/bin/sh\nexit 1\n")
      local out, code = host("git config core.fsmonitor ./tools/fsmon.sh", ws)
      assert(code == 0, out)
      assert(uv.fs_mkdir(ws .. "/home", 493))
      assert(uv.fs_mkdir(ws .. "/home/.ssh", 448))
      write_file(ws .. "/home/.ssh/id_ed25519", "SECRET-KEY\n")
      write_file(ws .. "/home/.bashrc", "# rc\n")
      local said, _, report = jail("mv tools t2; mkdir -p x/y; mv x z; python3 -c 'import ctypes, "
        .. "os; l = ctypes.CDLL(None, use_errno=True); print(\"openat2\", l.syscall(437, -100, "
        .. "b\".mcp.json\", b\"\\0\" * 24, 24), os.strerror(ctypes.get_errno()))'",
        nil, { env = { HOME = ws .. "/home", PATH = os.getenv("PATH") } })
      local rep2 = select(3, jail("mv home home.old; true", nil,
        { env = { HOME = ws .. "/home", PATH = os.getenv("PATH") } }))
      assert.equal("#!/bin/sh\nexit 1\n", read_file(ws .. "/tools/fsmon.sh"))
      assert.equal("SECRET-KEY\n", read_file(ws .. "/home/.ssh/id_ed25519"))
      assert.is_nil(uv.fs_stat(ws .. "/t2"))
      assert.is_nil(uv.fs_stat(ws .. "/home.old"))
      assert.is_not_nil(uv.fs_stat(ws .. "/z/y")) -- (an unprotected directory moves)
      assert.matches("openat2 %-1 Function not implemented", said)
      assert.is_nil(uv.fs_stat(ws .. "/.mcp.json"))
      local found = {}
      for _, d in ipairs(report.denials) do found[d.op .. " " .. d.path] = d.error end
      for _, d in ipairs(rep2.denials) do found[d.op .. " " .. d.path] = d.error end
      assert.equal("EBUSY", found["rename " .. ws .. "/tools"])
      assert.equal("EBUSY", found["rename " .. ws .. "/home"])
    end)

  it("keeps a config file the repository includes read-only", function()
    write_file(ws .. "/shared.gitconfig", "[user]\n\tname = t\n")
    local out, code = host("git config include.path ../shared.gitconfig", ws)
    assert(code == 0, out)
    jail(("printf '[core]\\n\\tfsmonitor = touch %s\\n' >> shared.gitconfig; true"):format(
      q(marker)))
    assert.equal("[user]\n\tname = t\n", read_file(ws .. "/shared.gitconfig"))
    host("git status --short", ws)
    assert.is_nil(uv.fs_stat(marker))
  end)

  it("keeps a bare repository in the workspace read-only", function()
    local out, code = host("git init -q --bare " .. q(ws .. "/origin.git"), "/")
    assert(code == 0, out)
    local _, _, report = jail("echo x > origin.git/hooks/pre-receive; true")
    assert.is_nil(uv.fs_stat(ws .. "/origin.git/hooks/pre-receive"))
    assert.is_true(contains(report.protected, ws .. "/origin.git"))
  end)

  it("spawns when .git is a symlink, and keeps its target read-only", function()
    local real = ws .. "/realgit"
    local out, code = host("git init -q --separate-git-dir " .. q(real) .. " " .. q(ws
      .. "/linked") .. " && rm linked/.git && ln -s ../realgit linked/.git", ws)
    assert(code == 0, out)
    local o, c, report = jail("cd linked && echo ok && echo x > .git/config; true")
    assert.equal(0, c)
    assert.truthy(o:find("ok\n", 1, true), o)
    assert.truthy(o:find("Read-only file system", 1, true), o)
    assert.is_true(contains(report.protected, real))
    local listed = false
    for _, u in ipairs(report.unprotected) do
      if u.path == ws .. "/linked/.git" then listed = true end
    end
    assert.is_true(listed)
  end)

  it("spawns when .git is a file naming nothing, and keeps the file", function()
    assert(uv.fs_mkdir(ws .. "/odd", 493))
    write_file(ws .. "/odd/.git", "not a gitdir line\n")
    local o, c, report = jail("cd odd && echo ok && echo x > .git; true")
    assert.equal(0, c)
    assert.truthy(o:find("ok\n", 1, true), o)
    assert.equal("not a gitdir line\n", read_file(ws .. "/odd/.git"))
    assert.is_true(contains(report.protected, ws .. "/odd/.git"))
  end)

  it("lets git status work inside; git commit fails cleanly and changes nothing", function()
    write_file(ws .. "/new.txt", "x\n")
    local head_before = read_file(ws .. "/.git/HEAD")
    local log_before = host("git log --oneline | wc -l", ws)
    local env = { PATH = os.getenv("PATH"), HOME = os.getenv("HOME"), GIT_AUTHOR_NAME = "t",
      GIT_AUTHOR_EMAIL = "t@t", GIT_COMMITTER_NAME = "t", GIT_COMMITTER_EMAIL = "t@t" }
    local out, code = jail("git status --short", nil, { env = env })
    assert.equal(0, code, out)
    assert.equal("?? new.txt\n", out)
    out, code = jail("git add new.txt && git commit -q -m inside", nil, { env = env })
    assert.are_not.equal(0, code)
    assert.truthy(out:find("index.lock", 1, true) and out:find("Read-only file system", 1, true),
      out)
    assert.equal(head_before, read_file(ws .. "/.git/HEAD"))
    assert.equal(log_before, (host("git log --oneline | wc -l", ws)))
    assert.is_nil(uv.fs_stat(ws .. "/.git/index.lock"))
  end)

  it("keeps the protect list read-only, and a missing entry's existing parent", function()
    write_file(ws .. "/.mcp.json", '{"mcpServers": {}}\n')
    assert(uv.fs_mkdir(ws .. "/.claude", 493))
    write_file(ws .. "/.claude/settings.json", "{}\n")
    assert(uv.fs_mkdir(ws .. "/.vscode", 493))
    local out, code, report = jail("echo '{\"mcpServers\":{\"x\":{}}}' > .mcp.json; "
      .. "echo '{\"hooks\":1}' > .claude/settings.json; mkdir .claude/commands; "
      .. "echo '{}' > .vscode/tasks.json; rm -f .mcp.json; mv .claude gone; echo done")
    assert.equal(0, code)
    assert.truthy(out:find("done\n", 1, true), out)
    assert.equal('{"mcpServers": {}}\n', read_file(ws .. "/.mcp.json"))
    assert.equal("{}\n", read_file(ws .. "/.claude/settings.json"))
    assert.is_nil(uv.fs_stat(ws .. "/.claude/commands"))
    assert.is_nil(uv.fs_stat(ws .. "/.vscode/tasks.json"))
    assert.is_nil(uv.fs_stat(ws .. "/gone"))
    for _, p in ipairs({ "/.mcp.json", "/.claude", "/.vscode" }) do
      assert.is_true(contains(report.protected, ws .. p), p)
    end
  end)

  it("refuses to make any default protected single name, at the top or in a subdirectory "
    .. "(editors', agents' and tool managers' files the host runs later)", function()
    local names = {}
    for _, e in ipairs(require("luxec.sandbox.paths").DEFAULT_PROTECT) do
      if not e:find("/", 1, true) then names[#names + 1] = e end
    end
    for _, n in ipairs({ ".devcontainer", "mise.toml", ".tool-versions", ".aider.conf.yml",
      ".run", ".windsurf" }) do
      assert.is_true(contains(names, n), n)
    end
    local script = { "mkdir -p sub" }
    for _, n in ipairs(names) do
      script[#script + 1] = ("echo x > %s; mkdir %s; echo x > sub/%s"):format(q(n), q(n), q(n))
    end
    jail(table.concat(script, " 2>/dev/null; ") .. " 2>/dev/null; true")
    for _, n in ipairs(names) do
      assert.is_nil(uv.fs_lstat(ws .. "/" .. n), n)
      assert.is_nil(uv.fs_lstat(ws .. "/sub/" .. n), "sub/" .. n)
    end
  end)

  it("keeps an existing protected name read-only in any subdirectory, and in /tmp (what a "
    .. "client started there reads), also one the host made since the last spawn", function()
    local dirs = { ws .. "/sub", ws .. "/a/b/c" }
    for _, d in ipairs(dirs) do
      assert(os.execute("mkdir -p " .. q(d .. "/.claude") .. " " .. q(d .. "/.vscode")))
      write_file(d .. "/.claude/settings.json", "orig\n")
      write_file(d .. "/.envrc", "orig\n")
      write_file(d .. "/mise.toml", "orig\n")
    end
    local tmp = H.tmpdir()
    finally(function() H.rmtree(tmp) end)
    write_file(tmp .. "/.mcp.json", "orig\n")
    local script = {}
    for _, d in ipairs({ "sub", "a/b/c" }) do
      for _, f in ipairs({ ".claude/settings.json", ".envrc", "mise.toml" }) do
        script[#script + 1] = ("echo PWNED > %s/%s"):format(d, f)
      end
      script[#script + 1] = ("echo x > %s/.vscode/tasks.json; mv %s/.vscode %s/vs.old")
        :format(d, d, d)
    end
    script[#script + 1] = ("echo PWNED > %s/.mcp.json; rm -f %s/.mcp.json"):format(q(tmp), q(tmp))
    local function check(report)
      for _, d in ipairs(dirs) do
        for _, f in ipairs({ "/.claude/settings.json", "/.envrc", "/mise.toml" }) do
          assert.equal("orig\n", read_file(d .. f), d .. f)
        end
        assert.is_nil(uv.fs_stat(d .. "/.vscode/tasks.json"))
        assert.is_nil(uv.fs_stat(d .. "/vs.old"))
        for _, p in ipairs({ "/.claude", "/.vscode", "/.envrc", "/mise.toml" }) do
          assert.is_true(contains(report.protected, d .. p), d .. p)
        end
      end
      assert.equal("orig\n", read_file(tmp .. "/.mcp.json"))
      -- each write is refused by the mount (EROFS), and recorded
      local refused = {}
      for _, d in ipairs(report.denials) do refused[d.op .. " " .. d.path] = d.error end
      assert.equal("EROFS", refused["open " .. ws .. "/a/b/c/.envrc"])
      assert.equal("EROFS", refused["open " .. tmp .. "/.mcp.json"])
      assert.equal("EBUSY", refused["unlink " .. tmp .. "/.mcp.json"])
    end
    local _, _, report = jail(table.concat(script, " 2>/dev/null; ") .. " 2>/dev/null; true")
    check(report)
    -- the host makes one more where the last search found none: the next session keeps it
    write_file(ws .. "/a/.envrc", "orig\n")
    _, _, report = jail("echo PWNED > a/.envrc; true")
    assert.equal("orig\n", read_file(ws .. "/a/.envrc"))
    assert.is_true(contains(report.protected, ws .. "/a/.envrc"))
    -- and one it removed is no longer reported (its name stays reserved)
    assert(os.remove(ws .. "/a/.envrc"))
    _, _, report = jail("echo x > a/.envrc 2>/dev/null; true")
    assert.is_nil(uv.fs_stat(ws .. "/a/.envrc"))
    assert.is_false(contains(report.protected, ws .. "/a/.envrc"))
  end)

  it("reserves a missing protected name, and protect = false clears the list",
    function()
      local _, _, report = jail("true")
      assert.is_true(contains(report.reserved, ws .. "/.mcp.json"))
      assert.is_true(contains(report.reserved, ".mcp.json"))
      assert.is_true(contains(report.reserved, ".git"))
      for _, u in ipairs(report.unprotected) do
        assert.is_nil(u.path:find(ws, 1, true), u.path .. ": " .. u.reason)
      end
      write_file(ws .. "/.mcp.json", "{}\n")
      jail("echo changed > .mcp.json", { protect = false })
      assert.equal("changed\n", read_file(ws .. "/.mcp.json"))
      jail("echo again > extra.cfg; echo x > .mcp.json", { protect = { defaults = false,
        "extra.cfg" } })
      assert.equal("x\n", read_file(ws .. "/.mcp.json"))
      write_file(ws .. "/extra.cfg", "kept\n")
      jail("echo again > extra.cfg", { protect = { "extra.cfg" } })
      assert.equal("kept\n", read_file(ws .. "/extra.cfg"))
    end)

  it("keeps the MCP server's config file read-only in the sandbox it configures", function()
    local file = ws .. "/.luxec-mcp.lua"
    write_file(file, "return { sandbox = { mode = 'workspace-write' } }\n")
    -- (the sandbox the engine gives a call: the config's, with the engine's protect list)
    local function policy_of(cfg)
      local e = config.engine_config(cfg)
      return require("luxec.engine.call").sandbox(e.sandbox, ws, {}, nil, e.protect)
    end
    local cfg = assert(config.load(file))
    local policy = policy_of(cfg)
    local r = assert(luxec.run({ "sh", "-c", "echo 'return {sandbox = false}' > .luxec-mcp.lua;"
      .. " echo rc=$?" }, { cwd = ws, sandbox = policy }))
    assert.truthy(r.output:find("rc=[12]"), r.output)
    assert.equal("return { sandbox = { mode = 'workspace-write' } }\n", read_file(file))
    -- also with a config that clears the default list
    write_file(file, "return { sandbox = { mode = 'workspace-write', protect = false } }\n")
    cfg = assert(config.load(file))
    policy = policy_of(cfg)
    luxec.run({ "sh", "-c", "echo 'return {sandbox = false}' > .luxec-mcp.lua" },
      { cwd = ws, sandbox = policy })
    assert.equal("return { sandbox = { mode = 'workspace-write', protect = false } }\n",
      read_file(file))
  end)

  it("masks deny_read secrets: the key's text never reaches the output", function()
    local home = H.tmpdir()
    assert(uv.fs_mkdir(home .. "/.ssh", 448))
    write_file(home .. "/.ssh/id_ed25519", "SECRET-KEY-MATERIAL\n", 384)
    assert(uv.fs_mkdir(home .. "/.aws", 448))
    write_file(home .. "/.aws/credentials", "AWS-SECRET\n")
    write_file(home .. "/.netrc", "machine x password NETRC-SECRET\n")
    write_file(home .. "/.bash_history", "export TOKEN=HISTORY-SECRET\n")
    write_file(home .. "/notes.txt", "readable\n")
    local env = { PATH = os.getenv("PATH"), HOME = home }
    local out, code, report = jail("cat ~/.ssh/id_ed25519 ~/.aws/credentials ~/.netrc "
      .. "~/.bash_history; ls -A ~/.ssh; cat ~/notes.txt; echo x > ~/.netrc; echo end", nil,
      { env = env })
    assert.equal(0, code)
    for _, secret in ipairs({ "SECRET-KEY", "AWS-SECRET", "NETRC-SECRET", "HISTORY-SECRET" }) do
      assert.falsy(out:find(secret, 1, true), out)
    end
    assert.truthy(out:find("readable\n", 1, true), out)
    assert.truthy(out:find("end\n", 1, true), out)
    assert.equal("machine x password NETRC-SECRET\n", read_file(home .. "/.netrc"))
    for _, p in ipairs({ "/.ssh", "/.aws", "/.netrc", "/.bash_history" }) do
      assert.is_true(contains(report.masked, home .. p), p)
    end
    assert.is_false(contains(report.masked, home .. "/notes.txt"))
    -- a glob of the policy's own, and deny_read = false
    out = jail("cat ~/notes.txt", { deny_read = { "~/no*.txt" } }, { env = env })
    assert.equal("", out)
    out = jail("cat ~/.netrc", { deny_read = false }, { env = env })
    assert.equal("machine x password NETRC-SECRET\n", out)
    H.rmtree(home)
  end)

  it("reserves what a dangling symlink at a protected or deny_read name would lead to "
    .. "(the host would run or write what a command made there)", function()
    assert(uv.fs_mkdir(ws .. "/sub", 493))
    assert(uv.fs_symlink("../envrc.local", ws .. "/sub/.envrc"))
    assert(uv.fs_symlink("claude/real", ws .. "/.claude")) -- (its directory is missing too)
    assert(uv.fs_symlink("mise.hop", ws .. "/mise.toml")) -- a chain: link, link, nothing
    assert(uv.fs_symlink("mise.local", ws .. "/mise.hop"))
    assert(uv.fs_symlink(ws .. "/pg.target", ws .. "/pg.secret"))
    -- HOME in the workspace: ~/.bashrc of a dotfile manager whose file is not made yet
    local env = { PATH = os.getenv("PATH"), HOME = ws .. "/home" }
    assert(uv.fs_mkdir(ws .. "/home", 493))
    assert(uv.fs_symlink("dotfiles/bashrc", ws .. "/home/.bashrc"))
    local made = { "envrc.local", "claude", "mise.local", "pg.target", "home/dotfiles" }
    local out, code, report = jail("echo x > envrc.local; mkdir -p claude/real; "
      .. "echo x > mise.local; touch pg.target; mkdir -p ~/dotfiles; "
      .. "echo x > sub/.envrc; echo x > mise.toml; echo x > pg.secret; echo end",
      { deny_read = { ws .. "/pg.secret" } }, { env = env })
    assert.equal(0, code, out)
    assert.truthy(out:find("end\n", 1, true), out)
    for _, m in ipairs(made) do
      assert.is_nil(uv.fs_lstat(ws .. "/" .. m), m)
      assert.is_true(contains(report.reserved, ws .. "/" .. m), m)
    end
    -- each refusal recorded (EACCES: a reserved name), and the links named as replaceable
    local refused = {}
    for _, d in ipairs(report.denials) do refused[d.path] = d.error end
    for _, m in ipairs({ "envrc.local", "claude", "mise.local", "pg.target", "home/dotfiles" }) do
      assert.equal("EACCES", refused[ws .. "/" .. m], m)
    end
    local said = {}
    for _, u in ipairs(report.unprotected) do said[u.path] = u.reason end
    for _, l in ipairs({ "/sub/.envrc", "/.claude", "/mise.toml", "/home/.bashrc" }) do
      assert.matches("a symlink to a missing path", said[ws .. l] or "", 1, true)
    end
  end)

  it("leaves the workspace writable when it is HOME and ~/.gitconfig is missing", function()
    local env = { PATH = os.getenv("PATH"), HOME = ws }
    local out, code, report = jail("echo x > file && cat file", nil, { env = env })
    assert.equal(0, code, out)
    assert.equal("x\n", out)
    assert.is_false(contains(report.protected, ws))
  end)

  it("refuses a deny_read entry that would hide a writable root", function()
    assert.has_error(function()
      sandbox.resolve({ mode = "workspace-write", deny_read = { ws } }, ws)
    end, ("bad sandbox policy: deny_read entry %q would hide the writable root %s"):format(ws, ws))
  end)

  it("fails closed when the repository search exceeds its bound, naming it", function()
    for i = 1, 5 do git_init(ws .. "/r" .. i) end
    local okr, err = pcall(sandbox.resolve, { mode = "workspace-write", tmp = false,
      git_scan = { repos = 3 } }, ws)
    assert.is_false(okr)
    assert.truthy(tostring(err):find("found more than 3 repositories", 1, true), err)
    assert.truthy(tostring(err):find("git_scan.repos", 1, true), err)
    local o = assert(luxec.spawn({ "true" }, { cwd = ws, sandbox = { mode = "workspace-write",
      tmp = false, git_scan = { repos = 10 } } }))
    assert.equal(0, assert(o:wait({ timeout = 10 })).code)
    o:close()
  end)
end)

describe("sandbox policy: protect, deny_read, git_scan", function()
  local ws
  before_each(function() ws = H.tmpdir() end)
  after_each(function() H.rmtree(ws) end)

  local function err_of(policy)
    local okr, err = pcall(sandbox.resolve, policy, ws)
    assert.is_false(okr)
    return err
  end

  it("names the key of each bad value", function()
    local W = "workspace-write"
    assert.equal("bad sandbox policy: 'protect' must be false or a list of paths (with "
      .. "defaults = false to replace the default list), got string",
      err_of({ mode = W, protect = "x" }))
    assert.equal("bad sandbox policy: protect[2] must be a non-empty string, got number",
      err_of({ mode = W, protect = { "a", 3 } }))
    assert.equal("bad sandbox policy: unknown key 'protect.extra' (a list of paths, and "
      .. "defaults = false)", err_of({ mode = W, protect = { extra = {} } }))
    assert.equal("bad sandbox policy: protect[1] contains '..': \"../x\"",
      err_of({ mode = W, protect = { "../x" } }))
    assert.equal("bad sandbox policy: protect[1] is a path, not a glob: \"*.json\"",
      err_of({ mode = W, protect = { "*.json" } }))
    assert.equal("bad sandbox policy: 'deny_read.defaults' must be a boolean, got string",
      err_of({ mode = W, deny_read = { defaults = "no" } }))
    assert.equal("bad sandbox policy: deny_read[1] must be absolute or start with ~/, got "
      .. "\"secrets\"", err_of({ mode = W, deny_read = { "secrets" } }))
    assert.equal("bad sandbox policy: deny_read[1] has an unmatched '[' or ']': \"/x[ab\"",
      err_of({ mode = W, deny_read = { "/x[ab" } }))
    assert.equal("bad sandbox policy: unknown key 'git_scan.width' (depth, dirs, repos)",
      err_of({ mode = W, git_scan = { width = 1 } }))
    assert.equal("bad sandbox policy: 'git_scan.depth' must be a non-negative integer, got -1",
      err_of({ mode = W, git_scan = { depth = -1 } }))
    assert.equal("bad sandbox policy: 'deny_read' needs mode \"read-only\" or "
      .. "\"workspace-write\" (a full-access session has no mount namespace)",
      err_of({ mode = "full-access", deny_read = { "/x" } }))
  end)

  it("makes /dev/shm a writable root when TMPDIR is unset", function()
    local saved = os.getenv("TMPDIR")
    local spec
    if saved then
      -- os.getenv cannot be unset from Lua: run the check in a child without TMPDIR
      local r = assert(luxec.run({ H.luxec, "-e", "local s = require('luxec.sandbox')"
        .. ".resolve({mode='workspace-write', tmp=true}, '/') for _, r in ipairs(s.roots) do "
        .. "print(r) end" }, { env = { PATH = os.getenv("PATH"), HOME = os.getenv("HOME") } }))
      assert.truthy(r.output:find("/dev/shm\n", 1, true), r.output)
      return
    end
    spec = sandbox.resolve({ mode = "workspace-write" }, ws)
    local found = false
    for _, r in ipairs(spec.roots) do
      if r == uv.fs_realpath("/dev/shm") then found = true end
    end
    assert.is_true(found)
  end)
end)
