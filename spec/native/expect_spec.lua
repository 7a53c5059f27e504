local H = require("helper")
local luxec = require("luxec")
local uv = require("luv")

local EMIT = H.fixture("emit")
local FAKESSH = H.fixture("fakessh")

-- A shell script as a session (sh is the one program specs may rely on besides fixtures).
local function sh(script, opts)
  return assert(luxec.spawn({ "sh", "-c", script }, opts))
end

local err_of = H.err_of

describe("p:expect", function()
  after_each(H.assert_clean)

  it("returns the index of the first matching alternative, the match and its captures", function()
    local p = sh("echo 'login: ok'; echo 'user=bob id=42'; echo done")
    assert.same({ 2, "login:" }, { p:expect({ "password:", "login:" }) })
    assert.same({ 1, "user=bob id=42", "bob", "42" },
      { p:expect({ re = [[user=(\w+) id=(\d+)]] }) })
    assert.equals(" ok\n", p.before)
    assert.equals("user=bob id=42", p.after)
    assert.same({ "bob", "42", n = 2 }, p.captures)
    assert.same({ 1, "done" }, { p:expect({ lua = "d%a+" }) })
    p:close()
  end)

  it("takes the earliest match in the output; a tie goes to the first pattern listed", function()
    local p = sh("echo 'aaa bbb ccc'")
    assert.same({ 3, "aaa bbb" }, { p:expect({ "ccc", "bbb", "aaa bbb" }) })
    p:close()
    p = sh("echo 'aaa bbb ccc'")
    -- "aaa bbb" and "aaa" start at the same byte: the first listed wins
    assert.same({ 2, "aaa bbb" }, { p:expect({ "ccc", "aaa bbb", "aaa" }) })
    assert.same({ 1, "ccc" }, { p:expect({ "ccc", "bbb" }) })
    p:close()
  end)

  it("treats plain strings as plain text, {lua=} as a Lua pattern, {re=} as PCRE2", function()
    local p = sh("echo 'a.b axb A+B x1y2'")
    assert.same({ 1, "a.b" }, { p:expect("a.b") })
    assert.same({ 1, "axb" }, { p:expect({ lua = "a.b" }) })
    assert.same({ 1, "A+B", "A", "B" }, { p:expect({ re = "(a)\\+(b)", flags = "i" }) })
    assert.same({ 1, "x1y2", "1", "2" }, { p:expect({ lua = "x(%d)y(%d)" }) })
    p:close()
  end)

  it("anchors ^ at the start of the output not yet matched", function()
    local p = sh("printf 'xx start\\nstart\\n'")
    assert.same({ 1, "xx" }, { p:expect({ lua = "^x+" }) })
    assert.same({ 1, " start" }, { p:expect({ re = "^ \\w+" }) })
    p:close()
  end)

  it("keeps what follows a match for the next expect, and p.before what preceded it", function()
    local p = sh("echo one two three")
    assert.equals(1, (p:expect("two")))
    assert.equals("one ", p.before)
    assert.same({ 1, " three" }, { p:expect({ lua = " %a+" }) })
    assert.equals("", p.before)
    assert.same({ 2, luxec.EOF }, { p:expect({ "one", luxec.EOF }) })
    assert.equals("\n", p.before)
    p:close()
  end)

  it("finds a match split across two reads", function()
    local p = sh("printf 'user@host pass'; sleep 0.2; printf 'word: '; sleep 0.2; printf 'ab'; " ..
      "sleep 0.2; echo 'cd-end'")
    local t0 = H.now_ms()
    assert.same({ 1, "password: " }, { p:expect("password: ") })
    assert.is_true(H.now_ms() - t0 >= 150, "the second half came later")
    assert.equals("user@host ", p.before)
    assert.same({ 1, "abcd-end", "abcd" }, { p:expect({ re = "(ab\\w+)-end" }) })
    p:close()
  end)

  it("matches luxec.EOF when the session ends, and reports it without one", function()
    local p = sh("echo last words; exit 3")
    assert.same({ 2, luxec.EOF }, { p:expect({ "never", luxec.EOF }) })
    assert.equals("last words\n", p.before)
    assert.equals(luxec.EOF, p.after)
    p:close()
    p = sh("echo bye; exit 3")
    local i, msg, code = p:expect("never")
    assert.is_nil(i)
    assert.equals("eof", code)
    assert.matches("^eof: the session ended %(exit code 3%) without a match for \"never\"", msg)
    assert.matches('last output: "bye\\n"', msg, 1, true)
    p:close()
  end)

  it("matches luxec.TIMEOUT when the wait runs out, and reports it without one", function()
    local p = sh("echo waiting; sleep 30")
    local t0 = H.now_ms()
    assert.same({ 2, luxec.TIMEOUT }, { p:expect({ "never", luxec.TIMEOUT }, { timeout = 0.2 }) })
    assert.is_true(H.now_ms() - t0 >= 190)
    assert.equals("waiting\n", p.before)
    local i, msg, code = p:expect({ "never", "nor this" }, { timeout = 0.1 })
    assert.is_nil(i)
    assert.equals("timeout", code)
    assert.matches('^timeout: no match for "never", "nor this" within 0.1 s', msg)
    -- what a timeout leaves is still there for the next expect; timeout = 0 only looks
    assert.same({ 1, "waiting" }, { p:expect("waiting", { timeout = 0 }) })
    p.timeout = 0.05 -- a per-session default, as pexpect's
    assert.equals("timeout", select(3, p:expect("never")))
    p:close()
  end)

  it("raises clear errors for bad patterns and options", function()
    local p = sh("sleep 30")
    assert.matches("bad argument #1 to 'expect' %(invalid regex \"a%(b\": missing closing " ..
      "parenthesis", err_of(p.expect, p, { re = "a(b" }))
    assert.matches("invalid Lua pattern \"x%[a\": malformed pattern %(missing ']'%)",
      err_of(p.expect, p, { lua = "x[a" }))
    assert.matches("invalid Lua pattern \"%(a\": unfinished capture",
      err_of(p.expect, p, { lua = "(a" }))
    assert.matches("bad argument #1 to 'expect' %(empty pattern%)", err_of(p.expect, p, ""))
    assert.matches("bad argument #1 to 'expect' %(no pattern given%)", err_of(p.expect, p, {}))
    assert.matches("pattern a string, {lua = pattern}, {re = regex}, luxec.EOF or luxec.TIMEOUT " ..
      "expected, got number", err_of(p.expect, p, 42))
    assert.matches("bad option 'timeout' to 'expect'", err_of(p.expect, p, "x", { timeout = -2 }))
    assert.matches("unknown option 'tiemout'", err_of(p.expect, p, "x", { tiemout = 1 }))
    assert.matches("bad argument #1 to 'expect_exact' %(pattern a string, luxec.EOF or " ..
      "luxec.TIMEOUT expected, got table", err_of(p.expect_exact, p, { re = "x" }))
    -- the error names the caller's line
    local err = err_of(function() p:expect({ re = "(" }) end)
    assert.matches("expect_spec.lua:%d+: bad argument", err)
    p:close()
    assert.matches("attempt to call 'expect' on a closed process", err_of(p.expect, p, "x"))
  end)

  it("takes the regex flags lua-rex-pcre2 knows, and names any other letter", function()
    local p = sh("echo 'HELLO aaab'; sleep 30")
    assert.same({ 1, "HELLO" }, { p:expect({ re = "h e l l o # a comment", flags = "xi" }) })
    assert.same({ 1, " a" }, { p:expect({ re = " a+", flags = "U" }) }) -- (ungreedy)
    assert.same({ 1, "aab" }, { p:expect({ re = "a+b", flags = "imsxU" }) })
    for _, flags in ipairs({ "I", "q", "zz9", "iq", "uX" }) do
      local bad = flags:match("[^imsxUu]")
      local line = debug.getinfo(1, "l").currentline + 1 -- (the error names the caller's line)
      local err = err_of(function() p:expect({ re = "hello", flags = flags }) end)
      assert.equals(("expect_spec.lua:%d: bad argument #1 to 'expect' (unknown regex flag %q in " ..
        "flags %q of \"hello\" (the flags are i caseless, m multiline, s dotall, x extended, " ..
        "U ungreedy, u UTF-8 characters))"):format(line, bad, flags),
        err:match("expect_spec%.lua:.*"))
    end
    assert.matches("^bad option 'events' to 'run' %(unknown regex flag \"I\"",
      err_of(luxec.run, { "true" }, { events = { [{ re = "x", flags = "I" }] = "y" } }))
    p:close()
  end)

  it("reads the output as UTF-8 characters with flags = \"u\", ill-formed bytes and all", function()
    -- é is \303\251 and ü \303\274; \377 is no character, and the é after "caf" comes in two
    -- writes 0.3 s apart
    local script = [[printf 'x\303\251\377\303\251\303\274!\n'; printf 'caf\303'; sleep 0.3; ]] ..
      [[printf '\251 ok\n'; sleep 30]]
    -- bytes (no u): a class of two characters is a class of their bytes, `.` one byte
    local p = sh(script)
    assert.same({ 1, "\195" }, { p:expect({ re = "[éè]" }) })
    assert.equals("x", p.before)
    assert.same({ 1, "caf\195" }, { p:expect({ re = "caf." }) })
    p:close()
    p = sh(script)
    -- characters: `.` is never the ill-formed \377, so the first é does not match; \w is ü
    assert.same({ 1, "éü", "ü" }, { p:expect({ re = "[éè](.)", flags = "u" }) })
    assert.equals("x\195\169\255", p.before)
    assert.same({ 1, "!" }, { p:expect({ re = "\\W", flags = "u" }) })
    -- the split é: `.` waits for the whole character
    assert.same({ 1, "café" }, { p:expect({ re = "caf.", flags = "u" }) })
    assert.same({ 1, "ok" }, { p:expect({ re = "OK", flags = "iu" }) })
    p:close()
  end)

  it("expect_exact matches strings as they are", function()
    local p = sh("echo '[a-z]+ (x)'")
    assert.same({ 1, "[a-z]+ (x)" }, { p:expect_exact({ "[a-z]+ (x)", luxec.EOF }) })
    p:close()
  end)

  it("waits inside luxec.go tasks while other sessions are served", function()
    local a = sh("sleep 0.3; echo from-a")
    local b = sh("sleep 0.1; echo from-b")
    local order = {}
    local ta = luxec.go(function()
      assert(a:expect("from-a"))
      order[#order + 1] = "a"
    end)
    local tb = luxec.go(function()
      assert(b:expect("from-b"))
      order[#order + 1] = "b"
    end)
    assert.is_true((ta:wait()))
    assert.is_true((tb:wait()))
    assert.same({ "b", "a" }, order)
    a:close()
    b:close()
  end)

  it("goes on after output the session dropped from memory before it was read", function()
    -- a tail of 4 KiB and reads of up to 64 KiB: most of the output is never held
    local p = sh(("printf 'first '; sleep 0.1; %s -o 300000; echo; echo END-MARK"):format(EMIT),
      { head = 16, tail = 4096, stdin = "null" })
    assert.same({ 1, "first" }, { p:expect("first") })
    assert.same({ 1, "END-MARK" }, { p:expect("END-MARK") })
    assert.is_true(p:snapshot().dropped > 0, "bytes were dropped")
    -- p.before is what followed the last gap: the output held, not 300 kB
    assert.is_true(#p.before <= 2 * 4096, #p.before)
    assert.matches("[a-z]\n$", p.before)
    p:close()
  end)

  it("searches 100 MiB with the pattern at its end in bounded memory and linear time", function()
    local maxbuffer = require("luxec.auto.expect").defaults.maxbuffer
    local function run(mib, pattern)
      local p = sh(("%s -o %d; echo END-MARKER"):format(EMIT, mib << 20), { stdin = "null" })
      collectgarbage()
      local mem0 = collectgarbage("count")
      local t0 = H.now_ms()
      local peak = 0
      local sampler = uv.new_timer()
      sampler:start(5, 5, function() peak = math.max(peak, collectgarbage("count")) end)
      local i = p:expect(pattern, { timeout = 60 })
      sampler:close()
      local ms = H.now_ms() - t0
      assert.equals(1, i)
      assert.is_true(#p.before <= maxbuffer + (1 << 20), "p.before is bounded")
      p:close()
      if os.getenv("LUXEC_SPEC_VERBOSE") then
        print(("%d MiB %s: %.0f ms, Lua memory +%.1f MiB"):format(mib, tostring(pattern.re or
          pattern), ms, (peak - mem0) / 1024))
      end
      return ms, (peak - mem0) / 1024
    end
    local small = run(10, "END-MARKER")
    local big, mem = run(100, "END-MARKER")
    assert.is_true(mem < 64, ("Lua memory grew by %.1f MiB"):format(mem))
    -- linear: 10x the output in well under 100x the time (a quadratic search would be ~100x)
    assert.is_true(big < 30 * math.max(small, 20),
      ("10 MiB: %.0f ms, 100 MiB: %.0f ms"):format(small, big))
    local re_ms, re_mem = run(100, { re = "END-M[A-Z]+" })
    assert.is_true(re_mem < 64, ("Lua memory grew by %.1f MiB"):format(re_mem))
    assert.is_true(re_ms < 30 * math.max(small, 20), ("regex: %.0f ms"):format(re_ms))
  end)
end)

describe("sending", function()
  after_each(H.assert_clean)

  it("sendline writes a line, send writes as is", function()
    local p = assert(luxec.spawn({ "cat" }, { tty = true }))
    assert.equals(6, p:sendline("hello"))
    assert.same({ 1, "hello\r\nhello\r\n" }, { p:expect("hello\r\nhello\r\n") })
    assert.equals(3, p:send("abc"))
    assert.equals(1, (p:expect("abc")))
    p:close()
  end)

  it("sendcontrol('c') interrupts the foreground program on a terminal", function()
    local p = assert(luxec.spawn({ "sh", "-c", "trap 'echo caught INT' INT; echo ready; " ..
      "while :; do sleep 0.05; done" }, { tty = true }))
    assert(p:expect("ready"))
    assert.equals(1, p:sendcontrol("c"))
    assert.equals(1, (p:expect("caught INT")))
    assert.equals("\3", require("luxec.auto.expect").control("^C"))
    assert.equals("\29", require("luxec.auto.expect").control("]"))
    assert.matches("bad argument #1 to 'sendcontrol'", err_of(p.sendcontrol, p, "cc"))
    p:close()
  end)

  it("sendcontrol('c') on a pipe session signals its process group", function()
    local p = sh("trap 'echo caught INT; exit 5' INT; echo ready; while :; do sleep 0.05; done")
    assert(p:expect("ready"))
    assert.is_true(p:sendcontrol("c"))
    assert.equals(1, (p:expect("caught INT")))
    assert.equals(5, p:wait({ timeout = 5 }).code)
    p:close()
  end)

  it("drives a password prompt with echo off (ssh style)", function()
    local p = assert(luxec.spawn({ FAKESSH, "alice@db1" }, { tty = true }))
    assert.equals(1, (p:expect("password: ")))
    H.wait_for(function() return p:status().waiting_for_input end, 5000, "the prompt's read")
    local st = p:status()
    assert.is_true(st.echo_off, "a secret prompt does not echo")
    p:sendline("wrong")
    assert.same({ 1, "Permission denied" }, { p:expect({ "Permission denied", "Welcome" }) })
    assert.is_nil(p.before:find("wrong", 1, true), "the password was not echoed")
    assert(p:expect("password: "))
    -- (like ssh, it flushes pending input when it turns echo off: answer once it reads)
    H.wait_for(function() return p:status().waiting_for_input end, 5000, "the second read")
    p:sendline("secret")
    assert.equals(2, (p:expect({ "Permission denied", "Welcome to db1!" })))
    assert(p:expect("$ "))
    p:sendline("hostname")
    assert.same({ 1, "\r\ndb1\r\n", "db1" }, { p:expect({ re = "\\r\\n(\\w+)\\r\\n" }) })
    p:sendline("exit")
    assert.equals(2, (p:expect({ "never", luxec.EOF })))
    assert.equals(0, p:wait({ timeout = 5 }).code)
    p:close()
  end)
end)

describe("recording", function()
  after_each(H.assert_clean)

  local function lines_of(path)
    local out = {}
    for l in io.lines(path) do
      out[#out + 1] = l
    end
    return out
  end

  it("record = file writes asciicast v2: header, output and input events, resizes", function()
    local dir = H.tmpdir()
    local cast = dir .. "/s.cast"
    local p = assert(luxec.spawn({ FAKESSH, "bob@web" }, { tty = { rows = 30, cols = 100 },
      record = cast }))
    assert(p:expect("password: "))
    H.wait_for(function() return p:status().echo_off end, 5000, "echo off")
    p:sendline("secret")
    assert(p:expect("$ "))
    p:resize(40, 120)
    p:sendline("echo héllo ✓")
    assert(p:expect("$ "))
    p:sendline("exit")
    assert(p:expect(luxec.EOF))
    p:wait()
    p:close()
    local cjson = require("cjson")
    local l = lines_of(cast)
    local header = cjson.decode(l[1])
    assert.equals(2, header.version)
    assert.same({ 100, 30 }, { header.width, header.height })
    assert.matches("fakessh bob@web$", header.command)
    local t, out, input, resize = -1, {}, {}, nil
    for i = 2, #l do
      local ev = cjson.decode(l[i])
      assert.is_true(ev[1] >= t, "times never go back")
      t = ev[1]
      if ev[2] == "o" then out[#out + 1] = ev[3] end
      if ev[2] == "i" then input[#input + 1] = ev[3] end
      if ev[2] == "r" then resize = ev[3] end
    end
    out = table.concat(out)
    assert.matches("bob@web's password: ", out, 1, true)
    assert.matches("héllo ✓\r\n", out, 1, true)
    assert.matches("logout", out, 1, true)
    assert.same({ "******\n", "echo héllo ✓\n", "exit\n" }, input)
    assert.equals("120x40", resize)
    H.rmtree(dir)
  end)

  it("starts nothing when the recording cannot be written; a failed start leaves no file",
    function()
      local dir = H.tmpdir()
      assert.same({ nil, "ENOENT: no such file or directory: " .. dir .. "/no/x.cast (record)",
        "ENOENT" }, { luxec.spawn({ "true" }, { record = dir .. "/no/x.cast" }) })
      assert.same({}, H.children())
      assert.equals("ENOENT", select(3, luxec.spawn({ dir .. "/missing" },
        { record = dir .. "/x.cast" })))
      assert.is_nil(io.open(dir .. "/x.cast"))
      assert.matches("bad option 'record' to 'spawn' %(string expected, got boolean%)",
        err_of(luxec.spawn, { "true" }, { record = true }))
      H.rmtree(dir)
    end)

  it("does not keep the host running: a script that ends ends its recorded session", function()
    local dir = H.tmpdir()
    local script = dir .. "/rec.lua"
    local f = assert(io.open(script, "w"))
    f:write(([[
      local luxec = require("luxec")
      local p = assert(luxec.spawn({"sh", "-c", "echo started; sleep 60"}, {record = %q}))
      p:expect("started")
    ]]):format(dir .. "/r.cast"))
    f:close()
    local r = H.run({ script }, { timeout = 10000 })
    assert.equals(0, r.code, r.stderr)
    assert.is_true(r.ms < 5000, "ended with the script")
    local cast = io.open(dir .. "/r.cast"):read("a")
    assert.matches('"o", "started\\r\\n"', cast, 1, true)
    H.rmtree(dir)
  end)
end)

describe("examples", function()
  after_each(H.assert_clean)

  local function example(name, args, timeout)
    local argv = { H.root .. "/examples/" .. name }
    for _, a in ipairs(args or {}) do
      argv[#argv + 1] = a
    end
    return H.run(argv, { timeout = timeout or 20000 })
  end

  it("ssh_login.lua logs in through a password prompt and runs commands", function()
    local r = example("ssh_login.lua", { FAKESSH })
    assert.equals(0, r.code, r.stdout .. r.stderr)
    assert.matches("password prompt, echo off: true", r.stdout, 1, true)
    assert.matches("hostname: db1", r.stdout, 1, true)
  end)

  it("python.lua drives python3 -i, or says why it cannot", function()
    local r = example("python.lua")
    assert.equals(0, r.code, r.stdout .. r.stderr)
    if r.stdout:find("skipped:", 1, true) then
      assert.matches("skipped: python3 is not installed", r.stdout)
    else
      assert.matches("6 * 7 = 42", r.stdout, 1, true)
      assert.matches("fib(20) = 6765", r.stdout, 1, true)
    end
  end)

  it("installer.lua answers an installer's dialog by patterns", function()
    local r = example("installer.lua")
    assert.equals(0, r.code, r.stdout .. r.stderr)
    assert.matches("installed to /opt/demo with 4 answers", r.stdout, 1, true)
  end)

  it("fanout.lua runs 20 commands at once and prints a table", function()
    local r = example("fanout.lua")
    assert.equals(0, r.code, r.stdout .. r.stderr)
    local rows = 0
    for _ in r.stdout:gmatch("\n%s*%d+%s+ok ") do
      rows = rows + 1
    end
    assert.equals(20, rows, r.stdout)
    local wall, sum = r.stdout:match("20 commands in (%d+) ms %((%d+) ms one after another%)")
    -- at once: the wall time is far below the sum of the commands' own times
    assert.is_true(wall ~= nil and tonumber(wall) < tonumber(sum) / 3, r.stdout)
  end)
end)
