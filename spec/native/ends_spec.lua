local H = require("helper")
local uv = require("luv")
local luxec = require("luxec")

local HOG = H.fixture("hog")

local function open_fds()
  local req, n = assert(uv.fs_scandir("/proc/self/fd")), 0
  while uv.fs_scandir_next(req) do n = n + 1 end
  return n
end

-- Whether pid still exists and is not a zombie: a process the kernel is still tearing down
-- (after SIGKILL it first frees its memory) counts.
local function present(pid)
  local f = io.open(("/proc/%d/stat"):format(pid))
  if not f then return false end
  local state = f:read("a"):match("^%d+ %(.*%) (%a)")
  f:close()
  return state ~= nil and state ~= "Z" and state ~= "X"
end

local killed = H.killed

-- A tree that ignores TERM and has 1,500 processes: after SIGKILL the kernel takes a while
-- (tens of ms, more under load) until the last of them is gone.
local function slow_to_die(cgroup)
  local p = assert(luxec.spawn({ "sh", "-c", "trap '' TERM; exec " .. HOG .. " fork 1500" },
    { cgroup = cgroup }))
  assert(p:expect("forked 1500", { timeout = 60 }))
  local f = assert(io.open(("/proc/%d/task/%d/children"):format(p.pid, p.pid)))
  local kids = {}
  for pid in f:read("a"):gmatch("%d+") do kids[#kids + 1] = tonumber(pid) end
  f:close()
  local sample = { p.pid }
  for i = #kids, 1, -math.max(1, #kids // 30) do sample[#sample + 1] = kids[i] end
  return p, sample
end

H.each_cgroup_mode("ending sessions never blocks the loop", function(cgroup)
  it("close() kills the whole tree at once, and it is gone without another call", function()
    local p, sample = slow_to_die(cgroup)
    p:close()
    for _, pid in ipairs(sample) do assert.is_true(killed(pid), pid .. " not killed") end
    H.wait_for(function()
      for _, pid in ipairs(sample) do if present(pid) then return false end end
      return true
    end, 10000, "the tree to be gone")
  end)

  it("close() kills what a program that ended left running (its output read to the end or not)",
    function()
      for _, read_all in ipairs({ false, true }) do
        local p = assert(luxec.spawn({ "sh", "-c", "sleep 30 & echo $!" }, { cgroup = cgroup }))
        local pid = tonumber((H.wait_output(p, "^%d+\n")))
        assert(p:wait({ timeout = 10 }))
        if read_all then p:read() end
        assert.is_true(present(pid), "the background sleep ended before close")
        p:close()
        H.wait_for(function() return not present(pid) end, 5000,
          "the background sleep to be killed by close()")
      end
    end)

  it("terminate_all of many trees takes about as long as the slowest one", function()
    local procs = {}
    for i = 1, 20 do
      procs[i] = assert(luxec.spawn({ "sh", "-c", "trap '' TERM; echo up; sleep 60" },
        { cgroup = cgroup }))
    end
    for _, p in ipairs(procs) do assert(p:expect("up")) end
    local t0 = uv.hrtime()
    local r = luxec.terminate_all(procs, { grace_ms = 200 })
    local ms = (uv.hrtime() - t0) / 1e6
    assert.is_false(r.graceful)
    assert.is_true(ms < 200 + 1500, ("took %.0f ms"):format(ms))
    for _, p in ipairs(procs) do
      assert.is_false(H.alive(p.pid))
      assert.is_true(p:finished())
      p:close()
    end
  end)

  it("terminate_all takes a closed session as ended and ends the others", function()
    local gone = assert(luxec.spawn({ "sleep", "60" }, { cgroup = cgroup }))
    local running = assert(luxec.spawn({ "sleep", "60" }, { cgroup = cgroup }))
    gone:close()
    local r = luxec.terminate_all({ gone, running }, { grace_ms = 200 })
    assert.is_true(r.graceful)
    assert.is_false(H.alive(running.pid))
    assert.is_true(running:finished())
    running:close()
  end)

  it("terminate() from many tasks at once: one signal for all, each back when its own is gone",
    function()
      local quick = assert(luxec.spawn({ "sh", "-c", "echo up; exec sleep 60" },
        { cgroup = cgroup }))
      local stubborn = assert(luxec.spawn({ "sh", "-c", "trap '' TERM; echo up; sleep 60" },
        { cgroup = cgroup }))
      local ended = assert(luxec.spawn({ "true" }, { cgroup = cgroup }))
      assert(quick:expect("up"))
      assert(stubborn:expect("up"))
      assert(ended:wait({ timeout = 10 }))
      local core, calls = require("luxec.core"), 0
      local signal_trees = core.signal_trees
      core.signal_trees = function(...)
        calls = calls + 1
        return signal_trees(...)
      end
      local ok, err = pcall(function()
        local grace = { grace_ms = 600000 } -- the stubborn one is still in it at the end
        local tq = luxec.go(function() return quick:terminate(grace) end)
        local ts = luxec.go(function() return stubborn:terminate(grace) end)
        local te = luxec.go(function() return ended:terminate(grace) end)
        local _, rq = assert(tq:wait())
        assert.same({ signal = "TERM", graceful = true, killed = 0,
          method = cgroup and "cgroup" or "process group and sweep" }, rq)
        assert.is_true(quick:finished())
        assert.same({ true, { signal = "TERM", graceful = true, killed = 0,
          method = "already gone" } }, { te:wait() })
        assert.is_false(ts.done)
        assert.equals(1, calls)
        assert.is_false(H.alive(quick.pid))
        assert.is_true(H.alive(stubborn.pid))
        stubborn:close() -- ends its tree, and the wait of its terminate() with it
        assert.is_true((ts:wait()))
      end)
      core.signal_trees = signal_trees
      for _, p in ipairs({ quick, stubborn, ended }) do p:close() end
      assert(ok, err)
    end)
end)

H.each_cgroup_mode("descriptors per session", function(cgroup)
  -- pidfd + PTY master; pidfd + output (+ stdin pipe, + stderr pipe)
  local kinds = {
    { name = "PTY", opts = { tty = true }, fds = 2 },
    { name = "pipes, stderr merged, stdin null", opts = { stdin = "null" }, fds = 2 },
    { name = "pipes, stderr merged, stdin pipe", opts = {}, fds = 3 },
    { name = "pipes, stderr apart, stdin pipe", opts = { stderr = "pipe" }, fds = 4 },
  }
  for _, kind in ipairs(kinds) do
    it(("%s: exactly %d each with 50 running, none after close"):format(kind.name, kind.fds),
      function()
        local opts = { cgroup = cgroup }
        for k, v in pairs(kind.opts) do opts[k] = v end
        local warm = assert(luxec.spawn({ "sleep", "60" }, opts)) -- the host's own handles
        warm:close()
        local before = open_fds()
        local procs = {}
        for i = 1, 50 do procs[i] = assert(luxec.spawn({ "sleep", "60" }, opts)) end
        uv.run("nowait")
        assert.equals(50 * kind.fds, open_fds() - before)
        for _, p in ipairs(procs) do p:close() end
        assert.equals(before, open_fds())
      end)
  end
end)

describe("a session closed while it runs", function()
  -- In a host of its own: nothing else of the suite has started the host's cgroup watcher.
  local SCRIPT = [[
local luxec = require("luxec")
local uv = require("luv")
local _, _, dir = require("luxec.core").cgroups()
local function dirs()
  local req, n = assert(uv.fs_scandir(dir)), 0
  for name in function() return uv.fs_scandir_next(req) end do
    if name:match("^s%d+$") then n = n + 1 end
  end
  return n
end
local function alive(pid)
  local f = io.open(("/proc/%d/stat"):format(pid))
  local state = f and f:read("a"):match("^%d+ %(.*%) (%a)")
  if f then f:close() end
  return state ~= nil and state ~= "Z" and state ~= "X"
end
local ps, pids = {}, {}
for i = 1, 8 do
  ps[i] = assert(luxec.spawn({ "sleep", "60" }))
  pids[i] = ps[i].pid
end
for _, p in ipairs(ps) do p:close() end -- killed, not waited for
local tick = uv.new_timer()
tick:start(10, 10, function() end)
local deadline = uv.now() + 10000
local function any_alive()
  for _, pid in ipairs(pids) do if alive(pid) then return true end end
  return false
end
while any_alive() and uv.now() < deadline do uv.run("once") end
tick:close()
local before = dirs()
local qs = {}
for i = 1, 8 do qs[i] = assert(luxec.spawn({ "sleep", "60" })) end
print(("left=%s before=%d after=%d"):format(tostring(any_alive()), before, dirs()))
for _, q in ipairs(qs) do q:close() end
]]

  it("gives its cgroup to a later spawn once its tree is gone (cgroups do not pile up)",
    function()
      if not H.cgroups() then
        pending("needs a writable cgroup2 tree")
        return
      end
      local r = H.run({ "-e", SCRIPT }, { timeout = 30000 })
      assert.equals(0, r.code, r.stdout .. r.stderr)
      assert.matches("left=false before=8 after=8\n", r.stdout, 1, true)
    end)
end)
