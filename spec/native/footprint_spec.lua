-- What a host that runs a script holds: only what the script uses. Modules and libraries a
-- script does not touch (the sandbox, remote sessions, ssh, the prompt's line editor) are not
-- loaded; they come the first time they are used. Each case runs a fresh host.
local H = require("helper")

local function host(script)
  local r = H.run({ "-e", script }, { timeout = 30000 })
  assert.equals(0, r.code, r.stdout .. r.stderr)
  return r.stdout
end

describe("a host running a script", function()
  it("loads no sandbox, remote, ssh, replwrap or stream module it does not use", function()
    local out = host([[
      local luxec = require("luxec")
      local p = assert(luxec.spawn({"true"}, {tty = true}))
      assert(p:wait({timeout = 10}))
      p:close()
      local loaded = {}
      for _, m in ipairs({"luxec.sandbox", "luxec.remote", "luxec.auto.ssh",
                          "luxec.auto.replwrap", "luxec.auto.stream"}) do
        if package.loaded[m] then loaded[#loaded + 1] = m end
      end
      print("loaded: " .. table.concat(loaded, " "))
    ]])
    assert.equals("loaded: \n", out)
  end)

  it("loads each of them the first time it is used", function()
    local out = host([[
      local luxec = require("luxec")
      assert(luxec.ssh == require("luxec.auto.ssh"))
      assert(luxec.replwrap == require("luxec.auto.replwrap"))
      assert(luxec.open_stream == require("luxec.auto.stream").open)
      assert(type(luxec.remote.connect) == "function")
      assert(luxec.nosuch == nil)
      print(package.loaded["luxec.auto.ssh"] ~= nil, package.loaded["luxec.remote"] ~= nil)
    ]])
    assert.equals("true\ttrue\n", out)
  end)

  it("maps no line-editing library (the prompt loads it when it opens)", function()
    local out = host([[
      local f = assert(io.open("/proc/self/maps"))
      local maps = f:read("a")
      f:close()
      print(maps:match("libedit[^\n]*") or "none")
    ]])
    assert.equals("none\n", out)
  end)
end)
