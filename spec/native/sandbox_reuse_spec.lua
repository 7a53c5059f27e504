-- A resolved sandbox policy is kept for the next spawn (luxec.sandbox.deps) only while what it
-- looked at stays the same: a repository, a `.git` file, a hooks directory, a protected file
-- or a secret the host makes between two spawns is protected or masked at the next one. Each
-- case spawns twice first (the second spawn uses the kept policy), changes the tree on the
-- host, and decides from outside: the host's git runs no planted hook, the file on the host is
-- unchanged, the secret is not in the output.
local H = require("helper")
local uv = require("luv")
local luxec = require("luxec")

local write_file, read_file = H.write_file, H.read_file
local function q(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

local function host(script, cwd)
  local r = assert(luxec.run({ "sh", "-c", script }, { cwd = cwd, timeout = 30,
    env = { PATH = os.getenv("PATH"), HOME = os.getenv("HOME"), GIT_CONFIG_NOSYSTEM = "1",
      GIT_AUTHOR_NAME = "t", GIT_AUTHOR_EMAIL = "t@t", GIT_COMMITTER_NAME = "t",
      GIT_COMMITTER_EMAIL = "t@t" } }))
  return r.output, r.code
end

local function git(args, cwd)
  local out, code = host("git " .. args, cwd or "/")
  assert(code == 0, out)
end

describe("a kept sandbox policy (changes on the host between two spawns)", function()
  local ok, why = H.sandbox_usable()
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
    git("init -q " .. q(ws) .. " && cd " .. q(ws) .. " && git commit -q --allow-empty -m i")
  end)
  after_each(function()
    H.rmtree(ws)
    os.remove(marker)
    H.assert_clean()
  end)

  local function jail(script, policy, opts)
    local sb = { mode = "workspace-write" }
    for k, v in pairs(policy or {}) do sb[k] = v end
    local o = { cwd = ws, sandbox = sb, timeout = 20 }
    for k, v in pairs(opts or {}) do o[k] = v end
    local r = assert(luxec.run({ "sh", "-c", script }, o))
    return r.output, r.code, r.sandbox
  end

  -- two spawns of the policy: the second one's is the kept one
  local function warm(policy, opts)
    jail("true", policy, opts)
    jail("true", policy, opts)
  end

  local function plant_then_commit(hookdir, repo)
    local script = ("mkdir -p %s; printf '#!/bin/sh\\ntouch %s\\n' > %s/pre-commit; "
      .. "chmod +x %s/pre-commit; echo planted=$?"):format(q(hookdir), q(marker), q(hookdir),
      q(hookdir))
    local out, code = jail(script)
    assert.equal(0, code)
    assert.truthy(out:find("planted=1", 1, true) or out:find("planted=2", 1, true), out)
    git("commit -q --allow-empty -m host", repo)
    assert.is_nil(uv.fs_stat(marker), "the planted hook ran")
  end

  it("protects a repository made since the last spawn", function()
    warm()
    git("init -q " .. q(ws .. "/late"))
    git("commit -q --allow-empty -m i", ws .. "/late")
    plant_then_commit(ws .. "/late/.git/hooks", ws .. "/late")
  end)

  it("protects a repository in a directory the host could not read at the last spawn",
    function()
      -- (a normal user's host cannot list a directory of mode 000 of its own: its spawn
      -- fails, naming it, until the mode is given back; root's host reads it)
      assert(uv.fs_mkdir(ws .. "/locked", 0))
      assert(uv.fs_chmod(ws .. "/locked", 0))
      if math.tointeger(uv.getuid()) == 0 then
        warm()
      else
        local warmed, err = pcall(warm)
        assert.is_false(warmed)
        assert.matches("may not read or search " .. (ws .. "/locked"):gsub("%p", "%%%0"),
          tostring(err))
      end
      assert(uv.fs_chmod(ws .. "/locked", 493))
      git("init -q " .. q(ws .. "/locked/repo"))
      git("commit -q --allow-empty -m i", ws .. "/locked/repo")
      plant_then_commit(ws .. "/locked/repo/.git/hooks", ws .. "/locked/repo")
    end)

  it("protects the git dir a .git file made since the last spawn names", function()
    -- (deeper than the search goes: only the .git file leads to it)
    local deep = ws .. "/d1/d2/d3/d4/d5/d6/d7"
    assert.equal(0, os.execute("mkdir -p " .. q(deep)) and 0)
    warm()
    git("init -q --separate-git-dir=" .. q(deep .. "/sep.git") .. " " .. q(ws .. "/wt"))
    git("commit -q --allow-empty -m i", ws .. "/wt")
    plant_then_commit(deep .. "/sep.git/hooks", ws .. "/wt")
  end)

  it("protects a hooks directory the repository's config names since the last spawn",
    function()
      assert(uv.fs_mkdir(ws .. "/myhooks", 493))
      warm()
      git("config core.hooksPath myhooks", ws)
      plant_then_commit(ws .. "/myhooks", ws)
    end)

  it("protects a protected file made since the last spawn", function()
    warm()
    write_file(ws .. "/.mcp.json", '{"mcpServers": {}}\n')
    assert(uv.fs_mkdir(ws .. "/.claude", 493))
    write_file(ws .. "/.claude/settings.json", "{}\n")
    local out = jail("echo '{\"x\":1}' > .mcp.json; echo '{\"hooks\":1}' > .claude/settings.json;"
      .. " echo end")
    assert.truthy(out:find("end\n", 1, true), out)
    assert.equal('{"mcpServers": {}}\n', read_file(ws .. "/.mcp.json"))
    assert.equal("{}\n", read_file(ws .. "/.claude/settings.json"))
  end)

  it("masks a deny_read match made since the last spawn", function()
    local home = H.tmpdir()
    local env = { PATH = os.getenv("PATH"), HOME = home }
    local policy = { deny_read = { "~/token*" } }
    write_file(home .. "/token1", "FIRST-SECRET\n")
    warm(policy, { env = env })
    write_file(home .. "/token2", "SECOND-SECRET\n")
    assert(uv.fs_mkdir(home .. "/.aws", 448))
    write_file(home .. "/.aws/credentials", "AWS-SECRET\n")
    local out = jail("cat ~/token1 ~/token2 ~/.aws/credentials; echo end", policy, { env = env })
    H.rmtree(home)
    assert.truthy(out:find("end\n", 1, true), out)
    for _, secret in ipairs({ "FIRST-SECRET", "SECOND-SECRET", "AWS-SECRET" }) do
      assert.falsy(out:find(secret, 1, true), out)
    end
  end)

  it("follows a symlinked protected file retargeted since the last spawn", function()
    local other = H.tmpdir()
    write_file(other .. "/a.json", "A\n")
    write_file(other .. "/b.json", "B\n")
    assert(uv.fs_symlink(other .. "/a.json", ws .. "/.mcp.json"))
    warm()
    assert(os.remove(ws .. "/.mcp.json"))
    assert(uv.fs_symlink(other .. "/b.json", ws .. "/.mcp.json"))
    jail("echo changed > " .. q(other .. "/b.json"))
    local b = read_file(other .. "/b.json")
    H.rmtree(other)
    assert.equal("B\n", b)
  end)
end)
