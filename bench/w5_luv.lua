--- W5's baseline for the host's RSS: what a plain luv program (Debian's lua-luv on lua5.4, no
--- luxec) holds with COUNT sessions of SLEEP 60 running, measured as bench/w5.lua measures
--- luxec (VmRSS after one turn of the loop with every session registered).
---   lua5.4 bench/w5_luv.lua COUNT SLEEP
--- luv cannot open a PTY (no posix_openpt/grantpt/ioctl in its API), so each session is what
--- a careful luv user makes instead: uv.spawn with a stdin pipe and one pipe for stdout and
--- stderr together (uv.pipe(), its write end given to the child as fds 1 and 2), output read
--- as it comes and kept (read_start appending to a table), and an exit callback that closes the
--- handles. Then every child is killed and reaped before the script ends.
local uv = require("luv")

local count, sleep = math.tointeger(tonumber(arg[1])), arg[2]
assert(count and sleep, "usage: lua5.4 w5_luv.lua COUNT SLEEP")

local function status_kib(field)
  local f = assert(io.open("/proc/self/status"))
  local kib = f:read("a"):match(field .. ":%s*(%d+)")
  f:close()
  return tonumber(kib)
end

local sessions, alive = {}, 0
local t0 = uv.hrtime()
for i = 1, count do
  local s = { chunks = {} }
  local fds = assert(uv.pipe({ nonblock = true }, { nonblock = false }))
  s.stdin = uv.new_pipe(false)
  s.out = uv.new_pipe(false)
  s.out:open(fds.read)
  s.proc, s.pid = uv.spawn(sleep, { args = { "60" }, stdio = { s.stdin, fds.write, fds.write } },
    function(code, signal)
      s.code, s.signal = code, signal
      s.proc:close()
      alive = alive - 1
    end)
  assert(s.proc, s.pid)
  uv.fs_close(fds.write)
  s.out:read_start(function(err, data)
    assert(not err, err)
    if data then
      s.chunks[#s.chunks + 1] = data
    else
      s.out:close()
    end
  end)
  alive = alive + 1
  sessions[i] = s
end
local start = (uv.hrtime() - t0) / 1e9
-- one turn of the loop, without waiting in it (with the read handles active, "once" would
-- block until a session printed or ended: a minute of sleep)
uv.run("nowait")
local rss = status_kib("VmRSS")

for _, s in ipairs(sessions) do
  s.proc:kill("sigkill")
  s.stdin:close()
end
while alive > 0 do
  uv.run("once")
end
for _, s in ipairs(sessions) do
  if not s.out:is_closing() then s.out:close() end
end
uv.run()
print(("start=%.6f rss_kib=%d survivors=%d"):format(start, rss, alive))
