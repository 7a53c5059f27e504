--- W1: spawn + reap PROGRAM COUNT times in turn, on pipes (luxec.spawn's defaults: stdin a
--- pipe, stdout and stderr merged) or on a PTY.
---   luxec bench/w1.lua pipe|pty COUNT PROGRAM [nocgroup]
local luxec = require("luxec")
local uv = require("luv")

local mode, count, prog = arg[1], math.tointeger(tonumber(arg[2])), arg[3]
assert((mode == "pipe" or mode == "pty") and count and prog, "usage: w1.lua pipe|pty COUNT PROG")
local opts = { tty = mode == "pty" or nil }
if arg[4] == "nocgroup" then opts.cgroup = false end

local t0 = uv.hrtime()
for _ = 1, count do
  local p = assert(luxec.spawn({ prog }, opts))
  local st = p:wait()
  if st.code ~= 0 then error(("%s ended: %s"):format(prog, st.signal_name or st.code)) end
  p:close()
end
print(("secs=%.6f"):format((uv.hrtime() - t0) / 1e9))
