-- Output cleaning: escape sequences, lines rewritten in place, held-back bytes across reads,
-- and the map from text positions back to raw offsets. No process, no loop.
local C = require("luxec.engine.clean")
local H = require("helper")

local function cleaned(s, opts)
  return (C.clean(s, opts))
end

describe("clean: escape sequences", function()
  it("strips SGR colours and counts the bytes removed", function()
    local text, removed = C.clean("\27[1;31mred\27[0m plain\n")
    assert.equals("red plain\n", text)
    assert.equals(11, removed)
  end)

  it("strips OSC (BEL or ST), DCS and APC strings, and two-byte sequences", function()
    assert.equals("text\n", cleaned("\27]0;window title\7text\n"))
    assert.equals("text\n", cleaned("\27]8;;http://x\27\\text\27]8;;\27\\\n"))
    assert.equals("ab", cleaned("a\27Pq#0;1;2\27\\b"))
    assert.equals("ab", cleaned("a\27_apc\27\\b"))
    assert.equals("ab", cleaned("a\27(Bb"))
    assert.equals("ab", cleaned("a\27=\27>b"))
    assert.equals("hidden", cleaned("\27[?25lhidden\27[?25h"))
    assert.equals("x\n", cleaned("\27[2J\27[Hx\n"))
  end)

  it("reads a sequence the same in bulk as line by line (fuzz_truncate)", function()
    -- a string cut short by the next ESC goes whole; an ESC that starts nothing goes alone,
    -- and taking out what follows it makes no new sequence of it
    for raw, text in pairs({
      ["\27Xsos\27[0m plain"] = " plain",
      ["\27]0;title\27[0m plain"] = " plain",
      ["\27]x\27]y\7z"] = "z",
      ["\27\27[31mm X"] = "m X",
      ["a\27[\1b"] = "a[b",
    }) do
      assert.equals(text, cleaned(raw, { collapse = false })) -- in bulk
      assert.equals(text .. "\n", cleaned(raw .. "\r\n")) -- \r: line by line
    end
  end)

  it("drops other control characters but keeps tabs and newlines", function()
    assert.equals("a\tb\n", cleaned("a\7\0\tb\1\127\n"))
  end)

  it("drops a malformed escape's ESC alone", function()
    assert.equals("a\nb", cleaned("a\27\nb"))
  end)

  it("leaves everything alone when both options are off, still valid UTF-8", function()
    local raw = "\27[31mred\27[0m\r\n50%\r100%\n\xff"
    assert.equals("\27[31mred\27[0m\r\n50%\r100%\n\u{FFFD}",
      cleaned(raw, { strip = false, collapse = false }))
  end)
end)

