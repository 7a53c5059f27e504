-- Sessions of the default sandbox alive at the same time are apart from each other: each has
-- a network namespace of its own (none shared, none the host's: a namespace is handed to one
-- session at a time), its own /dev/shm and devpts, and a /dev no session can add to (the part
-- every session has alike is made once and cloned). A namespace serves a later session once
-- its session is gone only if nothing is left in it: one a socket outlived its session in is
-- never met again. Run as root and as a normal user (the luxec host dropped with setpriv),
-- deciding from the sessions' own reports.
local luxec = require("luxec")
local uv = require("luv")
local H = require("helper")

local ESCAPE = H.fixture("escape")
local RUNNER = H.root .. "/spec/native/apart_runner.lua"

local expected = table.concat({
  "network namespaces: 4 distinct of 4, none the host's",
  "abstract socket of another session: ECONNREFUSED: Connection refused",
  "another session's /dev/shm: []",
  "another session's /dev: fd full null ptmx pts random shm stderr stdin stdout tty urandom zero ",
  "another session's /dev/pts: ptmx ",
  "a network namespace used again after its session ended: true",
  "left a socket: ok; its namespace met again 0 times; 30 later sessions connecting: "
    .. "ECONNREFUSED: Connection refused x30",
  "",
}, "\n")

local function users()
  if math.tointeger(uv.getuid()) ~= 0 then return { { name = "this user", prefix = {} } } end
  return {
    { name = "root", prefix = {} },
    { name = "an unprivileged user (uid 65534)",
      prefix = { "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups" } },
  }
end

describe("sandboxed sessions alive at once", function()
  local usable, why = H.sandbox_usable()
  for _, user in ipairs(users()) do
    it("are apart from each other, as " .. user.name, function()
      if not usable then return pending("skipped: " .. why) end
      if #user.prefix > 0 and not H.have("setpriv") then
        return pending("skipped: setpriv (util-linux) is not installed")
      end
      local ws = H.tmpdir()
      assert(uv.fs_chmod(ws, tonumber("777", 8)))
      local argv = {}
      for _, a in ipairs(user.prefix) do argv[#argv + 1] = a end
      for _, a in ipairs({ H.luxec, RUNNER, ESCAPE, ws }) do argv[#argv + 1] = a end
      local r = luxec.run(argv, { stderr = "pipe", env = { HOME = ws, PATH = os.getenv("PATH") },
        timeout = 120 })
      H.rmtree(ws)
      assert.equals(0, r.code, r.stderr)
      assert.equals(expected, r.output)
    end)
  end
end)

-- What a host keeps ahead for its sessions (a thread as root; as a normal user a keeper
-- process, holding a user namespace and the next network namespace) ends with the host, even
-- one killed with SIGKILL: no process of it is left, and with it no namespace.
describe("what the host keeps ahead for sandboxed sessions", function()
  local usable, why = H.sandbox_usable()
  for _, user in ipairs(users()) do
    it("ends when the host is killed, as " .. user.name, function()
      if not usable then return pending("skipped: " .. why) end
      if #user.prefix > 0 and not H.have("setpriv") then
        return pending("skipped: setpriv (util-linux) is not installed")
      end
      local ws = H.tmpdir()
      assert(uv.fs_chmod(ws, tonumber("777", 8)))
      local argv = {}
      for _, a in ipairs(user.prefix) do argv[#argv + 1] = a end
      for _, a in ipairs({ H.luxec, H.root .. "/spec/native/keeper_runner.lua", ws }) do
        argv[#argv + 1] = a
      end
      local p = assert(luxec.spawn(argv, { env = { HOME = ws, PATH = os.getenv("PATH") } }))
      local out = H.wait_output(p, "host %d+ children[%d ]*\n", 60000)
      local host, kids = out:match("host (%d+) children([%d ]*)\n")
      assert.equals(p.pid, math.tointeger(tonumber(host)))
      local pids = {}
      for k in kids:gmatch("%d+") do pids[#pids + 1] = math.tointeger(tonumber(k)) end
      -- a normal user's host has its keeper (and any session's init not yet reaped)
      if #user.prefix > 0 then assert.is_true(#pids >= 1, out) end
      p:signal("KILL")
      assert(p:wait({ timeout = 10 }))
      -- (before p:close, which would end the host's whole tree itself)
      local left = {}
      local ok = pcall(H.wait_for, function()
        left = {}
        for _, k in ipairs(pids) do if H.alive(k) then left[#left + 1] = k end end
        return #left == 0
      end, 10000, "the host's children to end")
      p:close()
      H.rmtree(ws)
      assert(ok, "left running after the host was killed: " .. table.concat(left, " "))
    end)
  end
end)
