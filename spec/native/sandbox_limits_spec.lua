-- Resource limits of a session (sandbox policy `limits`): a fork bomb and a memory bomb in one
-- session leave the host and other sessions working, status() names the limit that was hit,
-- a cpu limit throttles; without cgroups the rlimit fallback does what the README says, as
-- root and as an unprivileged user. What happened is decided outside the session: its exit,
-- the processes that exist, the kernel's cgroup counters read by the host.
local H = require("helper")
local uv = require("luv")
local luxec = require("luxec")
local exec = require("luxec.engine")

local HOG = H.fixture("hog")

local function full(limits, extra)
  local sb = { mode = "full-access", limits = limits }
  for k, v in pairs(extra or {}) do sb[k] = v end
  return sb
end

-- Read everything the session printed until `pattern` shows up (an output event, no sleep).
local function read_until(p, pattern, ms, plain)
  local got = ""
  H.wait_for(function()
    got = got .. p:read()
    return got:find(pattern, 1, plain) ~= nil or p:finished()
  end, ms or 10000, pattern)
  return got .. p:read()
end

-- Processes whose session id is sid, counted from /proc (outside the session).
local function session_procs(sid)
  local n = 0
  local req = assert(uv.fs_scandir("/proc"))
  for name in function() return uv.fs_scandir_next(req) end do
    if name:match("^%d+$") then
      local f = io.open("/proc/" .. name .. "/stat")
      local stat = f and f:read("a")
      if f then f:close() end
      local rest = stat and stat:match("^%d+ %(.*%) (.*)$")
      local state, _, _, sess = (rest or ""):match("^(%a) (%d+) (%d+) (%d+)")
      if sess and tonumber(sess) == sid and state ~= "Z" then n = n + 1 end
    end
  end
  return n
end

-- Another session that must keep answering while one is at its limit.
local function echo_session()
  local cat = assert(luxec.spawn({ "cat" }))
  return function(word)
    cat:write(word .. "\n")
    return read_until(cat, word, 5000, true)
  end, cat
end

describe("sandbox limits: the policy", function()
  after_each(H.assert_clean)

  local function err_of(limits)
    local ok, err = pcall(luxec.spawn, { "true" }, { sandbox = full(limits) })
    assert.is_false(ok)
    return err
  end

  it("rejects bad values with an error naming the key", function()
    assert.equal([[bad sandbox policy: 'limits.memory' must be bytes or a size like "512M" ]]
      .. [[(K, M or G), got "1.5G"]], err_of({ memory = "1.5G" }))
    assert.equal([[bad sandbox policy: 'limits.memory' must be bytes or a size like "512M" ]]
      .. [[(K, M or G), got "512MB"]], err_of({ memory = "512MB" }))
    assert.equal([[bad sandbox policy: 'limits.memory' must be at least 1M, got 512 (bytes; ]]
      .. [[write "512M" for MiB)]], err_of({ memory = 512 }))
    assert.equal("bad sandbox policy: 'limits.pids' must be an integer from 1 to 4194304, got 0",
      err_of({ pids = 0 }))
    assert.equal("bad sandbox policy: 'limits.pids' must be an integer from 1 to 4194304, got 2.5",
      err_of({ pids = 2.5 }))
    assert.equal("bad sandbox policy: 'limits.cpu' must be a number of CPUs from 0.01 to 4096, "
      .. "got -1", err_of({ cpu = -1 }))
    assert.equal("bad sandbox policy: 'limits.cpu' must be a number of CPUs from 0.01 to 4096, "
      .. "got 1.5", err_of({ cpu = "1.5" }))
    assert.equal("bad sandbox policy: unknown key 'limits.swap' (memory, pids or cpu)",
      err_of({ swap = "1G" }))
    assert.equal("bad sandbox policy: 'limits' must be a table {memory =, pids =, cpu =}, got "
      .. "number", err_of(5))
  end)

  it("turns sizes and CPUs into what the kernel takes", function()
    local limits = require("luxec.sandbox.limits")
    assert.same({ memory = 512 * 1024 * 1024, pids = 256, cpu_quota_us = 150000,
      cpu_period_us = 100000 }, limits.resolve({ memory = "512M", pids = 256, cpu = 1.5 }))
    assert.same({ memory = 2 * 1024 * 1024 * 1024 }, limits.resolve({ memory = "2G" }))
    assert.same({ memory = 4096 * 1024 }, limits.resolve({ memory = "4096K" }))
    assert.is_nil(limits.resolve({}))
  end)
end)

