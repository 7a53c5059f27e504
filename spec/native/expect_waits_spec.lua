-- expect and the waits as a pexpect user expects them: EOF means the program ended,
-- `timeout = false` means no limit everywhere, sendeof leaves a terminal usable, wait_input
-- returns once the program read what was sent, a failing listener breaks no wait, every
-- control key pexpect sends, and a recording holds every input byte.
local H = require("helper")
local luxec = require("luxec")

local function sh(script, opts)
  return assert(luxec.spawn({ "sh", "-c", script }, opts))
end

describe("p:expect(luxec.EOF)", function()
  after_each(H.assert_clean)

  it("returns once the program exited: the status says how it ended, every time", function()
    for i = 1, 60 do
      local p = sh("echo x; exit 3", { tty = i % 2 == 0 })
      assert.equals(1, p:expect(luxec.EOF, { timeout = 10 }))
      local st = p:status()
      assert.is_false(st.running, "still running after expect(EOF), run " .. i)
      assert.equals(3, st.code)
      p:close()
    end
  end)

  it("without an EOF pattern, the error says how the program ended", function()
    local p = sh("echo x; exit 5")
    local none, msg, code = p:expect("never", { timeout = 10 })
    assert.is_nil(none)
    assert.equals("eof", code)
    assert.matches("(exit code 5)", msg, 1, true)
    p:close()
  end)

  it("is still EOF when the program goes on with its output closed; status says it runs",
    function()
      local p = sh("echo x; exec >&- 2>&-; sleep 30")
      -- (the EOF first, however slow the start: the 0.3 s below is the wait for the exit)
      H.wait_for(function() return p:eof() end, 30000, "the EOF")
      local t0 = H.now_ms()
      assert.equals(1, p:expect(luxec.EOF, { timeout = 0.3 }))
      assert.is_true(H.now_ms() - t0 >= 250, "expect(EOF) waited for the exit within the timeout")
      assert.is_true(p:status().running)
      assert.equals(luxec.EOF, p.after)
      local none, msg = p:expect("never", { timeout = 0 })
      assert.is_nil(none)
      assert.matches("output closed; the program still runs", msg, 1, true)
      p:close()
    end)
end)

describe("timeout = false", function()
  after_each(H.assert_clean)

  it("means no limit in expect, expect_exact, wait, wait_output, wait_input, expect_screen, run",
    function()
      local p = sh("echo ready; read x; echo got $x", { tty = true })
      assert.same({ 1, "ready" }, { p:expect("ready", { timeout = false }) })
      assert.is_true(p:wait_input({ timeout = false }))
      p:sendline("a")
      assert.same({ 1, "got a" }, { p:expect_exact("got a", { timeout = false }) })
      assert.truthy(p:expect_screen("got a", { timeout = false }))
      assert.is_true(p:wait_output({ timeout = false }))
      assert.equals(0, p:wait({ timeout = false }).code)
      p:close()
      p = sh("echo y")
      p.timeout = false
      assert.same({ 1, "y" }, { p:expect("y") })
      p:close()
      local r = luxec.run({ "sh", "-c", "echo z" }, { timeout = false })
      assert.same({ 0, "z\n", false }, { r.code, r.output, r.timed_out })
    end)

  it("is refused as true, and a negative timeout is refused, naming the function", function()
    local p = sh("sleep 30")
    assert.has_error(function() p:wait({ timeout = true }) end,
      "bad option 'timeout' to 'wait' (non-negative number of seconds or false expected, " ..
      "got true)")
    assert.has_error(function() p:wait_output({ timeout = -1 }) end,
      "bad option 'timeout' to 'wait_output' (non-negative number of seconds or false " ..
      "expected, got -1)")
    p:close()
  end)
end)

