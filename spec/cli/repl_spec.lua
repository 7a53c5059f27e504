-- The prompt on a real terminal: luxec started on a PTY by luxec itself, typed at with
-- p:send and read back with p:expect and p:screen() (what tmux send-keys / capture-pane do).
local H = require("helper")
local luxec = require("luxec")
local uv = require("luv")

local TUI = H.fixture("tui")
local PROMPT = { re = "(?<!>)> $" } -- the primary prompt, not ">> "

local running = {} -- closed after each test, whatever happened

local function start(dir, args)
  local argv = { H.luxec }
  for _, a in ipairs(args or {}) do
    argv[#argv + 1] = a
  end
  local p = assert(luxec.spawn(argv, { tty = { rows = 30, cols = 100 }, inherit_env = true,
    env = { XDG_STATE_HOME = dir, LUXEC_HISTORY = false, TERM = "xterm", LUA_INIT = false,
      LUA_INIT_5_4 = false, HOME = dir } }))
  running[#running + 1] = p
  p.timeout = 10
  assert(p:expect(PROMPT))
  return p
end

-- Type a line; wait for the next prompt; what was printed in between (without the echo).
local function eval(p, line)
  p:send(line .. "\r")
  assert(p:expect(line))
  assert(p:expect(PROMPT))
  return (p.before:gsub("\27%[%?2004[hl]", ""):gsub("\r", ""):gsub("^\n", ""):gsub("\n$", ""))
end

local function quit(p)
  p:send("\4")
  assert(p:expect(luxec.EOF))
  local st = p:wait({ timeout = 5 })
  p:close()
  return st
end

-- The row of the screen the cursor is on, once it is `want` (the line editor may still be
-- redrawing when the text first shows).
local function cursor_line(p, want)
  local s = p:expect_screen(function(s) return s.lines[s.cursor.row] == want end,
    { timeout = 5 }) or p:screen()
  return s.lines[s.cursor.row]
end

describe("luxec prompt", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(function()
    for _, p in ipairs(running) do
      p:close()
    end
    running = {}
    H.rmtree(dir)
    H.assert_clean()
  end)

  it("evaluates and pretty-prints tables, strings, several values and sessions", function()
    local p = start(dir)
    assert.equals("42", eval(p, "6 * 7"))
    assert.equals('{ 1, "two", x = { y = true } }', eval(p, "{1, 'two', x = {y = true}}"))
    assert.equals('"a\\tb"', eval(p, "'a\\tb'"))
    assert.equals("1\tnil\t3", eval(p, "1, nil, 3"))
    assert.equals("", eval(p, "local t = {}"))
    eval(p, "s = luxec.spawn({'sleep', '30'})")
    assert.matches("^<session 1: sleep 30 %(pid %d+, running%)>$", eval(p, "s"))
    assert.matches('^{\n  "a+",\n', eval(p, "{('a'):rep(60), ('b'):rep(60)}"))
    assert.equals(0, quit(p).code)
  end)

  it("says which running sessions it ends when it is left", function()
    local p = start(dir)
    eval(p, "a = luxec.spawn({'sleep', '30'})")
    eval(p, "b = luxec.spawn({'true'}); b:wait()")
    local pid = tonumber(eval(p, "a.pid"))
    p:send("\4")
    assert(p:expect(("[ended 1 running session: 1 sleep 30 (pid %d, running)]"):format(pid)))
    assert(p:expect(luxec.EOF))
    assert.equals(0, p:wait({ timeout = 5 }).code)
    assert.is_false(H.alive(pid))
  end)

  it("Ctrl-C during luxec.run stops the program it runs", function()
    local p = start(dir)
    local line = ("r = luxec.run({'sh', '-c', 'echo $$ > %s/pid; exec sleep 30'})"):format(dir)
    p:send(line .. "\r")
    H.wait_for(function() return (H.read_file(dir .. "/pid") or ""):find("\n") end, 5000,
      "the pid file")
    local pid = tonumber(H.read_file(dir .. "/pid"))
    p:send("\3")
    assert(p:expect("interrupted"))
    assert(p:expect(PROMPT))
    H.wait_for(function() return not H.alive(pid) end, 10000, "the end of sleep") -- a kill
    assert.equals(0, quit(p).code)
  end)

  it("luxec -i script.lua: the script's sessions are in :ps", function()
    H.write_file(dir .. "/s.lua", "local luxec = require('luxec')\n" ..
      "a = luxec.spawn({'sleep', '30'})\n" ..
      "luxec.run({'true'})\n")
    local p = start(dir, { "-i", dir .. "/s.lua" })
    local ps = eval(p, ":ps")
    assert.matches("\n1%s+%d+%s+running%s+0 B%s+sleep 30", ps)
    assert.matches("\n2%s+%d+%s+closed%s+%-%s+true", ps)
    assert.equals("true", eval(p, "sessions[1] == a"))
    assert.equals(0, quit(p).code)
  end)

  it("prints what a task prints above the line being typed, which is drawn again", function()
    local p = start(dir)
    eval(p, ("go = '%s/go'"):format(dir))
    eval(p, "function w() print('from-task') io.write('no newline') end")
    eval(p, "luxec.go(function() repeat luxec.sleep(0.01) until io.open(go) w() end)")
    p:send("abc")
    assert.equals("> abc", cursor_line(p, "> abc"))
    H.write_file(dir .. "/go", "")
    local sc = p:expect_screen(function(s)
      return s.lines[s.cursor.row] == "> abc" and s.lines[s.cursor.row - 1] == "no newline"
    end, { timeout = 5 })
    assert.truthy(sc, tostring(p:screen()))
    assert.equals("from-task", sc.lines[sc.cursor.row - 2])
    p:send("\21")
    assert.equals(0, quit(p).code)
  end)

  it("keeps the last result in _", function()
    local p = start(dir)
    assert.equals("42", eval(p, "40 + 2"))
    assert.equals("84", eval(p, "_ * 2"))
    eval(p, "x = 1") -- no result: _ stays
    assert.equals("84", eval(p, "_"))
    assert.equals(0, quit(p).code)
  end)

  it("continues a chunk that is not finished on the next line", function()
    local p = start(dir)
    p:send("function f(x)\r")
    assert(p:expect(">> "))
    p:send("  return x * 2\r")
    assert(p:expect(">> "))
    assert.equals("42", eval(p, "end; return f(21)"))
    assert.matches("stdin:1: oops", eval(p, "error('oops')"))
    assert.equals(0, quit(p).code)
  end)

  it("completes globals, fields and methods with tab", function()
    local p = start(dir)
    p:send("luxec.sp\t")
    assert.equals("> luxec.spawn(", cursor_line(p, "> luxec.spawn("))
    p:send("\21string.for\t") -- Ctrl-U empties the line
    assert.equals("> string.format(", cursor_line(p, "> string.format("))
    p:send("\21")
    eval(p, "q = luxec.spawn({'sleep', '30'})")
    p:send("q:expect\t\t") -- two candidates: listed on the second tab
    local listed = p:expect_screen(function(s)
      return s:text():find("q:expect_exact(", 1, true) and s:text():find("q:expect(", 1, true)
    end, { timeout = 5 })
    assert.truthy(listed, p:screen():text())
    p:send("\21sessions[1]:wait_in\t") -- a session's methods, found through sessions[N]
    assert.equals("> sessions[1]:wait_input(", cursor_line(p, "> sessions[1]:wait_input("))
    p:send("\21:at\t")
    assert.equals("> :attach", cursor_line(p, "> :attach")) -- lines lose their trailing blanks
    assert.equals(11, p:screen().cursor.col)
    p:send("\21")
    assert.equals(0, quit(p).code)
  end)

  it("keeps its history across restarts", function()
    local p = start(dir)
    eval(p, "x = 'from the first run'")
    p:send("for i = 1, 2 do\r  y = i\r")
    assert(p:expect(">> "))
    eval(p, "end")
    assert.equals(0, quit(p).code)
    local f = assert(io.open(dir .. "/luxec/history"))
    local text = f:read("a")
    f:close()
    assert.equals("x = 'from the first run'\nfor i = 1, 2 do\\n  y = i\\nend\n", text)
    p = start(dir)
    p:send("\27[A\27[A") -- up, up: the first run's first line
    assert(p:expect("first run'"))
    assert.equals("> x = 'from the first run'", cursor_line(p, "> x = 'from the first run'"))
    p:send("\r")
    assert(p:expect(PROMPT))
    assert.equals('"from the first run"', eval(p, "x"))
    assert.equals(0, quit(p).code)
  end)

  it(":ps lists the sessions; they keep running while the prompt waits", function()
    local p = start(dir)
    assert.matches("no sessions", eval(p, ":ps"))
    eval(p, "a = luxec.spawn({'sh', '-c', 'sleep 0.3; echo late'})")
    eval(p, "b = luxec.spawn({'cat'}, {tty = true})")
    eval(p, "b:wait_input({timeout = 5})")
    local ps = eval(p, ":ps")
    assert.matches("#%s+PID%s+STATE%s+OUTPUT%s+COMMAND", ps)
    local pid = ps:match("\n1%s+(%d+)%s+running%s+0 B%s+sh %-c 'sleep 0%.3; echo late'")
    assert.is_not_nil(pid, ps)
    assert.matches("\n2%s+%d+%s+waiting for input%s+0 B%s+cat", ps)
    -- the prompt waits; session 1 runs to its end meanwhile, and the prompt's host reaps it
    H.wait_for(function() return not uv.fs_stat("/proc/" .. pid) end, 5000,
      "the waiting prompt to reap session 1 (pid " .. pid .. ")")
    assert.equals('"late\\n"', eval(p, "(sessions[1]:read())"))
    assert.matches("\n1%s+%d+%s+exited 0%s+5 B", eval(p, ":ps"))
    assert.equals(0, quit(p).code)
  end)

  it(":attach takes over a session, the escape key detaches, :kill ends it", function()
    local p = start(dir)
    eval(p, "sh = luxec.spawn({'sh'}, {tty = true, env = {PS1 = '$ ', PATH = os.getenv('PATH')}})")
    p:send(":attach 1\r")
    assert(p:expect("[attached to session 1: sh; Ctrl-] detaches]"))
    p:send("echo inside-$((6 * 7))\r")
    assert(p:expect("inside-42"))
    p:send("\29")
    assert(p:expect("[detached from session 1, which keeps running]"))
    assert(p:expect(PROMPT))
    assert.equals("true", eval(p, "sh:wait_input({timeout = 5})")) -- back at its prompt
    assert.matches("\n1%s+%d+%s+waiting for input", eval(p, ":ps"))
    assert.matches("session 1: killed by SIGHUP", eval(p, ":kill 1"))
    assert.matches("no sessions", eval(p, ":ps"))
    assert.matches("no session 7", eval(p, ":attach 7"))
    assert.equals(0, quit(p).code)
  end)

  it(":attach to a session without a terminal: Enter ends the line with a newline", function()
    local p = start(dir)
    eval(p, "c = luxec.spawn({'sh', '-c', 'read l; echo \"got:$l.\"'})")
    p:send(":attach 1\r")
    assert(p:expect("[a session without a terminal: what you type is not echoed]"))
    p:send("hi\r")
    assert(p:expect("got:hi."))
    assert(p:expect("[session 1 exited 0]"))
    assert(p:expect(PROMPT))
    assert.equals(0, quit(p).code)
  end)

  it(":attach redraws a full-screen program at the terminal's size", function()
    local p = start(dir)
    eval(p, ("t = luxec.spawn({%q}, {tty = {rows = 10, cols = 40}})"):format(TUI))
    eval(p, "t:expect('> ')")
    p:send(":attach 1\r")
    assert(p:expect("size 30x100")) -- resized to the prompt's terminal, and redrawn
    p:send("z")
    assert(p:expect("key: z"))
    local s = p:screen()
    assert.is_true(s.altscreen)
    assert.equals(("-"):rep(100), s.lines[1])
    p:send("\29")
    assert(p:expect("detached from session 1"))
    assert(p:expect(PROMPT))
    p:send("q") -- still reading keys? no: "q" is typed at the prompt now
    assert(p:expect("q"))
    p:send("\21")
    assert.equals('"key: z"', eval(p, "t:screen().lines[4]:match('key: %a')"))
    assert.equals(0, quit(p).code)
  end)

  it("does not lose output a slow terminal does not take at once", function()
    local p = start(dir)
    p:send("\19") -- Ctrl-S: the terminal stops taking output, as a slow one would
    p:send("io.write(string.rep(string.char(120), 2^20), 'E' .. 'ND')\r") -- 1 MiB of "x"
    luxec.sleep(0.2)
    p:send("\17") -- Ctrl-Q
    assert(p:expect("END"))
    local _, xs = p.before:gsub("x", "")
    assert.equals(1 << 20, xs) -- before, stdout shared stdin's O_NONBLOCK: most was lost
    assert(p:expect(PROMPT))
    assert.equals(0, quit(p).code)
  end)

  it(":help says what the commands do; an unknown one says so", function()
    local p = start(dir)
    local help = eval(p, ":help")
    for _, c in ipairs({ ":ps", ":attach N", ":kill N", ":help", "Ctrl%-%]", "luxec%.spawn%(",
      "p:expect%(", "luxec%.run%(", "luxec%.ssh%.login%(", "luxec%.replwrap%.python%(",
      "luxec%.open_stream%(" }) do
      assert.matches(c, help)
    end
    assert.matches("unknown command ':frob' %(try :help%)", eval(p, ":frob"))
    assert.equals(0, quit(p).code)
  end)
end)

describe("luxec play", function()
  after_each(H.assert_clean)

  local function write_cast(path, events)
    local f = assert(io.open(path, "w"))
    f:write('{"version": 2, "width": 80, "height": 24}\n')
    for _, e in ipairs(events) do
      f:write(e, "\n")
    end
    f:close()
  end

  it("replays a recording's output with its timing", function()
    local dir = H.tmpdir()
    local cast = dir .. "/t.cast"
    write_cast(cast, { '[0.0, "o", "hello "]', '[0.1, "i", "typed"]',
      '[0.35, "o", "w\\u00f6rld\\r\\n"]', '[0.4, "r", "100x30"]' })
    local r = H.run({ "play", cast })
    assert.equals(0, r.code, r.stderr)
    assert.equals("hello wörld\r\n", r.stdout)
    assert.is_true(r.ms >= 300, ("took %.0f ms"):format(r.ms))
    r = H.run({ "play", "--speed", "100", cast })
    assert.equals("hello wörld\r\n", r.stdout)
    r = H.run({ "play", "--idle-limit", "0.05", cast })
    assert.equals("hello wörld\r\n", r.stdout)
    write_cast(cast, { '[0.0, "o", "x"]', "not json" })
    r = H.run({ "play", cast })
    assert.equals(1, r.code)
    assert.matches("t.cast:3: not an event", r.stderr)
    r = H.run({ "play", dir .. "/missing.cast" })
    assert.equals(1, r.code)
    assert.matches("missing.cast: No such file", r.stderr)
    r = H.run({ "play" })
    assert.equals(2, r.code)
    assert.matches("usage: luxec play", r.stderr)
    H.rmtree(dir)
  end)

  it("replays what luxec recorded", function()
    local dir = H.tmpdir()
    local cast = dir .. "/rec.cast"
    local p = assert(luxec.spawn({ "sh", "-c", "printf 'one\\n'; sleep 0.1; printf 'two\\n'" },
      { tty = true, record = cast }))
    assert(p:expect(luxec.EOF))
    p:wait()
    p:close()
    local r = H.run({ "play", cast })
    assert.equals(0, r.code, r.stderr)
    assert.equals("one\r\ntwo\r\n", r.stdout)
    H.rmtree(dir)
  end)
end)

describe("p:interact", function()
  after_each(H.assert_clean)

  local SCRIPT = [[
    local luxec = require("luxec")
    local p = assert(luxec.spawn({ arg[1], table.unpack(arg, 2) }, { tty = true }))
    assert(p:expect(arg[1]:find("tui") and "> " or "ready"))
    local function interact()
      return p:interact({ start = function(t) t:write("[interacting]\r\n") end })
    end
    local how
    if os.getenv("INTERACT_IN_TASK") then -- a task's wait yields instead of driving the loop
      how = select(2, luxec.go(interact):wait())
    else
      how = interact()
    end
    print("back: " .. how)
    if how == "escape" then
      p:send("z")
      assert(p:expect("key: z"))
      print("the script goes on")
    end
  ]]

  local function script_session(args, size, env)
    local dir = H.tmpdir()
    local f = assert(io.open(dir .. "/interact.lua", "w"))
    f:write(SCRIPT)
    f:close()
    local argv = { H.luxec, dir .. "/interact.lua" }
    for _, a in ipairs(args) do
      argv[#argv + 1] = a
    end
    local p = assert(luxec.spawn(argv, { tty = size or true, inherit_env = true, env = env }))
    p.timeout = 10
    return p, dir
  end

  it("passes keys through raw, follows the window size, hands back on the escape key", function()
    local p, dir = script_session({ TUI }, { rows = 20, cols = 60 })
    assert(p:expect("[interacting]"))
    assert(p:expect("size 20x60")) -- the session took the terminal's size
    p:send("k")
    assert(p:expect("key: k"))
    p:send("\3") -- Ctrl-C is a key for the program, not a signal for the script
    assert(p:expect("key: ^C"))
    p:resize(15, 70)
    assert(p:expect("size 15x70"))
    local s = assert(p:expect_screen("key: ^C"))
    assert.equals(("-"):rep(70), s.lines[1])
    p:send("\29")
    assert(p:expect("back: escape"))
    assert(p:expect("the script goes on"))
    assert(p:expect(luxec.EOF))
    assert.equals(0, p:wait({ timeout = 5 }).code)
    p:close()
    H.rmtree(dir)
  end)

  it("returns when the session ends (in a task)", function()
    local p, dir = script_session({ "sh", "-c", "echo ready; read x; echo got $x" }, nil,
      { INTERACT_IN_TASK = "1" })
    assert(p:expect("[interacting]"))
    p:send("hello\r")
    assert(p:expect("got hello"))
    assert(p:expect("back: exit"))
    assert.equals(0, p:wait({ timeout = 5 }).code)
    p:close()
    H.rmtree(dir)
  end)
end)
