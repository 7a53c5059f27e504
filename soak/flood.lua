--- A child that floods output while the host writes to its stdin, two ways, on pipes:
---  echo:  `cat`, fed BYTES of numbered binary blocks (every byte value) while its copy is read
---         after every wake-up; the copy must be exactly what was written, byte for byte where
---         it was kept, and its length exactly BYTES.
---  first: `sh -c 'head -c BYTES /dev/zero; cat >/dev/null; echo done'`: the child floods
---         before it reads stdin at all while the host writes 64 MiB to it (queued, never
---         blocking the loop); everything arrives, the queue drains, the child says done.
--- No deadlock (each within a timeout), exit 0, nothing left, the host's RSS bounded.
---   luxec soak/flood.lua BYTES
local luxec = require("luxec")
local C = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")

local BYTES = math.tointeger(tonumber(arg[1] or tostring(2 * C.GiB)))
local S = C.scenario("flood")
local TIMEOUT = 60 + BYTES / (20 * C.MiB) -- seconds: far beyond 20 MiB/s
local BLOCK = 64 * C.KiB
local QUEUE = 4 * C.MiB -- written ahead of cat at most
local ECHO_RSS_BOUND_KIB = 48 * 1024 -- first case: a 16 MiB tail kept, 4 MiB in flight
local IN = 64 * C.MiB -- second case: written while the child does not read, all queued
local RSS_BOUND_KIB = 80 * 1024 -- second case: those 64 MiB queued by design, plus buffers

-- Block k: its number, then bytes of every value (a fixed pseudo-random run).
local BASE
do
  local t, x = {}, 12345
  for i = 1, BLOCK - 17 do
    x = (x * 1103515245 + 12345) % 2147483648
    t[i] = string.char((x >> 16) & 255)
  end
  BASE = table.concat(t)
end
local function block(k)
  return ("%016d|"):format(k) .. BASE
