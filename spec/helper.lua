--- Shared test helpers. Loaded by busted (see .busted) and required by specs as
--- `local H = require("helper")`.
local uv = require("luv")

local H = {}

H.root = uv.cwd()
H.build = os.getenv("LUXEC_BUILD_DIR") or (H.root .. "/build")
H.luxec = H.build .. "/bin/luxec"
--- The host runs under valgrind (scripts/test --valgrind), which runs a launch's clone as a
--- fork of its own: what the child sets up between clone and exec (rlimits, cgroup moves)
--- is valgrind's emulation, not what the program gets.
H.valgrind = os.getenv("LUXEC_UNDER_VALGRIND") == "1"

--- Absolute path of a fixture program built into build/fixtures.
function H.fixture(name)
  return H.build .. "/fixtures/" .. name
end

--- n random decimal digits (n <= 15, the first not 0) from the kernel's generator: names and
--- keys that neither another run nor a spec that seeds math.random can repeat.
function H.rand_digits(n)
  assert(n >= 1 and n <= 15, "1 to 15 digits")
  local x = string.unpack("<I7", uv.random(7))
  local lo = math.tointeger(10 ^ (n - 1))
  return tostring(lo + x % (lo * 10 - lo))
end

local function now_ms()
  return uv.hrtime() / 1e6
end
H.now_ms = now_ms

--- How the CPU time of run(make(n)) grows per 4x of n: about 4 when linear, 16 when
--- quadratic, measured from n to 16n (the square root of that ratio). A complexity check
--- that holds on a slow machine or under valgrind, where an absolute time limit does not, and
--- beside other work: n is doubled (up to 64 times) until a run takes 20 ms (a run of a few ms
--- is noise), each size is timed after a full collection (the garbage of the input's making
--- was timed before), best of three; a loaded machine's caches still slow the large size more
--- than the small one (4n read 8.8x once), which the span of 16x leaves far from quadratic.
--- Inputs are made untimed.
function H.growth(make, run, n)
  local function best(m, tries)
    local input, b = make(m), math.huge
    for _ = 1, tries do
      collectgarbage()
      local t0 = os.clock()
      run(input)
      b = math.min(b, os.clock() - t0)
    end
    return b
  end
  local t1 = best(n, 3)
  for _ = 1, 6 do
    if t1 >= 0.02 then break end
    n = 2 * n
    t1 = best(n, 3)
  end
  local t16 = best(16 * n, 2)
  return math.sqrt(t16 / math.max(t1, 1e-3)),
    ("%.3f s for n=%d, %.3f s for 16n"):format(t1, n, t16)
end

--- A lock of this machine's, by name, held until release() is called: a copy of the suite
--- running beside this one waits for it (up to timeout_s, 600 by default). For what every
--- copy changes alike: the system's package database and /usr. (flock(1) holds it while its
--- `cat` reads the pipe release() closes.)
function H.machine_lock(name, timeout_s)
  local luxec = require("luxec")
  local p = assert(luxec.spawn({ "flock", "-w", tostring(timeout_s or 600),
    "/tmp/luxec-spec-" .. name .. ".lock", "sh", "-c", "echo locked; exec cat" },
    { stdin = "pipe" }))
  local ok, err = p:expect("locked\n", { timeout = (timeout_s or 600) + 10 })
  if not ok then
    p:close()
    error("the machine lock " .. name .. ": " .. tostring(err), 2)
  end
  return function()
    p:close_stdin()
    p:wait({ timeout = 10 })
    p:close()
  end
end

--- Pump the shared loop until cond() is true; fails after timeout_ms naming `what`.
function H.wait_for(cond, timeout_ms, what)
  timeout_ms = timeout_ms or 5000
  local deadline = now_ms() + timeout_ms
  local timer = uv.new_timer()
  timer:start(10, 10, function() end) -- never block longer than 10 ms in one turn
  local ok = cond()
  while not ok and now_ms() < deadline do
    uv.run("once")
    ok = cond()
  end
  timer:close()
  uv.run("nowait") -- let the close finish
  assert(ok, ("timed out after %d ms waiting for %s"):format(timeout_ms, what or "condition"))
  return ok
end

--- Wait until pred(text) is true of the session's output so far (p:snapshot()'s head and
--- tail, the first stream unless `stream` is given), through the public API only: each turn
--- waits for new output with p:wait_output. Fails after timeout_ms (5000) naming `what` and
--- showing the output; returns the text and what pred returned. pred may be a Lua pattern.
function H.wait_output(p, pred, timeout_ms, what, stream)
  if type(pred) == "string" then
    local pattern = pred
    what = what or ("%q in the output"):format(pattern)
    pred = function(text) return text:match(pattern) end
  end
  timeout_ms = timeout_ms or 5000
  local deadline = now_ms() + timeout_ms
  local function text()
    local s = p:snapshot(stream)
    return s.head .. s.tail
  end
  local t = text()
  local got = pred(t)
  while not got do
    local left = deadline - now_ms()
    if left <= 0 or p:finished() then break end
    p:wait_output({ timeout = left / 1000, stream = stream })
    t = text()
    got = pred(t)
  end
  assert(got, ("%s waiting for %s; the output was: %q"):format(
    p:finished() and "the session finished" or ("timed out after %d ms"):format(timeout_ms),
    what or "the output", t))
  return t, got
