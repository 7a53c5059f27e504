local H = require("helper")
local uv = require("luv")
local luxec = require("luxec")

-- A shell that starts escapees of every kind and prints their pids, one line each.
local ESCAPEES = table.concat({
  "setsid sleep 300 & echo setsid $!",
  -- no environment (no marker there), its own session, started by absolute paths
  "env -i \"$(command -v setsid)\" \"$(command -v sleep)\" 300 & echo envless $!",
  "sh -c 'sleep 300 & echo double $!' &", -- a double fork: the grandchild is orphaned
  "nohup sleep 300 >/dev/null 2>&1 & echo nohup $!",
  -- it prints its pid once TERM is ignored (an ignored signal stays ignored across exec)
  "sh -c 'trap \"\" TERM; echo ignores_term $$; exec sleep 300' &",
  "echo ready",
  "wait",
}, "\n")

local KINDS = { "setsid", "envless", "double", "nohup", "ignores_term" }

local function pids_from(text)
  local pids = {}
  for kind, pid in text:gmatch("([%w_]+) (%d+)") do
    pids[kind] = tonumber(pid)
  end
  return pids
end

-- The pids of all four escapees, or nil while one is missing.
local function escapee_pids(text)
  local pids = pids_from(text)
  for _, kind in ipairs(KINDS) do
    if not pids[kind] then return nil end
  end
  return pids
end

-- Wait until the shell has printed "ready" and every escapee's pid (the double fork's
-- grandchild prints from the background, maybe after "ready"); fails naming what is missing.
local function wait_escapees(p)
  local ok, _, pids = pcall(H.wait_output, p, function(text)
    return text:find("ready", 1, true) and escapee_pids(text)
  end, 5000, "ready and the pids of " .. table.concat(KINDS, ", "))
  if not ok then
    p:close() -- the failure is this test's only
    error(_, 2)
  end
  return pids
end

local killed = H.killed

local function wait_text(p, pattern)
  H.wait_output(p, pattern, 5000)
end

