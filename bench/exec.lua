--- The exec engine's overhead: exec_command({cmd = "true"}) end to end (spawn, wait, read,
--- clean, cut, result, forget) against luxec.run of the same command — the same argv
--- ([shell, "-c", "true"], or "-lc" with `login`) and the same environment (the engine's,
--- with TERM=dumb, NO_COLOR=1, …) — alternating the two in one run; medians and their
--- difference. Target: exec_command at most 1 ms slower. An info row runs luxec.run with
--- the host's environment instead (a login shell's profile may behave differently there).
---   luxec bench/exec.lua [RUNS] [login]
local luxec = require("luxec")
local exec = require("luxec.engine")
local uv = require("luv")

local runs = math.tointeger(tonumber(arg[1] or "300")) or error("usage: exec.lua [RUNS] [login]")
local login = arg[2] == "login"
local shell = "/bin/bash"

local engine = exec.new({ shell = shell, login = login })
local argv = { shell, login and "-lc" or "-c", "true" }

local function median(xs)
  table.sort(xs)
  local n = #xs
  return n % 2 == 1 and xs[(n + 1) // 2] or (xs[n // 2] + xs[n // 2 + 1]) / 2
end

local function time_exec()
  local t0 = uv.hrtime()
  local r = assert(engine:exec_command({ cmd = "true" }))
  local dt = (uv.hrtime() - t0) / 1e6
  assert(r.exit_code == 0, "exec_command: exit " .. tostring(r.exit_code))
  return dt
end

local function time_run(env)
  local t0 = uv.hrtime()
  local r = assert(luxec.run(argv, { env = env }))
  local dt = (uv.hrtime() - t0) / 1e6
  assert(r.code == 0, "run: exit " .. tostring(r.code))
  return dt
end

local env = engine._env -- what every exec child gets

for _ = 1, 10 do -- warm up every path (page cache, allocator, the log directory)
  time_exec()
  time_run(env)
  time_run(nil)
end

local e, r, h = {}, {}, {}
local order = {
  function() e[#e + 1] = time_exec() end,
  function() r[#r + 1] = time_run(env) end,
  function() h[#h + 1] = time_run(nil) end,
}
for i = 1, runs do
  for k = 0, 2 do -- rotate which goes first
    order[(i + k) % 3 + 1]()
  end
end
engine:shutdown()

local me, mr, mh = median(e), median(r), median(h)
print(("exec: %d runs each of %s"):format(runs, table.concat(argv, " ")))
print(("luxec.run (host env, info)   median %8.3f ms"):format(mh))
print(("luxec.run (same env)         median %8.3f ms"):format(mr))
print(("exec_command                 median %8.3f ms"):format(me))
print(("difference                   %+8.3f ms (target <= +1 ms: %s), ratio %.2fx"):format(me - mr,
  me - mr <= 1 and "PASS" or "MISS", me / mr))
print(("run_ms=%.6f exec_ms=%.6f diff_ms=%.6f host_env_run_ms=%.6f"):format(mr, me, me - mr, mh))