end

--- PIDs of this process's live children (zombies included).
function H.children()
  local pids = {}
  local watchdog = require("luxec.core").watchdog_pid()
  local dir = ("/proc/%d/task"):format(uv.os_getpid())
  local req = assert(uv.fs_scandir(dir))
  for tid in function() return uv.fs_scandir_next(req) end do
    local f = io.open(dir .. "/" .. tid .. "/children")
    if f then
      for pid in f:read("a"):gmatch("%d+") do
        -- the host's cgroup watchdog, and the keeper of a normal user's network namespaces
        -- made ahead, live as long as it
        local comm = H.read_file("/proc/" .. pid .. "/comm") or ""
        if tonumber(pid) ~= watchdog and comm ~= "luxec-netns\n" then
          pids[#pids + 1] = tonumber(pid)
        end
      end
      f:close()
    end
  end
  return pids
end

--- PIDs of every descendant of pid, as the host sees them (a sandboxed process sees other
--- numbers: its own pid namespace's), found through /proc/<pid>/task/*/children.
function H.descendants(pid)
  local out, queue = {}, { pid }
  while #queue > 0 do
    local p = table.remove(queue)
    local dir = ("/proc/%d/task"):format(p)
    local req = uv.fs_scandir(dir)
    for tid in function() return req and uv.fs_scandir_next(req) end do
      local f = io.open(dir .. "/" .. tid .. "/children")
      if f then
        for kid in f:read("a"):gmatch("%d+") do
          out[#out + 1] = tonumber(kid)
          queue[#queue + 1] = tonumber(kid)
        end
        f:close()
      end
    end
  end
  return out
end

-- Where each luv timer was made (weak: a collected one is gone): a timer a test leaves
-- active is named by that place in assert_clean's message, not only by its type.
local timer_origins = setmetatable({}, { __mode = "k" })
do
  local new_timer = uv.new_timer
  uv.new_timer = function(...)
    local t, err = new_timer(...)
    if t then timer_origins[t] = debug.traceback("", 2):gsub("^\nstack traceback:\n\t", "") end
    return t, err
  end
end

local function active_timer_origins()
  local out = {}
  for t, where in pairs(timer_origins) do
    local ok, active = pcall(function() return not t:is_closing() and t:is_active() end)
    if ok and active then out[#out + 1] = (where:match("^[^\n]*\n?[^\n]*\n?[^\n]*")) end
  end
  return out
end

--- Fail the current test if it left a handle keeping the loop alive or a child process.
--- Cleans up what it finds so one leak does not fail every later test.
local reported_children = {}
function H.assert_clean()
  local core = require("luxec.core")
  uv.run("nowait")
  local handles = core.active_handles()
  -- Children that are on their way out (a killed host's watchdog finishing its sweep) get
  -- two seconds to go.
  local function new_children()
    local list = {}
    for _, pid in ipairs(H.children()) do
      if not reported_children[pid] then list[#list + 1] = pid end
    end
    return list
  end
  -- The list judged is the one of the wait's last look: one read again after it could hold a
  -- child adopted in between (an orphan of a tree ending just then), not yet reaped.
  local kids
  pcall(H.wait_for, function() -- the loop reaps them
    kids = new_children()
    return #kids == 0
  end, 2000)
  -- a child reported once (a zombie that is not luxec's to reap stays one) fails only the
  -- test that left it, not every test after it
  for _, pid in ipairs(kids) do reported_children[pid] = true end
  local described = {}
  for _, pid in ipairs(kids) do
    local f = io.open(("/proc/%d/stat"):format(pid))
    described[#described + 1] = ("%d %s"):format(pid, f and f:read("l"):match("%b() %a") or "?")
    if f then f:close() end
    uv.kill(pid, "sigkill")
  end
  if #handles > 0 then
    local where = active_timer_origins()
    assert(false, "test left active handles: " .. table.concat(handles, ", ")
      .. (#where > 0 and ("; luv timers made at: " .. table.concat(where, " | ")) or ""))
  end
  assert(#kids == 0, "test left child processes: " .. table.concat(described, ", "))
end

--- Whether a process with this pid exists and can still run: a zombie, or a process the
--- kernel is tearing down (PF_EXITING: it never returns to user space; a cgroup reports
--- "populated 0" at that point already) counts as gone.
function H.alive(pid)
  local f = io.open(("/proc/%d/stat"):format(pid))
  if not f then return false end
  local stat = f:read("a")
  f:close()
  local state, rest = stat:match("^%d+ %(.*%) (%a) (.*)$")
  if state == nil or state == "Z" or state == "X" then return false end
  local flags = tonumber(rest:match("^%S+ %S+ %S+ %S+ %S+ (%d+)"))
  local PF_EXITING = 0x4
  return not (flags and flags & PF_EXITING ~= 0)
end

--- A condition for H.wait_for: none of pids is alive.
---@param pids integer[]
function H.all_gone(pids)
  return function()
    for _, pid in ipairs(pids) do
      if H.alive(pid) then return false end
    end
    return true
  end
end

--- Whether the sandbox specs can run here: Landlock ABI 3 or later, and namespaces (root's,
--- or a normal user's through a user namespace). true, or false and why not.
function H.sandbox_usable()
  local layers = require("luxec.core").sandbox_layers()
  if layers.landlock < 3 then
    return false, "Landlock ABI " .. layers.landlock .. " (3 or later needed)"
  end
  if not layers.can_unshare and not layers.userns then
    return false, "no namespaces: not root, and no user namespace can be made ("
      .. tostring(layers.userns_reason) .. ")"
  end
  return true
end

--- Inside a describe: when the sandbox cannot run here, one pending test says why, and true
--- (the describe returns then).
function H.skip_without_sandbox()
  local ok, why = H.sandbox_usable()
  if ok then return false end
  -- the helper's globals are not the spec's, and busted's pending() inside an it() from here
  -- would pass it silently: a pending test of the describe, named with the reason
  require("busted").pending("runs where the kernel offers every layer: skipped: " .. why)
  return true
end

--- A workspace under the temporary directory and a directory outside every writable root
--- (/var/tmp), both by their real paths; remove them with H.rmtree and H.rm_outside.
function H.workspace_and_outside()
  local root = assert(uv.fs_realpath(H.tmpdir()))
  local outside = assert(uv.fs_realpath(assert(uv.fs_mkdtemp("/var/tmp/luxec-outside-XXXXXX"))))
  return root, outside
end

function H.rm_outside(outside)
  os.execute("rm -rf '" .. outside .. "'")
end

--- Write text to a file (mode: chmod it after), read a whole file (nil when missing).
function H.write_file(path, text, mode)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
  if mode then assert(uv.fs_chmod(path, mode)) end
end

function H.read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

--- A fresh temporary directory; H.rmtree removes it, and so does the end of the spec file
--- that made it (a test that fails before its own cleanup leaves nothing in /tmp either:
--- repositories left there would be searched by every later sandboxed spawn).
local made = {}
function H.tmpdir()
  local dir = assert(uv.fs_mkdtemp("/tmp/luxec-spec-XXXXXX"))
  made[#made + 1] = dir
  return dir
end

do
  local ok, busted = pcall(require, "busted")
  if ok and type(busted.subscribe) == "function" then
    busted.subscribe({ "file", "end" }, function()
      for i = #made, 1, -1 do
        if uv.fs_stat(made[i]) then os.execute("rm -rf '" .. made[i] .. "'") end
        made[i] = nil
      end
      return nil, true
    end)
  end
end

function H.rmtree(dir)
  assert(dir:match("^/tmp/luxec%-"), "refusing to remove " .. dir)
  os.execute("rm -rf '" .. dir .. "'")
end

--- Whether this run can use cgroups (root with a writable cgroup2 tree); the reason if not.
function H.cgroups()
  local ok, why = require("luxec.core").cgroups()
  return ok, why
end

--- Whether pid is gone or has SIGKILL pending: a kill returns without waiting for the kernel
--- to finish the job, so "killed at once" is this, and "gone" follows without anything more.
function H.killed(pid)
  local f = io.open(("/proc/%d/status"):format(pid))
  if not f then return true end
  local status = f:read("a")
  f:close()
  local pnd, shd = status:match("\nSigPnd:%s*(%x+)"), status:match("\nShdPnd:%s*(%x+)")
  local SIGKILL_BIT = 1 << 8
  return not H.alive(pid) or (tonumber(pnd or "0", 16) | tonumber(shd or "0", 16))
    & SIGKILL_BIT ~= 0
end

--- A port free on the loopback now.
function H.free_port()
  local t = uv.new_tcp()
  assert(t:bind("127.0.0.1", 0))
  local port = t:getsockname().port
  t:close()
  uv.run("nowait")
  return port
end

--- The error that fn(...) raises; the test fails when it raises none.
function H.err_of(fn, ...)
  local ok, err = pcall(fn, ...)
  require("luassert").is_false(ok, "expected an error")
  return err
end

--- Whether the command is on PATH.
function H.have(cmd)
  return os.execute("command -v " .. cmd .. " >/dev/null 2>&1") == true
end

local engines = {}

--- An agent engine for one test, with quick settings (deterministic, no login shell) unless
--- cfg says otherwise; H.end_engines() shuts down every one made since.
function H.engine(cfg)
  cfg = cfg or {}
  if cfg.deterministic == nil then cfg.deterministic = true end
  if cfg.login == nil then cfg.login = false end
  local e = require("luxec.engine").new(cfg)
  engines[#engines + 1] = e
  return e
end

function H.end_engines()
  for _, e in ipairs(engines) do e:shutdown() end
  engines = {}
end

--- describe(title .. " (cgroup)") and describe(title .. " (no cgroup)"), each checking after
--- every test that nothing is left behind; body(cgroup) defines the tests. Where cgroup v2 is
--- not writable the cgroup one is a pending test that says why.
function H.each_cgroup_mode(title, body)
  local busted = require("busted")
  local describe, pending = busted.describe, busted.pending
  for _, mode in ipairs({ "cgroup", "no cgroup" }) do
    local cgroup = mode == "cgroup"
    describe(title .. " (" .. mode .. ")", function()
      if cgroup and not H.cgroups() then
        -- a pending test of the describe (pending() inside an it() from here passes it)
        pending("runs where cgroup v2 is writable: skipped: " .. select(2, H.cgroups()))
        return
      end
      busted.after_each(H.assert_clean)
      body(cgroup)
    end)
  end
end

--- Run the built luxec (or another program) as a child with pipes; returns
--- {code=, signal=, stdout=, stderr=, ms=}. opts: input (string, then stdin is closed),
--- env (table of "K=V" strings; default: this process's environment), cwd, timeout (ms).
function H.run(args, opts)
  opts = opts or {}
  local cmd = args.cmd or H.luxec
  local stdin, stdout, stderr = uv.new_pipe(), uv.new_pipe(), uv.new_pipe()
  local out, err = {}, {}
  local result = {}
  local started = now_ms()
  local proc, perr
  local eof = 0
  local function reader(buf)
    return function(e, data)
      assert(not e, e)
      if data then
        buf[#buf + 1] = data
      else
        eof = eof + 1
      end
    end
  end
  local env = opts.env
  if not env then
    env = {}
    for k, v in pairs(uv.os_environ()) do
      env[#env + 1] = k .. "=" .. v
    end
  end
  -- (a group of its own: a command that runs out of time is killed with what it started,
  -- where killing it alone left its children to this host, whose session they share)
  proc, perr = uv.spawn(cmd, {
    args = args,
    stdio = { stdin, stdout, stderr },
    env = env,
    cwd = opts.cwd,
    detached = true,
  }, function(code, signal)
    -- (libuv gives code 0 for a program a signal ended: a crash must not read as success)
    result.code, result.signal = signal ~= 0 and 128 + signal or code, signal
  end)
  assert(proc, perr)
  stdout:read_start(reader(out))
  stderr:read_start(reader(err))
  if opts.input then
    stdin:write(opts.input)
  end
  stdin:shutdown(function()
    stdin:close()
  end)
  local ok = pcall(H.wait_for, function()
    return result.code ~= nil and eof == 2
  end, opts.timeout or 10000, "luxec " .. table.concat(args, " "))
  if not ok then
    uv.kill(-proc:get_pid(), "sigkill")
    H.wait_for(function()
      return result.code ~= nil
    end, 2000, "killed child")
    -- (killed: its exit status is no answer; a check of it says why)
    result.code = ("timed out after %d ms and killed"):format(opts.timeout or 10000)
  end
  proc:close()
  stdout:close()
  stderr:close()
  uv.run("nowait")
  result.stdout, result.stderr = table.concat(out), table.concat(err)
  result.ms = now_ms() - started
  result.timed_out = not ok
  return result
end

--- Run a command on a real pseudo-terminal through the ptydrive fixture; `steps` is a list
--- of {"x", text} (wait for text) and {"s", text} (send text, escapes as ptydrive takes).
function H.pty(cmdline, steps, opts)
  local args = { cmd = H.fixture("ptydrive"), "-t", tostring((opts and opts.timeout) or 5000) }
  for _, step in ipairs(steps) do
    args[#args + 1] = "-" .. step[1]
    args[#args + 1] = step[2]
  end
  args[#args + 1] = "--"
  for _, a in ipairs(cmdline) do
    args[#args + 1] = a
  end
  local r = H.run(args, opts)
  r.stdout = r.stdout:gsub("\27%[%?2004[hl]", ""):gsub("\r", "")
  return r
end

return H
