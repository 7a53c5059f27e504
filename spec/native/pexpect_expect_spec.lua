-- pexpect's tests/test_expect.py translated case by case to luxec's API. pexpect's string
-- patterns are regexes: they become plain strings where the text has no regex syntax (a
-- plain string is what luxec matches as is), {re = ...} where it has. Where luxec differs by
-- design the case says so (docs/pexpect.md) and checks luxec's behaviour instead.
local H = require("helper")
local luxec = require("luxec")
local uv = require("luv")

local EOF, TIMEOUT = luxec.EOF, luxec.TIMEOUT
local err_of = H.err_of

local function cat(opts)
  local p = assert(luxec.spawn({ "cat" }, opts or { tty = true, echo = false }))
  p.timeout = 5
  return p
end

local LIST100 = { "python3", "-c", "print(list(range(100)))" }

-- Both expect and expect_exact, as pexpect's *_exact twins run each case with both.
local function both(name, body)
  it(name, function() body(function(p, ...) return p:expect(...) end) end)
  it(name .. "_exact", function() body(function(p, ...) return p:expect_exact(...) end) end)
end

local function clean_ls(s)
  return (s:gsub("\r\n", "\n"):gsub("\r", "\n"):gsub("\n\n", "\n"):gsub("%s+$", ""))
end

