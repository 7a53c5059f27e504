-- The test hosts of the remote specs (spec/lib/testhost.lua) leave nothing behind: a host's
-- namespace goes with everything in it when it is closed, and one left by a run that was
-- killed (its pid gone) is removed, with its processes, by the next run.
local H = require("helper")
local T = require("lib.testhost")
local luxec = require("luxec")

local function namespaces()
  local r = luxec.run({ "ip", "netns", "list" })
  local set = {}
  for name in r.output:gmatch("(%S+)") do set[name] = true end
  return set
end

describe("test hosts as network namespaces", function()
  before_each(function()
    local why_not = T.skip_reason()
    if why_not then return pending(why_not) end
    local mode, why = T.mode()
    if mode ~= "netns" then return pending("no network namespaces here: " .. why) end
  end)
  after_each(H.assert_clean)

  it("removes a killed run's namespace and what runs in it; close removes a host's", function()
    local gone = assert(luxec.spawn({ "true" }))
    gone:wait()
    local dead = gone.pid
    gone:close()
    local name = ("luxec-t%d-1"):format(dead)
    assert.equals(0, luxec.run({ "ip", "netns", "add", name }).code)
    local inside = assert(luxec.spawn({ "ip", "netns", "exec", name, "sleep", "1000" }))
    H.wait_for(function()
      return luxec.run({ "ip", "netns", "pids", name }).output:find(tostring(inside.pid)) ~= nil
    end, 10000, "the process in the namespace")
    local box = T.start({ name = "box" }) -- (sweeps first)
    assert.is_nil(namespaces()[name])
    assert.equals("KILL", inside:wait({ timeout = 10 }).signal_name)
    inside:close()
    local own = box.netns
    assert.is_true(namespaces()[own])
    local host = assert(require("luxec.remote").connect({ command = box:ssh(nil, H.luxec,
      "serve"), name = "box" }))
    local p = assert(host:spawn({ "sleep", "1000" }))
    box:close() -- (with a session still running there)
    assert.is_nil(namespaces()[own])
    assert.matches("^connection to box lost", p:wait({ timeout = 10 }).connection_lost)
    host:close()
  end)
end)