local function survivors(pids)
  local alive = {}
  for kind, pid in pairs(pids) do
    if H.alive(pid) then
      alive[#alive + 1] = kind .. " " .. pid
    end
  end
  table.sort(alive)
  return alive
end

H.each_cgroup_mode("terminate", function(cgroup)
  it("leaves no survivor: setsid, double fork, nohup and a TERM-ignoring child", function()
    local p = assert(luxec.spawn({ "sh", "-c", ESCAPEES }, { cgroup = cgroup }))
    local pids = wait_escapees(p)
    assert.same({}, (function()
      local dead = {}
      for kind, pid in pairs(pids) do
        if not H.alive(pid) then dead[#dead + 1] = kind end
      end
      return dead
    end)())
    local r = p:terminate({ grace_ms = 300 })
    assert.same({}, survivors(pids))
    assert.is_false(r.graceful) -- the TERM-ignoring one had to be killed
    assert.is_true(r.killed >= 1)
    local st = p:status()
    assert.is_true(st.exited)
    assert.equals("terminate", st.killed_by)
    assert.is_true(p:finished())
    p:close()
  end)

  it("is graceful when everything exits on the signal", function()
    local p = assert(luxec.spawn({ "sleep", "300" }, { cgroup = cgroup }))
    local t0 = H.now_ms()
    local r = p:terminate({ grace_ms = 5000 })
    assert.is_true(H.now_ms() - t0 < 2000, "waited the whole grace")
    assert.is_true(r.graceful)
    assert.equals(0, r.killed)
    local st = p:status()
    assert.same({ "TERM", "terminate" }, { st.signal_name, st.killed_by })
    p:close()
  end)

  it("counts the grace from the call, however long the host ran before without the loop",
    function()
      local p = assert(luxec.spawn({ "sleep", "300" }, { cgroup = cgroup }))
      uv.sleep(3200) -- blocks the host: the loop's clock now lags by as much
      local r = p:terminate({ grace_ms = 3000 })
      assert.is_true(r.graceful) -- sleep ends on TERM: no kill after a grace cut short
      assert.equals(0, r.killed)
      assert.same({ "TERM", "terminate" }, { p:status().signal_name, p:status().killed_by })
      p:close()
    end)

  it("accepts another signal and a zero grace", function()
    local p = assert(luxec.spawn({ "sh", "-c",
      "trap 'exit 7' INT; echo armed; while :; do :; done" }, { cgroup = cgroup }))
    wait_text(p, "armed")
    p:terminate({ signal = "INT", grace_ms = 2000 })
    assert.equals(7, p:status().code)
    p:close()
    p = assert(luxec.spawn({ "sleep", "300" }, { cgroup = cgroup }))
    local r = p:terminate({ grace_ms = 0 })
    assert.is_false(H.alive(p.pid))
    assert.is_true(r.killed >= 0)
    p:close()
  end)

  it("on a finished process does nothing and says so", function()
    local p = assert(luxec.spawn({ "true" }, { cgroup = cgroup }))
    p:wait({ timeout = 5 })
    assert.equals("already gone", p:terminate().method)
    p:close()
  end)

  it("close() kills the whole tree at once", function()
    local p = assert(luxec.spawn({ "sh", "-c", ESCAPEES }, { cgroup = cgroup }))
    local pids = wait_escapees(p)
    for kind, pid in pairs(pids) do
      assert.is_true(H.alive(pid), kind .. " " .. pid .. " was dead before close")
    end
    p:close()
    for kind, pid in pairs(pids) do
      assert.is_true(killed(pid), kind .. " " .. pid .. " was not killed by close()")
    end
    H.wait_for(function() return #survivors(pids) == 0 end, 5000, "the tree to be gone")
  end)

  it("a to-be-closed variable ends the session when the scope ends", function()
    local pid
    do
      local p <close> = assert(luxec.spawn({ "sleep", "300" }, { cgroup = cgroup }))
      pid = p.pid
    end
    assert.is_true(killed(pid))
    H.wait_for(function() return not H.alive(pid) end, 5000, "the program to be gone")
  end)
end)

describe("the host going away", function()
  after_each(H.assert_clean)

  local function host_with_escapees(extra)
    local script = ([[
      local luxec = require("luxec")
      local p = assert(luxec.spawn({"sh", "-c", %q}))
      local function all_printed(text) -- "ready" and the pid of every escapee
        if not text:find("ready", 1, true) then return false end
        for _, kind in ipairs({%s}) do
          if not text:find(kind .. " %%d+") then return false end
        end
        return true
      end
      while not all_printed(p:snapshot().head) and not p:finished() do
        assert(p:wait_output({timeout = 5}), "no output for 5 s: " .. p:snapshot().head)
      end
      io.write(p:snapshot().head, "host ready\n")
      io.stdout:flush()
      %s
    ]]):format(ESCAPEES, '"' .. table.concat(KINDS, '", "') .. '"', extra)
    local out = {}
    local stdout = uv.new_pipe()
    local exited
    local handle = uv.spawn(H.luxec, { args = { "-e", script }, stdio = { nil, stdout, 2 } },
      function(code, sig)
        exited = { code, sig }
      end)
    stdout:read_start(function(_, data)
      if data then out[#out + 1] = data end
    end)
    H.wait_for(function()
      return table.concat(out):find("host ready") or exited
    end, 10000, "the host to start its session")
    return handle, stdout, out, function() return exited end
  end

  local function finish(handle, stdout, get_exited)
    H.wait_for(get_exited, 10000, "the host to exit")
    handle:close()
    stdout:close()
    uv.run("nowait")
  end

  it("SIGKILL of the host leaves no session process alive", function()
    local ok, why = H.cgroups()
    if not ok then
      pending("needs cgroup v2 (the watchdog kills the cgroups of a killed host): " .. why)
      return
    end
    local handle, stdout, out, get_exited = host_with_escapees("luxec.sleep(60)")
    local pids = escapee_pids(table.concat(out))
    assert(pids, "the host printed no pid for some escapee: " .. table.concat(out))
    handle:kill("sigkill")
    finish(handle, stdout, get_exited)
    assert.equals(9, get_exited()[2])
    H.wait_for(function()
      return #survivors(pids) == 0
    end, 5000, "the watchdog to kill the escapees")
  end)

  it("SIGTERM of the host leaves no session process alive", function()
    local ok, why = H.cgroups()
    if not ok then
      pending("needs cgroup v2: " .. why)
      return
    end
    local handle, stdout, out, get_exited = host_with_escapees("luxec.sleep(60)")
    local pids = escapee_pids(table.concat(out))
    assert(pids, "the host printed no pid for some escapee: " .. table.concat(out))
    handle:kill("sigterm")
    finish(handle, stdout, get_exited)
    H.wait_for(function()
      return #survivors(pids) == 0
    end, 5000, "the escapees to die")
  end)

  -- Processes of a sandboxed session print their own pid namespace's numbers: the sleeps are
  -- found from outside by their command line, `sleep WORD`.
  local function with_word(word)
    local pids = {}
    local req = assert(uv.fs_scandir("/proc"))
    for name in uv.fs_scandir_next, req do
      if name:match("^%d+$") then pids[#pids + 1] = tonumber(name) end
    end
    local found = {}
    for _, pid in ipairs(pids) do
      local cmdline = H.read_file(("/proc/%d/cmdline"):format(pid))
      if cmdline == "sleep\0" .. word .. "\0" and H.alive(pid) then
        found[#found + 1] = pid
      end
    end
    return found
  end

  for _, user in ipairs({ { "root", {} },
    { "an unprivileged user", { "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups" } } })
  do
    it("SIGKILL of the host ends a sandboxed session's processes, escapees included, as "
      .. user[1], function()
      local usable, why = H.sandbox_usable()
      if not usable then
        pending(why)
        return
      end
      if #user[2] > 0 and (uv.getuid() ~= 0 or not os.execute("command -v setpriv >/dev/null"))
      then
        pending("needs root and setpriv to drop to an unprivileged user")
        return
      end
      local word = ("31%06d"):format(uv.os_getpid() % 1000000) -- sleep's argument, unique
      local dir = H.tmpdir()
      assert(uv.fs_chmod(dir, tonumber("777", 8)))
      local script = ([[
        local luxec = require("luxec")
        local p = assert(luxec.spawn({ "sh", "-c",
          "setsid sleep %s & (sleep %s &) ; nohup sleep %s >/dev/null 2>&1 & echo started" },
          { cwd = %q, sandbox = { mode = "workspace-write", workspace = %q }, cgroup = false }))
        assert(p:expect("started", { timeout = 20 }))
        print("host ready")
        io.stdout:flush()
        luxec.sleep(60)
      ]]):format(word, word, word, dir, dir)
      local args = {}
      for _, a in ipairs(user[2]) do args[#args + 1] = a end
      args[#args + 1] = H.luxec
      args[#args + 1] = "-e"
      args[#args + 1] = script
      local out, exited = {}, nil
      local stdout = uv.new_pipe()
      local handle = assert(uv.spawn(table.remove(args, 1), { args = args, cwd = dir,
        stdio = { nil, stdout, 2 } }, function(code, sig) exited = { code, sig } end))
      stdout:read_start(function(_, data) if data then out[#out + 1] = data end end)
      H.wait_for(function() return table.concat(out):find("host ready") or exited end, 20000,
        "the host to start its sandboxed session")
      assert(not exited, "the host ended early: " .. table.concat(out))
      H.wait_for(function() return #with_word(word) == 3 end, 5000,
        "three sleeps of the sandboxed session")
      handle:kill("sigkill")
      H.wait_for(function() return exited end, 10000, "the host to die")
      handle:close()
      stdout:close()
      uv.run("nowait")
      H.wait_for(function() return #with_word(word) == 0 end, 5000,
        "the sandboxed session's processes to die with the host")
      H.rmtree(dir)
    end)
  end

  it("os.exit ends every session, escapees included", function()
    local handle, stdout, out, get_exited = host_with_escapees("os.exit(0)")
    local pids = escapee_pids(table.concat(out))
    assert(pids, "the host printed no pid for some escapee: " .. table.concat(out))
    finish(handle, stdout, get_exited)
    assert.equals(0, get_exited()[1])
    H.wait_for(function()
      return #survivors(pids) == 0
    end, 5000, "the escapees to die")
  end)
end)
