--- A child that closes its output early and keeps running: `sh -c 'echo before; exec >&- 2>&-;
--- sleep SECS; exit 7'` (on a PTY stdin is closed too: the terminal reports EOF only when no
--- descriptor of it is left), on pipes and on a PTY, both at once. Checks: "before" is read;
--- EOF is seen while the process is still reported running (and not finished); the host does
--- not spin while it waits (CPU time over the wait under a bound); exit code 7 is reported
--- after about SECS; nothing is left.
---   luxec soak/early_close.lua [SECS]
local luxec = require("luxec")
local C = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")

local SECS = tonumber(arg[1] or "2")
local S = C.scenario("early-close")
local CPU_BOUND = 0.2 -- seconds of host CPU while both wait SECS

local function start(tty)
  local close = tty and "exec <&- >&- 2>&-" or "exec >&- 2>&-"
  return assert(luxec.spawn({ "sh", "-c", ("echo before; %s; sleep %s; exit 7"):format(close,
    SECS) }, { tty = tty }))
end

local t0 = C.now()
local modes = { { name = "pipes", p = start(false) }, { name = "pty", p = start(true) } }
local nl = { pipes = "before\n", pty = "before\r\n" }

-- EOF first, while running.
for _, m in ipairs(modes) do
  local p = m.p
  C.wait_until(function() return p:eof() or p:finished() end, 10, 5)
  m.eof_at = C.now() - t0
  local st = p:status()
  m.out = p:read()
  S.check(m.out == nl[m.name], "%s: read %q before EOF, expected %q", m.name, m.out, nl[m.name])
  S.check(p:eof(), "%s: no EOF within 10 s", m.name)
  S.check(st.running and not st.exited and not p:finished(),
    "%s: at EOF the session is not reported running (running=%s, exited=%s, finished=%s)",
    m.name, tostring(st.running), tostring(st.exited), tostring(p:finished()))
  S.check(m.eof_at < SECS / 2, "%s: EOF only after %.2f s", m.name, m.eof_at)
end

-- The wait: the host asleep, not spinning on a closed descriptor.
local cpu0, w0 = C.cpu_seconds(), C.now()
for _, m in ipairs(modes) do
  m.st = m.p:wait({ timeout = SECS + 10 })
  m.exit_at = C.now() - t0
end
local cpu, waited = C.cpu_seconds() - cpu0, C.now() - w0
S.check(cpu < CPU_BOUND, "the host used %.3f s of CPU over a %.2f s wait (bound %.1f s)", cpu,
  waited, CPU_BOUND)
for _, m in ipairs(modes) do
  local st = m.st
  S.check(st ~= nil, "%s: not finished %.0f s after EOF", m.name, SECS + 10)
  st = m.p:status()
  S.check(st.exited and st.code == 7, "%s: ended %s, expected exit code 7", m.name,
    tostring(st.signal_name or st.code))
  S.check(m.exit_at >= SECS * 0.9, "%s: finished after %.2f s, before its %s s sleep", m.name,
    m.exit_at, SECS)
  S.check(st.holders == nil or #st.holders == 0, "%s: holders named after exit: %s", m.name,
    tostring(st.holders and st.holders[1] and st.holders[1].cmd))
  m.p:close()
end
local left = #C.children() + #C.cgroup_pids()
S.check(left == 0, "%d processes left", left)
local function line(m)
  local out = (m.out or ""):gsub("\r", "\\r"):gsub("\n", "\\n")
  return ("%s: \"%s\", EOF at %.2f s while running, exit %s at %.2f s"):format(m.name, out,
    m.eof_at, tostring(m.st and m.st.code), m.exit_at)
end
S.report("%s; %s; host CPU %.3f s over %.2f s wait; %d left", line(modes[1]), line(modes[2]),
  cpu, waited, left)
