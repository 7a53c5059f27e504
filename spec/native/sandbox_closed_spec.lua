-- A normal user's luxec host searches the writable roots with that user's permissions, and
-- keeps what it read between the spawns of one process (a long-running server). A session
-- that takes the permission away from a directory it owns, after an earlier search read it,
-- must not make the next search pass over what is in it: the next spawn fails, naming it
-- (the session would give the permission back and write a hook git runs on the host).
local H = require("helper")
local luxec = require("luxec")
local uv = require("luv")

local NOBODY = 65534

local TWO_SESSIONS = [[
local luxec = require("luxec")
local ws = arg[1]
local policy = { mode = "workspace-write", network = "deny" }
local r1 = assert(luxec.run({ "sh", "-c", "echo x > p2/.githooks/pre-commit; chmod 000 p2; " ..
  "echo first" }, { cwd = ws, sandbox = policy }))
io.write(r1.output)
local ok, r2 = pcall(luxec.run, { "sh", "-c", "chmod 755 p2; " ..
  "echo planted > p2/.githooks/pre-commit; echo second" }, { cwd = ws, sandbox = policy })
print(ok and ("STARTED " .. r2.output) or ("REFUSED " .. tostring(r2)))
]]

describe("a directory a session made unreadable, in one host", function()
  if H.skip_without_sandbox() then return end
  local root = math.tointeger(uv.getuid()) == 0
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(function()
    luxec.run({ "chmod", "-R", "u+rwx", dir })
    H.rmtree(dir)
    H.assert_clean()
  end)

  it("fails the next spawn of a normal user's host, naming it; the hook is not written",
    function()
      local ws = dir .. "/ws"
      local env = { PATH = "/usr/local/bin:/usr/bin:/bin", HOME = dir }
      assert(uv.fs_mkdir(ws, 493))
      for _, argv in ipairs({ { "git", "init", "-q", ws .. "/p2" },
        { "git", "-C", ws .. "/p2", "config", "core.hooksPath", ".githooks" },
        { "mkdir", ws .. "/p2/.githooks" } }) do
        assert.equals(0, luxec.run(argv, { env = env }).code)
      end
      H.write_file(dir .. "/two.lua", TWO_SESSIONS)
      local argv = { H.luxec, dir .. "/two.lua", ws }
      if root then
        assert.equals(0, luxec.run({ "chown", "-R", NOBODY .. ":" .. NOBODY, dir }).code)
        assert.equals(0, luxec.run({ "chmod", "a+rx", dir }).code)
        argv = { "setpriv", "--reuid=" .. NOBODY, "--regid=" .. NOBODY, "--clear-groups",
          table.unpack(argv) }
      end
      local r = luxec.run(argv, { env = env, timeout = 120 })
      assert.matches("first\n", r.output)
      assert.matches("REFUSED [^\n]*the host may not read or search " .. (ws .. "/p2"):gsub("%p",
        "%%%0") .. " ", r.output)
      luxec.run({ "chmod", "755", ws .. "/p2" })
      assert.is_nil(uv.fs_stat(ws .. "/p2/.githooks/pre-commit"))
    end)
end)
