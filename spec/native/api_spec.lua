local H = require("helper")
local luxec = require("luxec")

local EMIT = H.fixture("emit")

describe("spawn argument checking", function()
  after_each(H.assert_clean)

  local function err_of(fn)
    local ok, err = pcall(fn)
    assert.is_false(ok, "expected an error")
    return err
  end

  it("names the bad argument", function()
    assert.matches("bad argument #1 to 'spawn' %(argv must be a list of strings, got string%)",
      err_of(function() luxec.spawn("ls") end))
    assert.matches("bad argument #1 to 'spawn' %(argv is empty%)",
      err_of(function() luxec.spawn({}) end))
    assert.matches("argv%[2%] must be a string, got number",
      err_of(function() luxec.spawn({ "echo", 42 }) end))
    assert.matches("bad argument #1 to 'spawn' %(argv has the key 'cwd'; options go in the "
      .. "second argument%)", err_of(function() luxec.spawn({ "true", cwd = "/" }) end))
    assert.matches("bad argument #1 to 'run' %(argv has the key 3; options go in the second",
      err_of(function() luxec.run({ "true", [3] = "x" }) end))
    assert.matches("bad argument #2 to 'spawn' %(unknown option 'tyy'%)",
      err_of(function() luxec.spawn({ "true" }, { tyy = true }) end))
    assert.matches("bad argument #2 to 'spawn' %(options must be a table, got string%)",
      err_of(function() luxec.spawn({ "true" }, "tty") end))
    assert.matches("bad option 'cwd' to 'spawn' %(string expected, got number%)",
      err_of(function() luxec.spawn({ "true" }, { cwd = 1 }) end))
    assert.matches("bad option 'head' to 'spawn' %(non%-negative integer expected, got %-1%)",
      err_of(function() luxec.spawn({ "true" }, { head = -1 }) end))
    assert.matches("bad option 'tail' to 'spawn' %(non%-negative integer expected, got 1.5%)",
      err_of(function() luxec.spawn({ "true" }, { tail = 1.5 }) end))
    assert.matches("bad option 'stdin' to 'spawn' %(\"pipe\" or \"null\" expected, got \"file\"%)",
      err_of(function() luxec.spawn({ "true" }, { stdin = "file" }) end))
    assert.matches("bad option 'stderr' to 'spawn'",
      err_of(function() luxec.spawn({ "true" }, { stderr = "apart" }) end))
    assert.matches("bad option 'tty.rows' to 'spawn' %(integer 1..65535 expected, got 0%)",
      err_of(function() luxec.spawn({ "true" }, { tty = { rows = 0 } }) end))
    assert.matches("bad option 'tty' to 'spawn' %(unknown field 'width'%)",
      err_of(function() luxec.spawn({ "true" }, { tty = { width = 80 } }) end))
    assert.matches("a terminal session has one output stream",
      err_of(function() luxec.spawn({ "true" }, { tty = true, stderr = "pipe" }) end))
    assert.matches("invalid variable name \"A=B\"",
      err_of(function() luxec.spawn({ "true" }, { env = { ["A=B"] = "x" } }) end))
    assert.matches("value of X must be a string, got table",
      err_of(function() luxec.spawn({ "true" }, { env = { X = {} } }) end))
    -- an option the others make meaningless is refused, not ignored
    assert.matches("bad option 'stdin' to 'spawn' %(a terminal session's input is its terminal: "
      .. "it cannot be /dev/null%)",
      err_of(function() luxec.spawn({ "true" }, { tty = true, stdin = "null" }) end))
    assert.matches("bad option 'log_stderr' to 'spawn' %(needs stderr = \"pipe\"",
      err_of(function() luxec.spawn({ "true" }, { log_stderr = "/tmp/e.log" }) end))
    assert.matches("bad option 'log_max' to 'run' %(bounds each log: needs log or log_stderr%)",
      err_of(function() luxec.run({ "true" }, { log_max = 10 }) end))
    assert.matches("bad option 'echo' to 'spawn' %(a terminal's echo: needs tty; a pipe has no "
      .. "echo%)", err_of(function() luxec.spawn({ "true" }, { echo = false }) end))
    assert.matches("bad option 'echo' to 'run'",
      err_of(function() luxec.run({ "true" }, { echo = true }) end))
    assert.same({ nil, "ENOENT: no such file or directory (log_stderr: /nonexistent/e.log)",
      "ENOENT" },
      { luxec.spawn({ "true" }, { stderr = "pipe", log_stderr = "/nonexistent/e.log" }) })
    -- a NUL byte would end the C string there: the rest silently lost
    assert.matches("bad argument #1 to 'run' %(argv%[3%] contains a NUL byte: \"a\\0b\"%)",
      err_of(function() luxec.run({ "printf", "%s", "a\0b" }) end))
    assert.matches("bad option 'cwd' to 'spawn' %(contains a NUL byte",
      err_of(function() luxec.spawn({ "true" }, { cwd = "/tmp\0/x" }) end))
    assert.matches("bad option 'log' to 'spawn' %(contains a NUL byte",
      err_of(function() luxec.spawn({ "true" }, { log = "/tmp/l\0x" }) end))
    assert.matches("invalid variable name \"A\\0B\"",
      err_of(function() luxec.spawn({ "true" }, { env = { ["A\0B"] = "x" } }) end))
    assert.matches("value of A contains a NUL byte",
      err_of(function() luxec.spawn({ "true" }, { env = { A = "x\0y" } }) end))
    assert.matches("bad argument #1 to 'open_stream' %(\"/tmp/x\\0y\" contains a NUL byte%)",
      err_of(function() luxec.open_stream("/tmp/x\0y") end))
    assert.same({}, H.children(), "nothing may have been spawned")
  end)

  it("checks method arguments", function()
    local p = assert(luxec.spawn({ "cat" }))
    assert.matches("bad argument #1 to 'write' %(string expected, got number%)",
      err_of(function() p:write(1) end))
    assert.matches("unknown signal 'NOPE'", err_of(function() p:signal("NOPE") end))
    assert.matches("signal number out of range", err_of(function() p:signal(999) end))
    assert.matches("expected \"process\" or \"group\"",
      err_of(function() p:signal("TERM", "x") end))
    assert.matches("has no terminal", err_of(function() p:resize(10, 10) end))
    assert.matches("bad option 'timeout' to 'wait'",
      err_of(function() p:wait({ timeout = -1 }) end))
    assert.matches("bad argument #1 to 'wait' %(options table expected, got number%)",
      err_of(function() p:wait(5) end))
    assert.matches("bad option 'grace_ms' to 'terminate'",
      err_of(function() p:terminate({ grace_ms = -5 }) end))
    assert.matches("\"output\" or \"exit\" expected", err_of(function() p:on("data", print) end))
    assert.matches("bad argument #2 to 'on' %(function expected",
      err_of(function() p:on("exit", 1) end))
    assert.matches("bad argument #1 to 'read' %(this session has one output stream",
      err_of(function() p:read(2) end))
    assert.matches("bad argument #1 to 'reader' %(stream 1 or 2 expected, got 0%)",
      err_of(function() p:reader(0) end))
    assert.matches("bad argument #1 to 'eof' %(stream 1 or 2 expected, got 9%)",
      err_of(function() p:eof(9) end))
    assert.matches("bad option 'signal' to 'terminate' %(unknown signal 'NOPE'%)",
      err_of(function() p:terminate({ signal = "NOPE" }) end))
    assert.matches("bad option 'signal' to 'terminate_all' %(signal number out of range%)",
      err_of(function() luxec.terminate_all({ p }, { signal = 999 }) end))
    assert.matches("offset must be >= 0", err_of(function() p:read_range(-1, 1) end))
    p:close()
    local t = assert(luxec.spawn({ "cat" }, { tty = true }))
    -- a misspelt option is named, never ignored (each call below would wait 30 s or kill
    -- with the wrong signal if it were)
    for _, c in ipairs({
      { "#1 to 'wait' %(unknown option 'tmeout'%)", function() t:wait({ tmeout = 0 }) end },
      { "#1 to 'wait_output' %(unknown option 'strem'%)",
        function() t:wait_output({ timeout = 0, strem = 2 }) end },
      { "#1 to 'wait_input' %(unknown option 'echooff'%)",
        function() t:wait_input({ timeout = 0, echooff = true }) end },
      { "#1 to 'wait_echo_off' %(unknown option 'tmeout'%)",
        function() t:wait_echo_off({ tmeout = 0 }) end },
      { "#2 to 'expect_screen' %(unknown option 'tmeout'%)",
        function() t:expect_screen("x", { tmeout = 0 }) end },
      { "#3 to 'on' %(unknown option 'hld'%)",
        function() t:on("exit", print, { hld = false }) end },
      { "#1 to 'terminate' %(unknown option 'sig'%)",
        function() t:terminate({ sig = "KILL" }) end },
      { "#2 to 'terminate_all' %(unknown option 'grace'%)",
        function() luxec.terminate_all({ t }, { grace = 0 }) end },
      { "#2 to 'run' %(unknown option 'tmeout'%)",
        function() luxec.run({ "true" }, { tmeout = 1 }) end },
    }) do
      assert.matches("bad argument " .. c[1], err_of(c[2]))
    end
    assert.matches("bad option 'stream' to 'wait_output' %(1 or 2 expected, got 3%)",
      err_of(function() t:wait_output({ stream = 3 }) end))
    assert.matches("bad option 'tty.rows' to 'run' %(integer",
      err_of(function() luxec.run({ "true" }, { tty = { rows = 0 } }) end))
    assert.is_false(t:finished())
    assert.matches("rows must be 1..65535", err_of(function() t:resize(0, 10) end))
    assert.matches("cols must be 1..65535", err_of(function() t:resize(10, 70000) end))
    t:close()
  end)

  it("raises on any method of a closed handle but status and wait; close is idempotent",
    function()
      local p = assert(luxec.spawn({ "true" }))
      p:close()
      p:close()
      for _, m in ipairs({ "write", "read", "snapshot", "terminate", "signal", "resize",
        "close_stdin", "read_range" }) do
        assert.matches("attempt to call '" .. m .. "' on a closed process",
          err_of(function() p[m](p, "x", 1) end))
      end
      -- the status it had at the close (pexpect's isalive() and exitstatus after close())
      assert.is_false(p:status().running)
      assert.is_false(p:wait().running)
    end)
end)

describe("reading output", function()
  after_each(H.assert_clean)

  it("counts what falls between head and tail, and pages it back from the log", function()
    local dir = H.tmpdir()
    local p = assert(luxec.spawn({ EMIT, "-o", "100000" },
      { head = 1000, tail = 1000, log = dir .. "/out.log" }))
    p:wait({ timeout = 10 })
    local snap = p:snapshot()
    assert.same({ 1000, 1000, 98000, 100000 }, { #snap.head, #snap.tail, snap.dropped, snap.total })
    local data, dropped, gap_at = p:read()
    assert.same({ 2000, 98000, 1000 }, { #data, dropped, gap_at })
    local f = assert(io.open(dir .. "/out.log", "rb"))
    local full = f:read("a")
    f:close()
    assert.equals(100000, #full)
    assert.equals(full:sub(1, 1000), snap.head)
    assert.equals(full:sub(99001), snap.tail)
    assert.equals(full:sub(50001, 50100), p:read_range(50000, 100))
    assert.equals(full:sub(99991), p:read_range(99990, 100)) -- short at the end
    assert.equals("", p:read_range(200000, 10))
    p:close()
    H.rmtree(dir)
  end)

  it("stops the log at log_max and says what is no longer anywhere", function()
    local dir = H.tmpdir()
    local p = assert(luxec.spawn({ EMIT, "-o", "100000" },
      { head = 100, tail = 100, log = dir .. "/out.log", log_max = 5000 }))
    p:wait({ timeout = 5 })
    local f = assert(io.open(dir .. "/out.log", "rb"))
    assert.equals(5000, #f:read("a"))
    f:close()
    assert.equals(100, #p:read_range(4900, 100))
    local ok, msg, code = p:read_range(6000, 10)
    assert.same({ nil, "ERANGE" }, { ok, code })
    assert.matches("not in the log", msg)
    assert.equals(100, #p:read_range(99900, 100)) -- the tail is still in memory
    p:close()
    H.rmtree(dir)
  end)

  it("without a log says which bytes were dropped", function()
    local p = assert(luxec.spawn({ EMIT, "-o", "10000" }, { head = 100, tail = 100 }))
    p:wait({ timeout = 5 })
    assert.equals(100, #p:read_range(0, 100))
    assert.equals(50, #p:read_range(9950, 50))
    local ok, msg, code = p:read_range(5000, 10)
    assert.same({ nil, "ERANGE" }, { ok, code })
    assert.matches("bytes 5000..5010 were dropped from memory", msg)
    assert.has_error(function() luxec.spawn({ "true" }, { log_max = -1 }) end)
    p:close()
  end)

  it("wait_output returns at EOF even while the process still runs", function()
    local p = assert(luxec.spawn({ "sh", "-c", "exec >&- 2>&-; sleep 2" }))
    local t0 = H.now_ms()
    assert.is_true(p:wait_output({ timeout = 5 }))
    assert.is_true(H.now_ms() - t0 < 1500, "waited for the exit")
    p:close()
  end)

  it("wait_output past EOF waits for the exit, so a loop on it cannot spin", function()
    local p = assert(luxec.spawn({ "sh", "-c", "exec >&- 2>&-; sleep 0.3; exit 3" }))
    assert.is_true(p:wait_output({ timeout = 5 }))
    assert.is_true(p:eof())
    assert.is_false(p:finished())
    assert.is_false(p:wait_output({ timeout = 0.05 })) -- running, nothing can arrive
    local turns = 0
    while not p:finished() do
      turns = turns + 1
      p:wait_output({ timeout = 5 })
    end
    assert.equals(1, turns)
    assert.equals(3, p:wait().code)
    p:close()
  end)

  it("gives each reader its own cursor", function()
    local p = assert(luxec.spawn({ "cat" }))
    local r2 = p:reader()
    p:write("one\n")
    p:wait_output({ timeout = 5 })
    assert.equals("one\n", (p:read()))
    p:write("two\n")
    assert.is_true(p:_wait_until(function() return p:snapshot().total == 8 end, 5000))
    assert.equals("two\n", (p:read()))
    assert.equals("", (p:read()))
    assert.equals("one\ntwo\n", (r2.read()))
    p:close()
  end)

  it("calls output listeners with the new bytes and exit listeners once finished", function()
    local p = assert(luxec.spawn({ "sh", "-c", "echo a; sleep 0.1; echo b >&2; exit 4" },
      { stderr = "pipe" }))
    local got, exits = {}, {}
    p:on("output", function(data, stream) got[#got + 1] = stream .. ":" .. data end)
    p:on("exit", function(st) exits[#exits + 1] = st.code end)
    p:wait({ timeout = 5 })
    assert.same({ "1:a\n", "2:b\n" }, got)
    assert.same({ 4 }, exits)
    p:close()
  end)
end)

describe("luxec.process.run", function()
  after_each(H.assert_clean)

  it("returns code, output and dropped, feeding input", function()
    local r = luxec.run({ "sh", "-c", "cat; exit 5" }, { input = "fed\n" })
    assert.same({ 5, "fed\n", 0, false }, { r.code, r.output, r.dropped, r.timed_out })
  end)

  it("keeps stderr apart when asked", function()
    local r = luxec.run({ "sh", "-c", "echo out; echo err >&2" }, { stderr = "pipe" })
    assert.same({ "out\n", "err\n" }, { r.output, r.stderr })
  end)

  it("terminates the whole tree after its timeout", function()
    local t0 = H.now_ms()
    local r = luxec.run({ "sh", "-c", "sleep 30 & sleep 30" }, { timeout = 0.2 })
    assert.is_true(r.timed_out)
    assert.equals("TERM", r.signal_name)
    assert.is_true(H.now_ms() - t0 < 3000)
  end)

  it("returns the spawn error triple", function()
    local r, msg, code = luxec.run({ "/nonexistent" })
    assert.same({ nil, "ENOENT" }, { r, code })
    assert.matches("^ENOENT", msg)
  end)

  it("checks its own options", function()
    assert.has_error(function() luxec.run({ "true" }, { timeout = "1" }) end,
      "bad option 'timeout' to 'run' (non-negative number of seconds or false expected, got 1)")
    assert.has_error(function() luxec.run({ "true" }, { timeout = -2 }) end,
      "bad option 'timeout' to 'run' (non-negative number of seconds or false expected, got -2)")
  end)

  it("takes timeout = -1 as its default, no limit (pexpect's run(timeout=-1))", function()
    local opts = { timeout = -1 }
    local r = assert(luxec.run({ "sh", "-c", "sleep 0.2; echo done" }, opts))
    assert.same({ 0, "done\n", false }, { r.code, r.output, r.timed_out })
    assert.same({ timeout = -1 }, opts) -- (the caller's table is left as it was)
    r = assert(luxec.run({ "sh", "-c", "printf 'Name: '; read n; echo \"hi $n\"" },
      { timeout = -1, events = { ["Name: "] = "bob\n" } }))
    assert.same({ 0, "Name: bob\r\nhi bob\r\n", 1, false },
      { r.code, r.output, r.events, r.timed_out })
  end)
end)

describe("sessions and the scheduler", function()
  after_each(H.assert_clean)

  it("waits in tasks concurrently", function()
    -- each run's time, from its start to its end: concurrent runs overlap (in turn, the
    -- second would start after the first ended), however slow a loaded machine makes them
    local span = {}
    local function timed(name)
      return function()
        span[name] = { H.now_ms() }
        local code = luxec.run({ "sleep", "0.3" }).code
        span[name][2] = H.now_ms()
        return code
      end
    end
    local a, b = luxec.go(timed("a")), luxec.go(timed("b"))
    assert.same({ true, 0 }, { a:wait() })
    assert.same({ true, 0 }, { b:wait() })
    assert.is_true(span.b[1] < span.a[2] and span.a[1] < span.b[2],
      ("not at once: a %.0f..%.0f, b %.0f..%.0f"):format(span.a[1], span.a[2], span.b[1],
        span.b[2]))
  end)
end)
