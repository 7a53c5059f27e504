-- What saves an agent calls, tokens and waiting, with real processes: `until`, `input`,
-- `keep`, a marker in one unit that is exact for any bytes, exact line counts, log offsets
-- that say what is new, read_output's grep and clean, and Codex's exact text when asked.
local H = require("helper")
local exec = require("luxec.engine")
local clean = require("luxec.engine.clean")

local engine = H.engine

local function clean_up()
  H.end_engines()
  H.assert_clean()
end

local GETPASS = "python3 -c \"import getpass; print('got', getpass.getpass('Secret: '))\""

describe("arguments a tool does not take", function()
  after_each(clean_up)

  it("are ignored, as Codex ignores them, with a warning naming each (and what it may mean)",
    function()
      local e = engine()
      local r = assert(e:exec_command({ cmd = "echo hi", timeout = 500, bogus = 1,
        justification = "Codex's own: no warning" }))
      assert.same({ "exited", "hi\n" }, { r.state, r.output })
      assert.same({ "Ignored: `bogus`, `timeout` (did you mean `timeout_ms`?) are not "
        .. "arguments of exec_command" }, r.warnings)
      r = assert(e:exec_command({ cmd = "sleep 5", yield_time_ms = 250 }))
      assert.same({}, r.warnings)
      local w = assert(e:write_stdin({ session_id = r.session_id, char = "x\n",
        yield_time_ms = 250 }))
      assert.same({ "Ignored: `char` (did you mean `chars`?) is not an argument of write_stdin" },
        w.warnings)
      assert.matches("Warning: Ignored: `char`", exec.format(w), 1, true)
    end)
end)

