--- Shared helpers of the soak scenarios (loaded with dofile by each soak/*.lua): /proc
--- accounting (descriptors, memory, CPU time, descendants, start times), checks that collect
--- failures, and the one report line each scenario ends with.
local uv = require("luv")

local C = {}

C.KiB, C.MiB, C.GiB = 1024, 1024 * 1024, 1024 * 1024 * 1024

--- What a scenario that starts its own host needs: the luxec executable, the soak folder, a
--- marker unique to this run (MARK: `sleep MARK` and SOAK_MARK=MARK find its processes) and
--- a new temporary directory.
function C.host_setup()
  local bin = assert(os.getenv("LUXEC_BIN"), "LUXEC_BIN (the luxec executable) is not set")
  math.randomseed(uv.hrtime())
  local mark = ("1000.%d%06d"):format(uv.os_getpid(), math.random(0, 999999))
  return bin, arg[0]:match("^(.*)/") or ".", mark, assert(uv.fs_mkdtemp("/tmp/luxec-soak-XXXXXX"))
end

--- A reader of p's output that hands every piece to verify(data, from, to, offset) with its
--- absolute offset (the two sides of a dropped gap apart) and keeps count: r.got (bytes
--- returned), r.dropped (bytes it was told were dropped), r.reads, r.cursor (the offset the
--- next read starts from). r.consume() reads what is there.
function C.reader(p, verify)
  local r = { got = 0, dropped = 0, reads = 0, cursor = 0 }
  function r.consume()
    local data, dropped, gap_at = p:read()
    if #data == 0 and dropped == 0 then return end
    r.reads = r.reads + 1
    if dropped > 0 then
      verify(data, 1, gap_at, r.cursor)
      verify(data, gap_at + 1, #data, r.cursor + gap_at + dropped)
    else
      verify(data, 1, #data, r.cursor)
    end
    r.got, r.dropped = r.got + #data, r.dropped + dropped
    r.cursor = r.cursor + #data + dropped
  end
  return r
end

function C.now()
  return uv.hrtime() / 1e9
end

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end
C.read_file = read_file

-- The names in a directory. (luv 1.44's synchronous fs_scandir leaks about 0.5 KiB of Lua
-- heap a call, which would show up as growth here: opendir/readdir does not.)
local function scandir(dir)
  local names = {}
  local d = uv.fs_opendir(dir, nil, 256)
  if not d then return names end
  while true do
    local entries = d:readdir()
    if not entries then break end
    for _, e in ipairs(entries) do names[#names + 1] = e.name end
  end
  d:closedir()
  return names
end
C.scandir = scandir

--- A field of /proc/PID/status in KiB (VmRSS, VmHWM, ...).
function C.status_kib(pid, field)
  local s = read_file(("/proc/%s/status"):format(pid or "self"))
  return s and tonumber(s:match(field .. ":%s*(%d+)"))
end

--- Reset this process's VmHWM to its VmRSS (root: /proc/self/clear_refs); the RSS then.
function C.reset_peak()
  collectgarbage()
  collectgarbage()
  local f = io.open("/proc/self/clear_refs", "w")
  if f then
    f:write("5")
    f:close()
  end
  return C.status_kib("self", "VmRSS")
end

--- How many descriptors PID has open (for "self", the scan's own is not counted).
function C.fd_count(pid)
  local n = #scandir(("/proc/%s/fd"):format(pid or "self"))
  if pid == nil or pid == "self" or pid == uv.os_getpid() then n = n - 1 end
  return n
end

--- What PID's descriptors are, by kind: {pipe=, pty=, pidfd=, cgroup=, socket=, eventfd=,
--- netns=, other=}.
function C.fd_kinds(pid)
  local dir = ("/proc/%s/fd"):format(pid or "self")
  local kinds = { pipe = 0, pty = 0, pidfd = 0, cgroup = 0, socket = 0, eventfd = 0, netns = 0,
    other = 0 }
  for _, name in ipairs(scandir(dir)) do
    local target = uv.fs_readlink(dir .. "/" .. name)
    local kind = "other"
    if not target then
      kind = nil -- the scan's own descriptor, already closed
    elseif target:find("^pipe:") then
      kind = "pipe"
    elseif target == "/dev/ptmx" or target:find("^/dev/pts/") then
      kind = "pty"
    elseif target:find("pidfd") then
      kind = "pidfd"
    elseif target:find("^/sys/fs/cgroup") then
      kind = "cgroup"
    elseif target:find("^socket:") then
      kind = "socket"
    elseif target == "anon_inode:[eventfd]" then
      kind = "eventfd"
    elseif target:find("^net:%[") then
      kind = "netns"
    end
    if kind then kinds[kind] = kinds[kind] + 1 end
  end
  return kinds
end

--- This process's CPU time (user + system, every thread) in seconds.
function C.cpu_seconds()
  local r = uv.getrusage()
  return r.utime.sec + r.utime.usec / 1e6 + r.stime.sec + r.stime.usec / 1e6
end

--- {pid = {ppid=, sid=, state=, start=, comm=, flags=}} for every process in /proc.
function C.processes()
  local all = {}
  for _, entry in ipairs(scandir("/proc")) do
    local pid = tonumber(entry)
    local stat = pid and read_file("/proc/" .. entry .. "/stat")
    if stat then
      local comm, state, rest = stat:match("^%d+ %((.*)%) (%a) (.*)$")
      if comm then
        local f = {}
        for x in rest:gmatch("%S+") do f[#f + 1] = x end
        -- rest starts at field 4 (ppid); flags is field 9, starttime field 22
        all[pid] = { ppid = tonumber(f[1]), sid = tonumber(f[3]), state = state, comm = comm,
          flags = tonumber(f[6]), start = f[19] }
      end
    end
  end
  return all
end

--- The start time of PID (clock ticks after boot, as a string), or nil when it is gone.
function C.start_time(pid)
  local stat = read_file(("/proc/%d/stat"):format(pid))
  if not stat then return nil end
  local rest = stat:match("^%d+ %(.*%) %a (.*)$")
  local f = {}
  for x in rest:gmatch("%S+") do f[#f + 1] = x end
  return f[19]
end

--- Whether PID is alive and still the process that started at `start` (when given): a zombie
--- or a process the kernel is tearing down (PF_EXITING) counts as gone.
function C.alive(pid, start)
  local stat = read_file(("/proc/%d/stat"):format(pid))
  if not stat then return false end
  local state, rest = stat:match("^%d+ %(.*%) (%a) (.*)$")
  if state == nil or state == "Z" or state == "X" then return false end
  local f = {}
  for x in rest:gmatch("%S+") do f[#f + 1] = x end
  if start and f[19] ~= start then return false end -- the pid was reused
  local PF_EXITING = 0x4
  return tonumber(f[6]) & PF_EXITING == 0
end

--- Every live descendant of root (zombies and exiting ones left out), as a list of pids.
function C.descendants(root, procs)
  procs = procs or C.processes()
  local out = {}
  for pid, p in pairs(procs) do
    local up, depth = p.ppid, 0
    while up and up > 1 and up ~= root and depth < 256 do
      up, depth = procs[up] and procs[up].ppid, depth + 1
    end
    if up == root and p.state ~= "Z" and p.state ~= "X" then out[#out + 1] = pid end
  end
  table.sort(out)
  return out
end

--- The host's live children but its cgroup watchdog.
function C.children()
  local core = require("luxec.core")
  local watchdog = core.watchdog_pid()
  local kids = {}
  for _, tid in ipairs(scandir("/proc/self/task")) do
    local s = read_file(("/proc/self/task/%s/children"):format(tid)) or ""
    for pid in s:gmatch("%d+") do
      pid = tonumber(pid)
      if pid ~= watchdog and C.alive(pid) then kids[#kids + 1] = pid end
    end
  end
  return kids
end

--- Every pid in the session cgroups under this host's cgroup directory.
function C.cgroup_pids()
  local core = require("luxec.core")
  local ok, _, dir = core.cgroups()
  local pids = {}
  if not ok or not dir then return pids end
  for _, name in ipairs(scandir(dir)) do
    local procs = read_file(dir .. "/" .. name .. "/cgroup.procs")
    for pid in (procs or ""):gmatch("%d+") do
      pid = tonumber(pid)
      if C.alive(pid) then pids[#pids + 1] = pid end
    end
  end
  return pids
end

--- Pids (not ours) whose command line or environment contains `marker`.
function C.marked(marker)
  local me = uv.os_getpid()
  local out = {}
  for _, entry in ipairs(scandir("/proc")) do
    local pid = tonumber(entry)
    if pid and pid ~= me then
      local cmd = read_file("/proc/" .. entry .. "/cmdline") or ""
      local env = read_file("/proc/" .. entry .. "/environ") or ""
      if (cmd:find(marker, 1, true) or env:find(marker, 1, true)) and C.alive(pid) then
        out[#out + 1] = pid
      end
    end
  end
  return out
end

--- For a host a driver starts and kills: wait (up to an hour) to be killed, but exit (ending
--- every session) if the driver goes first.
function C.wait_to_be_killed()
  local luxec = require("luxec")
  local parent = uv.os_getppid()
  for _ = 1, 3600 * 4 do
    luxec.sleep(0.25)
    if uv.os_getppid() ~= parent then os.exit(1) end
  end
  os.exit(1)
end

--- Pids of live `sleep MARK` processes (the exact command line).
function C.sleepers(mark)
  local out = {}
  for _, pid in ipairs(C.marked(mark)) do
    if read_file(("/proc/%d/cmdline"):format(pid)) == "sleep\0" .. mark .. "\0" then
      out[#out + 1] = pid
    end
  end
  return out
end

--- Pump the loop (from top-level code or a task) until cond() or timeout seconds.
function C.wait_until(cond, timeout, step_ms)
  local luxec = require("luxec")
  local deadline = C.now() + timeout
  while not cond() do
    if C.now() >= deadline then return false end
    luxec.sleep((step_ms or 20) / 1000)
  end
  return true
end

--- A scenario's verdict: check() collects failures, report() prints them and the line
--- "soak: NAME  SUMMARY  PASS|FAIL" and exits 0 or 1.
function C.scenario(name)
  local S = { name = name, failures = {} }
  function S.check(ok, fmt, ...)
    if not ok then
      local msg = select("#", ...) > 0 and fmt:format(...) or fmt
      S.failures[#S.failures + 1] = msg
    end
    return ok
  end
  function S.info(fmt, ...)
    io.stdout:write(("soak: %s: " .. fmt .. "\n"):format(name, ...))
    io.stdout:flush()
  end
  function S.report(fmt, ...)
    local shown = 0
    for _, msg in ipairs(S.failures) do
      shown = shown + 1
      if shown > 20 then
        io.stdout:write(("soak: %s: ... and %d more failures\n"):format(name, #S.failures - 20))
        break
      end
      io.stdout:write(("soak: %s: FAILED: %s\n"):format(name, msg))
    end
    local verdict = #S.failures == 0 and "PASS" or "FAIL"
    io.stdout:write(("soak: %-13s "):format(name) .. fmt:format(...) .. "  " .. verdict .. "\n")
    io.stdout:flush()
    os.exit(#S.failures == 0 and 0 or 1)
  end
  return S
end

--- Numbers as people read them.
function C.bytes(n)
  if n >= C.GiB then return ("%.2f GiB"):format(n / C.GiB) end
  if n >= C.MiB then return ("%.1f MiB"):format(n / C.MiB) end
  if n >= C.KiB then return ("%.1f KiB"):format(n / C.KiB) end
  return ("%d B"):format(n)
end

return C
