-- Argument checking of the scheduler: no loop turn, no process.
local luxec = require("luxec")

describe("luxec.sleep arguments", function()
  it("rejects bad durations naming the argument", function()
    for _, bad in ipairs({ -1, "10", 0 / 0, math.huge, {} }) do
      local ok, err = pcall(luxec.sleep, bad)
      assert.is_false(ok)
      assert.matches(
        "bad argument #1 to 'sleep' %(non%-negative finite number of seconds expected", err)
    end
  end)
end)

describe("luxec.go arguments", function()
  it("rejects a non-function", function()
    assert.has_error(function()
      luxec.go(42)
    end, "bad argument #1 to 'go' (function expected, got number)")
  end)
end)
