--- The host of soak/ulimit.lua, run under `ulimit -n 64` (soft and hard: luxec raises its soft
--- limit to the hard one). Prints "FAILED: ..." for each failed check, "INFO: ..." lines, and
--- "SUMMARY: ..." last, then creates READY and waits to be killed (with one session whose
--- setsid escapee carries MARK: the driver checks the watchdog still ends it).
---   luxec soak/ulimit_host.lua MARK READY
local luxec = require("luxec")
local uv = require("luv")
local core = require("luxec.core")
local C = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")

local MARK, READY = arg[1], arg[2]
assert(MARK and READY, "usage: ulimit_host.lua MARK READY")
local failures = 0
local function check(ok, fmt, ...)
  if not ok then
    failures = failures + 1
    print("FAILED: " .. fmt:format(...))
  end
  return ok
end
local function info(fmt, ...) print("INFO: " .. fmt:format(...)) end

local limits = C.read_file("/proc/self/limits") or ""
local soft, hard = limits:match("Max open files%s+(%d+)%s+(%d+)")
check(soft == "64" and hard == "64",
  "RLIMIT_NOFILE is %s/%s, not 64/64 (run it under ulimit -n 64)", tostring(soft), tostring(hard))

--- spawn, and anything but a process or a clean nil, "EMFILE: ...", "EMFILE" is a failure.
local emfile, other = 0, 0
local function try_spawn(argv, opts)
  local ok, p, err, code = pcall(luxec.spawn, argv, opts)
  if not check(ok, "spawn raised instead of returning: %s", tostring(p)) then
    other = other + 1
    return nil
  end
  if p then return p end
  if check(code == "EMFILE" and type(err) == "string" and err:find("^EMFILE: too many open files"),
      "spawn failed with %s / %s, expected EMFILE", tostring(err), tostring(code)) then
    emfile = emfile + 1
  else
    other = other + 1
  end
  return nil, code
end

