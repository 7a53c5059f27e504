-- The agent engine with real processes: Codex's scenarios, then each of luxec's improvements.
local H = require("helper")
local luxec = require("luxec")
local exec = require("luxec.engine")
local process = require("luxec.process")
local truncate = require("luxec.engine.truncate")
local uv = require("luv")
-- What an error about a gone session's id adds (luxec's text)
local EXITED = ": its session ended: the process exited (an earlier result gave its exit code)"
local TERMINATED = ": its session was ended by terminate"
local PRUNED = ": its session was ended to make room for a new one (the least recently used "
  .. "of too many)"

local engine = H.engine

local function clean_up()
  H.end_engines()
  H.assert_clean()
end

local function ms_since(t0)
  return H.now_ms() - t0
end

-- A spawn that records what it was asked (and leaves out `sandbox`, which the process core
-- does not know yet).
local function spy()
  local calls = {}
  return calls, function(argv, opts)
    local copy = {}
    for k, v in pairs(opts) do copy[k] = v end
    calls[#calls + 1] = { argv = argv, opts = copy }
    opts.sandbox = nil
    return process.spawn(argv, opts)
  end
end

describe("exec_command: Codex parity", function()
  after_each(clean_up)

  it("returns a quick command's output and exit code at once, without a session", function()
    local e = engine()
    local t0 = H.now_ms()
    local r = assert(e:exec_command({ cmd = "echo hi; exit 3" })) -- default yield: 10 s
    assert.is_true(ms_since(t0) < 5000, "took " .. ms_since(t0) .. " ms")
    assert.same({ 3, "hi\n", "exited", false }, { r.exit_code, r.output, r.state, r.truncated })
    assert.is_nil(r.session_id)
    assert.matches("^%x%x%x%x%x%x$", r.chunk_id)
    assert.is_nil(r.chunk_id:find("%u"))
    assert.equals(1, r.original_token_count)
    assert.matches("^Chunk ID: %x+\nWall time: %d+%.%d%d%d%d seconds\nProcess exited with code 3\n"
      .. "Original token count: 1\nOutput:\nhi\n$", exec.format(r, { text = "codex" }))
    assert.matches("^Wall time: %d+%.%d%d%d%d seconds\nProcess exited with code 3\n"
      .. "Output %(bytes 0%-3%):\nhi\n$", exec.format(r))
  end)

  it("runs cmd as [shell, -lc, cmd] (or -c without login), stdin /dev/null", function()
    local calls, spawn = spy()
    local e = engine({ spawn = spawn, login = true, shell = "/bin/sh" })
    assert(e:exec_command({ cmd = "true" }))
    assert(e:exec_command({ cmd = "true", login = false, shell = "/bin/bash", workdir = "lua" }))
    assert.same({ "/bin/sh", "-lc", "true" }, calls[1].argv)
    assert.same({ "/bin/bash", "-c", "true" }, calls[2].argv)
    assert.equals("null", calls[1].opts.stdin)
    assert.is_nil(calls[1].opts.tty)
    assert.equals(H.root .. "/lua", calls[2].opts.cwd)
    assert.matches("/1000%-1%.log$", calls[1].opts.log)
    assert.is_nil(calls[1].opts.sandbox)
    local tty = engine({ spawn = spawn })
    assert(tty:exec_command({ cmd = "true", tty = true }))
    assert.same({ rows = 24, cols = 80 }, calls[3].opts.tty)
  end)

  it("gives a short yield a session id, and a poll the rest with the exit code", function()
    local e = engine()
    local r = assert(e:exec_command({ cmd = "sleep 1; echo done", yield_time_ms = 250 }))
    assert.same({ 1000, "", "running" }, { r.session_id, r.output, r.state })
    assert.is_nil(r.exit_code)
    assert.is_true(r.wall_time >= 0.24 and r.wall_time < 1, tostring(r.wall_time))
    assert.matches("\nProcess running with session ID 1000\n", exec.format(r))
    local t0 = H.now_ms()
    r = assert(e:write_stdin({ session_id = 1000 })) -- a poll waits 5 s at least, unless …
    assert.is_true(ms_since(t0) < 1500, "the poll did not return on exit") -- … it exits
    assert.same({ 0, "done\n", "exited" }, { r.exit_code, r.output, r.state })
    assert.is_nil(r.session_id)
    assert.same({ nil, "Unknown process id 1000" .. EXITED },
      { e:write_stdin({ session_id = 1000 }) })
  end)

  it("returns only the output produced since the previous call", function()
    local e = engine()
    local r = assert(e:exec_command({ tty = true, clean = true,
      cmd = "echo one; read a; echo two; read b; echo three" }))
    assert.equals("one\n", r.output)
    r = assert(e:write_stdin({ session_id = r.session_id, chars = "x\n" }))
    assert.equals("x\ntwo\n", r.output) -- the terminal's echo, then the program
    r = assert(e:write_stdin({ session_id = r.session_id, chars = "y\n" }))
    assert.same({ "y\nthree\n", 0 }, { r.output, r.exit_code })
  end)

  it("keeps state across calls in `bash -i` on a terminal", function()
    local e = engine()
    local r = assert(e:exec_command({ cmd = "bash --norc -i", tty = true, yield_time_ms = 2500 }))
    local id = assert(r.session_id)
    assert.equals("waiting_for_input", r.state) -- at the prompt, long before 2.5 s
    assert(e:write_stdin({ session_id = id, chars = "export CODEX_VAR=codex\n" }))
    r = assert(e:write_stdin({ session_id = id, chars = "echo \"[$CODEX_VAR]\"\n" }))
    assert.matches("%[codex%]", r.output)
    r = assert(e:write_stdin({ session_id = id, chars = "exit 4\n", yield_time_ms = 2000 }))
    assert.equals(4, r.exit_code)
    assert.same({ nil, "Unknown process id 1000" .. EXITED },
      { e:write_stdin({ session_id = 1000 }) })
  end)

  it("keeps separate sessions apart", function()
    local e = engine()
    local a = assert(e:exec_command({ cmd = "bash --norc -i", tty = true })).session_id
    local b = assert(e:exec_command({ cmd = "bash --norc -i", tty = true })).session_id
    assert.is_not.equals(a, b)
    assert(e:write_stdin({ session_id = a, chars = "export SHARED=yes\n" }))
    local r = assert(e:write_stdin({ session_id = b, chars = "echo \"[${SHARED:-unset}]\"\n" }))
    assert.matches("%[unset%]", r.output)
  end)

  it("ends a session on EOF through stdin; its id is unknown afterwards", function()
    local e = engine()
    local id = assert(e:exec_command({ cmd = "cat", tty = true })).session_id
    local r = assert(e:write_stdin({ session_id = id, chars = "abc\n" }))
    assert.matches("abc", r.output)
    r = assert(e:write_stdin({ session_id = id, chars = "\4" }))
    assert.same({ 0, "exited" }, { r.exit_code, r.state })
    assert.is_nil(r.session_id)
    assert.same({ nil, ("Unknown process id %d" .. EXITED):format(id) },
      { e:write_stdin({ session_id = id, chars = "x" }) })
    assert.same({}, e:list())
  end)

  it("summarises large output exactly as Codex does in token mode", function()
    local e = engine({ truncation = "codex-tokens" })
    local r = assert(e:exec_command({ cmd = "seq 1 20000", max_output_tokens = 100 }))
    local lines = {}
    for i = 1, 20000 do lines[i] = tostring(i) end
    local full = table.concat(lines, "\n") .. "\n"
    assert.equals(truncate.approx_tokens(#full), r.original_token_count)
    assert.equals((truncate.codex(full, { tokens = 100 })), r.output)
    assert.matches("^Total output lines: 20000\n\n1\n2\n", r.output)
    assert.matches(("…%d tokens truncated…"):format(truncate.approx_tokens(#full - 400)),
      r.output, 1, true)
    assert.matches(("\nOriginal token count: %d\nOutput:\nTotal output lines: 20000\n")
      :format(r.original_token_count), exec.format(r, { text = "codex" }), 1, true)
  end)

  it("prunes exited sessions first, protects recent ones, ends the pruned, warns", function()
    local e = engine({ max_sessions = 4, protect_recent = 1, warn_at = 3 })
    local function start(cmd)
      return assert(e:exec_command({ cmd = cmd, yield_time_ms = 250 }))
    end
    local s1 = start("sleep 30")
    local s2 = start("sleep 30")
    local r3 = start("sleep 30")
    assert.equals("3 sessions are open; at 4, a new command ends the least recently used one "
      .. "(end sessions you no longer need)", r3.warnings[1])
    assert.matches("\nWarning: 3 sessions are open", exec.format(r3), 1, true)
    start("sleep 30")
    local list = e:list()
    local pid1 = list[4].pid
    assert.is_true(uv.kill(list[3].pid, "sigterm") == 0) -- s2 exits, unreported
    H.wait_for(function() return not e:list()[3].running end, 5000, "s2 to exit")
    local r5 = start("sleep 30") -- full: s2 goes although s1 is older
    assert.matches(("Session %d %%(exited"):format(s2.session_id), r5.warnings[2])
    assert.same({ nil, ("Unknown process id %d" .. PRUNED):format(s2.session_id) },
      { e:write_stdin({ session_id = s2.session_id }) })
    assert.is_true(H.alive(pid1))
    local r6 = start("sleep 30") -- full, nothing exited: the least recently used, s1
    assert.matches(("Session %d %%(least recently used"):format(s1.session_id), r6.warnings[2])
    assert.is_false(H.alive(pid1), "the pruned session was not ended")
    assert.equals(4, #e:list())
  end)

  it("forces Codex's environment on every child, plus the configured extras", function()
    local e = engine()
    local r = assert(e:exec_command({ cmd = "env" }))
    for _, kv in ipairs({ "NO_COLOR=1", "TERM=dumb", "LANG=C.UTF-8", "LC_CTYPE=C.UTF-8",
      "LC_ALL=C.UTF-8", "COLORTERM=", "PAGER=cat", "GIT_PAGER=cat", "GH_PAGER=cat",
      "GIT_TERMINAL_PROMPT=0" }) do
      assert.matches("\n" .. kv:gsub("%p", "%%%0") .. "\n", "\n" .. r.output, nil, false, kv)
    end
    assert.matches("\nHOME=", "\n" .. r.output)
  end)

  it("applies the environment policy", function()
    local e = engine({ env = { inherit = "none", set = { FOO = "bar" } },
      env_extra = { JJ_PAGER = "cat" } })
    local r = assert(e:exec_command({ cmd = "env" }))
    assert.matches("\nFOO=bar\n", "\n" .. r.output)
    assert.matches("\nJJ_PAGER=cat\n", "\n" .. r.output)
    assert.matches("\nTERM=dumb\n", "\n" .. r.output)
    assert.is_nil(("\n" .. r.output):find("\nHOME="))
  end)

  it("says `Unknown process id N` for an id it never gave", function()
    local e = engine()
    assert.same({ nil, "Unknown process id 4242" }, { e:write_stdin({ session_id = 4242 }) })
  end)

  it("refuses chars on a pipe session with Codex's message", function()
    local e = engine()
    local id = assert(e:exec_command({ cmd = "sleep 30", yield_time_ms = 250 })).session_id
    assert.same({ nil, exec.STDIN_CLOSED }, { e:write_stdin({ session_id = id, chars = "y\n" }) })
    assert.equals("stdin is closed for this session; rerun exec_command with tty=true to keep "
      .. "stdin open", exec.STDIN_CLOSED)
  end)

  it("sends SIGINT to a pipe session's group for \\u0003: exit code 130", function()
    local e = engine()
    local id = assert(e:exec_command({ cmd = "sleep 30; echo never", yield_time_ms = 250 }))
      .session_id
    local r = assert(e:write_stdin({ session_id = id, chars = "\3" }))
    assert.same({ 130, "exited", "INT", "" }, { r.exit_code, r.state, r.signal_name, r.output })
    assert.matches("Process exited with code 130\n", exec.format(r))
  end)

  it("returns on exit even when a background child holds the output", function()
    local e = engine()
    local t0 = H.now_ms()
    local r = assert(e:exec_command({ cmd = "sleep 20 & echo started" }))
    -- (well before the background child's 20 s, and the default yield's 10 s)
    assert.is_true(ms_since(t0) < 5000, "took " .. ms_since(t0) .. " ms")
    assert.same({ 0, "started\n" }, { r.exit_code, r.output })
  end)

  it("uses random ids in 1000..99999 unless deterministic", function()
    local e = engine({ deterministic = false })
    local id = assert(e:exec_command({ cmd = "sleep 30", yield_time_ms = 250 })).session_id
    assert.is_true(id >= 1000 and id <= 99999)
  end)
end)

describe("exec engine concurrency", function()
  after_each(clean_up)

  it("runs calls on different sessions concurrently", function()
    local e = engine()
    -- each call's time: concurrent calls overlap (in turn, the second would start after the
    -- first returned), however slow a loaded machine makes them
    local span = {}
    local function call(name)
      return function()
        span[name] = { H.now_ms() }
        local r = e:exec_command({ cmd = "sleep 0.6; echo " .. name })
        span[name][2] = H.now_ms()
        return r
      end
    end
    local a, b = luxec.go(call("a")), luxec.go(call("b"))
    local _, ra = a:wait()
    local _, rb = b:wait()
    assert.same({ "a\n", "b\n" }, { ra.output, rb.output })
    assert.is_true(span.b[1] < span.a[2] and span.a[1] < span.b[2],
      ("not at once: a %.0f..%.0f, b %.0f..%.0f"):format(span.a[1], span.a[2], span.b[1],
        span.b[2]))
  end)

  it("serialises calls on one session", function()
    local e = engine()
    local id = assert(e:exec_command({ cmd = "bash --norc -i", tty = true })).session_id
    local order = {}
    local first = luxec.go(function()
      local r = e:write_stdin({ session_id = id, chars = "sleep 0.4; echo first\n",
        yield_time_ms = 3000 })
      order[#order + 1] = "first done"
      return r
    end)
    local second = luxec.go(function()
      order[#order + 1] = "second called"
      local r = e:write_stdin({ session_id = id, chars = "echo second\n", yield_time_ms = 3000 })
      order[#order + 1] = "second done"
      return r
    end)
    local _, r1 = first:wait()
    local _, r2 = second:wait()
    assert.same({ "second called", "first done", "second done" }, order)
    assert.matches("first", r1.output)
    assert.is_nil(r1.output:find("echo second", 1, true))
    assert.matches("second", r2.output)
    assert.is_nil(r2.output:find("first\r\n", 1, true))
  end)
end)

describe("exec engine improvements", function()
  after_each(clean_up)

  it("names the bytes a cut removed and the log offsets that hold them", function()
    local e = engine()
    local r = assert(e:exec_command({ cmd = "seq 1 20000", max_output_tokens = 100 }))
    local lines = {}
    for i = 1, 20000 do lines[i] = tostring(i) end
    local full = table.concat(lines, "\n") .. "\n"
    assert.is_true(r.truncated)
    assert.equals(#full - 400, r.removed)
    local range = r.log_range
    assert.same({ 200, #full - 200 }, { range.from, range.to })
    -- (the command ended in this call: the read names the log, as no session is named)
    local want = ("…%d bytes cut (log bytes %d-%d: read_output log=%s offset=%d length=%d)…")
      :format(#full - 400, range.from, range.to, range.path, range.from, #full - 400)
    assert.equals("Total output lines: 20000\n\n" .. full:sub(1, 200) .. want .. full:sub(-200),
      r.output)
    -- the read the marker names gives the removed bytes back
    local back = assert(e:read_output({ log = range.path, offset = range.from,
      length = #full - 400 }))
    assert.equals(full:sub(201, -201), back.data)
  end)

  it("never loses the middle silently when the buffer dropped it", function()
    local e = engine({ head = 1000, tail = 1000 })
    local r = assert(e:exec_command({ cmd = "seq 1 10000" }))
    local lines = {}
    for i = 1, 10000 do lines[i] = tostring(i) end
    local full = table.concat(lines, "\n") .. "\n"
    assert.same({ #full - 2000, #full - 2000, true }, { r.dropped, r.removed, r.truncated })
    assert.same({ 1000, #full - 1000 }, { r.log_range.from, r.log_range.to })
    assert.equals(full:sub(1, 1000), r.output:match("^Total output lines: %d+\n\n(.-)…"))
    assert.equals(full:sub(-1000), r.output:match("…[^…]*…(.*)$"))
    -- Codex's cut counts the whole output of the call (Codex reads it all while the call
    -- waits): the dropped bytes and their lines are in the counts and inside the cut
    local codex = engine({ head = 1000, tail = 1000, truncation = "codex-tokens" })
    r = assert(codex:exec_command({ cmd = "seq 1 10000", max_output_tokens = 100 }))
    assert.equals(("Total output lines: 10000\n\n%s…%d tokens truncated…%s"):format(
      full:sub(1, 200), math.ceil((#full - 400) / 4), full:sub(-200)), r.output)
    assert.matches(("\nWarning: The output buffer dropped %d bytes from the middle of this "
      .. "output\n"):format(#full - 2000), exec.format(r)) -- … which luxec names
  end)

  it("names raw offsets that cover the cut when escapes were cleaned", function()
    local e = engine()
    local r = assert(e:exec_command({ max_output_tokens = 10,
      cmd = "for i in $(seq 1 50); do printf '\\033[1mline %02d\\033[0m\\n' $i; done" }))
    assert.is_true(r.cleaned > 0)
    local f = assert(io.open(r.log_range.path, "rb"))
    local raw = f:read("a")
    f:close()
    local clean = require("luxec.engine.clean")
    local removed = clean.clean(raw:sub(r.log_range.from + 1, r.log_range.to))
    local head, tail = r.output:match("^Total output lines: 50\n\n(.-)….-…(.*)$")
    assert.equals(20, #head)
    -- head + what the log range holds + tail covers every line
    local all = head .. removed .. tail
    for i = 1, 50 do
      assert.truthy(all:find(("line %02d\n"):format(i), 1, true), i)
    end
  end)

  it("never cuts a UTF-8 character between calls", function()
    local e = engine()
    local dir = H.tmpdir()
    local r = assert(e:exec_command({ yield_time_ms = 250, cmd = ("printf 'price: \\342\\202'; "
      .. "while [ ! -e %s/go ]; do sleep 0.02; done; printf '\\254\\n'"):format(dir) }))
    assert.same({ "price: ", "running" }, { r.output, r.state })
    io.open(dir .. "/go", "w"):close()
    r = assert(e:write_stdin({ session_id = r.session_id }))
    assert.same({ "€\n", 0 }, { r.output, r.exit_code })
    H.rmtree(dir)
  end)

  it("cleans escapes and progress lines on pipes by default, on a terminal on request", function()
    local e = engine()
    local cmd = "printf '\\033[32mok\\033[0m\\n10%%\\r50%%\\r100%%\\n'"
    local r = assert(e:exec_command({ cmd = cmd }))
    assert.equals("ok\n100%\n", r.output)
    assert.equals(17, r.cleaned) -- 25 raw bytes, 8 of text
    r = assert(e:exec_command({ cmd = cmd, tty = true }))
    assert.equals("\27[32mok\27[0m\r\n10%\r50%\r100%\r\n", r.output)
    assert.equals(0, r.cleaned)
    r = assert(e:exec_command({ cmd = cmd, tty = true, clean = true }))
    assert.equals("ok\n100%\n", r.output)
  end)

  it("returns as soon as the program waits for input, and says so", function()
    local e = engine()
    local t0 = H.now_ms()
    local r = assert(e:exec_command({ tty = true,
      cmd = "printf 'name? '; read n; echo \"hi $n\"; read m" }))
    -- (well before the default yield's 10 s)
    assert.is_true(ms_since(t0) < 5000, "took " .. ms_since(t0) .. " ms")
    assert.same({ "waiting_for_input", "name? " }, { r.state, r.output })
    assert.matches("\nProcess is waiting for input\n", exec.format(r))
    t0 = H.now_ms()
    local p = assert(e:write_stdin({ session_id = r.session_id })) -- a poll: no 5 s wait
    assert.is_true(ms_since(t0) < 1500, "poll took " .. ms_since(t0) .. " ms")
    assert.equals("waiting_for_input", p.state)
    r = assert(e:write_stdin({ session_id = r.session_id, chars = "bob\n" }))
    assert.matches("hi bob", r.output)
    assert.equals("waiting_for_input", r.state)
  end)

  it("returns at the >>> of a python REPL, not after the full yield", function()
    if luxec.run({ "sh", "-c", "command -v python3" }).code ~= 0 then
      pending("python3 is not installed")
      return
    end
    local e = engine()
    local t0 = H.now_ms()
    local r = assert(e:exec_command({ cmd = "python3 -q -i", tty = true }))
    assert.is_true(ms_since(t0) < 3000, "took " .. ms_since(t0) .. " ms")
    assert.equals("waiting_for_input", r.state)
    assert.matches(">>> $", r.output)
    r = assert(e:write_stdin({ session_id = r.session_id, chars = "print(6*7)\n" }))
    assert.matches("42\r\n>>> $", r.output)
    assert.equals("waiting_for_input", r.state)
    r = assert(e:write_stdin({ session_id = r.session_id, chars = "exit()\n",
      yield_time_ms = 30000 }))
    assert.equals(0, r.exit_code)
  end)

  it("tells a password prompt from other input", function()
    local e = engine()
    local r = assert(e:exec_command({ tty = true,
      cmd = "printf 'Password: '; stty -echo; read p; stty echo; echo; echo \"got $p\"" }))
    assert.equals("waiting_for_password", r.state)
    assert.matches("waiting for a password", exec.format(r))
    r = assert(e:write_stdin({ session_id = r.session_id, chars = "s3cret\n" }))
    assert.matches("got s3cret", r.output)
    assert.equals(0, r.exit_code)
  end)

  it("interrupt ends a waiting call at once, and the next call does not wait behind it",
    function()
      local e = engine()
      local r = assert(e:exec_command({ cmd = "sleep 30", yield_time_ms = 250 }))
      local id = assert(r.session_id)
      local t0 = H.now_ms()
      local poll = luxec.go(function()
        return e:write_stdin({ session_id = id, yield_time_ms = 20000 }) -- a long poll
      end) -- a task runs until its first wait: the poll waits when go returns
      assert.is_true(e:interrupt(id))
      local ok, res = poll:wait()
      assert.is_true(ok)
      assert.equals("running", res.state)
      assert.is_true(H.now_ms() - t0 < 3000, "the poll ran " .. (H.now_ms() - t0) .. " ms")
      assert.is_false(e:interrupt(id)) -- nothing waits now
      r = assert(e:write_stdin({ session_id = id, yield_time_ms = 250 }))
      assert.equals("running", r.state)
      e:shutdown()
    end)

  it("waits without spinning when a program closed its output and runs on", function()
    local e = engine()
    local cpu = os.clock()
    local r = assert(e:exec_command({ cmd = "exec >&- 2>&-; sleep 5", yield_time_ms = 600 }))
    assert.equals("running", r.state)
    assert.is_true(os.clock() - cpu < 0.3, "the host used " .. (os.clock() - cpu) .. " s of CPU")
    e:shutdown()
  end)

  it("ends a command at its hard timeout and reports timed_out", function()
    local e = engine()
    local t0 = H.now_ms()
    local r = assert(e:exec_command({ cmd = "sleep 30 & sleep 30", timeout_ms = 300 }))
    assert.is_true(ms_since(t0) < 1500, "took " .. ms_since(t0) .. " ms")
    assert.same({ 124, "timed_out", true }, { r.exit_code, r.state, r.timed_out })
    assert.matches("\nProcess timed out after 300 ms; its process tree was terminated\n",
      exec.format(r))
  end)

  it("ends a command at its hard timeout between calls too", function()
    local e = engine()
    local r = assert(e:exec_command({ cmd = "sleep 30", yield_time_ms = 250, timeout_ms = 400 }))
    local pid = e:list()[1].pid
    H.wait_for(function() return not H.alive(pid) end, 5000, "the timeout to end it")
    r = assert(e:write_stdin({ session_id = r.session_id }))
    assert.same({ 124, "timed_out" }, { r.exit_code, r.state })
  end)

  it("passes the sandbox config to spawn and reports a labelled guess", function()
    local calls, spawn = spy()
    local sandbox = { mode = "read-only" }
    local e = engine({ spawn = spawn, sandbox = sandbox })
    local r = assert(e:exec_command({ cmd = "echo 'touch: /x: Permission denied' >&2; exit 1" }))
    -- the policy, over the engine's directory as the workspace, its log directory read-only
    assert.same({ mode = "read-only", workspace = e._cfg.cwd, protect = { e._log_dir } },
      calls[1].opts.sandbox)
    assert.same({ true, true }, { r.sandbox.denied, r.sandbox.guess })
    assert.matches(
      "\nSandbox may have denied this %(a guess: the output says \"permission denied\"",
      exec.format(r))
    r = assert(e:exec_command({ cmd = "mkdir -p /tmp/sandbox/x && false" }))
    assert.is_false(r.sandbox.denied) -- codex#18711
  end)

  it("asks the denial hook before a rerun without the sandbox, and says so", function()
    local calls, spawn = spy()
    local asked
    local e = engine({ spawn = spawn, sandbox = { mode = "read-only" },
      on_denial = function(verdict) asked = verdict return true end })
    local r = assert(e:exec_command({ cmd = "echo 'Operation not permitted'; exit 1" }))
    assert.is_true(asked.denied)
    assert.equals(2, #calls)
    assert.is_nil(calls[2].opts.sandbox)
    assert.is_nil(r.sandbox)
    assert.matches("Sandbox denied the first run %(the output says \"operation not permitted\"%);"
      .. " it was run again without the sandbox", exec.format(r))
  end)

  it("reports the core's denial evidence, the same refusal once with its count", function()
    local _, spawn = spy()
    local e = engine({ sandbox = { mode = "read-only" }, spawn = function(argv, opts)
      local p, err = spawn(argv, opts)
      local status = p.status
      p.status = function(self)
        local st = status(self)
        local d = { op = "connect", family = "AF_INET", addr = "93.184.216.34", port = 443,
          pid = 12, comm = "curl" }
        st.sandbox = { mode = "read-only", denials = { d, d, d, d }, denials_total = 5 }
        return st
      end
      return p, err
    end })
    local r = assert(e:exec_command({ cmd = "exit 7" }))
    assert.same({ true, false }, { r.sandbox.denied, r.sandbox.guess })
    assert.matches("\nSandbox denied: connect 93.184.216.34:443 %(pid 12 curl, 4 times%); "
      .. "1 more\n", exec.format(r))
  end)

  it("reports a real denial with the core's evidence", function()
    local e = engine({ sandbox = { mode = "read-only" } })
    local r, err = e:exec_command({ cmd = "touch /etc/luxec-exec-spec" })
    if not r and err:find("sandbox") then
      pending("this kernel cannot sandbox: " .. err)
      return
    end
    assert(r, err)
    assert.is_false(r.sandbox.guess)
    assert.matches("\nSandbox denied: [%w_]+ /etc/luxec%-exec%-spec: E%u+ %(pid %d+ touch%)",
      exec.format(r))
    assert.equals("read-only", r.sandbox.report.mode)
  end)

  it("tells a denial while the command runs on, each once; the exit's verdict lists all",
    function()
      local e = engine({ sandbox = { mode = "read-only" } })
      local r, err = e:exec_command({ yield_time_ms = 1500, tty = true,
        cmd = "touch /etc/luxec-spec-a; echo one; read x; touch /etc/luxec-spec-b; echo two; "
          .. "read y" })
      if not r and err:find("sandbox") then
        pending("this kernel cannot sandbox: " .. err)
        return
      end
      assert(r, err)
      assert.is_number(r.session_id)
      assert.same({ true, false }, { r.sandbox.denied, r.sandbox.guess })
      assert.matches("\nSandbox denied: [%w_]+ /etc/luxec%-spec%-a: E%u+ %(pid %d+ touch%)",
        exec.format(r))
      -- nothing new: no sandbox line
      r = assert(e:write_stdin({ session_id = r.session_id, chars = "", yield_time_ms = 300 }))
      assert.is_nil(r.sandbox)
      r = assert(e:write_stdin({ session_id = r.session_id, chars = "\n", yield_time_ms = 1500 }))
      local text = exec.format(r)
      assert.matches("Sandbox denied: [%w_]+ /etc/luxec%-spec%-b", text)
      assert.is_nil(text:find("luxec-spec-a", 1, true), text)
      r = assert(e:write_stdin({ session_id = r.session_id, chars = "\n", yield_time_ms = 3000 }))
      assert.equals("exited", r.state)
      text = exec.format(r)
      assert.truthy(text:find("/etc/luxec-spec-a", 1, true) and text:find("/etc/luxec-spec-b", 1,
        true), text)
    end)
end)

describe("exec engine bad input", function()
  after_each(clean_up)

  it("answers every bad call with an error text, never an error or a process", function()
    local e = engine()
    local bad_exec = {
      { nil, "expected an object, got nil" },
      { "ls", "expected an object, got string" },
      { {}, "missing field `cmd`" },
      { { cmd = 5 }, "invalid type: integer `5` for `cmd`, expected a string" },
      { { cmd = "  " }, "`cmd` is empty" },
      { { cmd = "a\0b" }, "NUL byte" },
      { { cmd = "true", yield_time_ms = -1 }, "invalid value: integer `-1` for `yield_time_ms`" },
      { { cmd = "true", yield_time_ms = 1e300 }, "for `yield_time_ms`, expected an integer" },
      { { cmd = "true", yield_time_ms = 0 / 0 }, "expected an integer" },
      { { cmd = "true", max_output_tokens = -5 }, "`max_output_tokens`" },
      { { cmd = "true", tty = "yes" }, "for `tty`, expected a boolean" },
      { { cmd = "true", timeout_ms = 0 }, "`timeout_ms`" },
      { { cmd = "true", workdir = "/nonexistent/dir" }, "failed to start `true`: ENOENT" },
      { { cmd = "true", shell = "/nonexistent/sh" }, "failed to start `true`: ENOENT" },
    }
    for _, case in ipairs(bad_exec) do
      local r, err = e:exec_command(case[1])
      assert.is_nil(r)
      assert.matches(case[2], err, 1, true)
    end
    local id = assert(e:exec_command({ cmd = "sleep 30", yield_time_ms = 250 })).session_id
    local bad_write = {
      { nil, "expected an object" },
      { {}, "missing field `session_id`" },
      { { session_id = "1000" }, "invalid type: string \"1000\" for `session_id`" },
      { { session_id = 1000.5 }, "expected an integer" },
      { { session_id = 99 }, "Unknown process id 99" },
      { { session_id = id, chars = 5 }, "for `chars`, expected a string" },
      { { session_id = id, chars = ("x"):rep(2 * 1024 * 1024) },
        "chars is 2097152 bytes; write_stdin takes at most 1048576 bytes in one call" },
      { { session_id = id, yield_time_ms = -250 }, "`yield_time_ms`" },
      { { session_id = id, max_output_tokens = 2 ^ 70 }, "`max_output_tokens`" },
    }
    for _, case in ipairs(bad_write) do
      local r, err = e:write_stdin(case[1])
      assert.is_nil(r)
      assert.matches(case[2], err, 1, true)
    end
    assert.equals(1, #H.children())
    assert.same({ nil, "Unknown process id 5" }, { e:terminate(5) })
    assert.matches("bad session id", select(2, e:terminate("x")))
  end)

  it("raises on a bad config, which is a programming error", function()
    assert.has_error(function() exec.new({ max_sessions = -1 }) end,
      "bad config 'max_sessions' for luxec.engine (non-negative integer expected, got -1)")
    assert.has_error(function() exec.new({ yeild = 1 }) end,
      "bad config key 'yeild' for luxec.engine")
    assert.has_error(function() exec.new({ truncation = "x" }) end)
    assert.has_error(function() exec.new({ env = { inherit = "some" } }) end)
  end)
end)

describe("exec engine housekeeping", function()
  after_each(clean_up)

  it("lists, terminates and shuts down, removing its logs", function()
    local e = engine()
    local a = assert(e:exec_command({ cmd = "sleep 30", yield_time_ms = 250 })).session_id
    local b = assert(e:exec_command({ cmd = "sleep 31", yield_time_ms = 250 })).session_id
    local list = e:list()
    assert.same({ b, a }, { list[1].session_id, list[2].session_id })
    assert.same({ "sleep 31", true, false }, { list[1].command, list[1].running, list[1].tty })
    local pid_a, log = list[2].pid, list[2].log
    assert.is_true(e:terminate(a))
    assert.is_false(H.alive(pid_a))
    assert.same({ nil, ("Unknown process id %d" .. TERMINATED):format(a) },
      { e:write_stdin({ session_id = a }) })
    local dir = log:match("^(.*)/")
    assert.truthy(io.open(dir))
    e:shutdown()
    assert.is_nil(io.open(dir))
    assert.same({ nil, "the exec engine is shut down" }, { e:exec_command({ cmd = "true" }) })
  end)

  it("deletes the log of a session that ended with nothing cut", function()
    local calls, spawn = spy()
    local e = engine({ spawn = spawn })
    assert(e:exec_command({ cmd = "echo small" }))
    assert.is_nil(io.open(calls[1].opts.log))
  end)
end)
