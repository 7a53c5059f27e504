-- pexpect's tests/test_interact.py translated case by case: its interact.py is a luxec
-- script here (it spawns getch, hands it to the person with p:interact and says "Escaped
-- interact" afterwards), run on a terminal of its own and typed at like a person.
local H = require("helper")
local luxec = require("luxec")

local EOF = luxec.EOF

local INTERACT = [[
local luxec = require("luxec")
local p = assert(luxec.spawn({ "python3", "-c", [=[
import os, sys, termios, tty
old = termios.tcgetattr(0)
tty.setraw(0)
try:
    sys.stdout.write("READY\r\n"); sys.stdout.flush()
    while True:
        c = os.read(0, 1)
        sys.stdout.write("%d<STOP>\r\n" % c[0]); sys.stdout.flush()
        if c == b"\0":
            break
finally:
    termios.tcsetattr(0, termios.TCSAFLUSH, old)
]=] }, { tty = true }))
local escape = nil
if arg[1] == "--no-escape" then escape = false end
p:interact({ escape = escape })
print("Escaped interact")
]]

describe("pexpect's test_interact.py", function()
  local dir
  before_each(function()
    dir = H.tmpdir()
    H.write_file(dir .. "/interact.lua", INTERACT)
  end)
  after_each(function()
    H.rmtree(dir)
    H.assert_clean()
  end)

  local function start(...)
    local p = assert(luxec.spawn({ H.luxec, dir .. "/interact.lua", ... }, { tty = true }))
    p.timeout = 10
    assert(p:expect("READY"))
    return p
  end

  local function ends(p)
    assert(p:expect_exact("Escaped interact"))
    assert.equals(1, p:expect(EOF))
    local st = assert(p:wait({ timeout = 10 }))
    assert.same({ false, 0 }, { st.running, st.code })
    p:close()
  end

  it("test_interact_escape", function()
    local p = start()
    p:sendcontrol("]")
    ends(p)
  end)

  it("test_interact_escape_None: escape = false", function()
    local p = start("--no-escape")
    p:sendcontrol("]")
    assert(p:expect("29<STOP>"))
    p:send("\0")
    assert(p:expect("0<STOP>"))
    ends(p)
  end)

  it("test_interact_exit_unicode: the bytes of UTF-8 text go through as they are", function()
    local p = start()
    p:send("ɑ")
    assert(p:expect("201<STOP>"))
    assert(p:expect("145<STOP>"))
    p:send("Β")
    assert(p:expect("206<STOP>"))
    assert(p:expect("146<STOP>"))
    p:send("\0")
    assert(p:expect("0<STOP>"))
    ends(p)
  end)
end)
