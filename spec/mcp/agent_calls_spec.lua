-- The arguments that save an agent a tool call, through the real server (build/bin/luxec mcp,
-- raw JSON-RPC lines): `input` as a list of answers, `grep` on exec results (the cut part of
-- the output too) and `terminate` (end a server once its client has run).
local H = require("helper")
local R = require("mcp.raw")

describe("luxec mcp: one call instead of several", function()
  local dir, P

  before_each(function()
    dir = H.tmpdir()
    P = R.start_in(dir, "return { login = false, sandbox = { mode = \"full-access\" } }")
    P:handshake("2025-11-25")
  end)

  after_each(function()
    R.finish(P, dir)
    P = nil
  end)

  it("answers a REPL's prompts in order from an `input` list, in one call", function()
    local r = P:tool("exec_command", { cmd = "python3 -q -i", tty = true, yield_time_ms = 20000,
      input = { "x = 6 * 7\n", "print(x + 1)\n", "exit()\n" } })
    local text, sc = r.content[1].text, r.structuredContent
    assert.is_nil(r.isError, text)
    assert.same({ "exited", 0 }, { sc.state, sc.exit_code })
    assert.matches("\n43\r?\n", sc.output)
    assert.matches(">>> x = 6 * 7\r\n>>> print(x + 1)\r\n43\r\n>>> exit()\r\n", sc.output, 1,
      true)
  end)

  it("says which answers were not written when the program ends first", function()
    local r = P:tool("exec_command", { cmd = "read -r a; echo got $a", tty = true,
      input = { "one\n", "two\n" }, yield_time_ms = 20000 })
    local text = r.content[1].text
    assert.matches("got one", text, 1, true)
    assert.matches("Warning: `input` 2 of 2 and later were not written: the process ended "
      .. "before the program waited for input again", text, 1, true)
  end)

  it("writes every answer at start when early return is off", function()
    P:close()
    P = R.start_in(dir, "return { login = false, sandbox = { mode = \"full-access\" }, "
      .. "exec = { early_return = false } }")
    P:handshake("2025-11-25")
    local r = P:tool("exec_command", { cmd = "read -r a; read -r b; echo \"got $a $b\"",
      tty = true, input = { "one\n", "two\n" }, yield_time_ms = 20000 })
    assert.same({ "exited", 0 }, { r.structuredContent.state, r.structuredContent.exit_code })
    assert.matches("got one two", r.structuredContent.output, 1, true)
  end)

  it("rejects an `input` that is neither a string nor a list of strings", function()
    local r = P:tool("exec_command", { cmd = "cat", tty = true, input = { "a", 3 } })
    assert.is_true(r.isError)
    assert.equals("failed to parse function arguments: invalid type: integer `3` for "
      .. "`input[2]`, expected a string", r.content[1].text)
  end)

  it("lists the lines matching `grep` in the whole output, the cut part too", function()
    local r = P:tool("exec_command", { cmd = "seq 1 5000", max_output_tokens = 50,
      grep = "^4321$", context = 1 })
    local text, sc = r.content[1].text, r.structuredContent
    assert.is_true(sc.truncated)
    assert.is_nil(sc.output:find("\n4321\n", 1, true)) -- cut from what the model reads…
    assert.matches("\nLines matching `^4321$`: 1 in bytes 0-23893:\n20488- 4320\n20493: 4321\n"
      .. "20498- 4322\n", text, 1, true) -- …and found
    assert.same({ 20493, "4321" }, { sc.grep.matches[1].offset, sc.grep.matches[1].line })
    assert.is_true(sc.grep.complete)
  end)

  it("greps what a write_stdin call returns", function()
    local s = P:tool("exec_command", { cmd = "cat", tty = true, yield_time_ms = 500 })
    local id = s.structuredContent.session_id
    local r = P:tool("write_stdin", { session_id = id, chars = "alpha\nbeta\n", grep = "^bet",
      yield_time_ms = 1000 })
    assert.same({ "beta" }, { r.structuredContent.grep.matches[1].line })
    assert.equals(2, #r.structuredContent.grep.matches) -- the echo and cat's copy
  end)

  it("ends the sessions named in `terminate` once the command's call is over", function()
    local srv = P:tool("exec_command", { cmd = "echo $$ > pid; exec sleep 300",
      yield_time_ms = 500 })
    local id = srv.structuredContent.session_id
    assert.is_not_nil(id)
    local pid = tonumber(H.read_file(dir .. "/pid"))
    local r = P:tool("exec_command", { cmd = "echo client ran; kill -0 " .. pid .. " && echo "
      .. "server alive", terminate = { id, 424242 } })
    local text = r.content[1].text
    assert.matches("client ran\nserver alive\n", r.structuredContent.output, 1, true)
    assert.matches(("\nTerminated session %d (process tree gone)\n"):format(id), text, 1, true)
    assert.matches("Warning: `terminate` 424242: Unknown process id 424242", text, 1, true)
    assert.same({ id }, { r.structuredContent.terminated[1] })
    assert.is_false(R.alive(pid))
    assert.same({}, P:tool("list_sessions", {}).structuredContent.sessions)
  end)
end)