describe("p:sendeof()", function()
  after_each(H.assert_clean)

  it("on a terminal, sends its EOF character: cat ends, the terminal stays usable", function()
    local p = assert(luxec.spawn({ "cat" }, { tty = true }))
    assert(p:wait_input({ timeout = 10 }))
    assert.equals(1, p:sendeof())
    assert.equals(1, p:expect(luxec.EOF, { timeout = 10 }))
    assert.equals(0, p:status().code)
    p:close()
    p = sh("read a || echo first-ended; read b; echo \"b=[$b]\"", { tty = true })
    assert(p:wait_input({ timeout = 10 }))
    p:sendeof()
    assert(p:expect("first-ended", { timeout = 10 }))
    assert(p:wait_input({ timeout = 10 }))
    assert(p:sendline("more"))
    assert(p:expect("b=[more]", { timeout = 10 }))
    assert.equals(0, p:wait({ timeout = 10 }).code)
    p:close()
  end)

  it("sends the character the terminal is set to (stty eof)", function()
    local p = sh("stty eof ^E; echo set; cat; echo cat-ended", { tty = true })
    assert(p:expect("set", { timeout = 10 }))
    assert(p:wait_input({ timeout = 10 }))
    p:sendeof()
    assert(p:expect("cat-ended", { timeout = 10 }))
    p:close()
  end)

  it("on pipes, closes stdin", function()
    local p = sh("cat; echo cat-ended")
    p:sendeof()
    assert(p:expect("cat-ended", { timeout = 10 }))
    assert.matches("stdin was closed", select(2, pcall(p.write, p, "x")))
    p:close()
  end)
end)

describe("p:wait_input() after a send", function()
  after_each(H.assert_clean)

  -- The program notes each line in a file before it reads the next: once wait_input returns,
  -- the file must hold every line sent.
  local function check(tty)
    local dir = H.tmpdir()
    local file = dir .. "/lines"
    local p = sh(("while read x; do echo \"$x\" >> %s; done"):format(file), { tty = tty })
    for i = 1, 25 do
      assert(p:wait_input({ timeout = 10 }))
      local got = select(2, (H.read_file(file) or ""):gsub("\n", ""))
      assert.equals(i - 1, got, "wait_input returned before the program read line " .. (i - 1))
      p:sendline("line " .. i)
    end
    p:close()
    H.rmtree(dir)
  end

  it("returns only once the program read the line and waits again (terminal)", function()
    check(true)
  end)

  it("returns only once the program read the line and waits again (pipes)", function()
    check(false)
  end)

  -- A ^C on a terminal becomes SIGINT before the program runs again: blocked in its read
  -- with the signal not yet delivered, it does not wait for input (what is typed next would
  -- go to whatever the signal starts). A stopped program keeps its signal pending: the state
  -- holds still to be looked at.
  it("does not count a program with a signal due as waiting for input", function()
    local uv = require("luv")
    local p = sh("trap 'echo got-int' INT; until read x; do :; done; echo read-done $x",
      { tty = true })
    assert(p:wait_input({ timeout = 10 }))
    assert(uv.kill(p.pid, "sigstop"))
    H.wait_for(function()
      return (H.read_file(("/proc/%d/stat"):format(p.pid)) or ""):match("^%d+ %b() (%a)") == "T"
    end, 5000, "the program to stop")
    assert.is_true(p:status().waiting_for_input)
    assert(uv.kill(p.pid, "sigint"))
    assert.is_false(p:status().waiting_for_input)
    assert.equals("timeout", select(3, p:wait_input({ timeout = 0.2 })))
    assert(uv.kill(p.pid, "sigcont"))
    assert(p:expect("got-int", { timeout = 10 }))
    assert(p:wait_input({ timeout = 10 }))
    p:sendline("after")
    assert(p:expect("read-done after", { timeout = 10 }))
    p:close()
  end)
end)

