local H = require("helper")
local luxec = require("luxec")

-- terminate's signal reaches each program's process group at once, and the rest of its tree
-- (processes in other groups: setsid, job control) when the program ends, or
-- terminate_rest_ms after the call while the program still runs. These specs watch a child
-- in a group of its own that writes down the signal it gets.

-- A shell in a new session of its own that writes "TERM" to file when TERM comes, after
-- writing "ready" there; it runs until then.
local function catcher(file)
  return ("setsid sh -c 'trap \"echo TERM > %s; exit 0\" TERM; echo ready > %s; "
    .. "while :; do sleep 0.05; done' &"):format(file, file)
end

local function wait_word(file, word, what)
  H.wait_for(function()
    local f = io.open(file)
    local text = f and f:read("a") or ""
    if f then f:close() end
    return text:match(word) ~= nil
  end, 10000, what)
end

H.each_cgroup_mode("terminate: the rest of the tree", function(cgroup)
  it("has the signal when its program ends on it", function()
    local file = os.tmpname()
    local p = assert(luxec.spawn({ "sh", "-c", catcher(file) .. " wait" }, { cgroup = cgroup }))
    wait_word(file, "ready", "the catcher to start")
    local r = p:terminate({ grace_ms = 30000 })
    assert.is_true(r.graceful) -- the catcher ended on TERM: no kill
    assert.equals(0, r.killed)
    assert.equals("TERM\n", H.read_file(file))
    assert.equals("TERM", p:status().signal_name)
    p:close()
    os.remove(file)
  end)

  it("has it terminate_rest_ms after the call while its program ignores it", function()
    local file = os.tmpname()
    -- (the catcher first: a signal ignored when a shell starts cannot be trapped in it)
    local p = assert(luxec.spawn({ "sh", "-c", catcher(file) .. " trap '' TERM; exec sleep 600" },
      { cgroup = cgroup }))
    wait_word(file, "ready", "the catcher to start")
    local t = luxec.go(function() return p:terminate({ grace_ms = 600000 }) end)
    wait_word(file, "TERM", "the catcher to have TERM") -- the program still runs meanwhile
    assert.is_false(t.done)
    assert.is_true(H.alive(p.pid))
    p:close() -- ends the tree, and the terminate() waiting for it
    assert.is_true((t:wait()))
    os.remove(file)
  end)

  it("core: signal_trees with defer owes the rest its signal, signal_rest sends it once",
    function()
      local core = require("luxec.core")
      local file = os.tmpname()
      local p = assert(luxec.spawn({ "sh", "-c", catcher(file) .. " trap '' TERM; exec sleep 600" },
        { cgroup = cgroup }))
      wait_word(file, "ready", "the catcher to start")
      local total = core.signal_trees({ p._core }, "TERM", true)
      assert.equals(1, total) -- the program's group only
      assert.equals("ready\n", H.read_file(file))
      assert.is_true(core.signal_rest({ p._core }) >= 1) -- the catcher (and its sleep)
      wait_word(file, "TERM", "the catcher to have TERM")
      assert.equals(0, core.signal_rest({ p._core })) -- paid already
      assert.is_true(H.alive(p.pid))
      p:close()
      os.remove(file)
    end)

  it("terminate_all: a tree left after its program is looked at and killed, the rest ended",
    function()
      local file = os.tmpname()
      local procs = {}
      for i = 1, 5 do procs[i] = assert(luxec.spawn({ "sleep", "60" }, { cgroup = cgroup })) end
      -- its program ends on TERM; its escapee ignores it (and is killed after the grace)
      local stubborn = assert(luxec.spawn({ "sh", "-c",
        "setsid sh -c 'trap \"\" TERM; echo $$ > " .. file .. "; exec sleep 60' & wait" },
        { cgroup = cgroup }))
      procs[#procs + 1] = stubborn
      wait_word(file, "%d", "the escapee to start")
      local escapee = tonumber(H.read_file(file):match("%d+"))
      local r = luxec.terminate_all(procs, { grace_ms = 300 })
      assert.is_false(r.graceful)
      assert.is_true(r.killed >= 1)
      assert.is_false(H.alive(escapee))
      for _, p in ipairs(procs) do
        assert.is_true(p:finished())
        assert.is_false(H.alive(p.pid))
        p:close()
      end
      os.remove(file)
    end)
end)
