-- The session store: ids, last use, Codex's pruning and warning. Pure bookkeeping.
local sessions = require("luxec.engine.sessions")

-- A store of plain entries {exited = bool}, ids deterministic.
local function store(opts)
  opts = opts or {}
  opts.deterministic = true
  return sessions.new(opts)
end

local function fill(st, n, exited)
  local ids = {}
  for i = 1, n do
    local id = assert(st:reserve())
    st:add(id, { exited = exited and exited(i) or false, n = i })
    ids[i] = id
  end
  return ids
end

describe("session ids", function()
  it("are 1000, 1001, … when deterministic", function()
    local st = store()
    assert.same({ 1000, 1001, 1002 }, { st:reserve(), st:reserve(), st:reserve() })
  end)

  it("when deterministic, are Codex's: one past the highest held now, 1000 for none", function()
    local st = store()
    local a = st:reserve()
    st:release(a) -- a command that ended within its first call
    assert.equals(1000, st:reserve()) -- (Codex: max of the reserved ids + 1, else 1000)
    st:add(1000, {})
    local b = st:reserve()
    st:add(b, {})
    assert.same({ 1000, 1001 }, { a, b })
    st:remove(1000) -- ended and reported: the highest held is 1001
    assert.equals(1002, st:reserve())
    st:remove(1001)
    st:release(1002)
    assert.equals(1000, st:reserve()) -- nothing held: 1000 again
    -- a stored id is never given back by release
    local c = st:reserve()
    st:add(c, {})
    st:release(c)
    assert.is_not.equals(c, st:reserve())
  end)

  it("are random in 1000..99999 otherwise, never handed out twice", function()
    local st = sessions.new()
    local seen = {}
    for _ = 1, 2000 do
      local id = assert(st:reserve())
      assert.is_true(id >= 1000 and id <= 99999)
      assert.is_nil(seen[id])
      seen[id] = true
    end
  end)

  it("are not reused after a session is removed (random ones)", function()
    local st = sessions.new({ random = function() return 4242 end })
    local id = st:reserve()
    st:add(id, {})
    st:remove(id)
    local again = st:reserve() -- the generator insists on 4242: the scan finds another
    assert.equals(4242, id)
    assert.is_not.equals(4242, again)
  end)
end)

describe("session store", function()
  it("gets, touches, removes and lists most recently used first", function()
    local st = store()
    local ids = fill(st, 3)
    assert.equals(3, st:count())
    assert.same({ ids[3], ids[2], ids[1] }, st:ids())
    st:touch(ids[1])
    assert.same({ ids[1], ids[3], ids[2] }, st:ids())
    assert.equals(2, st:remove(ids[2]).n)
    assert.is_nil(st:get(ids[2]))
    assert.is_nil(st:remove(ids[2]))
    assert.equals(2, st:count())
  end)
end)

describe("pruning (Codex's rules)", function()
  it("keeps 64 at most: the 65th prunes the least recently used exited one", function()
    local st = store()
    -- ids[5] and ids[20] exited; ids[5] is the older of the two
    local ids = fill(st, 64, function(i) return i == 5 or i == 20 end)
    local id = st:reserve()
    local pruned_id, pruned = st:add(id, { exited = false })
    assert.equals(ids[5], pruned_id)
    assert.equals(5, pruned.n)
    assert.equals(64, st:count())
    assert.is_nil(st:get(ids[5]))
  end)

  it("prunes the least recently used one when none exited", function()
    local st = store()
    local ids = fill(st, 64)
    local pruned_id = st:add(st:reserve(), {})
    assert.equals(ids[1], pruned_id)
  end)

  it("never prunes one of the 8 most recently used, even if it exited", function()
    local st = store()
    -- only the newest exited; it is protected, so the oldest running one goes
    local ids = fill(st, 64, function(i) return i == 64 end)
    local pruned_id = st:add(st:reserve(), {})
    assert.equals(ids[1], pruned_id)
  end)

  it("counts use, not creation: a touched old session is protected", function()
    local st = store()
    local ids = fill(st, 64, function(i) return i <= 2 end)
    st:touch(ids[1]) -- now among the 8 most recent
    local pruned_id = st:add(st:reserve(), {})
    assert.equals(ids[2], pruned_id)
    assert.is_not_nil(st:get(ids[1]))
  end)

  it("takes the limits from its options", function()
    local st = store({ max = 3, protect = 1 })
    local ids = fill(st, 3, function(i) return i == 3 end)
    -- ids[3] exited but is the most recent (protected): ids[1] goes
    assert.equals(ids[1], (st:add(st:reserve(), {})))
    assert.equals(3, st:count())
  end)

  it("asks the caller's predicate whether an entry exited", function()
    local st = sessions.new({ deterministic = true, max = 2, protect = 0,
      exited = function(e) return e.done end })
    local a, b = st:reserve(), st:reserve()
    st:add(a, { done = false })
    st:add(b, { done = true })
    assert.equals(b, (st:add(st:reserve(), {})))
  end)
end)

describe("the warning", function()
  it("starts at 60 open processes with Codex's exact text", function()
    local st = store()
    fill(st, 59)
    local _, _, warning = st:add(st:reserve(), {})
    assert.equals("The maximum number of unified exec processes you can keep open is 60 and you "
      .. "currently have 60 processes open. Reuse older processes or close them to prevent "
      .. "automatic pruning of old processes", warning)
    _, _, warning = st:add(st:reserve(), {})
    assert.matches("you currently have 61 processes open", warning)
  end)

  it("is absent below the threshold", function()
    local st = store()
    fill(st, 58)
    local _, _, warning = st:add(st:reserve(), {})
    assert.is_nil(warning)
  end)

  it("keeps warning at the limit while pruning", function()
    local st = store()
    fill(st, 64)
    local pruned_id, _, warning = st:add(st:reserve(), {})
    assert.is_not_nil(pruned_id)
    assert.matches("you currently have 64 processes open", warning)
  end)
end)
