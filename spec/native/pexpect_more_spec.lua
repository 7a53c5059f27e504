-- pexpect's tests/test_ctrl_chars.py, test_dotall.py, test_winsize.py and test_log.py
-- translated case by case to luxec's API (differences: docs/pexpect.md).
local H = require("helper")
local luxec = require("luxec")

local EOF = luxec.EOF
local err_of = H.err_of

-- getch.py: the terminal raw, each byte read reported as "N<STOP>"; a NUL ends it.
local GETCH = { "python3", "-c", [[
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
]] }

local function getch()
  local p = assert(luxec.spawn(GETCH, { tty = true, echo = false }))
  p.timeout = 5
  assert(p:expect("READY"))
  return p
end

local function ends_with_nul(p)
  p:send("\0")
  assert.equals(1, p:expect("0<STOP>"))
  assert.equals(1, p:expect(EOF))
  local st = assert(p:wait({ timeout = 5 }))
  assert.same({ false, 0 }, { st.running, st.code })
  p:close()
end

describe("pexpect's test_ctrl_chars.py", function()
  after_each(H.assert_clean)

  it("test_control_chars: every byte value", function()
    local p = getch()
    for i = 1, 255 do
      p:send(string.char(i))
      assert.equals(1, p:expect(i .. "<STOP>"))
    end
    ends_with_nul(p)
  end)

  it("test_sendintr: sendcontrol(\"c\") writes the terminal's INTR character", function()
    local p = getch()
    p:sendcontrol("c")
    assert.equals(1, p:expect("3<STOP>"))
    ends_with_nul(p)
  end)

  it("test_sendeof", function()
    local p = getch()
    p:sendeof()
    assert.equals(1, p:expect("4<STOP>"))
    ends_with_nul(p)
  end)

  it("test_bad_sendcontrol_chars: an error naming the key (pexpect returns 0)", function()
    local p = getch()
    assert.matches("bad argument #1 to 'sendcontrol' (a key such as \"c\" or \"^]\" expected, "
      .. "got 1)", err_of(p.sendcontrol, p, "1"), 1, true)
    p:close()
  end)

  it("test_sendcontrol", function()
    local p = getch()
    for c in ("abcdefghijklmnopqrstuvwxyz"):gmatch(".") do
      assert.equals(1, p:sendcontrol(c))
      assert.equals(1, p:expect_exact((c:byte() - 96) .. "<STOP>"))
    end
    for key, val in pairs({ ["["] = 27, ["\\"] = 28, ["]"] = 29, ["^"] = 30, ["_"] = 31,
      ["?"] = 127 }) do
      assert.equals(1, p:sendcontrol(key))
      assert.equals(1, p:expect_exact(val .. "<STOP>"))
    end
    assert.equals(1, p:sendcontrol("@"))
    assert.equals(1, p:expect("0<STOP>"))
    assert.equals(1, p:expect(EOF))
    assert.equals(0, assert(p:wait({ timeout = 5 })).code)
    p:close()
  end)
end)

describe("pexpect's test_dotall.py", function()
  after_each(H.assert_clean)
  local testdata = "BEGIN\nHello world\nEND"

  it("test_dotall: not DOTALL unless asked (flags = \"s\")", function()
    local p = assert(luxec.spawn({ "echo", testdata }, { tty = true }))
    assert.equals(1, p:expect({ { re = "BEGIN(.*)END", flags = "s" }, EOF }, { timeout = 5 }))
    p:close()
    p = assert(luxec.spawn({ "echo", testdata }, { tty = true }))
    assert.equals(2, p:expect({ { re = "BEGIN(.*)END" }, EOF }, { timeout = 5 }))
    p:close()
  end)

  it("test_precompiled: a regex without flags is not DOTALL", function()
    local p = assert(luxec.spawn({ "echo", testdata }, { tty = true }))
    assert.equals(2, p:expect({ { re = "BEGIN(.*)END" }, EOF }, { timeout = 5 }))
    p:close()
  end)
end)

describe("pexpect's test_winsize.py", function()
  after_each(H.assert_clean)

  it("test_winsize", function()
    local p = assert(luxec.spawn({ "python3", "-c", [[
import fcntl, signal, struct, termios
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGWINCH})
print("READY", flush=True)
while True:
    signal.sigwaitinfo({signal.SIGWINCH})
    r, c = struct.unpack("hh", fcntl.ioctl(0, termios.TIOCGWINSZ, b"\0" * 4))
    print("SIGWINCH: (%d, %d)" % (r, c), flush=True)
]] }, { tty = true }))
    -- (sigwaitinfo on a blocked signal: a handler with a long sleep misses a signal that comes
    -- between the handler's last check and the sleep, and reports it only when the sleep ends)
    p.timeout = 10
    assert(p:expect("READY"))
    for _, size in ipairs({ { 11, 22 }, { 24, 80 } }) do
      assert(p:resize(size[1], size[2]))
      assert.equals(1, p:expect({ re = [[SIGWINCH: \((\d*), (\d*)\)]] }))
      assert.same({ tostring(size[1]), tostring(size[2]) }, { p.captures[1], p.captures[2] })
      assert.same(size, { p:size() })
    end
    p:close()
  end)
end)