end
local function expected(off, len)
  local parts, k, skip = {}, off // BLOCK, off % BLOCK
  local have = 0
  while have < len do
    local b = block(k)
    local piece = b:sub(skip + 1, skip + (len - have))
    parts[#parts + 1] = piece
    have, k, skip = have + #piece, k + 1, 0
  end
  return table.concat(parts)
end

local rss0 = C.reset_peak()

-- echo ------------------------------------------------------------------------------------
local t0 = C.now()
local p = assert(luxec.spawn({ "cat" }, { head = 0, tail = 16 * C.MiB }))
local written, next_block = 0, 0
local bad, compared = 0, 0
local r -- the reader of the copy (below)
local stdin_closed = false
local function feed()
  -- at most QUEUE ahead of the copy (in the queue, the pipes and cat)
  while written < BYTES and written - r.cursor < QUEUE do
    local parts = {}
    for i = 1, 16 do
      if written + (i - 1) * BLOCK >= BYTES then break end
      parts[i] = block(next_block)
      next_block = next_block + 1
    end
    local chunk = table.concat(parts)
    if written + #chunk > BYTES then chunk = chunk:sub(1, BYTES - written) end
    local n, err = p:write(chunk)
    if not S.check(n == #chunk, "write at %d: %s", written, tostring(err or n)) then
      written = BYTES
      break
    end
    written = written + #chunk
  end
  if written >= BYTES and not stdin_closed then
    stdin_closed = true
    p:close_stdin()
  end
end
local function verify(data, from, to, off)
  local len = to - from + 1
  if len <= 0 then return end
  compared = compared + len
  if bad < 5 and data:sub(from, to) ~= expected(off, len) then
    bad = bad + 1
    S.check(false, "echo: the %d bytes at offset %d are not what was written", len, off)
  end
end
r = C.reader(p, verify)
local consume = r.consume
local deadline = C.now() + TIMEOUT
-- until EOF, then the exit
while not p:eof() and C.now() < deadline do
  feed()
  p:wait_output({ timeout = 1 })
  consume()
end
p:wait({ timeout = math.max(1, deadline - C.now()) })
consume()
local echo_secs = C.now() - t0
local echo_peak = C.status_kib("self", "VmHWM") - rss0
S.check(echo_peak <= ECHO_RSS_BOUND_KIB, "echo: host peak RSS +%d KiB (bound %d KiB)", echo_peak,
  ECHO_RSS_BOUND_KIB)
local st = p:status()
S.check(p:finished(), "echo: not finished after %.0f s (deadlock?): %d written, %d back", TIMEOUT,
  written, r.cursor)
S.check(st.code == 0, "echo: cat ended %s", tostring(st.signal_name or st.code))
S.check(written == BYTES, "echo: %d bytes written of %d", written, BYTES)
S.check(p:snapshot().total == BYTES, "echo: %d bytes came back, %d written", p:snapshot().total,
  BYTES)
S.check(r.got + r.dropped == BYTES, "echo: reads returned %d + %d dropped, %d written", r.got,
  r.dropped, BYTES)
S.check(bad == 0, "echo: %d pieces differ from what was written", bad)
p:close()
S.info("echo: %s through cat in %.2f s (%.0f MiB/s each way), %s compared byte for byte, %s "
  .. "dropped unread, peak RSS +%d KiB", C.bytes(BYTES), echo_secs, BYTES / C.MiB / echo_secs,
  C.bytes(compared), C.bytes(r.dropped), echo_peak)

-- first -----------------------------------------------------------------------------------
local rss1 = C.reset_peak()
t0 = C.now()
local q = assert(luxec.spawn({ "sh", "-c", "head -c " .. BYTES .. " /dev/zero; cat >/dev/null; "
  .. "echo done" }))
local chunk = ("x"):rep(C.MiB)
local accepted, queued_max = 0, 0
for _ = 1, IN // C.MiB do -- all at once: what the pipe does not take is queued
  accepted = accepted + (q:write(chunk) or 0)
  local queued = q:status().write_queued
  if queued > queued_max then queued_max = queued end
end
q:close_stdin()
local qst = q:wait({ timeout = TIMEOUT })
local first_secs = C.now() - t0
local rss_first = C.status_kib("self", "VmHWM") - rss1
S.check(qst ~= nil, "first: not finished after %.0f s (deadlock?)", TIMEOUT)
qst = q:status()
local snap = q:snapshot()
S.check(qst.code == 0, "first: ended %s", tostring(qst.signal_name or qst.code))
S.check(accepted == IN, "first: %d of %d bytes accepted", accepted, IN)
S.check(qst.write_queued == 0, "first: %d bytes still queued", qst.write_queued)
S.check(snap.total == BYTES + 5, "first: %d bytes of output, expected %d", snap.total, BYTES + 5)
S.check(snap.tail:sub(-5) == "done\n", "first: the output ends %q", snap.tail:sub(-20))
S.check(rss_first <= RSS_BOUND_KIB, "first: host peak RSS +%d KiB (bound %d KiB)", rss_first,
  RSS_BOUND_KIB)
q:close()
local left = #C.children() + #C.cgroup_pids()
S.check(left == 0, "%d processes left", left)
S.info("first: %s flooded before stdin was read, %s written meanwhile (%s queued at most), "
  .. "%.2f s, peak RSS +%d KiB", C.bytes(BYTES), C.bytes(IN), C.bytes(queued_max), first_secs,
  rss_first)
S.report("%s: cat echo %.0f MiB/s, %s back of %s (%s compared exactly), RSS +%.1f MiB; "
  .. "flood-first %s out + %s in, done in %.1f s, RSS +%.1f MiB (%s queued); %d left",
  C.bytes(BYTES), BYTES / C.MiB / echo_secs, C.bytes(r.got + r.dropped), C.bytes(written),
  C.bytes(compared), echo_peak / 1024, C.bytes(snap.total), C.bytes(accepted), first_secs,
  rss_first / 1024, C.bytes(queued_max), left)
