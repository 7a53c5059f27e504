--- The host that soak/sigkill.lua kills: N sessions of `sleep MARK` in several shapes — plain,
--- on a PTY, with background children, setsid double-forks, `setsid -f`, nohup, and a few
--- without a cgroup (direct children only: the parent-death signal is all they have) — then
--- every process it can see that belongs to them written to LIST (pid, start time, kind,
--- comm), and READY created. Then it waits to be killed.
---   luxec soak/sigkill_host.lua N MARK LIST READY
local luxec = require("luxec")
local uv = require("luv")
local C = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")

local N, MARK, LIST, READY = math.tointeger(tonumber(arg[1])), arg[2], arg[3], arg[4]
assert(N and MARK and LIST and READY, "usage: sigkill_host.lua N MARK LIST READY")
local sleep = "sleep " .. MARK

-- {argv, options, how many `sleep MARK` processes it makes}
local shapes = {
  { { "sleep", MARK }, {}, 1 },
  { { "sh", "-c", sleep .. " & exec " .. sleep }, { tty = true }, 2 },
  -- a double fork into a new session: the escapee is reparented away from the session
  { { "sh", "-c", "setsid sh -c '" .. sleep .. " &'; exec " .. sleep }, {}, 2 },
  { { "sh", "-c", "nohup " .. sleep .. " >/dev/null 2>&1 & setsid -f " .. sleep
    .. " </dev/null >/dev/null 2>&1; exec " .. sleep }, {}, 3 },
  { { "sh", "-c", "(setsid " .. sleep .. " </dev/null >/dev/null 2>&1 &); exec " .. sleep },
    { tty = true }, 2 },
}
-- A tenth without a cgroup: plain direct children (their escapees would be out of reach by
-- design). Started last, once the escapees above have left: the first session without a
-- cgroup makes the host a child subreaper, and orphans would come back to it.
local plain = N // 10

local function sleeps()
  return #C.sleepers(MARK)
end

local procs, want = {}, 0
local function start(argv, opts, count)
  opts.stdin = "pipe"
  procs[#procs + 1] = assert(luxec.spawn(argv, opts))
  want = want + count
  return procs[#procs]
end
for i = 1, N - plain do
  local shape = shapes[(i - 1) % #shapes + 1]
  local opts = {}
  for k, v in pairs(shape[2]) do opts[k] = v end
  start(shape[1], opts, shape[3])
end
-- Every sleep there (the escapees start a moment later), then the plain ones.
assert(C.wait_until(function() return sleeps() >= want end, 30),
  ("only %d of %d sleeps started"):format(sleeps(), want))
for _ = 1, plain do start({ "sleep", MARK }, { cgroup = false }, 1) end
assert(C.wait_until(function() return sleeps() >= want end, 30),
  ("only %d of %d sleeps started"):format(sleeps(), want))
local leaders = {}
for _, p in ipairs(procs) do leaders[p.pid] = true end

-- Everything that is ours: descendants, members of the session cgroups, and whatever carries
-- the mark (the escapees that left both the tree and, without a cgroup, everything else).
local me = uv.os_getpid()
local procs_now = C.processes()
local kind = {}
local function classify(pid)
  local p = procs_now[pid]
  -- a process that left its session (setsid) is an escapee, whoever its parent is now
  kind[pid] = kind[pid] or (p and not leaders[p.sid] and "escapee" or "session")
end
for _, pid in ipairs(C.descendants(me, procs_now)) do classify(pid) end
for _, pid in ipairs(C.cgroup_pids()) do classify(pid) end
for _, pid in ipairs(C.marked(MARK)) do classify(pid) end
local watchdog = require("luxec.core").watchdog_pid()
if watchdog then kind[watchdog] = "watchdog" end
kind[me] = "host"

local lines = {}
for pid, k in pairs(kind) do
  local started = C.start_time(pid)
  local p = procs_now[pid]
  if started then
    lines[#lines + 1] = ("%d %s %s %s"):format(pid, started, k, p and p.comm or "?")
  end
end
local f = assert(io.open(LIST .. ".tmp", "w"))
f:write(table.concat(lines, "\n"), "\n")
f:close()
assert(os.rename(LIST .. ".tmp", LIST))
assert(io.open(READY, "w")):close()
C.wait_to_be_killed()