describe("pexpect's test_log.py", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(function()
    H.rmtree(dir)
    H.assert_clean()
  end)

  it("test_log: log = path", function()
    local p = assert(luxec.spawn({ "echo", "This is a test." }, { tty = true,
      log = dir .. "/log" }))
    assert(p:expect(EOF, { timeout = 5 }))
    p:close()
    assert.equals("This is a test.", (H.read_file(dir .. "/log"):gsub("%s+$", "")))
  end)

  it("test_log_logfile_read: log_to", function()
    local f = assert(io.open(dir .. "/log", "wb"))
    local p = assert(luxec.spawn({ "cat" }, { tty = true, log_to = f }))
    p:sendline("This is a test.")
    p:sendeof()
    assert(p:expect(EOF, { timeout = 5 }))
    p:close()
    f:close()
    local lf = H.read_file(dir .. "/log")
    if lf:sub(-4) == "^D\b\b" then lf = lf:sub(1, -5) end
    assert.equals("This is a test.\r\nThis is a test.\r\n", lf)
  end)

  -- logfile_send and logfile: no option of their own; a recording (record = path, asciicast
  -- v2) keeps what was sent ("i" events) beside what came back ("o" events).
  local function recorded(kind)
    local p = assert(luxec.spawn({ "cat" }, { tty = true, record = dir .. "/rec.cast" }))
    p:sendline("This is a test.")
    p:sendeof()
    assert(p:expect(EOF, { timeout = 5 }))
    p:wait({ timeout = 5 })
    p:close()
    local json = require("luxec.json")
    local out = {}
    for line in H.read_file(dir .. "/rec.cast"):gmatch("[^\n]+") do
      local ev = json.decode(line)
      if ev[2] == kind then out[#out + 1] = ev[3] end
    end
    return table.concat(out)
  end

  it("test_log_logfile_send: a recording's input events", function()
    assert.equals("This is a test.\n", (recorded("i"):gsub("\4", "")))
  end)

  it("test_log_send_and_received: a recording's input and output events", function()
    assert.equals("This is a test.\n", (recorded("i"):gsub("\4", "")))
    local o = recorded("o")
    if o:sub(-4) == "^D\b\b" then o = o:sub(1, -5) end
    assert.equals("This is a test.\r\nThis is a test.\r\n", o)
  end)
end)

describe("pexpect's test_misc.py, test_expect.py and test_winsize.py: what a session says "
  .. "after the fact", function()
  after_each(function() H.assert_clean() end)

  it("test_with: after close, the status says not alive, with the exit status it had",
    function()
      local p = assert(luxec.spawn({ "sh", "-c", "exit 3" }, { tty = true }))
      assert(p:wait({ timeout = 10 }))
      p:close()
      local st = p:status()
      assert.same({ false, 3 }, { st.running, st.code })
      assert.equals(3, p:wait().code)
      -- a program still running at the close: killed by it
      local q = assert(luxec.spawn({ "sleep", "30" }))
      q:close()
      st = q:status()
      assert.same({ false, "KILL", "close" }, { st.running, st.signal_name, st.killed_by })
      assert.has_error(function() q:expect("x") end)
    end)

  it("test_waitnoecho_order: wait_echo_off returns once echo is off, the program reading "
    .. "or not (echo_wait.py sleeps without reading)", function()
      local p = assert(luxec.spawn({ "python3", "-c", "import sys, termios, time\n"
        .. "a = termios.tcgetattr(0)\ntime.sleep(1)\na[3] &= ~termios.ECHO\n"
        .. "termios.tcsetattr(0, termios.TCSANOW, a)\nprint('off', flush=True)\n"
        .. "time.sleep(30)" }, { tty = true }))
      assert.is_true(p:getecho())
      assert.is_true(p:wait_echo_off({ timeout = 20 }))
      assert.is_false(p:getecho())
      assert(p:expect("off", { timeout = 10 }))
      p:close()
      local q = assert(luxec.spawn({ "sleep", "30" }))
      local none, _, code = q:wait_echo_off()
      assert.same({ nil, "ENOTTY" }, { none, code })
      q:close()
    end)

  it("getwinsize: the terminal's size as the program set it (stty rows 11 cols 22)", function()
    local p = assert(luxec.spawn({ "sh", "-c", "stty rows 11 cols 22; echo set; sleep 30" },
      { tty = true }))
    assert(p:expect("set", { timeout = 10 }))
    assert.same({ 11, 22 }, { p:size() })
    p:close()
    assert.same({ 24, 80 }, { p:size() }) -- (closed: as last set)
  end)

  it("after is EOF or TIMEOUT when the wait ended so; timeout = -1 is p.timeout; a timeout "
    .. "of 0 sees output that came while top-level code blocked", function()
      local p = assert(luxec.spawn({ "sh", "-c", "echo hello; exec sleep 30" }))
      p.timeout = 1
      os.execute("sleep 0.5") -- (nothing turns the loop meanwhile)
      assert.equals(1, p:expect("hello", { timeout = 0 }))
      local ok, _, kind = p:expect("nothing", { timeout = -1 })
      assert.same({ nil, "timeout" }, { ok, kind })
      assert.equals(luxec.TIMEOUT, p.after)
      assert.is_nil(p.match)
      p:close()
      local q = assert(luxec.spawn({ "true" }))
      ok, _, kind = q:expect("never")
      assert.same({ nil, "eof" }, { ok, kind })
      assert.equals(EOF, q.after)
      q:close()
    end)
end)