--- How many descriptors can still be opened (counted by opening /dev/null until it fails).
local function free_fds()
  local fds = {}
  while true do
    local fd = uv.fs_open("/dev/null", "r", 0)
    if not fd then break end
    fds[#fds + 1] = fd
  end
  for _, fd in ipairs(fds) do uv.fs_close(fd) end
  return #fds
end

--- Whether a live session's process really is in a session cgroup of this host, as its
--- status says.
local function in_own_cgroup(p)
  local cg = (C.read_file(("/proc/%d/cgroup"):format(p.pid)) or ""):match("0::(%S+)")
  local _, _, dir = core.cgroups()
  local parent = cg and cg:match("^(.*)/s%d+$")
  return p:status().cgroup and parent ~= nil and dir ~= nil and dir:sub(-#parent) == parent, cg
end

local function session_dirs()
  local _, _, dir = core.cgroups()
  local n = 0
  for _, name in ipairs(C.scandir(dir)) do
    if name:match("^s%d+$") then n = n + 1 end
  end
  return n
end

local live = {}
local function echo_ok(p, tag)
  local line = tag .. "\n"
  p:write(line)
  local want = p:status().tty and (tag .. "\r\n" .. tag .. "\r\n") or line
  local got = ""
  C.wait_until(function()
    got = got .. p:read()
    return #got >= #want
  end, 10, 5)
  return check(got == want, "session %d echoed %q, expected %q", p.pid, got, want)
end

-- A: a spawn at every degree of shortage, 0..8 descriptors free, twice; every failure clean,
-- every session that starts really in its cgroup, no session directory left over.
local first = assert(luxec.spawn({ "cat" })) -- the watchdog, and one cgroup in use
live[#live + 1] = first
local watchdog = core.watchdog_pid()
for pass = 1, 2 do
  for slack = 0, 8 do
    local fill = {}
    for _ = 1, free_fds() - slack do fill[#fill + 1] = uv.fs_open("/dev/null", "r", 0) end
    local p = try_spawn({ "cat" }, { tty = slack % 2 == 1 })
    for _, fd in ipairs(fill) do uv.fs_close(fd) end
    if p then
      live[#live + 1] = p
      local ok, cg = in_own_cgroup(p)
      check(ok, "pass %d, %d free: the session says cgroup but its process is in %s", pass,
        slack, tostring(cg))
      check(echo_ok(p, "sweep-" .. pass .. "-" .. slack), "pass %d, %d free: no echo", pass, slack)
    end
  end
end
local dirs = session_dirs()
-- live sessions' cgroups, plus at most one pooled by a spawn that failed after taking it
check(dirs <= #live + 1, "%d session cgroup directories for %d live sessions", dirs, #live)
info("shortage sweep: %d sessions started, %d clean EMFILE failures, %d session dirs", #live,
  emfile, dirs)

-- B: spawn until it fails for both kinds in a row (a PTY session needs more descriptors than
-- a pipe one: one failing says nothing of the other); then 20 more attempts, all failing
-- cleanly.
local started = #live
local misses, k = 0, 0
while #live < 64 and misses < 2 do
  k = k + 1
  local p = try_spawn({ "cat" }, { tty = k % 2 == 1 })
  if p then
    live[#live + 1] = p
    misses = 0
  else
    misses = misses + 1
  end
end
local capacity = #live
check(capacity < 64, "64 sessions started under a limit of 64 descriptors")
local before = emfile
for i = 1, 20 do
  local p = try_spawn({ "cat" }, { tty = i % 2 == 1 })
  if p then live[#live + 1] = p end -- (counted as not failing; ended with the others)
end
check(emfile - before == 20, "%d of 20 spawns at the limit failed with EMFILE", emfile - before)
info("at the limit: %d sessions live (%d started in B), 20 more spawns: %d EMFILE", capacity,
  capacity - started, emfile - before)

-- C: every session still works.
local echoed = 0
for i, p in ipairs(live) do
  if echo_ok(p, "ping-" .. i) then echoed = echoed + 1 end
end

-- D: end half of them cleanly (EOF: cat exits 0), then as many of the same kinds start again
-- (a terminal session holds fewer descriptors than one with pipes): a failed spawn that
-- leaked a descriptor would leave less room.
local ended, exited0, kinds = 0, 0, {}
for i = #live, 1, -1 do
  if i % 2 == 0 then
    local p = table.remove(live, i)
    kinds[#kinds + 1] = p:status().tty
    p:close_stdin()
    local st = p:wait({ timeout = 10 })
    if check(st and st.code == 0, "session %d ended %s after EOF", p.pid,
        st and tostring(st.signal_name or st.code) or "not at all") then
      exited0 = exited0 + 1
    end
    p:close()
    ended = ended + 1
  end
end
local again = 0
while #live < 64 do
  local p = try_spawn({ "cat" }, { tty = kinds[again + 1] == true })
  if not p then break end
  live[#live + 1] = p
  again = again + 1
  check(echo_ok(p, "again-" .. again), "a session started after the others ended: no echo")
end
check(again == ended, "%d sessions ended, %d started again before EMFILE", ended, again)

-- E: room (two ended) for one more with a setsid escapee, the watchdog alive; the driver
-- kills us.
for _ = 1, 2 do table.remove(live):close() end
luxec.sleep(0.01) -- a closed session's descriptors are released by the loop's close callbacks
local esc = try_spawn({ "sh", "-c", "setsid sleep " .. MARK .. " </dev/null >/dev/null 2>&1 & "
  .. "exec cat" })
if check(esc ~= nil, "no room for the escapee session after closing one") then
  live[#live + 1] = esc
  check(C.wait_until(function() return #C.sleepers(MARK) >= 1 end, 10),
    "the escapee did not start")
end
check(watchdog and C.alive(watchdog), "the cgroup watchdog (%s) is not running", tostring(watchdog))
local wfds = watchdog and C.fd_count(watchdog) or -1
-- 0-2 and a spare /dev/null, its pipe, the host's cgroup directory and its parent
check(wfds >= 0 and wfds <= 7, "the watchdog holds %d descriptors (at most 7 expected)", wfds)
print(("SUMMARY: %d sessions at the limit, %d clean EMFILE, 0 raised: %s, %d/%d echoed, %d ended "
  .. "(%d exit 0), %d restarted, watchdog %s"):format(capacity, emfile, other == 0 and "yes" or
  "NO", echoed, capacity, ended, exited0, again,
  (watchdog and C.alive(watchdog)) and "alive" or "DEAD"))
io.stdout:flush()
assert(io.open(READY, "w")):close()
C.wait_to_be_killed()
