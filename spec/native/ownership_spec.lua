-- Who owns what of a session: a dropped session is collected (killed if it runs, its
-- descriptors freed), the host reaps only the processes of its sessions, and every session
-- tree ends with the host, however the host ends.
local H = require("helper")
local uv = require("luv")
local luxec = require("luxec")
local core = require("luxec.core")

local function open_fds()
  local n, req = 0, assert(uv.fs_scandir("/proc/self/fd"))
  while uv.fs_scandir_next(req) do n = n + 1 end
  return n
end

local function gc()
  collectgarbage()
  collectgarbage()
end

-- A session whose tree has a `setsid` descendant; returns it and the pids of its sh and
-- of the detached sleep.
-- (its own session and no environment: neither its session id nor a variable says whose it is)
local DETACHED = "env -i \"$(command -v setsid)\" /bin/sh -c 'echo $$; exec \"$0\" 1000' "
  .. "\"$(command -v sleep)\" & echo $$; wait"
local function detached_tree(opts)
  local p = assert(luxec.spawn({ "sh", "-c", DETACHED }, opts))
  local pids = {}
  assert(p:expect({ lua = "(%d+)\n(%d+)\n" }, { timeout = 10 }))
  for pid in p.match:gmatch("%d+") do pids[#pids + 1] = tonumber(pid) end
  return p, pids
end

local all_gone = H.all_gone

describe("a dropped session", function()
  after_each(H.assert_clean)

  for _, opts in ipairs({ {}, { cgroup = false }, { tty = true }, { stderr = "pipe" } }) do
    local what = next(opts) and next(opts) .. " = " .. tostring(opts[next(opts)]) or "default"
    it("is collected with its descriptors after it finished, without close (" .. what .. ")",
      function()
        -- Warm up: the watchdog's pipe, and as many pooled cgroups as the cycles can use
        -- (a cgroup whose session ended is kept for the next one, with its descriptors).
        local warm = {}
        for i = 1, 60 do warm[i] = assert(luxec.spawn({ "true" }, opts)) end
        for _, p in ipairs(warm) do p:close() end
        warm = nil -- luacheck: ignore 311
        gc()
        local before = open_fds()
        local seen = setmetatable({}, { __mode = "k" })
        for _ = 1, 50 do
          local p = assert(luxec.spawn({ "true" }, opts))
          seen[p] = true
          assert.equals(0, p:wait({ timeout = 10 }).code)
        end
        gc()
        assert.is_nil(next(seen), "a Process table outlived the collection")
        assert.equals(before, open_fds())
      end)
  end

  it("does not exhaust a low limit on open files: 300 spawn+wait at ulimit -n 256", function()
    local dir = H.tmpdir()
    local script = dir .. "/cycles.lua"
    H.write_file(script, [[
      local luxec = require("luxec")
      for i = 1, 300 do
        for _, opts in ipairs({ {}, { cgroup = false } }) do
          local p, err = luxec.spawn({ "true" }, opts)
          if not p then error(("spawn #%d: %s"):format(i, err)) end
          assert(p:wait({ timeout = 10 }).code == 0)
        end
      end
      print("done")
    ]])
    local r = H.run({ cmd = "sh", "-c", 'ulimit -n 256 && exec "$0" "$1"', H.luxec, script },
      { timeout = 60000 })
    H.rmtree(dir)
    assert.equals("done\n", r.stdout, r.stderr)
    assert.equals(0, r.code)
  end)

  for _, cgroup in ipairs({ true, false }) do
    it("is killed by the collector while it runs, whole tree (cgroup = " .. tostring(cgroup)
      .. ")", function()
      local p, pids = detached_tree({ cgroup = cgroup })
      local seen = setmetatable({ [p] = true }, { __mode = "k" })
      p = nil -- luacheck: ignore 311
      gc()
      assert.is_nil(next(seen))
      H.wait_for(all_gone(pids), 5000, "the dropped session's processes to end")
    end)
  end

  -- A session that ends once told to (a file appears), dropped by the script but held by
  -- hold(p): collection must not end it.
  local function held(hold)
    local dir = H.tmpdir()
    local seen = setmetatable({}, { __mode = "k" })
    local result = {}
    do
      local p = assert(luxec.spawn({ "sh", "-c",
        ("while [ ! -e %s/go ]; do sleep 0.01; done; exit 5"):format(dir) }, { cgroup = false }))
      seen[p] = true
      hold(p, result)
    end
    gc()
    assert.is_not_nil(next(seen), "a held session was collected")
    H.write_file(dir .. "/go", "")
    H.wait_for(function() return result.code ~= nil end, 5000, "the holder to see the exit")
    H.rmtree(dir)
    assert.equals(5, result.code)
  end

  it("is not collected while an exit listener waits for it", function()
    held(function(p, result)
      p:on("exit", function(st) result.code = st.code end)
    end)
  end)

  it("is not collected while a task waits on it", function()
    held(function(p, result)
      luxec.go(function() result.code = p:wait().code end)
    end)
  end)
end)

describe("reaping", function()
  after_each(H.assert_clean)

  -- A child of the host that is not a session's: wait until it has exited, then let the
  -- loop turn so that the host hears of it (SIGCHLD) before pclose does.
  local function settle_popen()
    local before = {}
    for _, pid in ipairs(H.children()) do before[pid] = true end
    local f = assert(io.popen("true"))
    local kid
    for _, pid in ipairs(H.children()) do
      if not before[pid] then kid = pid end
    end
    if kid then
      H.wait_for(function() return not H.alive(kid) end, 5000, "the popen child to exit")
    end
    for _ = 1, 3 do uv.run("nowait") end
    return f
  end

  it("leaves io.popen's and os.execute's children to them, sessions ending around them",
    function()
      for i = 1, 20 do
        local p, pids = detached_tree({ cgroup = false })
        if i % 2 == 0 then p:close() end
        local f = settle_popen()
        assert.same({ true, "exit", 0 }, { f:close() }, "popen, round " .. i)
        assert.same({ nil, "exit", 3 }, { os.execute("exit 3") }, "os.execute, round " .. i)
        if i % 2 == 1 then p:close() end
        H.wait_for(all_gone(pids), 5000, "the session's tree")
      end
    end)

  -- A host of its own (a fresh one: a session without a cgroup makes a host catch SIGCHLD for
  -- good, for the orphans its sessions may leave): each round closes a running session, turns
  -- the loop until its program is reaped, then until SIGCHLD is no longer caught, then reaps
  -- an ending program through its pidfd. Prints whether SIGCHLD was caught at the start and,
  -- each round, "reaped,let go" and the exit code; "nocgroup" when sessions get no cgroup.
  local SIGCHLD_HOST = [[
    local luxec = require("luxec")
    local uv = require("luv")
    local function caught() -- SIGCHLD (17) in the kernel's set of the host's caught signals
      local f = assert(io.open("/proc/self/status"))
      local mask = f:read("a"):match("\nSigCgt:%s*(%x+)")
      f:close()
      return (tonumber(mask, 16) >> 16) & 1 == 1
    end
    local function turn_until(cond)
      local deadline, t = uv.hrtime() + 5e9, uv.new_timer()
      t:start(10, 10, function() end)
      while not cond() and uv.hrtime() < deadline do uv.run("once") end
      t:close()
      uv.run("nowait")
      return cond()
    end
    local out = { tostring(caught()) }
    for _ = 1, 3 do
      local p = assert(luxec.spawn({ "sleep", "60" }))
      if not p:status().cgroup then
        p:close()
        print("nocgroup")
        os.exit(0)
      end
      local pid = p.pid
      p:close() -- killed, and left to the host to reap
      local reaped = turn_until(function() return not uv.fs_stat("/proc/" .. pid) end)
      out[#out + 1] = ("%s,%s"):format(reaped, turn_until(function() return not caught() end))
      local q = assert(luxec.spawn({ "sh", "-c", "exit 4" }))
      out[#out + 1] = tostring(q:wait({ timeout = 10 }).code)
      q:close()
    end
    print(table.concat(out, " "))
  ]]

  it("catches SIGCHLD only while a closed session's program is left to reap", function()
    local r = assert(luxec.run({ H.luxec, "-e", SIGCHLD_HOST }, { timeout = 60 }))
    assert.equals(0, r.code, r.output)
    -- (its last line: a sanitizer build may warn on stderr first)
    local said = r.output:match("([^\n]*)\n$")
    if said == "nocgroup" then
      pending("sessions get no cgroup here: such a host catches SIGCHLD for its orphans")
      return
    end
    assert.equals("false true,true 4 true,true 4 true,true 4", said, r.output)
  end)

  -- A fresh host runs a sandboxed session (whose sandbox has an init of its own, the host's
  -- child to reap) and closes it, turns the loop until SIGCHLD is let go (at most 3 s: the
  -- sweep for orphans runs every second while something may be left), then sleeps 2.5 s in
  -- the loop and prints how often its main thread was woken meanwhile (voluntary context
  -- switches) and whether SIGCHLD was caught at the end.
  local IDLE_HOST = [[
    local luxec = require("luxec")
    local uv = require("luv")
    local function status(path, field)
      local f = assert(io.open(path))
      local v = f:read("a"):match("\n" .. field .. ":%s*(%x+)")
      f:close()
      return v
    end
    local function caught()
      return (tonumber(status("/proc/self/status", "SigCgt"), 16) >> 16) & 1 == 1
    end
    local p = assert(luxec.spawn({ "true" },
      { sandbox = { mode = "workspace-write", network = "deny" } }))
    local st = p:wait({ timeout = 10 })
    assert(st.code == 0)
    p:close()
    if not st.cgroup then
      print("nocgroup")
      os.exit(0)
    end
    local deadline, t = uv.hrtime() + 3e9, uv.new_timer()
    t:start(10, 10, function() end)
    while caught() and uv.hrtime() < deadline do uv.run("once") end
    t:close()
    uv.run("nowait")
    local me = ("/proc/self/task/%d/status"):format(uv.os_getpid())
    local before = tonumber(status(me, "voluntary_ctxt_switches"))
    local idle = uv.new_timer()
    idle:start(2500, 0, function() idle:close() end)
    uv.run()
    print(tonumber(status(me, "voluntary_ctxt_switches")) - before, caught())
  ]]

  it("lets an idle host sleep once its sandboxed sessions are closed and reaped", function()
    if H.skip_without_sandbox() then return end
    local r = assert(luxec.run({ H.luxec, "-e", IDLE_HOST }, { timeout = 60 }))
    assert.equals(0, r.code, r.output)
    -- (its last line: a sanitizer build may warn on stderr first)
    local said = r.output:match("([^\n]*)\n$")
    if said == "nocgroup" then
      pending("sessions get no cgroup here: their orphans come back to the host, which looks "
        .. "for them every second for good")
      return
    end
    local wakes, caught = (said or ""):match("^(%d+)\t(%a+)$")
    assert(wakes, "the host said: " .. r.output)
    assert.equals("false", caught, "SIGCHLD still caught")
    -- (one wake: the end of the 2.5 s; a sweep every second would add two)
    assert.is_true(tonumber(wakes) <= 1, ("woken %s times in 2.5 s of idling"):format(wakes))
  end)

  it("leaves uv.spawn's children to libuv: the exit callback gets the real status", function()
    local p = detached_tree({ cgroup = false })
    p:close()
    local status
    local h = assert(uv.spawn("sh", { args = { "-c", "exit 7" } }, function(code)
      status = code
    end))
    H.wait_for(function() return status ~= nil end, 5000, "uv.spawn's exit callback")
    h:close()
    assert.equals(7, status)
  end)
end)

describe("the host's end", function()
  after_each(H.assert_clean)

  local HOST = [[
    local luxec = require("luxec")
    local p = assert(luxec.spawn({ "sh", "-c", %q }, { cgroup = false }))
    assert(p:expect({ lua = "(%%d+)\n(%%d+)\n" }, { timeout = 10 }))
    io.stdout:write(p.match:gsub("\n", " "), "\n")
    io.stdout:flush()
    local how = arg[1]
    if how == "error" then
      error("the script fails")
    elseif how == "os.exit" then
      os.exit(3)
    elseif how == "os.exit(close)" then
      os.exit(3, true)
    elseif how == "signal" then
      luxec.sleep(60)
    end
  ]]

  -- Start a host (as prefix's user), read the pids of its session's tree, end it the given
  -- way, and return those pids once the host is gone.
  local function run_host(dir, prefix, how, signal)
    local args = {}
    for _, a in ipairs(prefix) do args[#args + 1] = a end
    args[#args + 1] = H.luxec
    args[#args + 1] = dir .. "/host.lua"
    args[#args + 1] = signal and "signal" or how
    local cmd = table.remove(args, 1)
    local out = uv.new_pipe()
    local exited, line = false, ""
    local h, pid = assert(uv.spawn(cmd, {
      args = args, stdio = { nil, out, nil }, cwd = dir,
      env = { "PATH=" .. os.getenv("PATH"), "HOME=" .. dir },
    }, function() exited = true end))
    out:read_start(function(err, data)
      assert(not err, err)
      if data then line = line .. data end
    end)
    H.wait_for(function() return line:find("\n") or exited end, 10000, "the host's pids")
    local pids = {}
    for p in line:gmatch("%d+") do pids[#pids + 1] = tonumber(p) end
    assert.equals(2, #pids, "host said: " .. line)
    if signal then uv.kill(pid, signal) end
    H.wait_for(function() return exited end, 10000, "the host to end (" .. how .. ")")
    out:close()
    h:close()
    return pids
  end

  local users = { { name = "root", prefix = {} } }
  if uv.getuid() == 0 and os.execute("command -v setpriv >/dev/null") then
    users[2] = { name = "an unprivileged user",
      prefix = { "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups" } }
  end
  local ways = { { "the end of the script" }, { "error" }, { "os.exit" }, { "os.exit(close)" },
    { "SIGTERM", "sigterm" }, { "SIGINT", "sigint" }, { "SIGHUP", "sighup" },
    { "SIGKILL", "sigkill" } }
  for _, user in ipairs(users) do
    for _, way in ipairs(ways) do
      it(("kills every session tree without a cgroup: %s, as %s"):format(way[1], user.name),
        function()
          local dir = H.tmpdir()
          assert(uv.fs_chmod(dir, tonumber("755", 8)))
          H.write_file(dir .. "/host.lua", HOST:format(DETACHED))
          local pids = run_host(dir, user.prefix, way[1], way[2])
          H.rmtree(dir)
          H.wait_for(all_gone(pids), 5000, "the tree of a host ended by " .. way[1])
        end)
    end
  end
end)

describe("the core's options", function()
  after_each(H.assert_clean)

  local function copts(over)
    local o = { tty = false, no_echo = false, raw = false, rows = 24, cols = 80, stdin = "pipe",
      stderr = "merge", head = 1024, tail = 1024, cgroup = false, on_event = function() end,
      sandbox = { mode = "read-only", network = "deny", best_effort = true,
        evidence_net = false, evidence_files = false, roots = {}, unix_sockets = {},
        ro_paths = {}, masks = {} } }
    for k, v in pairs(over) do
      if type(v) == "table" and type(o[k]) == "table" then
        for k2, v2 in pairs(v) do o[k][k2] = v2 end
      else
        o[k] = v
      end
    end
    return o
  end

  local function refused(over, pattern)
    local ok, h = pcall(core.spawn, { "true" }, copts(over))
    if ok and h then h:close() end
    assert.is_false(ok, "accepted: " .. pattern)
    assert.truthy(tostring(h):find(pattern), tostring(h))
  end

  it("refuses an unknown value of every string enum, naming the option and the value",
    function()
      refused({ sandbox = { mode = "bogus" } }, "'sandbox.mode'.*\"bogus\"")
      refused({ sandbox = { mode = "full" } }, "'sandbox.mode'.*\"full\"")
      refused({ sandbox = { network = "allowed" } }, "'sandbox.network'.*\"allowed\"")
      refused({ stdin = "closed" }, "'stdin'.*\"closed\"")
      refused({ stderr = "apart" }, "'stderr'.*\"apart\"")
    end)

  it("refuses a missing value instead of a default of its own", function()
    for _, k in ipairs({ "stdin", "stderr", "tty", "raw", "cgroup", "rows", "head", "on_event" }) do
      local o = copts({})
      o[k] = nil
      local ok, err = pcall(core.spawn, { "true" }, o)
      assert.is_false(ok, k)
      assert.truthy(tostring(err):find("'" .. k .. "'", 1, true), err)
    end
    for _, k in ipairs({ "mode", "network", "best_effort" }) do
      local o = copts({})
      o.sandbox[k] = nil
      local ok, err = pcall(core.spawn, { "true" }, o)
      assert.is_false(ok, k)
      assert.truthy(tostring(err):find("'sandbox." .. k .. "'", 1, true), err)
    end
  end)

  it("takes the values it knows", function()
    local o = copts({ stdin = "null" })
    o.sandbox = nil
    local h = assert(core.spawn({ "true" }, o))
    h:close()
  end)
end)
