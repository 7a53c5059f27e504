-- A host's cgroup directories do not outlive it: the watchdog of a killed host removes its
-- directory with every cgroup below it (a nested host's directory sits in one of its
-- session's cgroups), and a host that starts removes the directories of hosts that died
-- with their watchdog.
local H = require("helper")
local uv = require("luv")

local function exists(path)
  return uv.fs_stat(path) ~= nil
end

describe("cgroup directories", function()
  local ok, why, dir
  setup(function()
    ok, why, dir = require("luxec.core").cgroups()
  end)

  local function need()
    if not ok then
      pending("needs cgroup v2: " .. tostring(why))
      return false
    end
    return true
  end

  -- A host (pid printed) whose session runs a nested host whose session runs sleep.
  local function nested_host()
    local inner = "local luxec = require('luxec'); local p = luxec.spawn({'sleep', '60'});"
      .. " local _, _, d = require('luxec.core').cgroups(); print('inner ' .. d);"
      .. " io.stdout:flush(); luxec.sleep(60)"
    local script = ([[
      local luxec = require("luxec")
      local p = assert(luxec.spawn({%q, "-e", %q}))
      assert(p:expect({lua = "inner %%S+\n"}, {timeout = 10}))
      local _, _, d = require("luxec.core").cgroups()
      print("outer " .. d .. " " .. p:snapshot().head:match("inner (%%S+)"))
      io.stdout:flush()
      luxec.sleep(60)
    ]]):format(H.luxec, inner)
    local stdout = uv.new_pipe(false)
    local out, exited = {}, nil
    local handle = assert(uv.spawn(H.luxec, { args = { "-e", script }, stdio = { nil, stdout, 2 } },
      function(code, sig)
        exited = { code, sig }
      end))
    stdout:read_start(function(_, data)
      if data then out[#out + 1] = data end
    end)
    H.wait_for(function()
      return table.concat(out):find("outer %S+ %S+\n") or exited
    end, 15000, "the nested host to start")
    local outer, inner_dir = table.concat(out):match("outer (%S+) (%S+)\n")
    assert(outer, "no directories printed: " .. table.concat(out))
    return handle, stdout, outer, inner_dir, function() return exited end
  end

  it("a session whose cgroup held a killed session runs (born in it, or moved in)", function()
    if not need() then return end
    local luxec = require("luxec")
    -- sessions killed in their cgroups (close of a running session writes cgroup.kill), then
    -- as many new ones, which get those cgroups back from the pool: some kernels kill a child
    -- cloned straight into a cgroup that was killed before
    for round = 1, 3 do
      local ps = {}
      for i = 1, 4 do
        ps[i] = assert(luxec.spawn({ "sh", "-c", "echo up; exec sleep 60" }, { tty = i % 2 == 0 }))
      end
      for i, p in ipairs(ps) do
        assert.equals(1, p:expect("up", { timeout = 10 }),
          ("round %d, session %d: %s"):format(round, i, tostring(p:status().signal_name)))
        local cg = H.read_file(("/proc/%d/cgroup"):format(p.pid)):match("0::(%S+)")
        assert.truthy(cg:find("/luxec%.%d+/s%d+$"), cg)
      end
      for _, p in ipairs(ps) do p:close() end
    end
    local p = assert(luxec.spawn({ "true" }))
    assert.equals(0, p:wait({ timeout = 10 }).code)
    p:close()
  end)

  it("the watchdog of a killed host removes every directory below its own", function()
    if not need() then return end
    local handle, stdout, outer, inner, get_exited = nested_host()
    assert.truthy(inner:sub(1, #outer + 1) == outer .. "/", inner .. " is below " .. outer)
    assert.truthy(exists(inner) and exists(outer))
    handle:kill("sigkill")
    H.wait_for(get_exited, 10000, "the host to exit")
    H.wait_for(function()
      return not exists(outer)
    end, 10000, "the watchdog to remove " .. outer)
    handle:close()
    stdout:close()
    uv.run("nowait")
  end)

  it("a starting host removes the directories of dead hosts, not of live ones", function()
    if not need() then return end
    local parent = dir:match("^(.*)/luxec%.%d+$")
    -- a pid that is not running: the largest pid of a process that exited
    local reaped = false
    local dead = assert(uv.spawn("true", {}, function() reaped = true end))
    local dead_pid = dead:get_pid()
    H.wait_for(function() return reaped end, 5000, "true to exit and be reaped")
    dead:close()
    local stale = parent .. "/luxec." .. dead_pid
    assert(uv.fs_mkdir(stale, 493))
    assert(uv.fs_mkdir(stale .. "/s1", 493))
    assert(uv.fs_mkdir(stale .. "/s1/luxec.1", 493))
    -- a live host's directory (this process's pid, no watchdog lock: it must stay because
    -- its pid runs)
    local live = parent .. "/luxec." .. uv.os_getppid()
    local made_live = uv.fs_mkdir(live, 493)
    local r = H.run({ "-e", 'require("luxec").run({"true"})' })
    assert.equals(0, r.code, r.stderr)
    local stale_left = exists(stale)
    local live_left = exists(live)
    if stale_left then
      pcall(uv.fs_rmdir, stale .. "/s1/luxec.1")
      pcall(uv.fs_rmdir, stale .. "/s1")
      pcall(uv.fs_rmdir, stale)
    end
    if made_live then uv.fs_rmdir(live) end
    assert.is_false(stale_left, stale .. " was left")
    assert.is_true(live_left, live .. " was removed")
  end)
end)