describe("exit listeners", function()
  it("an error in one is reported once, naming the session, and wakes every wait", function()
    local r = H.run({ "-e", [[
      local luxec = require("luxec")
      local uv = require("luv")
      local p = assert(luxec.spawn({"sh", "-c", "exit 4"}))
      local second
      p:on("exit", function() error("listener boom") end)
      p:on("exit", function(st) second = st.code end)
      local t0 = uv.hrtime()
      local st = assert(p:wait({timeout = 20}))
      io.write(("code=%d second=%s ms<5000=%s\n"):format(st.code, tostring(second),
        tostring((uv.hrtime() - t0) / 1e6 < 5000)))
      p:close()
    ]] })
    assert.equals("code=4 second=4 ms<5000=true\n", r.stdout)
    local _, reports = r.stderr:gsub("listener boom", "")
    assert.equals(1, reports, r.stderr)
    assert.matches('error in p:on%("exit"%) listener: luxec%.proc %(pid %d+, exited 4%): ',
      r.stderr)
    assert.equals(1, r.code) -- counted like every callback error
  end)
end)

describe("p:sendcontrol", function()
  after_each(H.assert_clean)

  it("sends every control key pexpect does", function()
    -- a raw terminal: every byte reaches the program as it is
    local p = sh("stty raw -echo; echo ready; dd bs=1 count=14 2>/dev/null | od -An -tx1 | " ..
      "tr -s ' \\r\\n' ' '", { tty = true })
    assert(p:expect("ready", { timeout = 10 }))
    for _, k in ipairs({ "@", "[", "\\", "]", "^", "_", "?", "a", "^Z", "`", "{", "|", "}",
      "~" }) do
      p:sendcontrol(k)
    end
    assert(p:expect(" 00 1b 1c 1d 1e 1f 7f 01 1a 00 1b 1c 1d 1e ", { timeout = 10 }))
    p:close()
    assert.has_error(function() p:sendcontrol("^^^") end,
      "bad argument #1 to 'sendcontrol' (a key such as \"c\" or \"^]\" expected, got ^^^)")
  end)
end)

describe("a recording", function()
  after_each(H.assert_clean)

  it("holds the EOF character of sendeof and close_stdin on a terminal", function()
    local dir = H.tmpdir()
    local cast = dir .. "/x.cast"
    local p = assert(luxec.spawn({ "cat" }, { tty = true, record = cast }))
    assert(p:wait_input({ timeout = 10 }))
    p:sendline("hi")
    assert(p:wait_input({ timeout = 10 }))
    p:sendeof()
    assert(p:expect(luxec.EOF, { timeout = 10 }))
    p:close()
    local text = H.read_file(cast)
    assert.matches('"i", "hi\\n"]', text, 1, true)
    assert.matches('"i", "\\u0004"]', text, 1, true)
    p = assert(luxec.spawn({ "cat" }, { tty = true, record = cast }))
    p:close_stdin()
    assert(p:expect(luxec.EOF, { timeout = 10 }))
    p:close()
    assert.matches('"i", "\\u0004"]', H.read_file(cast), 1, true)
    H.rmtree(dir)
  end)
end)

describe("a top-level wait refused inside a loop callback", function()
  after_each(H.assert_clean)

  -- The refused wait had marked its session as waiting in a turn of the loop; a later event of
  -- that session (here its output's end, after the script's last line) must not end the host's
  -- last run of the loop early: the script's exit listener would then never be called.
  it("leaves nothing that stops the loop later: the script's exit listener still runs",
    function()
      local r = H.run({ "-e", [[
        local luxec = require("luxec")
        local uv = require("luv")
        local p = assert(luxec.spawn({ "sh", "-c", "sleep 0.3; exec >&- 2>&-; sleep 0.3; exit 7" }))
        local t = uv.new_timer()
        t:start(0, 0, function()
          t:close()
          print(pcall(p.wait_output, p, { timeout = 1 }))
        end)
        luxec.sleep(0.05)
        p:on("exit", function(st) print("exit " .. st.code) end)
      ]] }, { timeout = 20000 })
      assert.equals(0, r.code, r.stderr)
      assert.matches("^false\t[^\n]*cannot wait inside a loop callback", r.stdout)
      assert.matches("exit 7\n", r.stdout, 1, true)
    end)
end)
