-- The watchdog of a host's sessions without a cgroup kills, when the host ends, the sessions
-- it was told of by their ids (the first process's pid, which is also the session's and the
-- group's id). An id whose session is gone may be given by the kernel to any new process: the
-- watchdog must never kill that stranger. Here a session is closed while its program runs (so
-- the host reaps it later, not through the session), its pid is handed to a new process of
-- the test's (through /proc/sys/kernel/ns_last_pid, root only), and the host then exits.
local H = require("helper")
local uv = require("luv")

local HOST = [[
  local luxec = require("luxec")
  local function sweepers()
    local set = {}
    local req = require("luv").fs_scandir("/proc")
    for name in function() return require("luv").fs_scandir_next(req) end do
      local f = tonumber(name) and io.open("/proc/" .. name .. "/comm")
      if f then
        if f:read("l") == "luxec-sweeper" then set[tonumber(name)] = true end
        f:close()
      end
    end
    return set
  end
  local before = sweepers()
  local p = assert(luxec.spawn({ "sleep", "100" }, { cgroup = false }))
  local pid = p.pid
  local mine -- (it names itself once it runs: it may not have yet)
  for _ = 1, 1000 do
    for s in pairs(sweepers()) do
      if not before[s] then mine = s end
    end
    if mine then break end
    luxec.sleep(0.005)
  end
  p:close() -- killed now; its zombie is reaped when it comes, not by the session
  local function exists()
    local f = io.open("/proc/" .. pid .. "/stat")
    if f then f:close() end
    return f ~= nil
  end
  while exists() do luxec.sleep(0.005) end
  io.stdout:write(pid, " ", tostring(mine), "\n")
  io.stdout:flush()
  io.read("l") -- the test has given the pid to a process of its own
]]

local function reason()
  if uv.getuid() ~= 0 then return "needs root (it writes /proc/sys/kernel/ns_last_pid)" end
  local f = io.open("/proc/sys/kernel/ns_last_pid", "w")
  if not f then return "/proc/sys/kernel/ns_last_pid is not writable here" end
  f:close()
  return nil
end

describe("the watchdog of sessions without a cgroup", function()
  after_each(H.assert_clean)

  it("leaves alone a process that was given the id of a session the host closed", function()
    local why = reason()
    if why then
      print("watchdog reuse spec skipped: " .. why)
      pending(why)
      return
    end
    local dir = H.tmpdir()
    H.write_file(dir .. "/host.lua", HOST)
    local inp, out = uv.new_pipe(), uv.new_pipe()
    local exited, line = false, ""
    local host = assert(uv.spawn(H.luxec, { args = { dir .. "/host.lua" },
      stdio = { inp, out, 2 }, cwd = dir }, function() exited = true end))
    local victim, vpid, vexited
    finally(function()
      if victim then
        victim:kill("sigkill")
        pcall(H.wait_for, function() return vexited end, 5000)
        victim:close()
      end
      if not exited then host:kill("sigkill") end
      pcall(H.wait_for, function() return exited end, 10000)
      for _, h in ipairs({ inp, out, host }) do
        if not h:is_closing() then h:close() end
      end
      H.rmtree(dir)
    end)
    out:read_start(function(err, data)
      assert(not err, err)
      if data then line = line .. data end
    end)
    H.wait_for(function() return line:find("\n") or exited end, 10000, "the session's pid")
    local pid, sweeper = line:match("^(%d+) (%d+)\n")
    pid, sweeper = tonumber(pid), tonumber(sweeper)
    assert(pid and sweeper, "the host said: " .. line)

    -- the pid again, now for a session leader of the test's own (as a new shell would be)
    for _ = 1, 50 do
      local f = assert(io.open("/proc/sys/kernel/ns_last_pid", "w"))
      f:write(tostring(pid - 1))
      f:close()
      vexited = false
      victim, vpid = uv.spawn("sleep", { args = { "100" }, detached = true },
        function() vexited = true end)
      if vpid == pid then break end
      victim:kill("sigkill")
      H.wait_for(function() return vexited end, 5000, "a stray sleep's end")
      victim:close()
      victim = nil
    end
    if not victim then
      inp:write("go\n")
      pending("other processes took pid " .. pid .. " first, 50 times")
      return
    end

    inp:write("go\n") -- the host ends; its watchdog sweeps
    H.wait_for(function() return exited end, 10000, "the host's end")
    H.wait_for(function() return not H.alive(sweeper) end, 10000, "the watchdog's end")
    local alive = not vexited and uv.kill(pid, 0) == 0
    assert(alive, "the watchdog killed pid " .. pid .. ", a process that was not the host's")
  end)
end)
