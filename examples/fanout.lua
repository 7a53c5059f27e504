-- Run 20 commands at once, each in its own task, and print a table of the results: the
-- whole run takes about as long as the slowest command, not the sum.
--   build/bin/luxec examples/fanout.lua
local luxec = require("luxec")
local uv = require("luv")

local commands = {}
for i = 1, 16 do
  -- stand-ins for remote jobs: each takes its time and prints a line
  commands[i] = { "sh", "-c", ("sleep 0.%d; echo job %d done on $(uname -n)"):format(i % 5 + 1, i) }
end
commands[17] = { "uname", "-sr" }
commands[18] = { "sh", "-c", "echo $((6 * 7))" }
commands[19] = { "ls", "/" }
commands[20] = { "sh", "-c", "printf '%s\\n' 'a multi-line' 'output' | tail -n 1" }

local results = {}
local t0 = uv.hrtime()
local tasks = {}
for i, argv in ipairs(commands) do
  tasks[i] = luxec.go(function()
    local start = uv.hrtime()
    local r = assert(luxec.run(argv, { timeout = 10 }))
    results[i] = { code = r.code, ms = (uv.hrtime() - start) / 1e6,
      first = (r.output:match("[^\n]*") or ""), timed_out = r.timed_out }
  end)
end
for i, t in ipairs(tasks) do
  local ok, err = t:wait()
  if not ok then results[i] = { code = -1, ms = 0, first = tostring(err) } end
end
local wall = (uv.hrtime() - t0) / 1e6

local sum = 0
print(("%3s  %-7s %4s %6s  %-40s %s"):format("#", "status", "code", "ms", "command",
  "first line of output"))
for i, r in ipairs(results) do
  sum = sum + r.ms
  local cmd = table.concat(commands[i], " ")
  print(("%3d  %-7s %4s %6.0f  %-40s %s"):format(i,
    r.timed_out and "timeout" or r.code == 0 and "ok" or "failed", tostring(r.code), r.ms,
    #cmd > 40 and cmd:sub(1, 37) .. "..." or cmd, r.first))
end
print(("20 commands in %.0f ms (%.0f ms one after another)"):format(wall, sum))
