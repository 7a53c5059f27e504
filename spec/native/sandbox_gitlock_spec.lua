-- The names that complete a git directory (HEAD, objects, refs, commondir) are looked at and
-- made under a lock of the directory they are made in: its flock (every host's sessions) and
-- a mutex of that directory (this host's). A sandboxed process can hold that flock (any
-- process that can read a directory can): it delays only the calls that make those names in
-- that directory, never another directory's (another session's), and the call it delays is
-- answered for what it is: refused EAGAIN and recorded so when it would not complete a git
-- directory, EACCES when it would. Decided by the order of events, not by a clock.
local H = require("helper")
local uv = require("luv")
local luxec = require("luxec")

local EV = H.fixture("evidence")

local list = require("lib.records").list

describe("sandbox: a git directory's names are made under a lock of that directory", function()
  if H.skip_without_sandbox() then return end

  local root
  before_each(function()
    root = assert(uv.fs_realpath(H.tmpdir()))
    assert(uv.fs_mkdir(root .. "/locked", 493))
    assert(uv.fs_mkdir(root .. "/other", 493))
  end)
  after_each(function()
    H.rmtree(root)
    H.assert_clean()
  end)

  local function policy()
    return { mode = "workspace-write", network = "deny", workspace = root }
  end

  local function finish(p)
    local st = assert(p:wait({ timeout = 20 }))
    local out = p:read()
    p:close()
    return out, st.sandbox
  end

  -- Session A holds the flock of locked/ and makes locked/objects (its call waits while
  -- the flock is held: by A itself); session B, started before, makes other/objects once A
  -- holds it. Both append to one log when their mkdir returned: B's must come first.
  local function race(log)
    local b = assert(luxec.spawn({ "sh", "-c", "read go; mkdir other/objects; echo \"B $?\" >> "
      .. log }, { cwd = root, sandbox = policy() }))
    local a = assert(luxec.spawn({ EV, "lockmkdir", root .. "/locked", "objects", log },
      { cwd = root, sandbox = policy() }))
    H.wait_output(a, "locked\n", 10000, "session A holding the flock")
    b:write("go\n")
    local bout, breport = finish(b)
    local aout, areport = finish(a)
    return H.read_file(log), aout, areport, bout, breport
  end

  it("another directory's name is made while one directory's flock is held", function()
    -- (A's call waits 0.2 s at most: a machine that stalls B longer lets A's return come
    -- first; three rounds)
    local got
    for i = 1, 3 do
      local log = root .. "/log" .. i
      local text, aout, areport, _, breport = race(log)
      got = text
      assert.equals("locked\nEAGAIN", aout:gsub("\n$", ""))
      -- A's refusal is said for what it is: the directory was locked, no reserved name
      assert(#areport.denials == 1, list(areport))
      local d = areport.denials[1]
      assert.same({ "mkdir", root .. "/locked/objects", "EAGAIN" }, { d.op, d.path, d.error })
      assert(#breport.denials == 0, list(breport))
      assert.is_nil(uv.fs_lstat(root .. "/locked/objects"))
      assert.is_truthy(uv.fs_lstat(root .. "/other/objects"))
      if text == "B 0\nA EAGAIN\n" then break end
      assert(uv.fs_rmdir(root .. "/other/objects"))
    end
    assert.equals("B 0\nA EAGAIN\n", got)
  end)

  it("a name that would complete the locked directory is refused EACCES", function()
    H.write_file(root .. "/locked/HEAD", "ref: refs/heads/main\n")
    assert(uv.fs_mkdir(root .. "/locked/refs", 493))
    local p = assert(luxec.spawn({ EV, "lockmkdir", root .. "/locked", "objects" },
      { cwd = root, sandbox = policy() }))
    local out, report = finish(p)
    assert.equals("locked\nEACCES\n", out)
    assert(#report.denials == 1, list(report))
    local d = report.denials[1]
    assert.same({ "mkdir", root .. "/locked/objects", "EACCES" }, { d.op, d.path, d.error })
    assert.is_nil(uv.fs_lstat(root .. "/locked/objects"))
  end)

  it("without a holder, the names are made and the directory's lock is let go", function()
    local out, report = finish(assert(luxec.spawn({ "sh", "-c",
      "mkdir locked/objects locked/refs && " .. EV .. " lockmkdir locked x" },
      { cwd = root, sandbox = policy() })))
    assert.equals("locked\nok\n", out)
    assert(#report.denials == 0, list(report))
  end)
end)
