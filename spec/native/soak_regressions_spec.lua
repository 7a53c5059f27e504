--- Regressions found by the soak scripts (scripts/soak, soak/*.lua).
local H = require("helper")

describe("soak regressions", function()
  after_each(H.assert_clean)

  -- soak/mcp.lua: the server's Lua heap grew about 43 KiB a tools/call without bound (400 MiB
  -- after 10,000 calls) because subcommands ran with the collector stopped since start-up.
  it("subcommands (luxec mcp) run with the garbage collector on", function()
    local dir = H.tmpdir()
    local config = dir .. "/gc.lua"
    local f = assert(io.open(config, "w"))
    f:write('io.stderr:write("gc running: " .. tostring(collectgarbage("isrunning")) .. "\\n")\n'
      .. "return {}\n")
    f:close()
    local r = H.run({ "mcp", "--check-config", config })
    H.rmtree(dir)
    assert.equals(0, r.code, r.stderr)
    assert.matches("gc running: true", r.stderr, 1, true)
  end)
end)

describe("soak regressions: RLIMIT_NOFILE of 64 (soak/ulimit.lua)", function()
  after_each(H.assert_clean)

  local SCRIPT = [[
local luxec = require("luxec")
local uv = require("luv")
local core = require("luxec.core")
local mark = arg[1]
local p = assert(luxec.spawn({ "sh", "-c", "setsid sleep " .. mark
  .. " </dev/null >/dev/null 2>&1 & echo escapee $!; exec sleep 1000" }))
-- the escapee's pid (setsid execs sleep in the same process: it leads no process group)
while not p:snapshot().head:match("escapee %d+") and not p:finished() do
  assert(p:wait_output({ timeout = 5 }), "no output for 5 s")
end
local escapee = p:snapshot().head:match("escapee (%d+)")
-- a spawn with no descriptor free at all (no pooled cgroup either: the only one is in use)
local fill = {}
while true do
  local fd = uv.fs_open("/dev/null", "r", 0)
  if not fd then break end
  fill[#fill + 1] = fd
end
local q, _, code = luxec.spawn({ "true" })
for _, fd in ipairs(fill) do uv.fs_close(fd) end
local _, _, dir = core.cgroups()
local dirs = 0
local d = assert(uv.fs_opendir(dir, nil, 64))
for _, e in ipairs(d:readdir() or {}) do
  if e.name:match("^s%d+$") then dirs = dirs + 1 end
end
d:closedir()
-- it runs (setsid, or the sleep it becomes)
local stat = io.open("/proc/" .. tostring(escapee) .. "/stat")
if not stat then escapee = nil else stat:close() end
local f = io.open("/proc/" .. core.watchdog_pid() .. "/stat")
local state = f and f:read("a"):match("^%d+ %b() (%a)")
print(("spawn=%s code=%s dirs=%d escapee=%s watchdog=%s"):format(tostring(q), tostring(code),
  dirs, tostring(escapee), tostring(state)))
io.stdout:flush()
local _ = p
uv.kill(uv.os_getpid(), "sigkill")
]]

  it("a failed spawn leaves no session cgroup behind; the watchdog runs and still kills "
    .. "escapees when the host is SIGKILLed", function()
    local ok = H.cgroups()
    if not ok then
      pending("needs a writable cgroup2 tree")
      return
    end
    local dir = H.tmpdir()
    local script = dir .. "/host.lua"
    local f = assert(io.open(script, "w"))
    f:write(SCRIPT)
    f:close()
    local mark = ("1000.%d%d"):format(require("luv").os_getpid(), os.time() % 100000)
    local r = H.run({ cmd = "/bin/sh", "-c", 'ulimit -n 64 && exec "$0" "$@"', H.luxec, script,
      mark }, { timeout = 20000 })
    H.rmtree(dir)
    local escapee = tonumber(r.stdout:match("escapee=(%d+)"))
    local gone = escapee and pcall(H.wait_for, function() return not H.alive(escapee) end, 3000)
    if escapee and not gone then require("luv").kill(escapee, "sigkill") end
    assert.equals(9, r.signal, r.stdout .. r.stderr)
    assert.matches("spawn=nil code=EMFILE", r.stdout, 1, true)
    assert.matches("dirs=1 ", r.stdout, 1, true) -- the running session's only
    assert.is_not_nil(escapee, r.stdout)
    -- alive (running, or waiting on its pipe), not a zombie: F_DUPFD 100 failed, once
    assert.matches("watchdog=[RSD]\n", r.stdout)
    assert.is_true(gone, "the escapee survived the host's SIGKILL")
  end)
end)

describe("soak regressions: the exec engine's ids (soak/mcp.lua)", function()
  local exec = require("luxec.engine")
  local sessions = require("luxec.engine.sessions")
  local saved = { sessions.defaults.id_min, sessions.defaults.id_max }
  local engine

  after_each(function()
    sessions.defaults.id_min, sessions.defaults.id_max = saved[1], saved[2]
    if engine then engine:shutdown() end
    engine = nil
    H.assert_clean()
  end)

  -- The server's Lua heap grew about 32 bytes a command (one id kept per command, even for
  -- those that ended within the call and never showed their id), and after 99,000 commands
  -- every exec_command would fail with "no process id left".
  it("a command that ends within its first call gives its id back; ids handed out stay "
    .. "unique", function()
    sessions.defaults.id_min, sessions.defaults.id_max = 1000, 1002 -- three ids in all
    engine = exec.new({ login = false })
    local held = assert(engine:exec_command({ cmd = "sleep 30", yield_time_ms = 250 }))
    assert.is_number(held.session_id)
    for i = 1, 10 do -- more short commands than there are ids
      local r, err = engine:exec_command({ cmd = "echo " .. i })
      assert.is_nil(err)
      assert.equals(0, r.exit_code)
      assert.is_nil(r.session_id)
    end
    local second = assert(engine:exec_command({ cmd = "sleep 30", yield_time_ms = 250 }))
    assert.is_number(second.session_id)
    assert.are_not.equal(held.session_id, second.session_id)
    assert(engine:terminate(held.session_id))
    local third = assert(engine:exec_command({ cmd = "sleep 30", yield_time_ms = 250 }))
    -- a third id, never the terminated one: an id seen by a client is not reused
    assert.is_number(third.session_id)
    assert.are_not.equal(held.session_id, third.session_id)
    assert.are_not.equal(second.session_id, third.session_id)
    local r, err = engine:exec_command({ cmd = "sleep 30", yield_time_ms = 250 })
    assert.is_nil(r)
    assert.matches("no process id left", err, 1, true)
  end)
end)