describe("clean: lines rewritten in place", function()
  it("keeps the final state of a \\r progress line", function()
    local text, removed = C.clean("10%\r50%\r100%\ndone\n")
    assert.equals("100%\ndone\n", text)
    assert.equals(8, removed)
  end)

  it("overwrites like a terminal: a shorter rewrite leaves the rest", function()
    assert.equals("XYcdef\n", cleaned("abcdef\rXY\n"))
  end)

  it("honours erase-in-line and cursor moves", function()
    assert.equals("progress 100%\ndone\n",
      cleaned("progress 10%\27[K\rprogress 100%\27[K\ndone\n"))
    assert.equals("new\n", cleaned("old text\27[2K\rnew\n"))
    assert.equals("ab\n", cleaned("abcdef\27[4D\27[K\n"))
    assert.equals("aXc\n", cleaned("abc\27[2GX\n"))
    assert.equals("a  b\n", cleaned("a\27[2Cb\n"))
  end)

  it("applies backspaces", function()
    assert.equals("___\n", cleaned("man\b\b\b___\n"))
    assert.equals("ac\n", cleaned("ab\bc\n"))
  end)

  it("turns \\r\\n into \\n and keeps the line", function()
    assert.equals("a\nb\n", cleaned("a\r\nb\r\n"))
  end)

  it("rewrites only the line it is on", function()
    assert.equals("first\nB2\nthird\n", cleaned("first\nA1\rB2\nthird\n"))
  end)

  it("trims the spaces a rewrite left at the end of the line", function()
    assert.equals("done\n", cleaned("working...\rdone      \n"))
  end)

  it("stops a cursor move right at a last column, like a terminal (fuzz_truncate)", function()
    -- a far column costs no memory: the move stops at column 1024 (0-based) or the text's end
    assert.equals("a" .. (" "):rep(1023) .. "b\n", cleaned("a\27[99999999999999999999999Gb\n"))
    assert.equals("a" .. (" "):rep(1023) .. "b\n", cleaned("a\27[4294967296Cb\n"))
    local far = cleaned(("\27[99999Cx"):rep(1000) .. "\n")
    assert.equals((" "):rep(1024) .. ("x"):rep(1000) .. "\n", far)
    -- within a long line a move goes where it says
    assert.equals(("y"):rep(1500) .. "z" .. ("y"):rep(1499) .. "\n",
      cleaned(("y"):rep(3000) .. "\27[1501Gz\n"))
    assert.equals("ab   c\n", cleaned("ab\27[3Cc\n"))
  end)

  it("leaves \\r alone when collapse is off", function()
    assert.equals("10%\r100%\n", cleaned("\27[1m10%\r100%\n", { collapse = false }))
  end)
end)