describe("pexpect's test_expect.py", function()
  after_each(H.assert_clean)

  both("test_expect_basic", function(expect)
    local p = cat()
    p:sendline("Hello")
    p:sendline("there")
    p:sendline("Mr. Python")
    assert.equals(1, expect(p, "Hello"))
    assert.equals(1, expect(p, "there"))
    assert.equals(1, expect(p, "Mr. Python"))
    p:sendeof()
    assert.equals(1, expect(p, EOF))
    p:close()
  end)

  it("test_expect_ignore_case", function()
    local p = cat()
    p:sendline("HELLO")
    p:sendline("there")
    assert.equals(1, p:expect({ re = "(?i)hello" }))
    assert.equals(1, p:expect({ re = "(?i)THERE" }))
    p:sendeof()
    assert.equals(1, p:expect(EOF))
    p:close()
  end)

  it("test_expect_ignore_case_flag: per pattern (flags = \"i\"), not per session", function()
    local p = cat()
    p:sendline("HELLO")
    p:sendline("there")
    assert.equals(1, p:expect({ re = "hello", flags = "i" }))
    assert.equals(1, p:expect({ re = "THERE", flags = "i" }))
    p:sendeof()
    assert.equals(1, p:expect(EOF))
    p:close()
  end)

  both("test_expect_order", function(expect)
    local p = cat()
    for _, l in ipairs({ "1234", "abcd", "wxyz", "7890" }) do
      p:sendline(l)
    end
    p:sendeof()
    assert.equals(1, expect(p, { "1234", "abcd", "wxyz", EOF, "7890" }))
    assert.equals(4, expect(p, { "54321", TIMEOUT, "1234", "abcd", "wxyz", EOF }))
    assert.equals(5, expect(p, { "54321", TIMEOUT, "1234", "abcd", "wxyz", EOF }))
    assert.equals(4, expect(p, { EOF, "abcd", "wxyz", "7890" }))
    assert.equals(4, expect(p, { "abcd", "wxyz", "7890", EOF }))
    p:close()
  end)

  local function echo_twice(p, expect)
    p:sendline("1234") -- seen twice: the terminal's echo, then cat's
    assert.equals(1, expect(p, { "1234", "abcd", "wxyz", EOF, TIMEOUT }))
    assert.equals(1, expect(p, { "1234", "abcd", "wxyz", EOF }))
  end

  both("test_expect_setecho_off", function(expect)
    local p = cat({ tty = true })
    echo_twice(p, expect)
    assert.is_true(p:setecho(false))
    assert.is_true(p:wait_input({ echo_off = true })) -- waitnoecho
    p:sendline("abcd") -- now seen once
    p:sendline("wxyz")
    assert.equals(3, expect(p, { EOF, TIMEOUT, "abcd", "wxyz", "1234" }))
    assert.equals(3, expect(p, { EOF, "abcd", "wxyz", "7890" }))
    assert.is_true(p:setecho(true))
    p:sendline("7890") -- twice again
    assert.equals(4, expect(p, { EOF, "abcd", "wxyz", "7890" }))
    assert.equals(4, expect(p, { EOF, "abcd", "wxyz", "7890" }))
    p:sendeof()
    p:close()
  end)

  it("test_waitnoecho", function()
    local p = cat()
    assert.is_true(p:setecho(false))
    assert.is_true(p:wait_input({ echo_off = true }))
    p:close()
  end)

  it("test_waitnoecho_order (the window of time is not checked: specs never time)", function()
    local p = assert(luxec.spawn({ "python3", "-c", [[
import sys, termios, time
print("READY", flush=True)
time.sleep(0.3)
a = termios.tcgetattr(0); a[3] &= ~termios.ECHO; termios.tcsetattr(0, termios.TCSANOW, a)
sys.stdin.readline()
]] }, { tty = true }))
    assert.is_true(p:wait_input({ echo_off = true, timeout = 10 }))
    assert.is_true(p:status().echo_off)
    p:close()
    local c = cat({ tty = true })
    local ok, err, code = c:wait_input({ echo_off = true, timeout = 0.5 })
    assert.same({ nil, "timeout" }, { ok, code })
    assert.matches("with echo off", err, 1, true)
    c:close()
  end)

  both("test_expect_echo", function(expect)
    local p = cat({ tty = true })
    echo_twice(p, expect)
    p:close()
  end)

  both("test_expect_index", function(expect)
    local p = cat()
    p:sendline("1234")
    assert.equals(3, expect(p, { "abcd", "wxyz", "1234", EOF }))
    p:sendline("abcd")
    assert.equals(2, expect(p, { TIMEOUT, "abcd", "wxyz", "1234", EOF }))
    p:sendline("wxyz")
    assert.equals(4, expect(p, { "54321", TIMEOUT, "abcd", "wxyz", "1234", EOF }))
    p:sendline("$*!@?")
    assert.equals(2, expect(p, { "54321", TIMEOUT, "abcd", "wxyz", "1234", EOF },
      { timeout = 0.3 }))
    p:sendeof()
    assert.equals(6, expect(p, { "54321", TIMEOUT, "abcd", "wxyz", "1234", EOF }))
    p:close()
  end)

  both("test_expect", function(expect)
    local old_way = clean_ls(H.run({ cmd = "ls", "-l", "/bin" }).stdout)
    local p = assert(luxec.spawn({ "ls", "-l", "/bin" }, { tty = true }))
    local new_way = {}
    while true do
      local i = expect(p, { "\n", EOF })
      new_way[#new_way + 1] = p.before
      if i == 2 then break end
    end
    assert.equals(old_way, clean_ls(table.concat(new_way)))
    p:close()
  end)

  it("test_expect_exact: hello.?world", function()
    local p = assert(luxec.spawn({ "echo", "hello.?world" }, { tty = true }))
    assert.equals(1, p:expect_exact(".?"))
    assert.same({ "hello", ".?" }, { p.before, p.after })
    p:close()
  end)

  it("test_expect_eof", function()
    local old_way = clean_ls(H.run({ cmd = "/bin/ls", "-l", "/bin" }).stdout)
    local p = assert(luxec.spawn({ "/bin/ls", "-l", "/bin" }, { tty = true }))
    assert.equals(1, p:expect(EOF))
    assert.equals(old_way, clean_ls(p.before))
    p:close()
  end)

  it("test_expect_timeout", function()
    local p = cat()
    assert.equals(1, p:expect(TIMEOUT, { timeout = 0.3 }))
    assert.equals(TIMEOUT, p.after)
    p:close()
  end)

  it("test_unexpected_eof: returned (nil, \"eof: ...\", \"eof\"), not raised", function()
    local p = assert(luxec.spawn({ "ls", "-l", "/bin" }, { tty = true }))
    local i, err, code = p:expect("_Z_XY_XZ")
    assert.same({ nil, "eof" }, { i, code })
    assert.matches("^eof: the session ended %(exit code 0%)", err)
    p:close()
  end)

  both("test_before_after", function(expect)
    local p = assert(luxec.spawn(LIST100, { tty = true }))
    p.timeout = 5
    expect(p, "5")
    assert.equals("5", p.after)
    assert.equals("[0, 1, 2", p.before:sub(1, 8))
    expect(p, "50")
    assert.equals("50", p.after)
    assert.equals(", 6, 7, 8", p.before:sub(1, 9))
    assert.equals("48, 49, ", p.before:sub(-8))
    expect(p, EOF)
    assert.equals(EOF, p.after)
    assert.equals(", 51, 52", p.before:sub(1, 8))
    assert.equals(", 99]\r\n", p.before:sub(-7))
    p:close()
  end)

  it("test_buffer_interface: p:buffer() is p.buffer, p:buffer(s) the assignment", function()
    local p = cat({ tty = true })
    p:sendline("Hello")
    assert.equals(1, p:expect("Hello"))
    assert(p:expect(TIMEOUT, { timeout = 0.2 })) -- (the rest of the echo and cat's copy)
    assert.equals("\r\nHello\r\n", p:buffer())
    assert.equals("Testing", p:buffer("Testing"))
    assert.equals(1, p:expect("Test"))
    assert.equals("ing", p:buffer())
    assert.equals("", p:buffer(""))
    assert.equals(2, p:expect({ "Hello", TIMEOUT }, { timeout = 0.1 }))
    p:sendeof()
    p:close()
  end)

  it("test_before_after_timeout", function()
    local p = cat()
    p:sendline("BEGIN")
    for _ = 1, 100 do p:sendline(("foo"):rep(10)) end
    assert.equals(2, p:expect({ "xyzzy", TIMEOUT }, { searchwindowsize = 10, timeout = 0.001 }))
    p:sendline("xyzzy")
    assert.equals(1, p:expect({ "xyzzy", TIMEOUT }, { searchwindowsize = 10, timeout = 30 }))
    assert.equals("BEGIN", p.before:sub(1, 5)) -- a timeout truncates nothing
    p:sendeof()
    assert(p:expect(EOF))
    p:close()
  end)

  it("test_increasing_searchwindowsize", function()
    local p = cat()
    p:sendline("BEGIN")
    for _ = 1, 100 do p:sendline(("foo"):rep(10)) end
    assert.equals(2, p:expect({ "xyzzy", TIMEOUT }, { searchwindowsize = 10, timeout = 0.01 }))
    assert.equals(2, p:expect({ "BEGIN", TIMEOUT }, { searchwindowsize = 10, timeout = 0.01 }))
    assert.equals(1, p:expect({ "BEGIN", TIMEOUT }, { searchwindowsize = 40000, timeout = 30 }))
    p:sendeof()
    assert(p:expect(EOF))
    p:close()
  end)

  both("test_searchwindowsize", function(expect)
    local p = assert(luxec.spawn({ "echo", "foobarbazbop" }, { tty = true }))
    -- "bar" is earlier, but outside the last 6 bytes ("zbop\r\n")
    assert.equals(2, expect(p, { "bar", "bop" }, { searchwindowsize = 6, timeout = 5 }))
    assert.equals("foobarbaz", p.before)
    p:close()
  end)

  it("searchwindowsize bounds a regex too", function()
    local p = assert(luxec.spawn({ "echo", "foobarbazbop" }, { tty = true }))
    assert.equals(2, p:expect({ { re = "ba." }, "bop" }, { searchwindowsize = 6, timeout = 5 }))
    p:close()
  end)

  it("searchwindowsize takes a positive integer", function()
    local p = cat()
    assert.matches("bad option 'searchwindowsize' to 'expect' %(positive integer expected, got 0%)",
      err_of(function() p:expect("x", { searchwindowsize = 0 }) end))
    p:close()
  end)

  both("test_ordering", function(expect)
    local p = assert(luxec.spawn({ "python3", "-i", "-q" }, { tty = true }))
    p.timeout = 20
    expect(p, ">>> ")
    local function case(code, pats, want)
      p:sendline(code)
      assert.equals(want, expect(p, pats))
      expect(p, ">>> ")
    end
    case("list(range(4*3))", { "5,", "5," }, 1)
    case("list(range(4*3))", { "7,", "5," }, 2)
    case("list(range(4*3))", { "5,", "7," }, 1)
    case("list(range(4*5))", { "2,", "12," }, 1)
    case("list(range(4*5))", { "12,", "2," }, 2)
    p:close()
  end)

  both("test_greed", function(expect)
    local p = assert(luxec.spawn(LIST100, { tty = true }))
    p.timeout = 5
    assert.equals(2, expect(p, { "3, 4", "2, 3, 4" })) -- the earliest start wins
    assert.equals(1, expect(p, { "5,", "5, 6" })) -- the same start: the first listed
    assert.equals(1, expect(p, { "7, 8", "7, 8, 9", "7, 8" }))
    p:close()
    -- _greed_read1 (maxread=1): no maxread in luxec; the line arrives in one read and the
    -- earliest start wins, where pexpect reading one byte at a time takes the first to end
    p = assert(luxec.spawn(LIST100, { tty = true }))
    assert.equals(1, expect(p, { "1, 2, 3", "2," }, { timeout = 5 }))
    p:close()
  end)

  it("test_bad_arg", function()
    local p = cat()
    for _, call in ipairs({ { "expect", 1 }, { "expect", { 1, "2" } },
      { "expect_exact", 1 }, { "expect_exact", { 1, "2" } } }) do
      assert.matches(("bad argument #1 to '%s' (pattern"):format(call[1]),
        err_of(p[call[1]], p, call[2]), 1, true)
    end
    p:close()
  end)

  it("test_timeout_none: timeout = false", function()
    local p = assert(luxec.spawn({ "echo", "abcdef" }, { tty = true }))
    p.timeout = false
    assert.equals(1, p:expect("abc"))
    assert.equals(1, p:expect_exact("def"))
    assert.equals(1, p:expect(EOF))
    p:close()
  end)

  it("test_signal_handling: a signal to the host during expect (SIGWINCH, as in a resize)",
    function()
      local p = assert(luxec.spawn({ "sh", "-c", "echo READY; read x; echo END" }))
      p.timeout = 5
      assert(p:expect("READY"))
      local t = uv.new_timer()
      t:start(50, 0, function()
        uv.kill(uv.os_getpid(), "sigwinch")
        p:sendline("go")
      end)
      assert.equals(1, p:expect("END"))
      t:close()
      p:close()
    end)

  for _, case in ipairs({ { "test_stdin_closed", "<&-" },
    { "test_stdin_stdout_closed", "<&- >&-" } }) do
    it(case[1], function()
      local dir = H.tmpdir()
      H.write_file(dir .. "/s.lua", [[
local luxec = require("luxec")
local c = assert(luxec.spawn({ "cat" }, { tty = true }))
c:sendeof()
assert(c:expect(luxec.EOF, { timeout = 10 }))
]])
      local r = H.run({ cmd = "sh", "-c", ('exec "$0" "$1" %s'):format(case[2]), H.luxec,
        dir .. "/s.lua" })
      assert.equals("", r.stderr)
      assert.equals(0, r.code)
      H.rmtree(dir)
    end)
  end
end)
