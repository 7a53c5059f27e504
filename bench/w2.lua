--- W2 (pipe) and W3 (tty): HEAD -c BYTES /dev/zero, the output kept as head + tail in memory
--- by luxec and nobody reading it: just p:wait(). Prints the host's peak RSS (VmHWM) too.
---   luxec bench/w2.lua pipe|pty|ptyraw BYTES HEAD   (ptyraw: tty = {raw = true})
local luxec = require("luxec")
local uv = require("luv")

local mode, bytes, head = arg[1], math.tointeger(tonumber(arg[2])), arg[3]
assert((mode == "pipe" or mode == "pty" or mode == "ptyraw") and bytes and head,
  "usage: w2.lua pipe|pty|ptyraw BYTES HEAD")
local tty = mode == "ptyraw" and { raw = true } or mode == "pty"

local function status_kib(field)
  local f = assert(io.open("/proc/self/status"))
  local kib = f:read("a"):match(field .. ":%s*(%d+)")
  f:close()
  return tonumber(kib)
end

local t0 = uv.hrtime()
local p = assert(luxec.spawn({ head, "-c", tostring(bytes), "/dev/zero" }, { tty = tty }))
local st = p:wait()
local secs = (uv.hrtime() - t0) / 1e9
local total = p:snapshot().total
p:close()
if st.code ~= 0 or total ~= bytes then
  error(("%s ended %s after %d bytes, expected %d"):format(head, st.signal_name or st.code,
    total, bytes))
end
print(("secs=%.6f rss_kib=%d"):format(secs, status_kib("VmHWM")))
