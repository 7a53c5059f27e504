-- The terminal in raw mode: spawn's tty = {raw = true} (set before the program runs) and
-- p:set_raw().
local H = require("helper")
local luxec = require("luxec")

local err_of = H.err_of

describe("terminal raw mode", function()
  after_each(H.assert_clean)

  it("tty = {raw = true}: the program starts on a terminal in raw mode", function()
    -- stty reports the modes the program found: set before it ran, not after.
    local script = "stty -a | tr ' ;' '\\n\\n' | grep -x -e '-*icanon' -e '-*echo' -e '-*isig'"
      .. " -e '-*opost' | tr '\\n' ' '; printf 'end\\n'"
    local p = assert(luxec.spawn({ "sh", "-c", script }, { tty = { raw = true } }))
    assert(p:wait({ timeout = 10 }))
    -- no output processing either: "\n" stays "\n" (a cooked terminal makes it "\r\n")
    assert.equals("-opost -isig -icanon -echo end\n", p:read())
    p:close()
  end)

  it("bytes go both ways as they are: no echo, no line editing, no signal characters", function()
    local p = assert(luxec.spawn({ "sh", "-c", "head -c 7 | od -An -c" },
      { tty = { raw = true, rows = 10 } }))
    -- ^C, ^U and ^D are data in raw mode: head reads them (and nothing of it is echoed)
    assert(p:write("a\3b\21c\4\n"))
    assert(p:wait({ timeout = 10 }))
    assert.equals(0, p:status().code)
    local out = p:read()
    assert.truthy(out:match("^%s*a%s+003%s+b%s+025%s+c%s+004%s+\\n\n$"), out)
    assert.equals(10, (p:size()))
    p:close()
  end)

  it("p:set_raw() turns a running session's terminal raw, and set_raw(false) back", function()
    local p = assert(luxec.spawn({ "cat" }, { tty = true }))
    p.timeout = 5
    p:sendline("one")
    assert(p:expect("one\r\none\r\n")) -- cooked: the echo, then cat's copy, with "\r\n"
    assert.is_true(p:set_raw())
    assert.is_false(p:getecho())
    p:send("two\n")
    assert(p:expect("two\n"))
    p:send("three\n")
    assert(p:expect("three\n"))
    assert.equals("", p.before) -- "two" came once, and no "\r" anywhere
    assert.is_true(p:set_raw(false))
    assert.is_true(p:getecho())
    p:sendline("four")
    assert(p:expect("four\r\nfour\r\n"))
    assert.equals("", p.before)
    p:close()
  end)

  it("close_stdin on a raw terminal says it has no end of input (^D would be data)", function()
    for _, how in ipairs({ "spawn", "set_raw" }) do
      local p = assert(luxec.spawn({ "sh", "-c", "head -c 3 | od -An -c" },
        { tty = how == "spawn" and { raw = true } or true }))
      if how == "set_raw" then assert(p:set_raw()) end
      assert(p:write("ab"))
      assert.same({ nil, "EINVAL: the terminal is raw (tty = {raw = true} or p:set_raw()): it "
        .. "has no end of input, and its EOF character would be read as data", "EINVAL" },
        { p:close_stdin() })
      assert(p:write("c")) -- input still goes: nothing was sent or closed
      assert(p:wait({ timeout = 10 }))
      assert.truthy(p:read():match("^%s*a%s+b%s+c%s*\n$"), how)
      p:close()
    end
  end)

  it("a pipe session has no terminal to set raw", function()
    local p = assert(luxec.spawn({ "cat" }))
    assert.same({ nil, "ENOTTY: a pipe session has no terminal to set raw", "ENOTTY" },
      { p:set_raw() })
    p:close()
  end)

  it("names bad arguments", function()
    assert.matches("bad option 'tty.raw' to 'spawn' %(boolean expected, got number%)",
      err_of(luxec.spawn, { "true" }, { tty = { raw = 1 } }))
    local p = assert(luxec.spawn({ "cat" }, { tty = true }))
    assert.matches("tty_raw_spec.lua:%d+: bad argument #1 to 'set_raw' %(boolean expected, got "
      .. "string%)", err_of(function() p:set_raw("on") end))
    p:close()
    assert.matches("attempt to call 'set_raw' on a closed process", err_of(p.set_raw, p))
  end)
end)
