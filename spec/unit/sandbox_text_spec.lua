-- The sandbox's records as text (luxec.sandbox.escape, describe): what a path or a command
-- name an attacker chose can hide from a person or a model reading it.
local sandbox = require("luxec.sandbox")

describe("sandbox.escape", function()
  it("keeps printable UTF-8 and shows controls, escapes and invalid bytes as bytes", function()
    assert.equals("/tmp/ré sumé.txt", sandbox.escape("/tmp/ré sumé.txt"))
    assert.equals("a\\nb\\x1b[2Jc\\x07", sandbox.escape("a\nb\27[2Jc\7"))
    assert.equals("\\xff\\xfe", sandbox.escape("\255\254"))
    assert.equals("x\\xc2\\x9by", sandbox.escape("x\u{9b}y")) -- C1 CSI
  end)

  it("shows what displays nothing but a model reads: bidi controls, zero-width characters, "
    .. "line and paragraph separators, tag characters", function()
      for _, cp in ipairs({ 0x061C, 0x200B, 0x200D, 0x200E, 0x2028, 0x2029, 0x202E, 0x2060,
        0x2066, 0xFEFF, 0xE0001, 0xE0041, 0xE007F, 0x00AD }) do
        local ch = utf8.char(cp)
        local out = sandbox.escape("a" .. ch .. "b")
        assert.is_nil(out:find(ch, 1, true), ("U+%04X kept"):format(cp))
        assert.matches("^a\\x%x%x", out)
      end
      -- a hidden instruction in tag characters is spelled out, not kept invisible
      local hidden = ""
      for c in ("ignore"):gmatch(".") do hidden = hidden .. utf8.char(0xE0000 + c:byte()) end
      assert.is_nil(sandbox.escape(hidden):find("[\128-\255]"))
      assert.equals(6 * 4 * 4, #sandbox.escape(hidden)) -- each byte as \xNN
      assert.is_nil(sandbox.escape("/tmp/x" .. hidden):find("\u{E0069}", 1, true))
    end)
end)
