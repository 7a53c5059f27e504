-- The output buffer on its own (core.outbuf): no process, no loop.
local core = require("luxec.core")

-- Codex's "capacity C" is a head of floor(C/2) and a tail of the rest.
local function codex(cap)
  return core.outbuf(cap // 2, cap - cap // 2)
end

local function kept(ob)
  local head, tail, dropped, total = ob:snapshot()
  return head .. tail, dropped, total
end

describe("the output buffer", function()
  it("keeps head and tail and counts the middle (capacity 10: '0123456789' then 'ab')", function()
    local ob = codex(10)
    ob:push("0123456789")
    ob:push("ab")
    assert.same({ "01234789ab", 2, 12 }, { kept(ob) })
    local head, tail = ob:snapshot()
    assert.same({ "01234", "789ab" }, { head, tail })
  end)

  it("with capacity 1 keeps the last byte", function()
    local ob = codex(1)
    ob:push("abc")
    assert.same({ "c", 2, 3 }, { kept(ob) })
  end)

  it("with capacity 0 keeps nothing and counts everything", function()
    local ob = codex(0)
    ob:push("abc")
    ob:push("")
    assert.same({ "", 3, 3 }, { kept(ob) })
  end)

  it("reads from a cursor: what is held after it, the dropped count and where the gap is",
    function()
      local ob = core.outbuf(3, 4)
      ob:push("abcdefghij") -- held: "abc" and "ghij", dropped: "def"
      local data, next_cursor, dropped, gap_at = ob:read(0)
      local _
      assert.same({ "abcghij", 10, 3, 3 }, { data, next_cursor, dropped, gap_at })
      data, next_cursor, dropped = ob:read(next_cursor)
      assert.same({ "", 10, 0 }, { data, next_cursor, dropped })
      ob:push("kl")
      data, next_cursor, dropped, gap_at = ob:read(10)
      assert.same({ "kl", 12, 0, 0 }, { data, next_cursor, dropped, gap_at })
      data, _, dropped, gap_at = ob:read(5) -- inside what is dropped now: offsets 3..7
      assert.same({ "ijkl", 3, 0 }, { data, dropped, gap_at })
      data, _, dropped, gap_at = ob:read(1)
      assert.same({ "bcijkl", 5, 2 }, { data, dropped, gap_at })
    end)

  it("matches a simple model under 2,000 random pushes and reads", function()
    math.randomseed(20261130) -- the same pushes every run; random again after (finally)
    finally(function() math.randomseed() end)
    for _, caps in ipairs({ { 0, 0 }, { 0, 7 }, { 5, 0 }, { 16, 16 }, { 100, 3 }, { 1, 1000 } }) do
      local H, T = caps[1], caps[2]
      local ob = core.outbuf(H, T)
      local all, cursor = {}, 0
      local n = 0
      for _ = 1, 2000 do
        if math.random() < 0.7 then
          local len = math.random(0, 40)
          local bytes = {}
          for i = 1, len do
            bytes[i] = string.char(math.random(0, 255))
          end
          local s = table.concat(bytes)
          ob:push(s)
          all[#all + 1] = s
          n = n + len
        else
          local stream = table.concat(all)
          all = { stream }
          local data, next_cursor, dropped, gap_at = ob:read(cursor)
          -- model: the held offsets are [0, min(H, n)) and [max(H, n - T), n)
          local head_end = math.min(H, n)
          local tail_start = math.max(head_end, n - T)
          local want_head = cursor < head_end and stream:sub(cursor + 1, head_end) or ""
          local from = math.max(cursor, tail_start)
          local want_tail = stream:sub(from + 1, n)
          local want_dropped = math.max(0, tail_start - math.max(cursor, head_end))
          if cursor >= n then want_dropped = 0 end
          assert.equals(want_head .. want_tail, data)
          assert.equals(want_dropped, dropped)
          assert.equals(#want_head, gap_at)
          assert.equals(n, next_cursor)
          cursor = next_cursor
          local _, _, total_dropped, total = ob:snapshot()
          assert.equals(n, total)
          assert.equals(n - head_end - (n - tail_start), total_dropped)
        end
      end
    end
  end)

  it("reads a range from the head on into the tail when nothing was dropped (fuzz_outbuf)",
    function()
      local ob = core.outbuf(4, 4)
      ob:push("abcdef") -- held: "abcd" and "ef", nothing dropped
      assert.equals("cde", ob:read_range(2, 3))
      assert.equals("abcdef", ob:read_range(0, 100))
      assert.equals("", ob:read_range(6, 1))
      ob:push("ghij") -- held: "abcd" and "ghij"; "ef" dropped
      assert.same({ nil, "ERANGE" }, { ob:read_range(2, 3) })
      assert.same({ nil, "ERANGE" }, { ob:read_range(4, 1) })
      assert.equals("", ob:read_range(5, 0)) -- an empty range touches nothing
      assert.equals("abcd", ob:read_range(0, 4))
      assert.equals("ij", ob:read_range(8, 10))
      local empty = core.outbuf(0, 4)
      empty:push("xyz")
      assert.equals("", empty:read_range(0, 0)) -- no head at all: nothing to copy from
      assert.equals("yz", empty:read_range(1, 5))
    end)

  it("rejects negative sizes and cursors", function()
    assert.has_error(function() core.outbuf(-1, 0) end)
    assert.has_error(function() core.outbuf(0, -1) end)
    assert.has_error(function() core.outbuf(1, 1):read(-1) end)
  end)
end)
