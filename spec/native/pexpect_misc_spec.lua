-- pexpect's tests/test_misc.py, test_isalive.py and test_timeout_pattern.py translated case
-- by case to luxec's API. pexpect's readline/readlines/iteration have no method of their own
-- in luxec: a line is p:expect("\n") with p.before (docs/pexpect.md); the cases use that.
-- Cases for pexpect's internals (searcher classes' text, its own pty fork, a forced bad
-- state) are listed in docs/pexpect.md as having no counterpart.
local H = require("helper")
local luxec = require("luxec")

local EOF = luxec.EOF
local err_of = H.err_of

local function cat(opts)
  local p = assert(luxec.spawn({ "cat" }, opts or { tty = true }))
  p.timeout = 5
  return p
end

-- pexpect's readline: the next line with its "\r\n", or what is left at EOF.
local function readline(p)
  local i = p:expect({ "\n", EOF })
  return i == 1 and p.before .. "\n" or p.before
end

local CAT_EOF = "^D\b\b" -- what a terminal echoes for ^D

-- Lua's assert (busted's replaces the global one): raises the message at the caller's line.
local function check(ok, msg)
  if not ok then error(msg, 2) end
  return ok
end

describe("pexpect's test_misc.py", function()
  after_each(H.assert_clean)

  it("test_isatty", function()
    local p = cat()
    assert.is_true(p:status().tty)
    p:close()
  end)

  it("test_read: read() takes all that arrived (no size argument)", function()
    local p = cat()
    p:sendline("abc")
    p:sendeof()
    assert(p:wait({ timeout = 5 }))
    assert.equals("abc\r\nabc\r\n", (p:read():gsub(CAT_EOF:gsub("%p", "%%%0"), "")))
    assert.equals("", p:read())
    p:close()
  end)

  it("test_readline_bin_echo", function()
    local p = assert(luxec.spawn({ "echo", "alpha", "beta" }, { tty = true }))
    assert.equals("alpha beta\r\n", readline(p))
    p:close()
  end)

  it("test_readline", function()
    local p = cat({ tty = true, echo = false })
    for _, w in ipairs({ "alpha", "beta", "gamma", "delta" }) do
      p:sendline(w)
    end
    p:sendeof()
    for _, w in ipairs({ "alpha", "beta", "gamma", "delta" }) do
      assert.equals(w, (readline(p):gsub("%s+$", "")))
    end
    assert.equals(1, p:expect(EOF))
    local st = assert(p:wait({ timeout = 5 }))
    assert.same({ false, 0 }, { st.running, st.code })
    p:close()
  end)

  local function lines_of(p)
    local page = {}
    repeat
      local l = readline(p)
      page[#page + 1] = l
    until l == "" or not l:find("\n")
    return (table.concat(page):gsub(CAT_EOF:gsub("%p", "%%%0"), ""))
  end

  it("test_iter", function()
    local p = cat({ tty = true, echo = false })
    p:sendline("abc")
    p:sendline("123")
    p:sendeof()
    assert.equals("abc\r\n123\r\n", lines_of(p))
    p:close()
  end)

  it("test_readlines", function()
    local p = cat({ tty = true, echo = false })
    p:sendline("abc")
    p:sendline("123")
    p:sendeof()
    assert.equals("abc\r\n123\r\n", lines_of(p))
    local st = assert(p:wait({ timeout = 5 }))
    assert.same({ false, 0 }, { st.running, st.code })
    p:close()
  end)

  it("test_write", function()
    local p = cat({ tty = true, echo = false })
    assert.equals(1, p:write("a"))
    assert.equals(1, p:write("\r"))
    assert.equals("a\r\n", readline(p))
    p:close()
  end)

  it("test_writelines: write(table.concat(lines))", function()
    local p = cat()
    p:write(table.concat({ "abc", "123", "xyz", "\r" }))
    p:sendeof()
    assert.equals("abc123xyz\r\n", readline(p))
    p:close()
  end)

  it("test_eof: expect after EOF returns nil, \"eof: ...\", \"eof\"", function()
    local p = cat()
    p:sendeof()
    local i, err, code = p:expect("the unexpected")
    assert.same({ nil, "eof" }, { i, code })
    assert.matches("^eof:", err)
    p:close()
  end)

  it("test_with: a to-be-closed variable", function()
    local pid
    do
      local p <close> = assert(luxec.spawn({ "python3", "-c",
        "while True: print('<out>' + input('<in >'), flush=True)" }, { tty = true }))
      pid = p.pid
      p.timeout = 5
      assert(p:expect("<in >"))
      p:sendline("alpha")
      assert(p:expect("<out>alpha"))
      assert.is_true(p:status().running)
    end
    assert(H.wait_for(function() return not H.alive(pid) end, 5000, "the end of the program"))
  end)

  it("test_terminate: force is signal = \"KILL\"", function()
    local p = cat()
    local r = p:terminate({ signal = "KILL" })
    assert.equals("KILL", r.signal)
    assert.equals("KILL", p:status().signal_name)
    p:close()
  end)

  it("test_sighup: no ignore_sighup option; a program is killed by SIGHUP", function()
    -- (the ignore_sighup=True half: the program itself, or `trap '' HUP` before exec,
    -- ignores the signal; docs/pexpect.md)
    local p = assert(luxec.spawn({ "python3", "-c",
      "import sys; print('READY', flush=True); sys.stdin.read(1)" }, { tty = true }))
    assert(p:expect("READY", { timeout = 5 }))
    p:signal("HUP")
    local st = assert(p:wait({ timeout = 5 }))
    assert.equals("HUP", st.signal_name)
    p:close()
    p = assert(luxec.spawn({ "sh", "-c", "trap '' HUP; exec python3 -c \"import sys; " ..
      "print('READY', flush=True); sys.stdin.read(1)\"" }, { tty = true }))
    assert(p:expect("READY", { timeout = 5 }))
    p:signal("HUP")
    assert.is_nil(p:wait({ timeout = 0.3 })) -- still running
    p:close()
  end)

  it("test_bad_arguments_suggest_fdpsawn", function()
    assert.matches("a session over a descriptor is luxec.open_stream(fd)",
      err_of(luxec.spawn, 1), 1, true)
  end)

  it("test_bad_arguments_second_arg_is_list", function()
    assert.matches("argv must be a list of strings, got string",
      err_of(luxec.spawn, "ls", "-la"), 1, true)
    assert.matches("bad argument #2 to 'spawn'", err_of(luxec.spawn, { "ls" }, { "-la" }), 1,
      true)
  end)

  it("test_read_after_close_raises_value_error", function()
    for _, call in ipairs({ "read", "expect", "write" }) do
      local p = cat()
      p:close()
      assert.matches(("attempt to call '%s' on a closed process"):format(call),
        err_of(p[call], p, "x"), 1, true)
    end
  end)

  it("test_isalive", function()
    local p = cat()
    assert.is_true(p:status().running)
    p:sendeof()
    assert.equals(1, p:expect(EOF))
    assert(p:wait({ timeout = 5 })) -- EOF of the output; the exit is reaped by wait
    assert.is_false(p:status().running)
    p:close()
  end)

  it("test_bad_type_in_expect", function()
    local p = cat()
    assert.matches("bad argument #1 to 'expect' (no pattern given)", err_of(p.expect, p, {}),
      1, true)
    p:close()
  end)

  it("test_env", function()
    local default = assert(luxec.run({ "env" })).output
    local custom = assert(luxec.run({ "env" }, { env = { _key = "_value" } })).output
    assert.are_not.equal(default, custom)
    assert.matches("_key=_value", custom, 1, true)
  end)

  it("test_cwd", function()
    local tmp = assert(require("luv").fs_realpath("/tmp"))
    local default = assert(luxec.run({ "pwd" })).output
    local here = assert(luxec.run({ "pwd" }, { cwd = tmp })).output:gsub("%s+$", "")
    assert.are_not.equal(default, here)
    assert.equals(tmp, here)
  end)

  -- test_searcher_*_as_string: pexpect's searcher classes print their patterns; luxec's
  -- expect names them in its timeout and EOF messages.
  for _, case in ipairs({
    { "test_searcher_as_string", { "alpha", "beta", "gamma", "delta" },
      '"alpha", "beta", "gamma", "delta"' },
    { "test_searcher_re_as_string", { { re = "alpha" }, { re = "beta" } },
      '{re = "alpha"}, {re = "beta"}' },
  }) do
    it(case[1], function()
      local p = cat()
      local _, err = p:expect(case[2], { timeout = 0 })
      assert.matches("no match for " .. case[3], err, 1, true)
      p:sendeof()
      local pats = { table.unpack(case[2]) }
      pats[#pats + 1] = "omega"
      _, err = p:expect(pats)
      assert.matches("without a match for " .. case[3] .. ', "omega"', err, 1, true)
      p:close()
    end)
  end

  it("test_exception_tb: the message names the caller's line, not luxec's code", function()
    local p = assert(luxec.spawn({ "sleep", "0.1" }))
    local err = err_of(function() check(p:expect("BLAH")) end)
    assert.matches("pexpect_misc_spec.lua:%d+: eof: ", err)
    assert.is_nil(err:find("luxec/auto", 1, true))
    p:close()
  end)
end)

describe("pexpect's test_isalive.py", function()
  after_each(H.assert_clean)

  it("test_expect_wait: wait returns the status, after a kill too", function()
    local p = assert(luxec.spawn({ "sleep", "0.2" }))
    assert.is_true(p:status().running)
    assert(p:wait({ timeout = 10 }))
    assert.is_false(p:status().running)
    p:close()
    -- pexpect's wait raises once the child was killed and reaped by isalive; luxec's wait
    -- returns the status however the program ended
    p = assert(luxec.spawn({ "sleep", "30" }))
    p:signal(9)
    assert.equals("KILL", assert(p:wait({ timeout = 10 })).signal_name)
    p:close()
    -- pexpect's p.kill(sig) is p:kill(sig); SIGKILL without one
    p = assert(luxec.spawn({ "sleep", "30" }))
    assert.is_true(p:kill(15))
    assert.equals("TERM", assert(p:wait({ timeout = 10 })).signal_name)
    p:close()
    p = assert(luxec.spawn({ "sleep", "30" }))
    assert.is_true(p:kill())
    assert.equals("KILL", assert(p:wait({ timeout = 10 })).signal_name)
    p:close()
    assert.matches("closed process", select(2, pcall(p.kill, p, 9)))
  end)

  it("spawn(timeout=) is the session's expect timeout (p.timeout); bad ones are named",
    function()
      local p = assert(luxec.spawn({ "sleep", "30" }, { timeout = 0.2 }))
      assert.equals(0.2, p.timeout)
      local t0 = H.now_ms()
      assert.same({ nil, "timeout" }, { select(1, p:expect("never")), select(3, p:expect("x")) })
      assert.is_true(H.now_ms() - t0 < 5000)
      p:close()
      p = assert(luxec.spawn({ "true" }, { timeout = false }))
      assert.is_false(p.timeout)
      p:close()
      assert.matches("bad option 'timeout' to 'spawn' %(non%-negative number of seconds or false",
        select(2, pcall(luxec.spawn, { "true" }, { timeout = -2 })))
      assert.matches("bad option 'timeout' to 'spawn'",
        select(2, pcall(luxec.spawn, { "true" }, { timeout = true })))
    end)

  it("test_signal_wait", function()
    local p = assert(luxec.spawn({ "python3", "-c",
      "import signal, time; signal.alarm(1); time.sleep(30)" }))
    local st = assert(p:wait({ timeout = 10 }))
    assert.is_nil(st.code)
    assert.equals("ALRM", st.signal_name)
    p:close()
  end)

  -- After EOF the program may not be reaped yet: p:wait() waits for that (pexpect's
  -- isalive waits for it itself).
  local function dead_after_eof(p)
    assert.equals(1, p:expect(EOF, { timeout = 5 }))
    assert(p:wait({ timeout = 5 }))
    assert.is_false(p:status().running)
    p:close()
  end

  it("test_expect_isalive_dead_after_normal_termination", function()
    dead_after_eof(assert(luxec.spawn({ "ls" }, { tty = true })))
  end)

  for _, case in ipairs({ { "SIGHUP", "HUP" }, { "SIGINT", "INT" } }) do
    it("test_expect_isalive_dead_after_" .. case[1], function()
      local p = cat()
      assert.is_true(p:status().running)
      assert.is_true(p:terminate({ signal = case[2] }).graceful)
      dead_after_eof(p)
    end)
  end

  it("test_expect_isalive_dead_after_SIGKILL", function()
    local p = cat()
    assert.is_true(p:status().running)
    p:signal(9)
    dead_after_eof(p)
  end)

  it("test_forced_terminate", function()
    local p = assert(luxec.spawn({ "python3", "-c", "import signal, time\n" ..
      "for s in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):\n" ..
      "    signal.signal(s, signal.SIG_IGN)\n" ..
      "print('READY', flush=True)\ntime.sleep(30)" }, { tty = true }))
    assert(p:expect("READY", { timeout = 5 }))
    local r = p:terminate({ grace_ms = 100 })
    assert.is_false(r.graceful) -- it ignored TERM: killed after the grace
    dead_after_eof(p)
  end)

  it("test_expect_isalive_consistent_multiple_calls", function()
    local p = cat()
    assert.is_true(p:status().running)
    assert.is_true(p:status().running)
    p:signal(9)
    assert.equals(1, p:expect(EOF, { timeout = 5 }))
    assert(p:wait({ timeout = 5 }))
    assert.is_false(p:status().running)
    assert.is_false(p:status().running)
    p:close()
  end)
end)

describe("pexpect's test_timeout_pattern.py", function()
  after_each(H.assert_clean)

  it("test_matches_exp_timeout: no exceptions; the code says timeout", function()
    local p = cat()
    assert.same({ nil, "timeout" }, { select(1, p:expect("x", { timeout = 0 })),
      select(3, p:expect("x", { timeout = 0 })) })
    p:close()
  end)

  it("test_pattern_printout", function()
    local p = cat()
    p:sendline("Hello")
    assert.equals(1, p:expect("Hello"))
    assert.equals(1, p.index)
    local i, err = p:expect("Goodbye", { timeout = 0.2 })
    assert.is_nil(i)
    assert.is_nil(p.index) -- match_index
    assert.matches('no match for "Goodbye" within 0.2 s', err, 1, true)
    p:close()
  end)

  it("test_exp_timeout_notThrown", function()
    local p = cat()
    p:sendline("Hello")
    assert.equals(1, p:expect("Hello"))
    p:close()
  end)

  it("test_stacktraceMunging: the message names the caller's line, not luxec's code", function()
    local p = cat()
    p:sendline("Hello")
    local err = err_of(function() check(p:expect("Goodbye", { timeout = 0.1 })) end)
    assert.matches("pexpect_misc_spec.lua:%d+: timeout: ", err)
    assert.is_nil(err:find("luxec/auto", 1, true))
    p:close()
  end)

  it("test_correctStackTrace", function()
    local p = cat()
    p:sendline("Hello")
    local function nestedFunction(q) check(q:expect("junk", { timeout = 0.1 })) end
    local ok, tb = xpcall(function() nestedFunction(p) end, debug.traceback)
    assert.is_false(ok)
    assert.matches("nestedFunction", tb, 1, true)
    p:close()
  end)
end)
