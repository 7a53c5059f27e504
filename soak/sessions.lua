--- N concurrent sessions (half on a PTY, half on pipes), each a shell that prints a line and
--- waits for input. While all are live: the host's descriptors and RSS against before. Then a
--- line to each, its output read back exactly, exit 0 for all, everything closed: the
--- descriptors back to the baseline, no child and no process in a session cgroup left. Done
--- twice: the second round must not grow the host (RSS, Lua heap, descriptors).
---   luxec soak/sessions.lua N
local luxec = require("luxec")
local C = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")

local N = math.tointeger(tonumber(arg[1] or "1000"))
local S = C.scenario("sessions")
local MAX_FDS_PER_SESSION = 8 -- pidfd, stdin, output (PTY: master and its dup), 3 cgroup fds
local MAX_KIB_PER_SESSION = 64 -- measured about 8
local MAX_ROUND2_GROWTH_KIB = 1024 -- RSS after round 2 against after round 1
local MAX_ROUND2_HEAP_KIB = 16 -- Lua heap, the same

local SCRIPT = 'echo "ready $1"; read -r line; echo "got $line"; exit 0'

local function settle()
  collectgarbage()
  collectgarbage()
  luxec.sleep(0.05)
end

-- Warm up: the first cgroup starts the watchdog, and closed session cgroups are pooled (up
-- to 64, each holding its descriptors): fill the pool so the baseline includes it.
do
  local warm = {}
  for i = 1, 64 do warm[i] = assert(luxec.spawn({ "true" }, { tty = i % 2 == 1 })) end
  for _, p in ipairs(warm) do
    p:wait({ timeout = 10 })
    p:close()
  end
  settle()
end

local function kinds(k)
  return ("pipe %d, pty %d, pidfd %d, cgroup %d, other %d"):format(k.pipe, k.pty, k.pidfd,
    k.cgroup, k.other + k.socket)
end

local function round(r)
  local m = { fds0 = C.fd_count(), rss0 = C.status_kib("self", "VmRSS"), kinds0 = C.fd_kinds() }
  local t0 = C.now()
  local procs = {}
  for i = 1, N do
    local p, err = luxec.spawn({ "sh", "-c", SCRIPT, "sh", tostring(i) }, { tty = i % 2 == 1 })
    if S.check(p ~= nil, "round %d: spawn %d: %s", r, i, tostring(err)) then
      procs[#procs + 1] = p
    end
  end
  m.t_spawn = C.now() - t0

  -- Every one live and ready.
  m.ready = 0
  for i, p in ipairs(procs) do
    local want = "ready " .. i
    local ok = C.wait_until(function()
      return p:snapshot().head:find(want, 1, true) ~= nil or p:finished()
    end, 60, 5)
    if S.check(ok and not p:finished(), "round %d: session %d never printed %q", r, i, want) then
      m.ready = m.ready + 1
    end
  end
  m.t_ready = C.now() - t0
  collectgarbage()
  m.fds1, m.rss1, m.kinds1 = C.fd_count(), C.status_kib("self", "VmRSS"), C.fd_kinds()
  m.live = #C.children()
  S.check(m.live == N, "round %d: %d children live, expected %d", r, m.live, N)
  m.fds_per = (m.fds1 - m.fds0) / N
  m.kib_per = (m.rss1 - m.rss0) / N
  S.check(m.fds_per <= MAX_FDS_PER_SESSION, "round %d: %.1f descriptors a session (bound %d)",
    r, m.fds_per, MAX_FDS_PER_SESSION)
  S.check(m.kib_per <= MAX_KIB_PER_SESSION, "round %d: %.1f KiB of RSS a session (bound %d)",
    r, m.kib_per, MAX_KIB_PER_SESSION)

  -- A line to each; each answers and exits 0; its output is exactly what it should be.
  for i, p in ipairs(procs) do
    local n = p:write(("hello-%d\n"):format(i))
    S.check(n == #("hello-" .. i) + 1, "round %d: write to session %d returned %s", r, i,
      tostring(n))
  end
  m.exited0, m.exact = 0, 0
  for i, p in ipairs(procs) do
    local st = p:wait({ timeout = 60 })
    if S.check(st ~= nil, "round %d: session %d did not finish", r, i) then
      if S.check(st.code == 0, "round %d: session %d ended %s", r, i,
          tostring(st.signal_name or st.code)) then
        m.exited0 = m.exited0 + 1
      end
    end
    local out, dropped = p:read()
    local nl = i % 2 == 1 and "\r\n" or "\n"
    local want = ("ready %d%s"):format(i, nl)
      .. (i % 2 == 1 and ("hello-%d\r\n"):format(i) or "") -- the terminal's echo
      .. ("got hello-%d%s"):format(i, nl)
    if S.check(out == want and dropped == 0, "round %d: session %d printed %q, expected %q", r,
        i, out, want) then
      m.exact = m.exact + 1
    end
  end
  for _, p in ipairs(procs) do p:close() end
  m.t_all = C.now() - t0
  procs = nil -- luacheck: ignore 311
  settle()
  m.fds2, m.rss2, m.kinds2 = C.fd_count(), C.status_kib("self", "VmRSS"), C.fd_kinds()
  m.heap = collectgarbage("count")
  m.left = #C.children() + #C.cgroup_pids()
  S.check(m.fds2 == m.fds0, "round %d: %d descriptors after closing everything, %d before", r,
    m.fds2, m.fds0)
  S.check(m.left == 0, "round %d: %d processes left (children or in session cgroups)", r, m.left)
  S.info("round %d: descriptors before %d (%s)", r, m.fds0, kinds(m.kinds0))
  S.info("round %d: descriptors live   %d (%s)", r, m.fds1, kinds(m.kinds1))
  S.info("round %d: descriptors after  %d (%s)", r, m.fds2, kinds(m.kinds2))
  S.info("round %d: RSS before %d KiB, live %d KiB, after %d KiB; Lua heap %.1f KiB; spawn "
    .. "%.2f s, all ready %.2f s, all done %.2f s", r, m.rss0, m.rss1, m.rss2, m.heap, m.t_spawn,
    m.t_ready, m.t_all)
  return m
end

local m1 = round(1)
local m2 = round(2)
local growth = m2.rss2 - m1.rss2
local heap_growth = m2.heap - m1.heap
S.check(growth <= MAX_ROUND2_GROWTH_KIB, "RSS grew %d KiB from round 1 to round 2 (bound %d)",
  growth, MAX_ROUND2_GROWTH_KIB)
S.check(heap_growth <= MAX_ROUND2_HEAP_KIB, "Lua heap grew %.1f KiB from round 1 to round 2 "
  .. "(bound %d)", heap_growth, MAX_ROUND2_HEAP_KIB)
S.check(m2.fds2 == m1.fds0, "descriptors %d after round 2, %d before round 1", m2.fds2, m1.fds0)
S.report("%5d concurrent: %.1f fds/session, %.1f KiB RSS/session, %d ready, %d exact, %d "
  .. "exited 0, %d left, fds %d -> %d -> %d; round 2: RSS %+d KiB, heap %+.1f KiB, %d left",
  N, m1.fds_per, m1.kib_per, m1.ready, m1.exact, m1.exited0, m1.left, m1.fds0, m1.fds1, m1.fds2,
  growth, heap_growth, m2.left)