describe("sandbox limits through the session's cgroup", function()
  -- Usable when a session with every limit starts without best_effort (fail closed otherwise).
  local probe, why = luxec.spawn({ "true" },
    { sandbox = full({ memory = "64M", pids = 8, cpu = 0.5 }) })
  if not probe then
    it("runs where the host can enforce cgroup limits", function()
      pending("skipped: " .. tostring(why))
    end)
    return
  end
  local via = probe:status().sandbox.limits
  probe:wait({ timeout = 5 })
  probe:close()
  after_each(H.assert_clean)

  it("says how each limit is enforced", function()
    for _, k in ipairs({ "memory", "pids", "cpu" }) do
      assert.truthy(via[k].via == "cgroup2" or via[k].via == "cgroup1", k .. ": " .. via[k].via)
    end
    assert.same({ 64 * 1024 * 1024, 8, 0.5, 50000, 100000 },
      { via.memory.max, via.pids.max, via.cpu.max, via.cpu.quota_us, via.cpu.period_us })
  end)

  it("holds no limit file open, and leaves no descriptor behind (a fresh cgroup, not pooled)",
    function()
      local function fds()
        local t, req = {}, assert(uv.fs_scandir("/proc/self/fd"))
        for n in function() return uv.fs_scandir_next(req) end do
          t[#t + 1] = uv.fs_readlink("/proc/self/fd/" .. n) or ""
        end
        return t
      end
      local before = #fds()
      local limited = assert(luxec.spawn({ "cat" },
        { sandbox = full({ memory = "64M", pids = 8, cpu = 0.5 }) }))
      assert.equal(0, limited:status().sandbox.limits.pids.hits) -- read, and closed again
      local v2dir = select(3, require("luxec.core").cgroups()) or "\0"
      local bad
      for _, target in ipairs(fds()) do
        local base = target:match("[^/]+$") or ""
        if base:find("^memory%.") or base:find("^pids%.") or base:find("^cpu%.")
          or (target:find("/luxec%.%d+/s%d+") and target:sub(1, #v2dir) ~= v2dir) then
          bad = target -- a limit's control file, or a cgroup v1 directory of the session
        end
      end
      limited:close()
      assert.is_nil(bad)
      assert.equal(before, #fds())
    end)

  it("stops a fork bomb at the pids limit while other sessions keep working", function()
    local ask, cat = echo_session()
    local bomb = assert(luxec.spawn({ HOG, "fork", "5000" },
      { sandbox = full({ pids = 32, cpu = 0.5 }) }))
    finally(function()
      bomb:close()
      cat:close()
    end)
    local out = read_until(bomb, "forked %d+ failed %d+")
    local forked, errno = out:match("forked (%d+) failed (%d+)")
    forked, errno = tonumber(forked), tonumber(errno)
    assert.equal(11, errno) -- EAGAIN: fork refused
    -- outside: the processes that exist, and the kernel's count of the session's tasks
    assert.equal(forked + 1, session_procs(bomb.pid))
    assert.truthy(forked + 1 <= 32, "more processes than the limit: " .. forked + 1)
    local st = bomb:status()
    assert.equal(32, st.sandbox.limits.pids.current)
    assert.truthy(st.sandbox.limits.pids.hits >= 1)
    -- (on a busy machine the cpu limit may have held the bomb back too: said after it)
    local pids_hit = ("pids limit 32 reached: %d fork%s refused"):format(
      st.sandbox.limits.pids.hits, st.sandbox.limits.pids.hits == 1 and "" or "s")
    local rest = st.sandbox.limits_hit:sub(#pids_hit + 1)
    assert.equal(pids_hit, st.sandbox.limits_hit:sub(1, #pids_hit))
    assert.truthy(rest == "" or rest:find(
      "^; cpu limit 0%.5 CPUs throttled it in %d+ periods? of %d+ %([%d.]+ s held back%)$"),
      st.sandbox.limits_hit)
    -- the host and another session still work while the bomb holds its 32 processes
    assert.truthy(ask("still-here"):find("still-here", 1, true))
    local r = luxec.run({ "sh", "-c", "echo host-forks" }, { timeout = 5 })
    assert.equal("host-forks\n", r.output)
    bomb:terminate({ grace_ms = 0 })
    assert.equal(0, session_procs(bomb.pid))
    bomb:close()
    cat:close()
  end)

  it("ends a memory bomb at the memory limit (OOM kill) while other sessions keep working",
    function()
      local ask, cat = echo_session()
      local bomb = assert(luxec.spawn({ HOG, "mem", "1024" },
        { sandbox = full({ memory = "64M" }) }))
      local st = assert(bomb:wait({ timeout = 20 }))
      local out = bomb:read()
      assert.equal("KILL", st.signal_name)
      assert.falsy(out:find("done", 1, true))
      local last = 0
      for k in out:gmatch("MiB (%d+)") do last = tonumber(k) end
      assert.truthy(last <= 64, "touched " .. last .. " MiB under a 64 MiB limit")
      local m = st.sandbox.limits.memory
      assert.equal(1, m.oom_kills)
      assert.equal(64 * 1024 * 1024, m.max)
      assert.equal("memory limit 64 MiB reached: the kernel killed 1 process (out of memory)",
        st.sandbox.limits_hit)
      assert.truthy(ask("after-oom"):find("after-oom", 1, true))
      bomb:close()
      cat:close()
    end)

  it("ends a bomb of processes each smaller than the host at the memory limit: the host "
    .. "lives (a sandbox's init shares the host's memory and is not in the session's cgroup)",
    function()
      -- the host under test is a luxec of its own: were it killed, this one sees it
      local script = ([[
        local luxec = require("luxec")
        local p = assert(luxec.spawn({ %q, "small", "40", "2" }, { sandbox = {
          mode = "workspace-write", network = "deny", limits = { memory = "32M" } } }))
        local out = ""
        while not out:find("small %%d+") and not p:finished() do
          p:wait_output({ timeout = 20 })
          out = out .. p:read()
        end
        -- (the children touch their memory after the count is printed)
        local function kills() return p:status().sandbox.limits.memory.oom_kills end
        for _ = 1, 200 do
          if kills() > 0 then break end
          p:wait({ timeout = 0.1 })
        end
        print(out:match("small %%d+"), kills() > 0)
        p:close()
        print("host alive")
      ]]):format(HOG)
      local dir = H.tmpdir()
      H.write_file(dir .. "/host.lua", script)
      local r = assert(luxec.run({ H.luxec, dir .. "/host.lua" }, { cwd = dir, timeout = 60 }))
      H.rmtree(dir)
      assert.equal(0, r.code, r.output)
      -- (its last lines: a sanitizer build may warn on stderr first)
      assert.equal("small 40\ttrue\nhost alive\n", r.output:match("small %d+\t.*$"), r.output)
    end)

  it("throttles a session at its cpu limit (cpu.stat nr_throttled)", function()
    if H.valgrind then
      pending("skipped: under valgrind the launch's child is valgrind's emulated fork")
      return
    end
    local spin = assert(luxec.spawn({ HOG, "spin" }, { sandbox = full({ cpu = 0.05 }) }))
    finally(function() spin:close() end)
    local c
    -- (the kernel adds a throttled period's time when the period ends: nr_throttled counts
    -- it before throttled_usec does)
    H.wait_for(function()
      c = spin:status().sandbox.limits.cpu
      return (c.throttled or 0) > 0 and (c.throttled_usec or 0) > 0
    end, 10000, "a throttled period, and its time")
    assert.truthy(c.periods >= c.throttled)
    assert.truthy(spin:status().sandbox.limits_hit:find("^cpu limit 0.05 CPUs throttled it in "))
    spin:terminate({ grace_ms = 0 })
  end)

  it("holds the host's work judging a session's calls to the session's cpu limit", function()
    if H.valgrind then
      pending("skipped: under valgrind the launch's child is valgrind's emulated fork")
      return
    end
    -- each mkdir of a 4,000-byte path of "a/../" steps costs the caller nothing and the host
    -- a lookup per step, on its own serving thread: outside the session's cgroup, so held to
    -- the session's quota by the host (without that: ~0.2 CPU seconds a second here)
    local function host_cpu()
      local f = assert(io.open("/proc/self/stat"))
      local fields = {}
      for w in f:read("a"):match("%) (.*)"):gmatch("%S+") do fields[#fields + 1] = w end
      f:close()
      return (tonumber(fields[12]) + tonumber(fields[13])) / 100 -- (USER_HZ: 100)
    end
    local ws = H.tmpdir()
    local p = assert(luxec.spawn({ HOG, "judged", "3" }, { cwd = ws,
      sandbox = { mode = "workspace-write", network = "deny", limits = { cpu = 0.05 } } }))
    finally(function() p:close() end)
    local c0 = host_cpu()
    local st = assert(p:wait({ timeout = 30 }))
    local used = host_cpu() - c0
    assert.equals(0, st.code)
    assert.matches("^judged %d+\n$", (p:read()))
    -- 3 s at 0.05 CPUs is 0.15 CPU seconds; the rest of the host's loop adds a little
    assert.is_true(used < 0.4, ("the host spent %.2f CPU seconds in 3 s"):format(used))
  end)

  it("gives the agent engine a line naming the limit", function()
    local e = exec.new({ deterministic = true, login = false,
      sandbox = full({ memory = "64M" }) })
    local r = assert(e:exec_command({ cmd = HOG .. " mem 1024", yield_time_ms = 20000 }))
    assert.equal("memory limit 64 MiB reached: the kernel killed 1 process (out of memory)",
      r.sandbox.limits_hit)
    assert.truthy(exec.format(r):find("\nSandbox limit: memory limit 64 MiB reached: the "
      .. "kernel killed 1 process (out of memory)\n", 1, true))
    e:shutdown()
  end)
end)

describe("sandbox limits without a cgroup (rlimit fallback)", function()
  after_each(H.assert_clean)

  it("fails closed naming the limit and why, unless best_effort", function()
    local p, err, code = luxec.spawn({ "true" },
      { cgroup = false, sandbox = full({ memory = "64M" }) })
    assert.is_nil(p)
    assert.equal("ENOTSUP", code)
    assert.equal("sandbox: limits.memory cannot be enforced here: the session has no cgroup "
      .. "(cgroup = false) (with best_effort: RLIMIT_DATA instead, which bounds each process's "
      .. "private writable memory, not the session's total)", err)
    p, err = luxec.spawn({ "true" }, { cgroup = false, sandbox = full({ pids = 8 }) })
    assert.is_nil(p)
    assert.equal("sandbox: limits.pids cannot be enforced here: the session has no cgroup "
      .. "(cgroup = false) (with best_effort: no pids limit (RLIMIT_NPROC counts every process "
      .. "of the user, not the session's))", err)
  end)

  it("with best_effort, RLIMIT_DATA stops a memory bomb and the rest is reported degraded",
    function()
      if H.valgrind then
        pending("skipped: valgrind keeps the rlimits its emulated child sets to itself")
        return
      end
      local p = assert(luxec.spawn({ HOG, "mem", "1024" }, { cgroup = false,
        sandbox = full({ memory = "64M", pids = 8, cpu = 1 }, { best_effort = true }) }))
      local st = assert(p:wait({ timeout = 20 }))
      local out = p:read()
      assert.equal(3, st.code) -- malloc failed: the process saw ENOMEM, nothing was killed
      local at = tonumber(out:match("malloc failed at (%d+)"))
      assert.truthy(at and at <= 64, out)
      local lim = st.sandbox.limits
      assert.same({ "rlimit", "RLIMIT_DATA", "none", "none" },
        { lim.memory.via, lim.memory.rlimit, lim.pids.via, lim.cpu.via })
      assert.same({
        "limits.memory: the session has no cgroup (cgroup = false): RLIMIT_DATA instead, which "
          .. "bounds each process's private writable memory, not the session's total",
        "limits.pids: the session has no cgroup (cgroup = false): no pids limit (RLIMIT_NPROC "
          .. "counts every process of the user, not the session's)",
        "limits.cpu: the session has no cgroup (cgroup = false): no cpu limit (RLIMIT_CPU counts "
          .. "cpu-seconds, not a rate)",
      }, st.sandbox.degraded)
      assert.is_nil(st.sandbox.limits_hit) -- no counter says so: the process only saw ENOMEM
      p:close()
    end)

  it("does the same for an unprivileged user", function()
    if uv.getuid() ~= 0 then
      pending("skipped: needs root to run the check as another user (setpriv)")
      return
    end
    local dir = H.tmpdir()
    assert(uv.fs_chown(dir, 65534, 65534))
    local script = dir .. "/limits.lua"
    local f = assert(io.open(script, "w"))
    f:write(([[
      local luxec = require("luxec")
      local p, err = luxec.spawn({"true"}, {sandbox = {mode = "full-access",
        limits = {memory = "64M"}}})
      print(("closed %%s %%s"):format(p == nil, err))
      p = assert(luxec.spawn({%q, "mem", "1024"}, {sandbox = {mode = "full-access",
        best_effort = true, limits = {memory = "64M"}}}))
      local st = p:wait({timeout = 20})
      print(("code %%d %%s"):format(st.code, st.sandbox.limits.memory.via))
      print("out " .. p:read():match("malloc failed at %%d+"))
      p:close()
    ]]):format(HOG))
    f:close()
    local env = { "PATH=" .. os.getenv("PATH"), "HOME=" .. dir }
    local r = H.run({ cmd = "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
      H.luxec, script }, { env = env, cwd = dir })
    H.rmtree(dir)
    assert.equal(0, r.code, r.stderr)
    local closed = r.stdout:match("closed true ([^\n]*)")
    assert.truthy(closed, r.stdout)
    assert.truthy(closed:find("^sandbox: limits%.memory cannot be enforced here: "), closed)
    assert.truthy(closed:find("cgroup v1: ", 1, true), closed) -- the reason of each layer
    assert.truthy(closed:find("%(with best_effort: RLIMIT_DATA instead"), closed)
    assert.truthy(r.stdout:find("code 3 rlimit\n", 1, true), r.stdout)
    local at = tonumber(r.stdout:match("out malloc failed at (%d+)"))
    assert.truthy(at and at <= 64, r.stdout)
  end)
end)