describe("until", function()
  after_each(clean_up)

  it("returns as soon as the output matches, long before the yield", function()
    local e = engine()
    local t0 = H.now_ms()
    local r = assert(e:exec_command({ yield_time_ms = 20000, ["until"] = "listening on \\d+",
      cmd = "echo starting; sleep 0.3; echo 'listening on 8080'; sleep 60" }))
    assert.is_true(H.now_ms() - t0 < 5000, "took " .. (H.now_ms() - t0) .. " ms")
    assert.same({ "matched", "listening on 8080" }, { r.state, r.match })
    assert.equals("starting\nlistening on 8080\n", r.output)
    assert.is_number(r.session_id)
    assert.matches("Output matched `until`: listening on 8080\n", exec.format(r), 1, true)
    -- write_stdin takes it too: the next match, in new output only
    r = assert(e:write_stdin({ session_id = r.session_id, chars = "", yield_time_ms = 5000,
      ["until"] = "listening" }))
    assert.equals("running", r.state)
    assert.is_true(r.wall_time >= 4.9, "no old output matches: it polled to the end")
  end)

  it("a program that ends right after the match: its exit, and its last words, in the result",
    function()
      local e = engine()
      -- (the server's error matched; it exits a moment later)
      local r = assert(e:exec_command({ yield_time_ms = 20000, ["until"] = "Error",
        cmd = "sleep 0.3; echo 'Error: port in use'; sleep 0.01; echo 'giving up'; exit 3" }))
      assert.same({ "exited", 3 }, { r.state, r.exit_code })
      assert.is_nil(r.session_id)
      assert.equals("Error: port in use\ngiving up\n", r.output)
      assert.matches("Process exited with code 3\n", exec.format(r), 1, true)
    end)

  it("returns on exit or the yield when nothing matches; the state says which", function()
    local e = engine()
    local r = assert(e:exec_command({ cmd = "echo a", ["until"] = "never" }))
    assert.same({ "exited", 0 }, { r.state, r.exit_code })
    r = assert(e:exec_command({ cmd = "sleep 30", ["until"] = "never", yield_time_ms = 300 }))
    assert.equals("running", r.state)
    assert.is_true(r.wall_time < 2)
  end)

  it("matches ^ at line starts of the cleaned output", function()
    local e = engine()
    local r = assert(e:exec_command({ yield_time_ms = 20000, ["until"] = "^ready$",
      cmd = "printf 'not ready\\n\\033[1mready\\033[0m\\n'; sleep 60" }))
    assert.same({ "matched", "ready" }, { r.state, r.match })
  end)

  it("watches without taking the output: memory stays bounded by the output buffer", function()
    local e = engine({ head = 4096, tail = 4096 })
    local r = assert(e:exec_command({ cmd = "yes | head -c 20000000", ["until"] = "never",
      max_output_tokens = 100 }))
    assert.equals(0, r.exit_code)
    assert.is_true(r.dropped > 20000000 - 2 * 4096 - 4096, "dropped " .. r.dropped)
    assert.equals(20000000, r.log_offset)
  end)

  it("rejects a bad regex, naming the argument", function()
    local e = engine()
    local r, err = e:exec_command({ cmd = "true", ["until"] = "(" })
    assert.is_nil(r)
    assert.matches("invalid regex \"(\" for `until`", err, 1, true)
  end)
end)

describe("input", function()
  after_each(clean_up)

  it("answers the first prompt in the same call (a /dev/tty password prompt)", function()
    local e = engine()
    local r = assert(e:exec_command({ tty = true, cmd = GETPASS, input = "pw9\n",
      yield_time_ms = 20000 }))
    assert.equals(0, r.exit_code)
    assert.matches("Secret: \r?\ngot pw9", r.output)
  end)

  it("says when it was not written", function()
    local e = engine()
    local r = assert(e:exec_command({ tty = true, cmd = "echo done", input = "x\n" }))
    assert.equals(0, r.exit_code)
    assert.matches("`input` was not written: the process ended before the program waited "
      .. "for input", r.warnings[1], 1, true)
    local _, err = e:exec_command({ cmd = "cat", input = "x\n" })
    assert.matches("`input` needs tty = true", err, 1, true)
  end)
end)

describe("cutting output", function()
  after_each(clean_up)

  it("keep = tail gives the whole budget to the end, keep = head to the start", function()
    local e = engine()
    local r = assert(e:exec_command({ cmd = "seq 1 3000", max_output_tokens = 10,
      keep = "tail" }))
    assert.matches("^Total output lines: 3000\n\n…%d+ bytes cut %b()…", r.output)
    assert.matches("\n2999\n3000\n$", r.output)
    r = assert(e:exec_command({ cmd = "seq 1 3000", max_output_tokens = 10, keep = "head" }))
    assert.matches("^Total output lines: 3000\n\n1\n2\n3\n", r.output)
    assert.matches("bytes cut %b()…$", r.output)
    local _, err = e:exec_command({ cmd = "true", keep = "middle" })
    assert.matches("for `keep`", err, 1, true)
  end)

  it("counts binary output in output bytes, exactly: the range read back is what was cut",
    function()
      local e = engine()
      local r = assert(e:exec_command({ max_output_tokens = 100,
        cmd = "python3 -c \"import sys; sys.stdout.buffer.write(bytes(range(128, 256)) * 40)\"" }))
      local t = {}
      for b = 128, 255 do t[#t + 1] = b end
      local raw = string.char(table.unpack(t)):rep(40)
      local from, to = r.log_range.from, r.log_range.to
      assert.equals(to - from, r.removed)
      assert.matches(("…%d bytes cut (log bytes %d-%d: read_output log=%s offset=%d length=%d)…")
        :format(r.removed, from, to, r.log_range.path, from, r.removed), r.output, 1, true)
      -- what is shown is exactly the cleaning of the bytes around the range
      local head, tail = r.output:match("^Total output lines: 1\n\n(.-)…%d+ bytes cut.-…(.*)$")
      assert.equals(clean.clean(raw:sub(1, from)), head)
      assert.equals(clean.clean(raw:sub(to + 1)), tail)
      local back = assert(e:read_output({ log = r.log_range.path, offset = from,
        length = r.removed }))
      assert.equals(raw:sub(from + 1, to), back.data)
    end)

  it("counts the lines of the whole output, the ones the buffer dropped too", function()
    local e = engine()
    local r = assert(e:exec_command({ cmd = "seq 1 300000", max_output_tokens = 50 }))
    assert.is_true(r.dropped > 0)
    assert.matches("^Total output lines: 300000\n", r.output)
    assert.equals(300000, r.total_lines)
  end)

  it("warns when max_output_tokens is above the limit", function()
    local e = engine({ max_output_tokens_limit = 100 })
    local r = assert(e:exec_command({ cmd = "true", max_output_tokens = 2147483647 }))
    assert.same({ "max_output_tokens 2147483647 was lowered to the limit, 100" }, r.warnings)
  end)
end)

describe("log offsets and read_output", function()
  after_each(clean_up)

  it("every result says which output bytes it covers: read_output from there is what is new",
    function()
      local e = engine()
      local r = assert(e:exec_command({ yield_time_ms = 20000, ["until"] = "one",
        cmd = "printf '\\033[31mone\\033[0m\\n'; read x; echo two; sleep 60", tty = true }))
      assert.equals(0, r.log_from)
      local first_end = r.log_offset
      local r2 = assert(e:write_stdin({ session_id = r.session_id, chars = "\n",
        ["until"] = "two", yield_time_ms = 20000 }))
      assert.equals(first_end, r2.log_from)
      local new = assert(e:read_output({ session_id = r.session_id, offset = first_end,
        length = r2.log_offset - first_end }))
      assert.matches("two", new.data, 1, true)
      assert.equals(r2.log_offset, new.next_offset)
      local cleaned = assert(e:read_output({ session_id = r.session_id, offset = 0,
        length = first_end, clean = true }))
      assert.equals("one\n", cleaned.data) -- (escapes gone, a terminal's \r\n a newline)
    end)

  it("grep finds the failing line in a cut log, with its offset and context", function()
    local e = engine()
    local r = assert(e:exec_command({ max_output_tokens = 50,
      cmd = "for i in $(seq 1 20000); do if [ $i = 12345 ]; then echo \"test_$i FAILED: "
        .. "boom\"; else printf 'test_%d \\033[32mok\\033[0m\\n' $i; fi; done" }))
    assert.is_true(r.truncated)
    local g = assert(e:read_output({ log = r.log_range.path, grep = "FAILED", context = 1 }))
    assert.equals(1, #g.grep.matches)
    local m = g.grep.matches[1]
    assert.equals("test_12345 FAILED: boom", m.line)
    assert.same({ "test_12344 ok" }, { m.before[1][2] }) -- matched and shown cleaned
    assert.equals("test_12346 ok", m.after[1][2])
    local at = assert(e:read_output({ log = r.log_range.path, offset = m.offset, length = 23 }))
    assert.equals("test_12345 FAILED: boom", at.data)
    assert.is_true(g.grep.complete)
    -- bounded: at most max_matches, and where to continue
    local many = assert(e:read_output({ log = r.log_range.path, grep = "ok", max_matches = 3 }))
    assert.equals(3, #many.grep.matches)
    assert.is_false(many.grep.complete)
    local more = assert(e:read_output({ log = r.log_range.path, grep = "ok", max_matches = 1,
      offset = many.next_offset }))
    assert.matches("^test_4 ", more.grep.matches[1].line)
  end)

  it("grep shows the part of a long line around its match (a minified file, a JSON line)",
    function()
      local e = engine()
      local r = assert(e:exec_command({ max_output_tokens = 50, grep = "NEEDLE",
        cmd = "python3 -c \"print('A' * 300000 + 'NEEDLE' + 'B' * 300000); print('x NEEDLE')\"" }))
      local m = r.grep.matches
      assert.equals(2, #m)
      assert.equals(0, m[1].offset)
      assert.matches("^…A+NEEDLEB+…$", m[1].line)
      assert.is_true(#m[1].line <= 400 + 6, #m[1].line)
      assert.equals("x NEEDLE", m[2].line)
      -- a match within the first 400 bytes: the line's start, as before
      r = assert(e:exec_command({ grep = "NEEDLE",
        cmd = "python3 -c \"print('NEEDLE' + 'B' * 1000)\"" }))
      assert.matches("^NEEDLEB+…$", r.grep.matches[1].line)
    end)
end)

describe("text = \"codex\"", function()
  after_each(clean_up)

  it("runs the resolved shell with CODEX_CI=1 and answers in Codex's text exactly", function()
    local e = engine({ text = "codex", shell = "bash" })
    local r = assert(e:exec_command({ cmd = "echo \"$0 $CODEX_CI\"; exit 2" }))
    assert.matches("^/[%w/]+/bash 1\n$", r.output)
    assert.matches("^Chunk ID: %x%x%x%x%x%x\nWall time: %d+%.%d%d%d%d seconds\n"
      .. "Process exited with code 2\nOriginal token count: %d+\nOutput:\n/", e:format(r))
    r = assert(e:exec_command({ cmd = "seq 1 20000", max_output_tokens = 10 }))
    assert.matches("…%d+ tokens truncated…", r.output) -- Codex's truncation
    -- luxec's facts stay out of the text
    r = assert(e:exec_command({ cmd = "kill -INT $$" }))
    assert.equals("INT", r.signal_name)
    assert.is_nil(e:format(r):find("signal", 1, true))
  end)
end)
