--- W4: COUNT round trips through CAT on a PTY: write a line, wait until both its copies came
--- back (the terminal's echo and cat's output, each the line and "\r\n"), then the next.
---   luxec bench/w4.lua COUNT CAT
local luxec = require("luxec")
local uv = require("luv")

local count, cat = math.tointeger(tonumber(arg[1])), arg[2]
assert(count and cat, "usage: w4.lua COUNT CAT")

local p = assert(luxec.spawn({ cat }, { tty = true }))
local t0 = uv.hrtime()
for i = 0, count - 1 do
  local line = ("rt%06d"):format(i)
  local want = 2 * (#line + 2)
  assert(p:write(line .. "\n"))
  local got = p:read()
  while #got < want do
    if not p:wait_output({ timeout = 10 }) or p:finished() then
      error(("no copy of %s: got %q"):format(line, got))
    end
    got = got .. p:read()
  end
  if #got ~= want or got ~= line .. "\r\n" .. line .. "\r\n" then
    error(("round trip %d: unexpected output %q"):format(i, got))
  end
end
local secs = (uv.hrtime() - t0) / 1e9
p:close()
print(("secs=%.6f"):format(secs))
