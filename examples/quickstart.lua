-- The quickstart: tasks and timers on luxec's one loop.
--   build/bin/luxec examples/quickstart.lua
local luxec = require("luxec")

print(("luxec %s"):format(luxec.version))

-- Two tasks sleep at the same time: the whole run takes the longer sleep, not the sum.
local start = os.clock()
local t0 = require("luv").hrtime()
local slow = luxec.go(function()
  luxec.sleep(300)
  return "slow task done"
end)
local fast = luxec.go(function()
  luxec.sleep(100)
  return "fast task done"
end)
print(select(2, fast:wait()))
print(select(2, slow:wait()))
print(("both finished in %.0f ms of wall time, %.0f ms of CPU"):format(
  (require("luv").hrtime() - t0) / 1e6, (os.clock() - start) * 1000))
