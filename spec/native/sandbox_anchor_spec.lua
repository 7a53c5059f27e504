-- A session must not turn the next session's writable root, workspace, working directory,
-- TMPDIR, HOME or protected path into another place: each is looked up by its name at every
-- spawn, so a session that replaced one of them (a symlink where a directory was, a directory
-- moved away and made again) would have the host bind what it chose. Each attempt runs in
-- one session; a second session of the same policy then tries to write through the name, and
-- the verdict is taken on the host: no file appeared outside the roots, the name was not
-- replaced, and the refusal was recorded.
local H = require("helper")
local uv = require("luv")
local luxec = require("luxec")

local PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

local function q(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

local function records(res)
  local out = {}
  for _, d in ipairs(res.sandbox and res.sandbox.denials or {}) do
    out[#out + 1] = d.op .. " " .. tostring(d.path)
  end
  return table.concat(out, "\n")
end

describe("the names a spawn looks up, kept from being replaced", function()
  if H.skip_without_sandbox() then return end

  local root, outside, saved_tmpdir
  before_each(function()
    root, outside = H.workspace_and_outside()
    saved_tmpdir = os.getenv("TMPDIR")
  end)
  after_each(function()
    if saved_tmpdir then uv.os_setenv("TMPDIR", saved_tmpdir) else uv.os_unsetenv("TMPDIR") end
    H.rmtree(root)
    H.rm_outside(outside)
    H.assert_clean()
  end)

  -- One session: `script` in sh, with the policy and the environment given.
  local function session(script, policy, cwd, env)
    local e = { PATH = PATH, HOME = root }
    for k, v in pairs(env or {}) do e[k] = v end
    return assert(luxec.run({ "sh", "-c", script }, { cwd = cwd, env = e, timeout = 20,
      sandbox = policy }))
  end

  -- Nothing was made outside, and `name` is not a symlink on the host.
  local function held(name, res, res2)
    local made = {}
    for f in uv.fs_scandir_next, assert(uv.fs_scandir(outside)) do made[#made + 1] = f end
    assert.same({}, made, "made outside the roots: " .. res.output .. res2.output)
    local st = uv.fs_lstat(name)
    assert.is_true(st == nil or st.type ~= "link", name .. " was replaced by a symlink")
  end

  it("TMPDIR in /tmp: removed and made a symlink to a directory outside", function()
    local parent = root .. "/p"
    local tmpdir = parent .. "/mytmp"
    assert(uv.fs_mkdir(parent, 493))
    assert(uv.fs_mkdir(tmpdir, 493))
    local ws = root .. "/ws"
    assert(uv.fs_mkdir(ws, 493))
    uv.os_setenv("TMPDIR", tmpdir)
    local policy = { mode = "workspace-write", network = "deny" }
    local env = { TMPDIR = tmpdir }
    -- (the name itself, then the directory above it moved away and made again)
    local res = session(("rmdir %s; ln -s %s %s; mv %s %s/p2 && mkdir %s && ln -s %s %s; "
      .. "true"):format(q(tmpdir), q(outside), q(tmpdir), q(parent), q(root), q(parent),
      q(outside), q(tmpdir)), policy, ws, env)
    local res2 = session(("touch %s/owned; true"):format(q(tmpdir)), policy, ws, env)
    held(tmpdir, res, res2)
    assert.matches("symlink " .. tmpdir:gsub("%p", "%%%0"), records(res))
  end)

  it("a cwd in a configured root (protect = false): replaced by a symlink", function()
    local r = root .. "/rootR"
    local wsx = r .. "/wsX"
    assert(uv.fs_mkdir(r, 493))
    assert(uv.fs_mkdir(wsx, 493))
    local policy = { mode = "workspace-write", network = "deny", protect = false, tmp = false,
      roots = { r } }
    local res = session(("cd / && rmdir %s && ln -s %s %s; true"):format(q(wsx), q(outside),
      q(wsx)), policy, wsx)
    -- (wsX may be gone now: the second session then cannot start there)
    local ok, res2 = pcall(session, "touch owned; true", policy, wsx)
    held(wsx, res, ok and res2 or { output = "" })
    assert.matches("symlink " .. wsx:gsub("%p", "%%%0"), records(res))
  end)

  it("a cwd given through a symlink in a writable root: the link pointed elsewhere", function()
    local r = root .. "/R"
    assert(uv.fs_mkdir(r, 493))
    assert(uv.fs_mkdir(r .. "/real", 493))
    assert(uv.fs_symlink(r .. "/real", r .. "/link"))
    local policy = { mode = "workspace-write", network = "deny", protect = false, tmp = false,
      roots = { r } }
    local res = session(("cd / && rm %s/link && ln -s %s %s/link; mv %s/real %s/r2 && "
      .. "ln -s %s %s/real; true"):format(q(r), q(outside), q(r), q(r), q(r), q(outside), q(r)),
      policy, r .. "/link")
    local ok, res2 = pcall(session, "touch owned; true", policy, r .. "/link")
    held(r .. "/real", res, ok and res2 or { output = "" })
    assert.equals(r .. "/real", uv.fs_realpath(r .. "/link") or (r .. "/real"))
    assert.matches("symlink " .. (r .. "/link"):gsub("%p", "%%%0"), records(res))
  end)

  it("HOME in /tmp moved away and made again, with a program in a new ~/.local/bin", function()
    local home = root .. "/home"
    assert(uv.fs_mkdir(home, 493))
    assert(uv.fs_mkdir(home .. "/.local", 493))
    assert(uv.fs_mkdir(home .. "/.local/bin", 493))
    local ws = root .. "/ws"
    assert(uv.fs_mkdir(ws, 493))
    local policy = { mode = "workspace-write", network = "deny" }
    local script = ("mv %s %s/h2; mkdir -p %s/.local/bin; echo 'touch %s/ran' > %s/.local/bin/git;"
      .. " mv %s/h2/.local %s/h2/l2; mkdir -p %s/h2/.local/bin; true"):format(q(home), q(root),
      q(home), q(outside), q(home), q(root), q(root), q(root))
    local res = session(script, policy, ws, { HOME = home })
    -- (whichever of HOME's two names is HOME now, no git was planted in its ~/.local/bin)
    for _, h in ipairs({ home, root .. "/h2" }) do
      assert.is_nil(uv.fs_stat(h .. "/.local/bin/git"), h .. "/.local/bin/git was made")
    end
    assert.matches(home:gsub("%p", "%%%0"), records(res))
  end)
end)
