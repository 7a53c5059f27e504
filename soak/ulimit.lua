--- `ulimit -n 64`: soak/ulimit_host.lua runs under a soft and hard limit of 64 descriptors and
--- checks there that spawns at every degree of shortage fail cleanly (nil, "EMFILE: too many
--- open files (...)", "EMFILE"; never a raise or a crash), that the sessions started before
--- keep working and exit cleanly, that ending some makes room for exactly as many again (no
--- descriptor leaked by the failures), and that the cgroup watchdog runs. This driver then
--- SIGKILLs it: its setsid escapee must die and its cgroup directory go (the watchdog's work).
---   luxec soak/ulimit.lua
local uv = require("luv")
local C = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")

local S = C.scenario("ulimit")
local luxec_bin, here, MARK, tmp = C.host_setup()
local ready = tmp .. "/ready"

local out, err = uv.new_pipe(), uv.new_pipe()
local output, code, sig = {}, nil, nil
local host, perr = uv.spawn("/bin/sh", {
  args = { "-c", 'ulimit -n 64 && exec "$0" "$@"', luxec_bin, here .. "/ulimit_host.lua", MARK,
    ready },
  stdio = { nil, out, err },
}, function(c, s) code, sig = c, s end)
assert(host, perr)
local host_pid = host:get_pid()
for _, pipe in ipairs({ out, err }) do
  pipe:read_start(function(_, data) if data then output[#output + 1] = data end end)
end

local ok = C.wait_until(function() return uv.fs_stat(ready) ~= nil or code ~= nil end, 120)
S.check(ok and uv.fs_stat(ready) ~= nil, "the host did not get ready (exit %s, signal %s)",
  tostring(code), tostring(sig))
local host_cg
do
  local mnt
  for line in io.lines("/proc/self/mountinfo") do
    mnt = mnt or line:match("^%S+ %S+ %S+ %S+ (%S+) .* %- cgroup2 ")
  end
  local own = (C.read_file(("/proc/%d/cgroup"):format(host_pid)) or ""):match("0::(%S+)")
  host_cg = mnt and own and (mnt .. (own == "/" and "" or own) .. "/luxec." .. host_pid)
end
local escapees = #C.marked(MARK)

local t0 = C.now()
uv.kill(host_pid, "sigkill")
local left = {}
C.wait_until(function()
  left = C.marked(MARK)
  return #left == 0 and not (host_cg and uv.fs_stat(host_cg)) and code ~= nil
end, 5, 10)
local secs = C.now() - t0
C.wait_until(function() return code ~= nil end, 5)

local summary = "no summary"
for line in table.concat(output):gmatch("[^\n]+") do
  local failed = line:match("^FAILED: (.*)")
  if failed then
    S.check(false, "%s", failed)
  elseif line:match("^INFO: ") then
    S.info("%s", line:sub(7))
  elseif line:match("^SUMMARY: ") then
    summary = line:sub(10)
  else
    S.check(false, "host: %s", line)
  end
end
S.check(sig == 9, "the host ended with signal %s (exit %s) instead of our SIGKILL", tostring(sig),
  tostring(code))
S.check(escapees >= 1, "the escapee was not running before the kill")
S.check(#left == 0, "%d escapees survived the host's SIGKILL", #left)
local cg_left = host_cg ~= nil and uv.fs_stat(host_cg) ~= nil
S.check(not cg_left, "the host's cgroup directory %s is still there", tostring(host_cg))
for _, pid in ipairs(left) do uv.kill(pid, "sigkill") end
for _, h in ipairs({ out, err, host }) do
  if not h:is_closing() then h:close() end
end
os.execute("rm -rf '" .. tmp .. "'")
S.report("-n 64: %s; SIGKILL -> %d survivors after %.2f s, cgroup dir %s", summary, #left, secs,
  cg_left and "LEFT" or "removed")
