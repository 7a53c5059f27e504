--- A host killed outright: soak/sigkill_host.lua starts N sessions (setsid escapees, nohup,
--- PTYs, a few without a cgroup) of `sleep MARK`, MARK a number unique to this run that is
--- also in every process's environment (SOAK_MARK), and lists every process it can see. This
--- driver SIGKILLs the host, then for up to WINDOW seconds checks: of the listed processes
--- (pid + start time, so a reused pid does not count) none alive, no process anywhere with
--- the mark in its command line or environment, the host's cgroup directory gone and its
--- watchdog exited.
---   luxec soak/sigkill.lua N
local uv = require("luv")
local C = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")

local N = math.tointeger(tonumber(arg[1] or "50"))
local WINDOW = 5 -- seconds
local S = C.scenario("sigkill")
local luxec_bin, here, MARK, tmp = C.host_setup()
local list, ready = tmp .. "/list", tmp .. "/ready"
local env = {}
for k, v in pairs(uv.os_environ()) do env[#env + 1] = k .. "=" .. v end
env[#env + 1] = "SOAK_MARK=" .. MARK

local exit_signal
local out, err = uv.new_pipe(), uv.new_pipe()
local output = {}
local host, perr = uv.spawn(luxec_bin, {
  args = { here .. "/sigkill_host.lua", tostring(N), MARK, list, ready },
  stdio = { nil, out, err }, env = env,
}, function(_, sig) exit_signal = sig end)
assert(host, perr)
local host_pid = host:get_pid()
for _, pipe in ipairs({ out, err }) do
  pipe:read_start(function(_, data) if data then output[#output + 1] = data end end)
end

local ok = C.wait_until(function() return uv.fs_stat(ready) ~= nil or exit_signal ~= nil end, 60)
if not (ok and uv.fs_stat(ready)) then
  S.check(false, "the host never got ready: %s", table.concat(output))
  host:kill("sigkill")
  S.report("host did not start")
end

-- What the host listed, and what we see ourselves.
local listed, kinds = {}, {}
for line in io.lines(list) do
  local pid, start, kind, comm = line:match("^(%d+) (%d+) (%S+) (.*)$")
  if pid then
    listed[#listed + 1] = { pid = tonumber(pid), start = start, kind = kind, comm = comm }
    kinds[kind] = (kinds[kind] or 0) + 1
  end
end
local seen = {}
for _, e in ipairs(listed) do seen[e.pid] = true end
local unlisted = 0
for _, pid in ipairs(C.marked(MARK)) do
  if not seen[pid] and pid ~= host_pid then unlisted = unlisted + 1 end
end
S.check(unlisted == 0, "%d processes with the mark were not in the host's list", unlisted)
local cg_dir
for line in io.lines("/proc/self/mountinfo") do
  local mnt = line:match("^%S+ %S+ %S+ %S+ (%S+) .* %- cgroup2 ")
  if mnt then cg_dir = mnt break end
end
local own = (C.read_file(("/proc/%d/cgroup"):format(host_pid)) or ""):match("0::(%S+)")
local host_cg = cg_dir and own and (cg_dir .. (own == "/" and "" or own) .. "/luxec." .. host_pid)
S.check(host_cg and uv.fs_stat(host_cg), "the host's cgroup directory %s is not there",
  tostring(host_cg))

local function survivors()
  local alive = {}
  for _, e in ipairs(listed) do
    if C.alive(e.pid, e.start) then alive[#alive + 1] = e end
  end
  for _, pid in ipairs(C.marked(MARK)) do
    local known = false
    for _, e in ipairs(alive) do known = known or e.pid == pid end
    if not known then alive[#alive + 1] = { pid = pid, kind = "marked", comm = "?" } end
  end
  return alive
end

local before = #survivors()
local t0 = C.now()
uv.kill(host_pid, "sigkill")
local left
C.wait_until(function()
  left = survivors()
  return #left == 0 and not (host_cg and uv.fs_stat(host_cg))
end, WINDOW, 10)
local secs = C.now() - t0
C.wait_until(function() return exit_signal ~= nil end, 5)
S.check(exit_signal == 9, "the host ended with signal %s", tostring(exit_signal))
S.check(#left == 0, "%d of %d processes survived the host's SIGKILL after %.1f s", #left,
  #listed, secs)
for i, e in ipairs(left) do
  if i > 10 then break end
  S.check(false, "survivor: pid %d (%s, %s)", e.pid, e.kind, e.comm)
end
local cg_left = host_cg and uv.fs_stat(host_cg) ~= nil
S.check(not cg_left, "the host's cgroup directory %s is still there", tostring(host_cg))
for _, e in ipairs(left) do uv.kill(e.pid, "sigkill") end
for _, h in ipairs({ out, err, host }) do
  if not h:is_closing() then h:close() end
end
os.execute("rm -rf '" .. tmp .. "'")
local shown = {}
for k, n in pairs(kinds) do shown[#shown + 1] = ("%d %s"):format(n, k) end
table.sort(shown)
S.info("listed: %s; alive before the kill %d", table.concat(shown, ", "), before)
S.report("%2d sessions, %d processes (%d escapees) + host + watchdog, SIGKILL -> %d survivors "
  .. "after %.2f s, cgroup dir %s", N, #listed - 2, kinds.escapee or 0, #left, secs,
  cg_left and "LEFT" or "removed")