describe("clean: across reads", function()
  it("holds back an escape sequence cut by a read", function()
    local cl, out = C.new(), C.output()
    cl:feed(out, "a\27[3", 0, false)
    assert.equals(3, cl:pending())
    assert.equals("a", C.text(out))
    cl:feed(out, "1mred\27[0m", 5, false)
    assert.equals(0, cl:pending())
    assert.equals("ared", C.text(out))
  end)

  it("holds back a UTF-8 sequence cut by a read", function()
    local cl = C.new()
    local out1 = C.output()
    cl:feed(out1, "price: \xe2\x82", 0, false)
    assert.equals("price: ", C.text(out1))
    local out2 = C.output()
    cl:feed(out2, "\xac\n", 9, false)
    assert.equals("€\n", C.text(out2))
  end)

  it("holds back a trailing \\r that may be half of \\r\\n", function()
    local cl, out = C.new(), C.output()
    cl:feed(out, "line\r", 0, false)
    assert.equals("line", C.text(out))
    cl:feed(out, "\nnext\n", 5, false)
    assert.equals("line\nnext\n", C.text(out))
  end)

  it("flushes what it held when told the stream is over", function()
    local cl, out = C.new(), C.output()
    cl:feed(out, "x\xe2\x82", 0, false)
    cl:feed(out, "", 3, true)
    assert.equals("x\u{FFFD}", C.text(out))
    assert.equals(0, cl:pending())
  end)

  it("cuts a line longer than 64 KiB between characters and sequences (fuzz_truncate)",
    function()
      -- a read cleaned in blocks: a block that ends inside the line must not end inside a
      -- character (two U+FFFD for one €) or an escape sequence ("31m" left as text)
      local text = cleaned("\27[1m" .. ("€"):rep(30000))
      assert.is_nil(text:find("\u{FFFD}"))
      assert.is_true(text == ("€"):rep(30000)) -- (not assert.equals: 90 KB in a message)
      local sgr = "\27[1m" .. ("a"):rep(65530) .. "\27[31mXYZ" .. ("b"):rep(100)
      for _, collapse in ipairs({ true, false }) do
        text = cleaned(sgr, { collapse = collapse })
        assert.equals("aXYZb", text:sub(65530, 65534))
        assert.is_true(text == ("a"):rep(65530) .. "XYZ" .. ("b"):rep(100))
      end
      assert.equals(100000, #cleaned(("B\0\0f"):rep(50000)))
      -- where a block may end is found in linear time
      local ratio, times = H.growth(function(n) return ("B\0\0f"):rep(n) end, cleaned, 40000)
      assert.is_true(ratio < 10, times) -- (linear: 4; quadratic: 16)
    end)

  it("holds back a string with the sequence a read cut that cuts it short (fuzz_truncate)",
    function()
      local cl, out = C.new({ collapse = false }), C.output()
      assert.equals(1, cl:feed(out, "a\27Xsos\27[0", 0, false)) -- the SOS waits with the CSI
      assert.equals("a", C.text(out))
      cl:feed(out, "m plain", 9, true)
      assert.equals("a plain", C.text(out))
      -- nor does a block of a long output end inside a string (which may hold a newline)
      local long = ("x"):rep(4090) .. "\27]title\nmore\27[0m end\n"
      assert.is_true(cleaned(long, { collapse = false }) == ("x"):rep(4090) .. " end\n")
    end)

  it("holds back a string cut short by an ESC whose meaning the next read decides (fuzz_truncate)",
    function()
      -- "\27X...\27\27" : the first ESC after the string cuts it short only because the next
      -- byte is not "\\"; a read that ends between the two ESCs must hold the string back too
      for _, collapse in ipairs({ true, false }) do
        local cl, out = C.new({ collapse = collapse }), C.output()
        assert.equals(1, cl:feed(out, "a\27X62mred\27\27", 0, false))
        assert.equals("a", C.text(out))
        cl:feed(out, "0m plain\n", 11, true)
        assert.equals("am plain\n", C.text(out))
        assert.equals("am plain\n", (C.clean("a\27X62mred\27\0270m plain\n",
          { collapse = collapse })))
      end
    end)

  it("removes a run of strings each cut short by the next, longer than a block (fuzz_truncate)",
    function()
      -- each string ends where the next begins; a block or a read that ends between two of
      -- them still knows the first was cut short (the ESC after it starts a string)
      local raw = ("\0\27_title"):rep(10000) .. "\27\\end\n"
      for _, collapse in ipairs({ true, false }) do
        assert.equals("end\n", cleaned(raw, { collapse = collapse }))
        for _, size in ipairs({ 600, 4096, 5000 }) do
          local cl, out = C.new({ collapse = collapse }), C.output()
          for at = 1, #raw, size do
            cl:feed(out, raw:sub(at, at + size - 1), at - 1, false)
          end
          cl:feed(out, "", #raw, true)
          assert.equals("end\n", C.text(out))
        end
      end
    end)

  it("returns the raw offset where it stopped", function()
    local cl, out = C.new(), C.output()
    assert.equals(2, cl:feed(out, "ab\27[", 0, false))
    assert.equals(8, cl:feed(out, "0mcd\r", 4, false)) -- the \r at 8 waits
  end)
end)

describe("clean: a line rewritten across blocks and reads", function()
  -- what a progress bar prints: updates of one line, each after a \r, and a newline at last
  local function progress(n, width)
    local t = {}
    for i = 0, n - 1 do t[#t + 1] = ("\rstep %06d |%s|"):format(i, ("#"):rep(width)) end
    return table.concat(t) .. "\ndone\n"
  end
  local function fed(raw, size, opts)
    local cl, out = C.new(opts), C.output()
    for at = 1, #raw, size do cl:feed(out, raw:sub(at, at + size - 1), at - 1, false) end
    cl:feed(out, "", #raw, true)
    return C.text(out)
  end

  it("keeps only the last state of a line longer than a block (64 KiB) of updates", function()
    local raw = progress(2000, 40) -- 110 KB on one line
    local want = ("step 001999 |%s|\ndone\n"):format(("#"):rep(40))
    assert.equals(want, (C.clean(raw, { collapse = true })))
    for _, size in ipairs({ 13, 3000, 65536, 70000 }) do
      assert.equals(want, fed(raw, size, { collapse = true }), "reads of " .. size)
    end
  end)

  it("a read that ends inside an update, or after an erase, leaves the cursor where it was",
    function()
      assert.equals("  xyz", fed("ab\27[2Kxyz", 6, { collapse = true }))
      assert.equals("\na\nxy", fed("\na\n\rxy\r", 2, { collapse = true }))
      -- reads of any size give what one read gives (but for spaces at line ends)
      local atoms = { "a", "bc", "xyz ", "\r", "\n", "\27[K", "\27[2K", "\27[31m", "\27[0m",
        "\xc3\xa9", "\xe2\x82\xac", "long", "#####", "\rst 1 |#|" }
      local function norm(x) return (x:gsub(" +\n", "\n"):gsub(" +$", "")) end
      local seed = 20261203
      local function rnd(n) -- (a generator of its own: the cases are the same in every run)
        seed = (seed * 1103515245 + 12345) % 2147483648
        return seed % n + 1
      end
      for case = 1, 300 do
        local parts = {}
        for _ = 1, rnd(60) do parts[#parts + 1] = atoms[rnd(#atoms)] end
        local raw = table.concat(parts)
        local whole = norm((C.clean(raw, { collapse = true })))
        assert.equals(whole, norm(fed(raw, rnd(40), { collapse = true })), ("case %d: %q")
          :format(case, raw))
      end
    end)
end)

describe("clean: map back to raw offsets", function()
  it("maps a cut in plain text exactly", function()
    local out = C.output()
    C.new():feed(out, "0123456789", 100, true)
    assert.same({ 103, 107 }, { C.raw_range(out, 3, 7, 100, 110) })
  end)

  it("covers escape sequences removed next to the cut, to a block's precision", function()
    local raw = "abc\27[31mdef\27[0mghi"
    local out = C.output()
    C.new():feed(out, raw, 0, true)
    assert.equals("abcdefghi", C.text(out))
    -- "def" (text 3..6) came from raw 3..15 with the escapes; one block here: all of it
    assert.same({ 0, #raw }, { C.raw_range(out, 3, 6, 0, #raw) })
  end)

  it("keeps that precision within a few KiB on large output", function()
    local lines = {}
    for i = 1, 2000 do lines[i] = ("\27[1mline %04d\27[0m\n"):format(i) end
    local raw = table.concat(lines) -- 2000 lines of 18 raw bytes, 10 of text
    local out = C.output()
    C.new():feed(out, raw, 0, true)
    local text = C.text(out)
    assert.equals(20000, #text)
    local a, b = C.raw_range(out, 5000, 15000, 0, #raw) -- lines 501..1500
    assert.is_true(a <= 500 * 18 and a > 500 * 18 - 4200, tostring(a))
    assert.is_true(b >= 1500 * 18 and b < 1500 * 18 + 4200, tostring(b))
    -- every removed line is in the range, and the range holds whole lines
    local got = C.clean(raw:sub(a + 1, b))
    assert.truthy(got:find("line 0501\n", 1, true))
    assert.truthy(got:find("line 1500\n", 1, true))
  end)

  it("cleans binary output in bulk", function()
    local function binary(n)
      local bytes = {}
      for i = 1, n do bytes[i] = string.char((i * 7919) % 256) end
      return table.concat(bytes)
    end
    assert.truthy(utf8.len((C.clean(binary(300000)))))
    local ratio, times = H.growth(binary, C.clean, 50000)
    assert.is_true(ratio < 10, times) -- (linear: 4; quadratic: 16)
  end)

  it("maps into a rewritten line as the whole raw line", function()
    local raw = "head\n10%\r100%\ntail\n"
    local out = C.output()
    C.new():feed(out, raw, 0, true)
    assert.equals("head\n100%\ntail\n", C.text(out))
    local a, b = C.raw_range(out, 6, 8, 0, #raw) -- "00" inside "100%"
    assert.same({ 5, 13 }, { a, b }) -- the raw line "10%\r100%"
  end)

  it("uses the bounds given when the cut reaches either end", function()
    local out = C.output()
    C.new():feed(out, "abcdef", 10, true)
    assert.same({ 7, 16 }, { C.raw_range(out, 0, 6, 7, 16) })
  end)
end)
