--- W4 written as an automation script: COUNT round trips through CAT on a PTY with
--- p:sendline + p:expect (both copies of the line: the terminal's echo and cat's output),
--- against pexpect doing the same, tuned as a careful user would (no delay before sends
--- nor after reads, a large maxread, expect_exact, bytes, no echo handling of its own).
---   luxec bench/expect.lua luxec COUNT CAT      the luxec side: prints secs=
---   luxec bench/expect.lua pexpect COUNT CAT    pexpect in python3: prints secs=
---   luxec bench/expect.lua compare COUNT CAT [RUNS]   both, alternated, medians and ratio
local luxec = require("luxec")
local uv = require("luv")

local mode, count, cat = arg[1], math.tointeger(tonumber(arg[2] or "")), arg[3]
assert((mode == "luxec" or mode == "pexpect" or mode == "compare") and count and cat,
  "usage: expect.lua luxec|pexpect|compare COUNT CAT [RUNS]")

-- The same loop for pexpect. Only the loop is timed, as on the luxec side.
local PEXPECT = [[
import sys, time, pexpect
count, cat = int(sys.argv[1]), sys.argv[2]
p = pexpect.spawn(cat, [], maxread=65536, searchwindowsize=None, echo=True)
p.delaybeforesend = None
p.delayafterread = None  # pexpect sleeps 100 us after every read by default
p.delayafterclose = 0
p.delayafterterminate = 0
t0 = time.monotonic()
for i in range(count):
    line = b"rt%06d" % i
    p.sendline(line)
    p.expect_exact(line + b"\r\n" + line + b"\r\n", timeout=10)
secs = time.monotonic() - t0
p.close(force=True)
print("secs=%.6f" % secs)
]]

local function luxec_side()
  local p = assert(luxec.spawn({ cat }, { tty = true }))
  local t0 = uv.hrtime()
  for i = 0, count - 1 do
    local line = ("rt%06d"):format(i)
    p:sendline(line)
    if not p:expect(line .. "\r\n" .. line .. "\r\n", { timeout = 10 }) then
      error(("round trip %d: no copy of %s"):format(i, line))
    end
  end
  local secs = (uv.hrtime() - t0) / 1e9
  p:close()
  return secs
end

local function pexpect_side()
  local r = assert(luxec.run({ "python3", "-c", PEXPECT, tostring(count), cat },
    { timeout = 600, stderr = "pipe" }))
  local secs = tonumber(r.output:match("secs=([%d.]+)"))
  if r.code ~= 0 or not secs then
    error(("pexpect failed (exit %s): %s%s"):format(tostring(r.code), r.output, r.stderr or ""))
  end
  return secs
end

if mode == "luxec" then
  print(("secs=%.6f"):format(luxec_side()))
elseif mode == "pexpect" then
  print(("secs=%.6f"):format(pexpect_side()))
else
  local runs = math.tointeger(tonumber(arg[4] or "5")) or 5
  local l, pe = {}, {}
  for r = 1, runs do -- alternate, the order flipping every round
    if r % 2 == 1 then
      l[#l + 1], pe[#pe + 1] = luxec_side(), pexpect_side()
    else
      pe[#pe + 1], l[#l + 1] = pexpect_side(), luxec_side()
    end
  end
  local function median(t)
    table.sort(t)
    return #t % 2 == 1 and t[(#t + 1) // 2] or (t[#t // 2] + t[#t // 2 + 1]) / 2
  end
  local ml, mp = median(l), median(pe)
  print(("W4 sendline+expect x%d, %d runs each: luxec %.1f ms (%.1f us/rt), pexpect %.1f ms " ..
    "(%.1f us/rt), ratio %.2fx (target <= 0.90x)"):format(count, runs, ml * 1e3, ml * 1e6 / count,
    mp * 1e3, mp * 1e6 / count, ml / mp))
end
