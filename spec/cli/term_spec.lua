local H = require("helper")
local luxec = require("luxec")

-- The host's own terminal (luxec.term, what interact writes the session's output to) when the
-- terminal stops taking output: Ctrl-S (XOFF) on it, or a terminal emulator that stops reading.
describe("luxec.term writes to a stopped terminal", function()
  after_each(H.assert_clean)

  -- Run by luxec on the PTY of a session: once "go" arrives (after the ^S that stopped the
  -- terminal), write LINES numbered lines, then let a 20 ms timer fire 10 times and record how
  -- late it was at worst, and what was still queued; then end (the queue is written first).
  local SCRIPT = [[
    local uv = require("luv")
    local t = require("luxec.term").open()
    local out, lines = arg[1], tonumber(arg[2])
    assert(t:start(function(kind, data)
      if kind ~= "input" or not data:find("go") then return end
      for i = 1, lines do
        assert(t:write(("line %06d\n"):format(i)))
      end
      local queued_after_writes = t:queued()
      local timer, ticks, worst = uv.new_timer(), 0, 0
      uv.update_time()
      local start = uv.now()
      timer:start(20, 20, function()
        ticks = ticks + 1
        uv.update_time()
        worst = math.max(worst, uv.now() - start - 20 * ticks)
        if ticks == 10 then
          timer:close()
          t:stop()
          local f = assert(io.open(out .. ".tmp", "w"))
          f:write(("ticks=%d worst=%d queued=%d still=%d\n")
            :format(ticks, worst, queued_after_writes, t:queued()))
          f:close()
          assert(os.rename(out .. ".tmp", out))
        end
      end)
    end))
  ]]

  it("queues the output, the loop keeps turning, and every byte comes in order on ^Q",
    function()
      local dir = H.tmpdir()
      H.write_file(dir .. "/writer.lua", SCRIPT)
      local result = dir .. "/result"
      local LINES = 20000
      local p = assert(luxec.spawn({ H.luxec, dir .. "/writer.lua", result, tostring(LINES) },
        { tty = true }))
      p:write("\19") -- ^S: the terminal stops its output (IXON is on in a new PTY)
      p:write("go\n")
      H.wait_for(function() return H.read_file(result) ~= nil end, 10000,
        "the writer's timer to fire 10 times while its terminal is stopped")
      local text = H.read_file(result)
      local ticks, worst, queued, still =
        text:match("ticks=(%d+) worst=(%d+) queued=(%d+) still=(%d+)")
      assert.equals("10", ticks)
      -- (a loop blocked by the stopped terminal would bring no tick at all; late on a loaded
      -- machine is a scheduling delay)
      assert.is_true(tonumber(worst) < 2000, "a tick came " .. worst .. " ms late")
      -- the output was queued (the terminal took none of it) and is still waiting
      assert.equals(LINES * 12, tonumber(queued))
      assert.equals(LINES * 12, tonumber(still))
      assert.is_nil(p:snapshot().head:find("line 000001", 1, true))
      p:write("\17") -- ^Q: the terminal resumes, the writer drains its queue and ends
      assert.equals(0, assert(p:wait({ timeout = 20 })).code)
      local got = {}
      for n in p:snapshot().head:gmatch("line (%d+)\r\n") do
        got[#got + 1] = tonumber(n)
      end
      assert.equals(LINES, #got)
      for i = 1, LINES do
        if got[i] ~= i then assert.equals(i, got[i], "line " .. i .. " out of order") end
      end
      p:close()
      H.rmtree(dir)
    end)
end)
