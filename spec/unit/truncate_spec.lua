-- Truncation policies: Codex's exactly (every case of the reference), luxec's cut, and the
-- UTF-8 helpers that keep a character from ever being cut. No process, no loop.
local T = require("luxec.engine.truncate")
local H = require("helper")

local LONG = "this is an example of a long output that should be truncated"
local TWO_LINES = LONG .. "\nalso some other line"
local EMOJI = ("😀"):rep(10) .. "\nsecond line with text\n"

describe("Codex's truncation, case by case from the reference", function()
  it("byte budget 1 keeps the last character and counts removed characters", function()
    assert.equals("Total output lines: 1\n\n…13 chars truncated…t",
      (T.codex("example output", { bytes = 1 })))
  end)

  it("token budget 1 keeps two bytes each side and counts the overflow in tokens", function()
    assert.equals("Total output lines: 1\n\nex…3 tokens truncated…ut",
      (T.codex("example output", { tokens = 1 })))
  end)

  it("returns text that fits unchanged, with no header", function()
    assert.same({ "example output", false }, { T.codex("example output", { tokens = 10 }) })
    assert.same({ "example output", false }, { T.codex("example output", { bytes = 20 }) })
    assert.same({ "", false }, { T.codex("", { tokens = 0 }) })
  end)

  it("cuts a long line by tokens", function()
    assert.equals(60, #LONG)
    assert.equals("Total output lines: 1\n\nthis is an…10 tokens truncated… truncated",
      (T.codex(LONG, { tokens = 5 })))
  end)

  it("cuts a long line by bytes", function()
    assert.equals("Total output lines: 1\n\nthis is an exam…30 chars truncated…ld be truncated",
      (T.codex(LONG, { bytes = 30 })))
  end)

  it("counts the lines of the original, two here, by bytes", function()
    assert.equals("Total output lines: 2\n\nthis is an exam…51 chars truncated…some other line",
      (T.codex(TWO_LINES, { bytes = 30 })))
  end)

  it("counts the lines of the original, two here, by tokens", function()
    assert.equals(
      "Total output lines: 2\n\nthis is an example o…11 tokens truncated…also some other line",
      (T.codex(TWO_LINES, { tokens = 10 })))
  end)

  it("keeps whole emoji and does not count the trailing empty piece as a line", function()
    assert.equals(63, #EMOJI)
    assert.equals(16, T.approx_tokens(#EMOJI))
    assert.equals("Total output lines: 2\n\n😀😀😀😀…8 tokens truncated… line with text\n",
      (T.codex(EMOJI, { tokens = 8 })))
  end)

  it("drops a character that straddles the cut", function()
    -- 4-byte emoji, budget 6: the head may hold 3 bytes (no whole emoji), the tail 3 (none)
    local out = T.codex("😀😀😀", { bytes = 6 })
    assert.equals("Total output lines: 1\n\n…3 chars truncated…", out)
  end)

  it("keeps the header around the marker alone for a budget of 0", function()
    assert.same({ "Total output lines: 1\n\n…2 tokens truncated…", true },
      { T.codex("abcdef", { tokens = 0 }) })
    assert.same({ "Total output lines: 2\n\n…5 chars truncated…", true },
      { T.codex("ab\ncé", { bytes = 0 }) })
    assert.equals("Total output lines: 1\n\n…6 chars truncated…",
      (T.codex("abcdef", { bytes = 0 })))
  end)
end)

describe("truncation helpers", function()
  it("estimates tokens as ceil(bytes / 4)", function()
    assert.same({ 0, 1, 1, 2, 16250 }, { T.approx_tokens(0), T.approx_tokens(1),
      T.approx_tokens(4), T.approx_tokens(5), T.approx_tokens(65000) })
  end)

  it("counts lines the way Rust's str::lines does", function()
    assert.same({ 0, 1, 1, 1, 2, 3, 2 }, { T.count_lines(""), T.count_lines("a"),
      T.count_lines("a\n"), T.count_lines("\n"), T.count_lines("a\nb"),
      T.count_lines("a\n\nb\n"), T.count_lines("\n\n") })
  end)

  it("finds character boundaries on either side", function()
    local s = "a€b" -- € is 3 bytes: offsets 1..4 are inside or after it
    assert.same({ 0, 1, 1, 1, 4, 5 }, { T.floor_boundary(s, 0), T.floor_boundary(s, 1),
      T.floor_boundary(s, 2), T.floor_boundary(s, 3), T.floor_boundary(s, 4),
      T.floor_boundary(s, 9) })
    assert.same({ 0, 1, 4, 4, 4, 5 }, { T.ceil_boundary(s, 0), T.ceil_boundary(s, 1),
      T.ceil_boundary(s, 2), T.ceil_boundary(s, 3), T.ceil_boundary(s, 4),
      T.ceil_boundary(s, 9) })
  end)
end)

describe("luxec's cut", function()
  it("says nothing fits-or-not for text within the budget", function()
    assert.is_nil(T.cut("short", 100))
  end)

  it("splits the budget like Codex, on whole characters", function()
    assert.same({ 15, 45 }, { T.cut(LONG, 30) })
    assert.same({ 16, 47 }, { T.cut(EMOJI, 32) })
  end)

  it("always cuts through a hole, even when the text would fit", function()
    assert.same({ 3, 3 }, { T.cut("abcdef", 100, 3) })
    -- a hole inside the head moves the head's end back to it
    assert.same({ 5, 45 }, { T.cut(LONG, 30, 5) })
    -- a hole inside the tail moves the tail's start forward
    assert.same({ 15, 55 }, { T.cut(LONG, 30, 55) })
  end)

  it("never lands a hole inside a character", function()
    local p, q = T.cut("a€b", 100, 2)
    assert.same({ 1, 4 }, { p, q })
  end)
end)

describe("UTF-8 is never cut", function()
  it("holds back an incomplete sequence at the end", function()
    assert.same({ "ab", "\xe2\x82" }, { T.split_incomplete("ab\xe2\x82") })
    assert.same({ "ab", "\xf0\x9f\x98" }, { T.split_incomplete("ab\xf0\x9f\x98") })
    assert.same({ "a", "\xc3" }, { T.split_incomplete("a\xc3") })
  end)

  it("leaves complete text and text that no byte could complete alone", function()
    assert.same({ "ab€", "" }, { T.split_incomplete("ab€") })
    assert.same({ "😀", "" }, { T.split_incomplete("😀") })
    assert.same({ "", "" }, { T.split_incomplete("") })
    assert.same({ "a\xff", "" }, { T.split_incomplete("a\xff") }) -- never valid: lossy's job
    assert.same({ "a\x80", "" }, { T.split_incomplete("a\x80") })
  end)

  it("replaces each ill-formed sequence with U+FFFD as from_utf8_lossy does", function()
    local R = "\u{FFFD}"
    assert.same({ "plain €", false }, { T.lossy("plain €") })
    -- a character cut short (the start of a well-formed one) is one replacement
    assert.same({ "a" .. R .. "b", true }, { T.lossy("a\xe2\x82b") })
    assert.same({ R, true }, { T.lossy("\xf0\x9f\x98") })
    -- a byte no well-formed sequence starts with is one each: lone continuation bytes, an
    -- overlong form, a surrogate, a code point past U+10FFFF, 0xF8..0xFF
    assert.same({ R .. "x" .. R:rep(3), true }, { T.lossy("\xffx\xed\xa0\x80") })
    assert.equals("ok" .. R:rep(2), (T.lossy("ok\xc0\x80")))
    assert.equals(R:rep(3) .. "|" .. R:rep(3) .. "|" .. R:rep(3) .. "|" .. R .. "\n",
      (T.lossy("\x80\x80\x80|\xf0\x80\x80|\xed\xa0\x80|\xff\n")))
    assert.equals(R:rep(3), (T.lossy("\xe0\x80\xaf")))
    assert.equals(R:rep(4), (T.lossy("\xf4\x90\x80\x80")))
    assert.equals(R .. "(", (T.lossy("\xe0\xa0(")))
  end)

  it("handles a large mostly-broken input in linear time", function()
    assert.equals(200000 * 3, #T.lossy(("\xff"):rep(200000)))
    local ratio, times = H.growth(function(n) return ("\xff"):rep(n) end, T.lossy, 25000)
    assert.is_true(ratio < 10, times) -- (linear: 4; quadratic: 16)
  end)
end)
