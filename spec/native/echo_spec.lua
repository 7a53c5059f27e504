-- The terminal's echo: the echo = false spawn option, p:setecho and p:getecho.
local H = require("helper")
local luxec = require("luxec")

local err_of = H.err_of

describe("terminal echo", function()
  after_each(H.assert_clean)

  it("echo = false: the program starts on a terminal without echo", function()
    -- stty reports the mode the program found: set before it ran, not after.
    local script = "stty -a | tr ' ;' '\\n\\n' | grep -x -- '-*echo'; cat"
    local p = assert(luxec.spawn({ "sh", "-c", script }, { tty = true, echo = false }))
    assert(p:expect("-echo\r\n", { timeout = 5 }))
    assert.is_false(p:getecho())
    p:sendline("hello")
    assert(p:expect("hello\r\n", { timeout = 5 }))
    p:sendeof()
    assert(p:expect(luxec.EOF, { timeout = 5 }))
    assert.equals("", p.before) -- cat's copy only: no echo of the line before it
    assert.equals(0, p:status().code)
    p:close()
  end)

  it("a terminal echoes by default; setecho turns it off and on", function()
    local p = assert(luxec.spawn({ "cat" }, { tty = true }))
    p.timeout = 5
    assert.is_true(p:getecho())
    p:sendline("one")
    assert(p:expect("one\r\none\r\n")) -- the echo, then cat's copy
    assert.is_true(p:setecho(false))
    assert.is_false(p:getecho())
    p:sendline("two")
    assert(p:expect("two\r\n"))
    p:sendline("three")
    assert(p:expect("three\r\n"))
    assert.equals("", p.before) -- "two" came once: cat's copy
    assert.is_true(p:setecho(true))
    assert.is_true(p:getecho())
    p:sendline("four")
    assert(p:expect("four\r\nfour\r\n"))
    assert.equals("", p.before)
    p:close()
  end)

  it("a pipe session has no echo to set", function()
    local p = assert(luxec.spawn({ "cat" }))
    assert.is_false(p:getecho())
    assert.same({ nil, "ENOTTY: a pipe session has no terminal echo to set", "ENOTTY" },
      { p:setecho(true) })
    p:close()
  end)

  it("names bad arguments", function()
    local p = assert(luxec.spawn({ "cat" }, { tty = true }))
    assert.matches("echo_spec.lua:%d+: bad argument #1 to 'setecho' %(boolean expected, got "
      .. "string%)", err_of(function() p:setecho("off") end))
    p:close()
    assert.matches("attempt to call 'getecho' on a closed process", err_of(p.getecho, p))
    assert.matches("bad option 'echo' to 'spawn' %(boolean expected, got string%)",
      err_of(luxec.spawn, { "cat" }, { tty = true, echo = "no" }))
  end)
end)
