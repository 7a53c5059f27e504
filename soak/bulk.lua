--- BYTES through one session: `seq 1 N` (N chosen so its output is at least BYTES; every byte
--- is known from its offset) on pipes, read by the script after every wake-up while it runs.
--- Checks: the total is exactly seq's length; what the reads returned plus what they were told
--- was dropped is exactly that total, and so is head + tail + dropped of the snapshot; the
--- head and the tail are seq's text exactly, and each piece a read returned starts and ends
--- with the bytes that belong at its offset; the host's RSS (sampled every 100 ms, and VmHWM)
--- stays under a stated bound above the start.
---   luxec soak/bulk.lua BYTES
local luxec = require("luxec")
local uv = require("luv")
local C = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")

local BYTES = math.tointeger(tonumber(arg[1] or tostring(10 * C.GiB)))
local S = C.scenario("bulk")
local RSS_BOUND_KIB = 32 * 1024 -- above the RSS at the start; the kept output is 1 MiB

-- seq's output, by arithmetic: F(m) = bytes of "1\n" .. "m\n".
local function F(m)
  local total, lo, d = 0, 1, 1
  while lo <= m do
    local hi = math.min(m, lo * 10 - 1)
    total = total + (hi - lo + 1) * (d + 1)
    lo, d = lo * 10, d + 1
  end
  return total
end

--- The number whose line holds byte `off` (0-based) of seq's output, and where its line starts.
local function line_at(off)
  local base, lo, d = 0, 1, 1
  while true do
    local group = 9 * lo * (d + 1)
    if off < base + group then
      local k = (off - base) // (d + 1)
      return lo + k, base + k * (d + 1)
    end
    base, lo, d = base + group, lo * 10, d + 1
  end
end

--- Bytes [off, off + len) of seq's output.
local function expected(off, len)
  local n, start = line_at(off)
  local parts, have = {}, 0
  local skip = off - start
  while have < len + skip do
    local line = n .. "\n"
    parts[#parts + 1] = line
    have = have + #line
    n = n + 1
  end
  return table.concat(parts):sub(skip + 1, skip + len)
end

local N -- the smallest N with F(N) >= BYTES
do
  local lo, hi = 1, BYTES
  while lo < hi do
    local mid = (lo + hi) // 2
    if F(mid) >= BYTES then hi = mid else lo = mid + 1 end
  end
  N = lo
end
local total_expected = F(N)

local EDGE = 64 -- bytes checked at each end of every piece a read returns
local pieces_checked, bad_pieces = 0, 0
local function check_piece(data, from, to, off)
  -- data:sub(from, to) should be seq's bytes at offset off
  local len = to - from + 1
  if len <= 0 then return end
  pieces_checked = pieces_checked + 1
  local n = math.min(EDGE, len)
  local ok = data:sub(from, from + n - 1) == expected(off, n)
    and data:sub(to - n + 1, to) == expected(off + len - n, n)
  if not ok then
    bad_pieces = bad_pieces + 1
    S.check(false, "the %d bytes read at offset %d are not seq's (start %q)", len, off,
      data:sub(from, from + 40))
  end
end

local rss0 = C.reset_peak()
local hwm0 = C.status_kib("self", "VmHWM")
local rss_max = rss0
local sampler = uv.new_timer()
sampler:start(100, 100, function()
  local rss = C.status_kib("self", "VmRSS")
  if rss > rss_max then rss_max = rss end
end)

local t0 = C.now()
local cpu0 = C.cpu_seconds()
local p = assert(luxec.spawn({ "seq", "1", tostring(N) }, { stdin = "null" }))
local r = C.reader(p, check_piece)
local consume = r.consume
-- until EOF, then the exit (past EOF wait_output would wait for it too, without the message)
while not p:eof() do
  p:wait_output({ timeout = 30 })
  consume()
end
S.check(p:wait({ timeout = 30 }) ~= nil, "seq did not finish within 30 s of its EOF")
consume()
local secs = C.now() - t0
local cpu = C.cpu_seconds() - cpu0
sampler:close()
local st = p:status()
local snap = p:snapshot()
local hwm = C.status_kib("self", "VmHWM")
local rss_end = C.status_kib("self", "VmRSS")
if rss_end > rss_max then rss_max = rss_end end

S.check(st.code == 0, "seq ended %s", tostring(st.signal_name or st.code))
S.check(snap.total == total_expected, "%d bytes arrived, seq printed %d", snap.total,
  total_expected)
S.check(r.got + r.dropped == total_expected, "reads returned %d and were told of %d dropped: "
  .. "%d, expected %d", r.got, r.dropped, r.got + r.dropped, total_expected)
S.check(r.cursor == total_expected, "the reads ended at offset %d, expected %d", r.cursor,
  total_expected)
S.check(#snap.head + #snap.tail + snap.dropped == snap.total,
  "head %d + tail %d + dropped %d ~= total %d", #snap.head, #snap.tail, snap.dropped, snap.total)
S.check(snap.head == expected(0, #snap.head), "the head is not seq's first %d bytes", #snap.head)
S.check(snap.tail == expected(snap.total - #snap.tail, #snap.tail),
  "the tail is not seq's last %d bytes", #snap.tail)
S.check(bad_pieces == 0, "%d of %d pieces read had the wrong bytes", bad_pieces, pieces_checked)
local peak = math.max(rss_max, hwm) - rss0
-- VmHWM is the peak of the whole life: compare with the start's peak too.
S.check(peak <= RSS_BOUND_KIB, "host RSS peaked %d KiB above the start (bound %d KiB)", peak,
  RSS_BOUND_KIB)
p:close()
local left = #C.children() + #C.cgroup_pids()
S.check(left == 0, "%d processes left", left)
S.info("seq 1 %d: %d bytes in %.2f s, host CPU %.2f s, %d reads, %d pieces checked; RSS start "
  .. "%d KiB (HWM %d), max sampled %d KiB, HWM at end %d KiB", N, snap.total, secs, cpu, r.reads,
  pieces_checked, rss0, hwm0, rss_max, hwm)
S.report("%s through one session: %.0f MiB/s, read %s + dropped %s = %d bytes (exact), head "
  .. "%s + tail %s kept, RSS peak +%.1f MiB (bound %d MiB), %d left", C.bytes(snap.total),
  snap.total / C.MiB / secs, C.bytes(r.got), C.bytes(r.dropped), r.got + r.dropped,
  C.bytes(#snap.head), C.bytes(#snap.tail), peak / 1024, RSS_BOUND_KIB // 1024, left)
