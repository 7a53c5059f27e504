--- W5: COUNT concurrent PTY sessions of SLEEP 60: the time to start them all, the host's RSS
--- (VmRSS) with all of them running, the time to end them all, and how many survived.
---   luxec bench/w5.lua COUNT SLEEP [terminate|terminate-tasks|terminate-all|close [nocgroup]]
--- terminate: p:terminate() on each in turn (the default); terminate-tasks: p:terminate() on
--- each in its own luxec.go task, all at once; terminate-all: luxec.terminate_all(procs);
--- close: p:close() on each, then the loop turned until every one is reaped. nocgroup spawns
--- with
--- cgroup = false.
local luxec = require("luxec")
local uv = require("luv")

local count, sleep = math.tointeger(tonumber(arg[1])), arg[2]
local how = arg[3] or "terminate"
assert(count and sleep,
  "usage: w5.lua COUNT SLEEP [terminate|terminate-tasks|terminate-all|close [nocgroup]]")
local opts = { tty = true }
if arg[4] == "nocgroup" then opts.cgroup = false end

local function status_kib(field)
  local f = assert(io.open("/proc/self/status"))
  local kib = f:read("a"):match(field .. ":%s*(%d+)")
  f:close()
  return tonumber(kib)
end

--- How many processes named comm descend from root (walking /proc's parent links), zombies
--- included: a child left unreaped is left too.
local function count_descendants(root, comm)
  local parent, name = {}, {}
  local req = assert(uv.fs_scandir("/proc"))
  for entry in function() return uv.fs_scandir_next(req) end do
    local pid = tonumber(entry)
    local f = pid and io.open("/proc/" .. entry .. "/stat")
    if f then
      local stat = f:read("a") or ""
      f:close()
      local n, ppid = stat:match("^%d+ %((.*)%) %a (%d+)")
      if n then
        parent[pid], name[pid] = tonumber(ppid), n
      end
    end
  end
  local k = 0
  for pid, n in pairs(name) do
    if n == comm then
      local up, depth = parent[pid], 0
      while up and up > 1 and up ~= root and depth < 64 do
        up, depth = parent[up], depth + 1
      end
      if up == root then k = k + 1 end
    end
  end
  return k
end

--- Whether a process named comm is left below root, zombies included, walking down through
--- the "children" files of each process's tasks: the few processes below the host, not every
--- process of the machine, so cheap enough to ask at every turn of the loop while it reaps.
local function any_below(root, comm)
  local todo = { math.tointeger(root) }
  while #todo > 0 do
    local pid = table.remove(todo)
    local req = uv.fs_scandir(("/proc/%d/task"):format(pid))
    for tid in function() return req and uv.fs_scandir_next(req) end do
      local f = io.open(("/proc/%d/task/%s/children"):format(pid, tid))
      for kid in (f and f:read("a") or ""):gmatch("%d+") do
        local st = io.open(("/proc/%s/stat"):format(kid))
        if st and st:read("a"):match("^%d+ %((.*)%)") == comm then
          st:close()
          f:close()
          return true
        end
        if st then st:close() end
        todo[#todo + 1] = math.tointeger(tonumber(kid))
      end
      if f then f:close() end
    end
  end
  return false
end

local function cpu_seconds()
  local r = uv.getrusage()
  return r.utime.sec + r.stime.sec + (r.utime.usec + r.stime.usec) / 1e6
end

local procs = {}
local t0 = uv.hrtime()
for i = 1, count do
  procs[i] = assert(luxec.spawn({ sleep, "60" }, opts))
end
local start = (uv.hrtime() - t0) / 1e9
-- One turn of the loop with every session registered (C polls every master once). Sessions
-- do not keep the loop alive, so a due timer makes the turn happen.
local turn = uv.new_timer()
turn:start(0, 0, function() end)
uv.run("once")
turn:close()
local rss = status_kib("VmRSS")

t0 = uv.hrtime()
local c0 = cpu_seconds()
if how == "terminate" then
  for _, p in ipairs(procs) do
    p:terminate()
    p:close()
  end
elseif how == "terminate-tasks" then
  local tasks = {}
  for i, p in ipairs(procs) do
    tasks[i] = luxec.go(function()
      p:terminate()
      p:close()
    end)
  end
  for _, t in ipairs(tasks) do
    assert(t:wait())
  end
elseif how == "terminate-all" then
  luxec.terminate_all(procs)
  for _, p in ipairs(procs) do
    p:close()
  end
elseif how == "close" then
  for _, p in ipairs(procs) do
    p:close()
  end
  -- close() kills without waiting: the dead are reaped on the next turns of the loop
  local t = uv.new_timer()
  t:start(1, 1, function() end)
  local deadline = uv.hrtime() + 5e9
  while any_below(uv.os_getpid(), "sleep") and uv.hrtime() < deadline do
    uv.run("once")
  end
  t:close()
else
  error("unknown way to end the sessions: " .. how)
end
local stop, cpu = (uv.hrtime() - t0) / 1e9, cpu_seconds() - c0
local left = count_descendants(uv.os_getpid(), "sleep")
print(("start=%.6f rss_kib=%d kill=%.6f kill_cpu=%.6f survivors=%d")
  :format(start, rss, stop, cpu, left))
if left ~= 0 then os.exit(1) end
